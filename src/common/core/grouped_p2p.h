// Collectives made of grouped point-to-point operations: AlltoAll, Gather,
// Scatter (collectives_api.cc) and RCCL's AllToAll/AllToAllv (rccl_api.cc).
// Their arguments are validated as a whole first, so the inner send/recv
// calls cannot fail half-way through recording; the sends and receives then
// go into one implicit group.
#pragma once

#include <cstddef>

#include "common/core/group.h"
#include "uniccl.h"

// Returns a failed call's result after recording it for the open group.
#define GCHECK(call)                                       \
  do {                                                     \
    ncclResult_t gres_ = (call);                           \
    if (gres_ != ncclSuccess) return uniccl::groupErrCheck(gres_); \
  } while (0)

namespace uniccl {

// ncclGroupStart on construction; end() (or the destructor, on an early
// return) closes it.
class ImplicitGroup {
 public:
  ImplicitGroup() { ncclGroupStart(); }
  [[nodiscard]] ncclResult_t end() {
    ended_ = true;
    return ncclGroupEnd();
  }
  ~ImplicitGroup() {
    if (!ended_) ncclGroupEnd();
  }
  ImplicitGroup(const ImplicitGroup&) = delete;
  ImplicitGroup& operator=(const ImplicitGroup&) = delete;

 private:
  bool ended_ = false;
};

// AlltoAll (count elements to and from every rank) under the API name `fn`:
// NCCL's ncclAlltoAll and RCCL's ncclAllToAll are the same operation.
[[nodiscard]] ncclResult_t alltoAll(const char* fn, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                      ncclComm_t comm, uniccl_stream_t stream);

}  // namespace uniccl
