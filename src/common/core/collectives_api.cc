// The NCCL collective and point-to-point entry points: validate, lower the
// reduction, record a task (group semantics in group.cc).
#include <cstring>
#include <vector>

#include "common/api_export.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/group.h"
#include "common/core/grouped_p2p.h"
#include "common/core/launch.h"
#include "common/core/validate.h"
#include "common/util/debug.h"

using namespace uniccl;

namespace {

// Non-blocking progress on every call: run callbacks of finished launches.
[[nodiscard]] ncclResult_t pollCompletions(ncclComm* comm) {
  if (comm->callbacks.empty()) return ncclSuccess;
  return comm->callbacks.poll(/*waitSome=*/false);
}

[[nodiscard]] ncclResult_t recordColl(TaskKind kind, const char* fn, const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t dtype, ncclRedOp_t op, int root, ncclComm_t comm, uniccl_stream_t stream) {
  UCHECK(checkCommUsable(comm, fn));
  UCHECK(checkDataType(dtype, fn));
  size_t elem = dataTypeSize(dtype);
  size_t sendBytes = 0, recvBytes = 0;
  int n = comm->nRanks;
  bool isRoot = true;
  switch (kind) {
    case TaskKind::AllReduce:
      UCHECK(checkedBytes(count, elem, 1, &sendBytes, fn));
      recvBytes = sendBytes;
      break;
    case TaskKind::AllGather:
      UCHECK(checkedBytes(count, elem, 1, &sendBytes, fn));
      UCHECK(checkedBytes(count, elem, n, &recvBytes, fn));
      break;
    case TaskKind::ReduceScatter:
      UCHECK(checkedBytes(count, elem, n, &sendBytes, fn));
      UCHECK(checkedBytes(count, elem, 1, &recvBytes, fn));
      break;
    case TaskKind::Broadcast:
      UCHECK(checkRank(comm, root, "root", fn));
      isRoot = comm->rank == root;
      UCHECK(checkedBytes(count, elem, 1, &recvBytes, fn));
      sendBytes = isRoot ? recvBytes : 0;
      break;
    case TaskKind::Reduce:
      UCHECK(checkRank(comm, root, "root", fn));
      isRoot = comm->rank == root;
      UCHECK(checkedBytes(count, elem, 1, &sendBytes, fn));
      recvBytes = isRoot ? sendBytes : 0;
      break;
    default:
      return ncclInternalError;
  }
  UCHECK(checkBuffer(comm, sendbuff, sendBytes, "sendbuff", fn));
  UCHECK(checkBuffer(comm, recvbuff, recvBytes, "recvbuff", fn));

  Task t;
  memset(&t, 0, sizeof(t));
  t.kind = kind;
  t.dtype = dtype;
  if (kind != TaskKind::Broadcast && kind != TaskKind::AllGather) {
    LoweredOp lowered;
    UCHECK(comm->redOps.lower(op, dtype, n, &lowered));
    t.redOp = lowered.op;
    t.scalarKind = lowered.scalarKind;
    t.scalar = lowered.scalar;
    t.userRedOp = (int)op >= (int)ncclNumOps;
  }
  if (count == 0) {
    // Every rank passes the same count, so all of them drop the operation (as
    // NCCL does) rather than launch a kernel that moves nothing.
    comm->opCount++;
    return ncclSuccess;
  }
  t.sendbuff = sendbuff;
  t.recvbuff = recvbuff;
  t.count = count;
  t.root = root;
  t.stream = stream;
  t.seq = comm->opCount++;
  UCHECK(pollCompletions(comm));
  TRACE(kSubsysColl, "%s seq %llu count %zu %s rank %d/%d stream %p", fn, (unsigned long long)t.seq, count,
        dataTypeName(dtype), comm->rank, n, (void*)stream);
  return enqueueTask(comm, t);
}

// stage > 0: a send of an in-place AlltoAll, from its tasks' k-th staged
// range (core/inplace_stage.h).
[[nodiscard]] ncclResult_t recordP2p(TaskKind kind, const char* fn, void* buff, size_t count, ncclDataType_t dtype, int peer,
                       ncclComm_t comm, uniccl_stream_t stream, uint32_t stage = 0) {
  UCHECK(checkCommUsable(comm, fn));
  UCHECK(checkDataType(dtype, fn));
  UCHECK(checkRank(comm, peer, "peer", fn));
  size_t bytes;
  UCHECK(checkedBytes(count, dataTypeSize(dtype), 1, &bytes, fn));
  UCHECK(checkBuffer(comm, buff, bytes, kind == TaskKind::Send ? "sendbuff" : "recvbuff", fn));
  Task t;
  memset(&t, 0, sizeof(t));
  t.kind = kind;
  t.dtype = dtype;
  if (kind == TaskKind::Send) {
    t.sendbuff = buff;
  } else {
    t.recvbuff = buff;
  }
  t.count = count;
  t.root = peer;   // Task::peer()
  t.stream = stream;
  t.stage = stage;
  t.seq = comm->opCount++;
  UCHECK(pollCompletions(comm));
  return enqueueTask(comm, t);
}


// In-place AlltoAll: a rank's own block already sits where it belongs (no
// message to itself); the blocks for its peers are overwritten by what
// they send, so their sends read a copy the group end takes first. The
// ranges before and after the own block are staged, once every task is
// recorded (inside the implicit group AlltoAll opens: a failed call drops
// the tasks, and leaves no range behind).
[[nodiscard]] ncclResult_t recordInPlaceAlltoAll(char* buff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                                   uniccl_stream_t stream) {
  const size_t chunk = count * dataTypeSize(datatype);
  const int n = comm->nRanks, me = comm->rank;
  std::vector<StagedRange>& staged = comm->tasks.staged;
  // Task::stage of the blocks below / above the own one (range index + 1).
  const uint32_t below = me > 0 ? (uint32_t)staged.size() + 1 : 0;
  const uint32_t above = me < n - 1 ? (uint32_t)staged.size() + 1 + (below != 0) : 0;
  for (int r = 0; r < n; r++) {
    if (r == me) continue;
    char* block = buff + (size_t)r * chunk;
    GCHECK(recordP2p(TaskKind::Send, "ncclAlltoAll", block, count, datatype, r, comm, stream, r < me ? below : above));
    GCHECK(recordP2p(TaskKind::Recv, "ncclAlltoAll", block, count, datatype, r, comm, stream));
  }
  if (below != 0) staged.push_back(StagedRange{buff, (size_t)me * chunk, stream});
  if (above != 0) staged.push_back(StagedRange{buff + (size_t)(me + 1) * chunk, (size_t)(n - 1 - me) * chunk, stream});
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, uniccl_stream_t stream) {
  return groupErrCheck(
      recordColl(TaskKind::AllReduce, "ncclAllReduce", sendbuff, recvbuff, count, datatype, op, 0, comm, stream));
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, uniccl_stream_t stream) {
  return groupErrCheck(
      recordColl(TaskKind::Broadcast, "ncclBroadcast", sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                 stream));
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
         uniccl_stream_t stream);
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       uniccl_stream_t stream) {
  return groupErrCheck(
      recordColl(TaskKind::Broadcast, "ncclBcast", buff, buff, count, datatype, ncclSum, root, comm, stream));
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, int root, ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, uniccl_stream_t stream) {
  return groupErrCheck(
      recordColl(TaskKind::Reduce, "ncclReduce", sendbuff, recvbuff, count, datatype, op, root, comm, stream));
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, uniccl_stream_t stream) {
  return groupErrCheck(
      recordColl(TaskKind::AllGather, "ncclAllGather", sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm,
                 stream));
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, uniccl_stream_t stream) {
  return groupErrCheck(
      recordColl(TaskKind::ReduceScatter, "ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype, op, 0,
                 comm, stream));
}

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      uniccl_stream_t stream) {
  return groupErrCheck(
      recordP2p(TaskKind::Send, "ncclSend", const_cast<void*>(sendbuff), count, datatype, peer, comm, stream));
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         uniccl_stream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      uniccl_stream_t stream) {
  return groupErrCheck(
      recordP2p(TaskKind::Recv, "ncclRecv", recvbuff, count, datatype, peer, comm, stream));
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, uniccl_stream_t stream) {
  return alltoAll("ncclAlltoAll", sendbuff, recvbuff, count, datatype, comm, stream);
}

ncclResult_t uniccl::alltoAll(const char* fn, const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, ncclComm_t comm, uniccl_stream_t stream) {
  GCHECK(checkCommUsable(comm, fn));
  GCHECK(checkDataType(datatype, fn));
  size_t bytes;
  GCHECK(checkedBytes(count, dataTypeSize(datatype), comm->nRanks, &bytes, fn));
  GCHECK(checkBuffer(comm, sendbuff, bytes, "sendbuff", fn));
  GCHECK(checkBuffer(comm, recvbuff, bytes, "recvbuff", fn));
  // Nothing to move: no kernel, no message (NCCL does the same; a group
  // of zero-byte sends and receives cost a launch and a round trip per peer).
  if (bytes == 0) return ncclSuccess;
  size_t chunk = count * dataTypeSize(datatype);
  ImplicitGroup group;
  if (sendbuff == recvbuff) {
    GCHECK(recordInPlaceAlltoAll(static_cast<char*>(recvbuff), count, datatype, comm, stream));
    return group.end();
  }
  for (int r = 0; r < comm->nRanks; r++) {
    GCHECK(ncclSend(static_cast<const char*>(sendbuff) + r * chunk, count, datatype, r, comm, stream));
    GCHECK(ncclRecv(static_cast<char*>(recvbuff) + r * chunk, count, datatype, r, comm, stream));
  }
  return group.end();
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, uniccl_stream_t stream) {
  const char* fn = "ncclGather";
  GCHECK(checkCommUsable(comm, fn));
  GCHECK(checkDataType(datatype, fn));
  GCHECK(checkRank(comm, root, "root", fn));
  size_t bytes;
  GCHECK(checkedBytes(count, dataTypeSize(datatype), comm->nRanks, &bytes, fn));
  if (comm->rank == root) GCHECK(checkBuffer(comm, recvbuff, bytes, "recvbuff", fn));
  size_t chunk = count * dataTypeSize(datatype);
  GCHECK(checkBuffer(comm, sendbuff, chunk, "sendbuff", fn));
  if (chunk == 0) return ncclSuccess;   // nothing to move (as AlltoAll)
  ImplicitGroup group;
  GCHECK(ncclSend(sendbuff, count, datatype, root, comm, stream));
  if (comm->rank == root) {
    for (int r = 0; r < comm->nRanks; r++)
      GCHECK(ncclRecv(static_cast<char*>(recvbuff) + r * chunk, count, datatype, r, comm, stream));
  }
  return group.end();
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, uniccl_stream_t stream) {
  const char* fn = "ncclScatter";
  GCHECK(checkCommUsable(comm, fn));
  GCHECK(checkDataType(datatype, fn));
  GCHECK(checkRank(comm, root, "root", fn));
  size_t bytes;
  GCHECK(checkedBytes(count, dataTypeSize(datatype), comm->nRanks, &bytes, fn));
  if (comm->rank == root) GCHECK(checkBuffer(comm, sendbuff, bytes, "sendbuff", fn));
  size_t chunk = count * dataTypeSize(datatype);
  GCHECK(checkBuffer(comm, recvbuff, chunk, "recvbuff", fn));
  if (chunk == 0) return ncclSuccess;   // nothing to move (as AlltoAll)
  ImplicitGroup group;
  if (comm->rank == root) {
    for (int r = 0; r < comm->nRanks; r++)
      GCHECK(ncclSend(static_cast<const char*>(sendbuff) + r * chunk, count, datatype, r, comm, stream));
  }
  GCHECK(ncclRecv(recvbuff, count, datatype, root, comm, stream));
  return group.end();
}
