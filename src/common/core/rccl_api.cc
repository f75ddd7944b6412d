// RCCL's own API names (include/rccl/rccl.h), so programs written for RCCL
// (rccl-tests, ROCm builds of PyTorch) build and run unchanged: ncclAllToAll
// is RCCL's spelling of NCCL's ncclAlltoAll; ncclAllToAllv moves a different
// count to and from every peer, as grouped sends and receives (RCCL does the
// same). Both backends' libraries export them.
#include <cstdint>

#include "common/api_export.h"
#include "common/core/comm.h"
#include "common/core/grouped_p2p.h"
#include "common/core/redop.h"
#include "common/core/validate.h"
#include "common/util/debug.h"
#include "rccl/rccl.h"

using namespace uniccl;

namespace {

// The elements [0, *extent) of a buffer that AllToAllv touches on one side:
// the end of the furthest block with a non-zero count (displacements of
// empty blocks are never used). Fails when displacement + count overflows.
[[nodiscard]] ncclResult_t blockExtent(const size_t counts[], const size_t displs[], int n, const char* what, const char* fn,
                         size_t* extent) {
  size_t end = 0;
  for (int r = 0; r < n; r++) {
    if (counts[r] == 0) continue;
    if (displs[r] > SIZE_MAX - counts[r]) {
      WARN("%s: %s block of peer %d (displacement %zu + count %zu) overflows size_t", fn, what, r, displs[r],
           counts[r]);
      return ncclInvalidArgument;
    }
    if (displs[r] + counts[r] > end) end = displs[r] + counts[r];
  }
  *extent = end;
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclAllToAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t ncclAllToAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, uniccl_stream_t stream) {
  return alltoAll("ncclAllToAll", sendbuff, recvbuff, count, datatype, comm, stream);
}

NCCL_API(ncclResult_t, ncclAllToAllv, const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
         void* recvbuff, const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype,
         ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t ncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                           const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype,
                           ncclComm_t comm, uniccl_stream_t stream) {
  const char* fn = "ncclAllToAllv";
  GCHECK(checkCommUsable(comm, fn));
  GCHECK(checkDataType(datatype, fn));
  if (!sendcounts || !sdispls || !recvcounts || !rdispls) {
    WARN("%s: sendcounts, sdispls, recvcounts and rdispls must all be arrays of nranks (%d) elements; got "
         "%p %p %p %p", fn, comm->nRanks, (const void*)sendcounts, (const void*)sdispls, (const void*)recvcounts,
         (const void*)rdispls);
    return groupErrCheck(ncclInvalidArgument);
  }
  const int n = comm->nRanks;
  const size_t elem = dataTypeSize(datatype);
  size_t sendExtent, recvExtent, sendBytes, recvBytes;
  GCHECK(blockExtent(sendcounts, sdispls, n, "send", fn, &sendExtent));
  GCHECK(blockExtent(recvcounts, rdispls, n, "receive", fn, &recvExtent));
  GCHECK(checkedBytes(sendExtent, elem, 1, &sendBytes, fn));
  GCHECK(checkedBytes(recvExtent, elem, 1, &recvBytes, fn));
  // Overlapping buffers would let a rank overwrite data it has yet to send.
  const uintptr_t s = reinterpret_cast<uintptr_t>(sendbuff), d = reinterpret_cast<uintptr_t>(recvbuff);
  if (sendBytes > 0 && recvBytes > 0 && s < d + recvBytes && d < s + sendBytes) {
    WARN("%s: sendbuff [%p, +%zu B) and recvbuff [%p, +%zu B) overlap; in-place AllToAllv is not supported", fn,
         sendbuff, sendBytes, recvbuff, recvBytes);
    return groupErrCheck(ncclInvalidArgument);
  }
  GCHECK(checkBuffer(comm, sendbuff, sendBytes, "sendbuff", fn));
  GCHECK(checkBuffer(comm, recvbuff, recvBytes, "recvbuff", fn));
  // Empty blocks post nothing: the peer's matching count is zero too (the
  // caller's contract, as in RCCL and MPI_Alltoallv).
  ImplicitGroup group;
  for (int r = 0; r < n; r++) {
    if (sendcounts[r])
      GCHECK(ncclSend(static_cast<const char*>(sendbuff) + sdispls[r] * elem, sendcounts[r], datatype, r, comm,
                      stream));
    if (recvcounts[r])
      GCHECK(ncclRecv(static_cast<char*>(recvbuff) + rdispls[r] * elem, recvcounts[r], datatype, r, comm, stream));
  }
  return group.end();
}
