// The error-reporting part of the NCCL API: result strings (NCCL's exact
// wording, which scripts and frameworks match on), the last error, the version.
#include "common/api_export.h"
#include "common/util/debug.h"
#include "common/util/version.h"

NCCL_API(const char*, ncclGetErrorString, ncclResult_t result);
const char* ncclGetErrorString(ncclResult_t result) {
  switch ((int)result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

// As in NCCL the last error belongs to the calling thread, not to `comm`
// (which may be NULL).
NCCL_API(const char*, ncclGetLastError, ncclComm_t comm);
const char* ncclGetLastError(ncclComm_t comm) { return uniccl::lastErrorMessage(); }

NCCL_API(ncclResult_t, ncclGetVersion, int* version);
ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) {
    WARN("ncclGetVersion: version is a null pointer; pass the address of an int");
    return ncclInvalidArgument;
  }
  *version = UNICCL_NCCL_VERSION_CODE;
  return ncclSuccess;
}
