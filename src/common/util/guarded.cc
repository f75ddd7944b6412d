#include "common/util/guarded.h"

#include <exception>
#include <new>
#include <system_error>

#include "common/util/debug.h"

namespace uniccl {

ncclResult_t currentExceptionResult(const char* where) noexcept {
  // WARN formats into fixed-size buffers (no allocation): usable out of memory.
  try {
    throw;
  } catch (const std::bad_alloc&) {
    WARN("%s: out of host memory", where);
    return ncclSystemError;
  } catch (const std::system_error& e) {
    WARN("%s: %s", where, e.what());
    return ncclSystemError;
  } catch (const std::exception& e) {
    WARN("%s: unexpected exception: %s", where, e.what());
    return ncclInternalError;
  } catch (...) {
    WARN("%s: unexpected exception of an unknown type", where);
    return ncclInternalError;
  }
}

}  // namespace uniccl
