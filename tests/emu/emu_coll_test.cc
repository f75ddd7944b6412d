// Every collective end to end on the CPU emulator: the real library (init,
// bootstrap, transports, proxy + socket network, planner, work FIFO, the
// kernels compiled for the CPU) over the emulated GPU backend. Run once per
// transport by meson (environment): P2P, SHM (NCCL_P2P_DISABLE=1) and NET
// (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, the socket transport on lo).
//
// Data: small random integers as floats, so sums, products, max/min and the
// average of 2..4 ranks are exact and any misplaced element shows.
//
//   emu_coll_test [--ranks N] (default 2; UNICCL_EMU_DEVICES must be >= N)
//                 [--mixed-group]: also one group of 8 collectives of 8
//                 datatypes (a build with -Dkernel_filter=all)
//                 [--group-init]: ncclCommInitRank per device in a group
//                 [--expect-algo=ring|tree|mixed]: at the end, check which
//                 AllReduce algorithms the tuning chose (NCCL_ALGO runs)
//                 [--expect-algo=pat]: every AllGather ran as PAT rounds
//                 (core/allgather_pat.h), none on the ring or tree, and so
//                 did every ReduceScatter with sum, prod, max or min
//                 (core/reducescatter_pat.h), the others on the ring
//                 [--pat-group]: also one group of PAT AllGathers and
//                 ReduceScatters with a ring ReduceScatter, an AllReduce
//                 and messages (run with NCCL_ALGO=PAT)
//                 [--copy-engine]: only what copy engines may carry
//                 (core/side_stream.h): AlltoAll, Broadcast, send/recv,
//                 the task-order cases and AllReduce
//                 (--ranks=1: every collective as a copy or nothing,
//                 core/one_rank.h; PreMulSum by the kernels)
//                 [--expect-ce]: transfers of 70001 elements must go by copy
//                 engine where the order cases say so, AllReduces of 70000
//                 on 2 ranks too (run with UNICCL_COPY_ENGINE_MIN_BYTES and
//                 UNICCL_COPY_ENGINE_ALLREDUCE_MIN_BYTES below 70000 elements)
//                 [--expect-proto=LL|LL128|Simple|ll128-mixed]: at the end, check
//                 which protocols the collectives' tuning chose (only the one
//                 named; ll128-mixed: LL128 and at least one other)
//                 [--ranks-per-gpu=K]: rank r on emulated device r / K (several
//                 ranks per GPU: ncclCommInitAll with UNICCL_RANKS_PER_GPU=K,
//                 or ncclCommInitRankMulti with --group-init)
//                 [--small]: counts 0, 1, 7 and 1000 only
//                 [--traffic=ring|tree]: at the end, AllReduces whose bytes
//                 per link class, NIC, channel and peer must be the
//                 algorithm's minimum on the topology (traffic_check.h;
//                 run with NCCL_ALGO naming the same algorithm)
//                 [--revoke-shrink]: only ncclCommRevoke with work in flight,
//                 then ncclCommShrink (around rank 1 from 3 ranks on)
//                 [--mem-alloc]: the send and receive buffers come from
//                 ncclMemAlloc (the emulator's virtual memory: each one a
//                 mapping of its own physical allocation) instead of
//                 plain device memory
//                 [--hang-allreduce]: only rank 0 starts an AllReduce of 4099
//                 elements (the others never do): its kernel must leave
//                 its polls once the watchdog (UNICCL_TIMEOUT_MS) aborts the
//                 communicator, and the stream drain (run with NCCL_PROTO=LL128
//                 to check LL128's line polls); then every rank aborts
//                 [--expect-init-error=TEXT]: the communicators must NOT come
//                 up: init answers ncclInvalidUsage with TEXT in
//                 ncclGetLastError (refusals of GPU sharing); exits there
#include <algorithm>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "common/core/inplace_stage.h"
#include "common/core/one_rank.h"
#include "common/core/self_copy_kernel.h"
#include "common/core/side_stream.h"
#include "common/core/tuning.h"
#include "common/gpu.h"
#include "common/memory/mem_alloc.h"
#include "emu_runtime.h"
#include "traffic_check.h"
#include "nccl.h"
#include "rccl/rccl.h"   // ncclCommInitRankMulti
#include "test_check.h"

using namespace uniccl;

namespace {

int gFailures = 0;
int gChecks = 0;
// The element type under test (--type=f32|bf16): data are small integers,
// exact in both, converted at upload and download.
ncclDataType_t gType = ncclFloat;
size_t gElem = sizeof(float);
std::mt19937 gRng(20261122);
// ReduceScatters the test ran, per rank, by the algorithm NCCL_ALGO=PAT or
// the tuner must give them (--expect-algo=pat): PAT rounds for the ops
// without a scalar, the ring for ncclAvg and PreMulSum.
uint64_t gRsPatWanted = 0, gRsRingWanted = 0;

struct Rank {
  int dev;
  ncclComm_t comm;
  uniccl_stream_t stream;   // an emulated stream (gpu::Stream) in the API's type
  char* send = nullptr;
  char* recv = nullptr;
  size_t cap = 0;   // elements of each buffer
};

std::vector<float> randomData(size_t n) {
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<float> v(n);
  for (float& x : v) x = (float)d(gRng);
  return v;
}

uint16_t toBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);   // round to nearest even
  return (uint16_t)(u >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

void upload(Rank& r, char* dst, const std::vector<float>& v) {
  NCCL_OK_OR_EXIT(gpu::setDevice(r.dev));
  if (v.empty()) return;
  if (gType == ncclBfloat16) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); i++) h[i] = toBf16(v[i]);
    NCCL_OK_OR_EXIT(gpu::memcpy(dst, h.data(), h.size() * 2));
  } else {
    NCCL_OK_OR_EXIT(gpu::memcpy(dst, v.data(), v.size() * sizeof(float)));
  }
}
std::vector<float> download(Rank& r, const char* src, size_t n) {
  std::vector<float> v(n);
  NCCL_OK_OR_EXIT(gpu::setDevice(r.dev));
  if (n == 0) return v;
  if (gType == ncclBfloat16) {
    std::vector<uint16_t> h(n);
    NCCL_OK_OR_EXIT(gpu::memcpy(h.data(), src, n * 2));
    for (size_t i = 0; i < n; i++) v[i] = fromBf16(h[i]);
  } else {
    NCCL_OK_OR_EXIT(gpu::memcpy(v.data(), src, n * sizeof(float)));
  }
  return v;
}
void syncAll(std::vector<Rank>& ranks) {
  for (Rank& r : ranks) {
    NCCL_OK_OR_EXIT(gpu::setDevice(r.dev));
    NCCL_OK_OR_EXIT(gpu::streamSynchronize(static_cast<gpu::Stream>(r.stream)));
  }
}

// tol: relative tolerance (0: exact). Averages over 3 ranks are computed as
// a sum of x/3 terms on the device (PreMulSum), so they round differently
// (in bf16, each term to 8 bits: a few hundredths).
void check(const std::string& what, const std::vector<float>& got, const std::vector<float>& want, float tol = 0) {
  gChecks++;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); i++) {
    const float lim = tol * std::max(1.0f, std::fabs(want[i]));
    if (tol == 0 ? got[i] != want[i] : !(std::fabs(got[i] - want[i]) <= lim)) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad) {
    gFailures++;
    fprintf(stderr, "FAIL %s: %zu of %zu wrong, first at %zu: got %g want %g\n", what.c_str(), bad, want.size(), first,
            got[first], want[first]);
  }
}

float reduce(ncclRedOp_t op, float a, float b) {
  switch (op) {
    case ncclSum: case ncclAvg: return a + b;
    case ncclProd: return a * b;
    case ncclMax: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}
const char* opName(ncclRedOp_t op) {
  static const char* n[] = {"sum", "prod", "max", "min", "avg"};
  return n[(int)op];
}

// One group per rank mixing PAT AllGathers and ReduceScatters (NCCL_ALGO=PAT:
// core/allgather_pat.h, core/reducescatter_pat.h) with other work: an
// out-of-place AllGather at an odd element offset, a send to the next rank
// and a receive from the previous, an AllReduce, an in-place AllGather, an
// out-of-place ReduceScatter (max) at odd offsets, an in-place one (sum)
// and one with ncclAvg (the ring's). The collective kernels, the messages
// and each PAT round's launch (the ReduceScatters' on the datatype's
// collective kernel, sharing one scratch) must all match across ranks;
// every result is checked, and the rest of the in-place ReduceScatter's
// input must stay as it was.
void runPatGroup(std::vector<Rank>& ranks) {
  const int n = (int)ranks.size();
  const size_t agA = 7, msg = 29, ar = 1000, agB = 33, rsA = 5, rsB = 33, rsC = 9;
  // Element offsets: send buffer: A's block at 1, the message at 64, the
  // ReduceScatters' inputs (A's, C's) at 129 and after; receive buffer: A's
  // output at 1, the message, the AllReduce, B's output, ReduceScatter A's
  // output, B's input and output, C's output.
  const size_t sA = 1, sMsg = 64, sRsA = 129, sRsC = sRsA + rsA * n + 2;
  const size_t rA = 1, rMsg = rA + agA * n + 3, rAr = rMsg + msg + 5, rB = rAr + ar + 1;
  const size_t rRsA = rB + agB * n + 3, rRsB = rRsA + rsA + 1, rRsC = rRsB + rsB * n + 2, rEnd = rRsC + rsC;
  std::vector<std::vector<float>> inA(n), inMsg(n), inAr(n), inB(n), inRsA(n), inRsB(n), inRsC(n);
  for (int r = 0; r < n; r++) {
    inA[r] = randomData(agA);
    inMsg[r] = randomData(msg);
    inAr[r] = randomData(ar);
    inB[r] = randomData(agB);
    inRsA[r] = randomData(rsA * n);
    inRsB[r] = randomData(rsB * n);
    inRsC[r] = randomData(rsC * n);
    Rank& R = ranks[r];
    upload(R, R.recv, randomData(rEnd));   // junk everywhere first
    upload(R, R.send + sA * gElem, inA[r]);
    upload(R, R.send + sMsg * gElem, inMsg[r]);
    upload(R, R.send + sRsA * gElem, inRsA[r]);
    upload(R, R.send + sRsC * gElem, inRsC[r]);
    upload(R, R.recv + rAr * gElem, inAr[r]);
    upload(R, R.recv + (rB + r * agB) * gElem, inB[r]);
    upload(R, R.recv + rRsB * gElem, inRsB[r]);
  }
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    Rank& R = ranks[r];
    NCCL_OK_OR_EXIT(ncclAllGather(R.send + sA * gElem, R.recv + rA * gElem, agA, gType, R.comm, R.stream));
    NCCL_OK_OR_EXIT(ncclSend(R.send + sMsg * gElem, msg, gType, (r + 1) % n, R.comm, R.stream));
    NCCL_OK_OR_EXIT(ncclRecv(R.recv + rMsg * gElem, msg, gType, (r - 1 + n) % n, R.comm, R.stream));
    char* arBuf = R.recv + rAr * gElem;
    NCCL_OK_OR_EXIT(ncclAllReduce(arBuf, arBuf, ar, gType, ncclSum, R.comm, R.stream));
    char* outB = R.recv + rB * gElem;
    NCCL_OK_OR_EXIT(ncclAllGather(outB + r * agB * gElem, outB, agB, gType, R.comm, R.stream));
    NCCL_OK_OR_EXIT(ncclReduceScatter(R.send + sRsA * gElem, R.recv + rRsA * gElem, rsA, gType, ncclMax, R.comm,
                                      R.stream));
    char* inOutB = R.recv + rRsB * gElem;
    NCCL_OK_OR_EXIT(ncclReduceScatter(inOutB, inOutB + r * rsB * gElem, rsB, gType, ncclSum, R.comm, R.stream));
    NCCL_OK_OR_EXIT(ncclReduceScatter(R.send + sRsC * gElem, R.recv + rRsC * gElem, rsC, gType, ncclAvg, R.comm,
                                      R.stream));
  }
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  gRsPatWanted += 2 * (uint64_t)n;
  gRsRingWanted += (uint64_t)n;
  std::vector<float> wantA, wantB, wantAr(ar, 0.0f);
  for (int k = 0; k < n; k++) {
    wantA.insert(wantA.end(), inA[k].begin(), inA[k].end());
    wantB.insert(wantB.end(), inB[k].begin(), inB[k].end());
    for (size_t i = 0; i < ar; i++) wantAr[i] += inAr[k][i];
  }
  // ReduceScatter X's result on rank r: block r of every rank's input, combined.
  auto reduced = [&](const std::vector<std::vector<float>>& in, size_t count, int r, ncclRedOp_t op) {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; i++) {
      v[i] = in[0][r * count + i];
      for (int k = 1; k < n; k++) v[i] = reduce(op, v[i], in[k][r * count + i]);
      if (op == ncclAvg) v[i] /= (float)n;
    }
    return v;
  };
  for (int r = 0; r < n; r++) {
    const std::string who = "/rank" + std::to_string(r);
    Rank& R = ranks[r];
    check("PatGroup/AllGather-odd-offset" + who, download(R, R.recv + rA * gElem, agA * n), wantA);
    check("PatGroup/SendRecv" + who, download(R, R.recv + rMsg * gElem, msg), inMsg[(r - 1 + n) % n]);
    check("PatGroup/AllReduce" + who, download(R, R.recv + rAr * gElem, ar), wantAr);
    check("PatGroup/AllGather-inplace" + who, download(R, R.recv + rB * gElem, agB * n), wantB);
    check("PatGroup/ReduceScatter-max-odd-offset" + who, download(R, R.recv + rRsA * gElem, rsA),
          reduced(inRsA, rsA, r, ncclMax));
    std::vector<float> wantRsB = inRsB[r];   // in place: only block r changes
    const std::vector<float> sumB = reduced(inRsB, rsB, r, ncclSum);
    std::copy(sumB.begin(), sumB.end(), wantRsB.begin() + r * rsB);
    check("PatGroup/ReduceScatter-sum-inplace" + who, download(R, R.recv + rRsB * gElem, rsB * n), wantRsB);
    check("PatGroup/ReduceScatter-avg-ring" + who, download(R, R.recv + rRsC * gElem, rsC),
          reduced(inRsC, rsC, r, ncclAvg), gType == ncclBfloat16 ? 4e-2f : 1e-6f);
  }
}

// sendbuff of rank r: `count` (x nranks for ReduceScatter/AlltoAll/Scatter) elements.
void runCase(std::vector<Rank>& ranks, const char* coll, size_t count, bool inPlace, ncclRedOp_t op, int root) {
  const int n = (int)ranks.size();
  const std::string name = std::string(coll) + "/" + opName(op) + "/c" + std::to_string(count) + (inPlace ? "/inplace" : "") +
                           "/root" + std::to_string(root);
  const bool rs = !strcmp(coll, "ReduceScatter"), ag = !strcmp(coll, "AllGather"), a2a = !strcmp(coll, "AlltoAll");
  const size_t sendCount = (rs || a2a) ? count * n : count;
  const size_t recvCount = (ag || a2a) ? count * n : count;
  std::vector<std::vector<float>> in(n);
  for (int r = 0; r < n; r++) {
    in[r] = randomData(sendCount);
    if (!strcmp(coll, "AllReduce") || !strcmp(coll, "Reduce") || rs) {
      if (op == ncclProd)
        for (float& x : in[r]) x = (float)((int)x % 3);   // products of small values stay exact
    }
  }
  // Garbage in the receive buffers: untouched elements must stay as they were.
  std::vector<std::vector<float>> before(n);
  for (int r = 0; r < n; r++) {
    Rank& R = ranks[r];
    before[r] = randomData(recvCount);
    upload(R, R.recv, before[r]);
    if (inPlace) {
      // In place: the input sits where the API says (AllGather: rank's block of recv; ReduceScatter: recv is
      // the rank's block of send).
      if (ag) {
        std::vector<float> b = before[r];
        std::copy(in[r].begin(), in[r].end(), b.begin() + r * count);   // no memcpy: count may be 0 (null data)
        before[r] = b;
        upload(R, R.recv, b);
      } else {
        upload(R, R.recv, in[r]);
      }
    } else {
      upload(R, R.send, in[r]);
    }
  }
  const uint64_t copiesBefore = oneRankCopies(), stagedBefore = stagedBytes();
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    Rank& R = ranks[r];
    const char* s = inPlace ? (ag ? R.recv + r * count * gElem : R.recv) : R.send;
    char* d = R.recv;
    if (rs && inPlace) d = R.recv + r * count * gElem;
    if (!strcmp(coll, "AllReduce")) NCCL_OK_OR_EXIT(ncclAllReduce(s, d, count, gType, op, R.comm, R.stream));
    else if (!strcmp(coll, "Broadcast")) NCCL_OK_OR_EXIT(ncclBroadcast(s, d, count, gType, root, R.comm, R.stream));
    else if (!strcmp(coll, "Reduce")) NCCL_OK_OR_EXIT(ncclReduce(s, d, count, gType, op, root, R.comm, R.stream));
    else if (ag) NCCL_OK_OR_EXIT(ncclAllGather(s, d, count, gType, R.comm, R.stream));
    else if (rs) NCCL_OK_OR_EXIT(ncclReduceScatter(s, d, count, gType, op, R.comm, R.stream));
    else if (a2a) NCCL_OK_OR_EXIT(ncclAlltoAll(s, d, count, gType, R.comm, R.stream));
  }
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  if (rs && count > 0) (op == ncclAvg ? gRsRingWanted : gRsPatWanted) += (uint64_t)n;

  for (int r = 0; r < n; r++) {
    std::vector<float> want = before[r];
    if (!strcmp(coll, "AllReduce") || (!strcmp(coll, "Reduce") && r == root)) {
      for (size_t i = 0; i < count; i++) {
        float v = in[0][i];
        for (int k = 1; k < n; k++) v = reduce(op, v, in[k][i]);
        if (op == ncclAvg) v /= (float)n;
        want[i] = v;
      }
    } else if (!strcmp(coll, "Broadcast")) {
      for (size_t i = 0; i < count; i++) want[i] = in[root][i];
    } else if (ag) {
      for (int k = 0; k < n; k++)
        for (size_t i = 0; i < count; i++) want[k * count + i] = in[k][i];
    } else if (rs) {
      // In place, the whole input buffer is checked: only block r changes.
      const size_t off = inPlace ? r * count : 0;
      if (inPlace) want = in[r];
      for (size_t i = 0; i < count; i++) {
        float v = in[0][r * count + i];
        for (int k = 1; k < n; k++) v = reduce(op, v, in[k][r * count + i]);
        if (op == ncclAvg) v /= (float)n;
        want[off + i] = v;
      }
    } else if (a2a) {
      for (int k = 0; k < n; k++)
        for (size_t i = 0; i < count; i++) want[k * count + i] = in[k][r * count + i];
    } else if (!strcmp(coll, "Reduce") && inPlace) {
      want = in[r];   // non-root, in place: its input stays
      want.resize(recvCount);
    }
    if (!strcmp(coll, "Reduce") && r != root && !inPlace) want = before[r];
    if (!strcmp(coll, "AllReduce") && inPlace) want.resize(recvCount);
    check(name + "/rank" + std::to_string(r), download(ranks[r], ranks[r].recv, want.size()), want,
          op == ncclAvg ? (gType == ncclBfloat16 ? 4e-2f : 1e-6f) : 0.0f);
  }
  // How the data moved: one rank copies out of place and does nothing in
  // place (core/one_rank.h); an in-place AlltoAll stages what each rank
  // sends its peers (core/inplace_stage.h).
  const uint64_t copies = oneRankCopies() - copiesBefore, staged = stagedBytes() - stagedBefore;
  const uint64_t wantCopies = n == 1 && !inPlace && count > 0 ? 1 : 0;
  const uint64_t wantStaged = a2a && inPlace ? (uint64_t)n * (n - 1) * count * gElem : 0;
  gChecks++;
  if (copies != wantCopies || staged != wantStaged) {
    gFailures++;
    fprintf(stderr, "FAIL %s: %llu one-rank copies (expected %llu), %llu bytes staged (expected %llu)\n",
            name.c_str(), (unsigned long long)copies, (unsigned long long)wantCopies, (unsigned long long)staged,
            (unsigned long long)wantStaged);
  }
}

// Reductions with an ncclRedOpCreatePreMulSum op (a host scalar of -3 in
// the element type): each rank's input is scaled before the sum, on every
// rank count (on one rank too: that is no copy, the kernels run it).
void runPreMulSum(std::vector<Rank>& ranks, const char* coll, size_t count, bool inPlace) {
  const int n = (int)ranks.size();
  const bool rs = !strcmp(coll, "ReduceScatter");
  const size_t sendCount = rs ? count * n : count;
  const std::string name = std::string("PreMulSum/") + coll + "/c" + std::to_string(count) + (inPlace ? "/inplace" : "");
  std::vector<ncclRedOp_t> ops(n);
  std::vector<std::vector<float>> in(n);
  const float scalar = -3.0f;
  const uint16_t scalarBf16 = toBf16(scalar);
  for (int r = 0; r < n; r++) {
    Rank& R = ranks[r];
    NCCL_OK_OR_EXIT(gpu::setDevice(R.dev));
    const void* sp = gType == ncclBfloat16 ? (const void*)&scalarBf16 : (const void*)&scalar;
    NCCL_OK_OR_EXIT(ncclRedOpCreatePreMulSum(&ops[r], const_cast<void*>(sp), gType, ncclScalarHostImmediate, R.comm));
    in[r] = randomData(sendCount);
    upload(R, R.recv, randomData(sendCount));
    upload(R, inPlace ? R.recv : R.send, in[r]);
  }
  const uint64_t copiesBefore = oneRankCopies();
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    Rank& R = ranks[r];
    const char* s = inPlace ? R.recv : R.send;
    char* d = rs && inPlace ? R.recv + r * count * gElem : R.recv;
    if (rs) NCCL_OK_OR_EXIT(ncclReduceScatter(s, d, count, gType, ops[r], R.comm, R.stream));
    else NCCL_OK_OR_EXIT(ncclAllReduce(s, d, count, gType, ops[r], R.comm, R.stream));
  }
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  if (rs && count > 0) gRsRingWanted += (uint64_t)n;
  for (int r = 0; r < n; r++) {
    const size_t off = rs ? r * count : 0;
    std::vector<float> want(count);
    for (size_t i = 0; i < count; i++) {
      float v = 0;
      for (int k = 0; k < n; k++) v += scalar * in[k][off + i];
      want[i] = v;
    }
    const char* at = rs && inPlace ? ranks[r].recv + r * count * gElem : ranks[r].recv;
    check(name + "/rank" + std::to_string(r), download(ranks[r], at, count), want);
    NCCL_OK_OR_EXIT(ncclRedOpDestroy(ops[r], ranks[r].comm));
  }
  gChecks++;
  if (oneRankCopies() != copiesBefore) {
    gFailures++;
    fprintf(stderr, "FAIL %s: went as a one-rank copy (the scalar was not applied)\n", name.c_str());
  }
}

// One rank: a message to itself in place moves nothing and costs no copy;
// out of place it is one copy.
void runSelfMessagesOneRank(Rank& R, size_t count) {
  std::vector<float> v = randomData(count);
  upload(R, R.recv, v);
  const uint64_t before = oneRankCopies();
  NCCL_OK_OR_EXIT(ncclGroupStart());
  NCCL_OK_OR_EXIT(ncclSend(R.recv, count, gType, 0, R.comm, R.stream));
  NCCL_OK_OR_EXIT(ncclRecv(R.recv, count, gType, 0, R.comm, R.stream));
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  NCCL_OK_OR_EXIT(gpu::streamSynchronize(static_cast<gpu::Stream>(R.stream)));
  check("SelfInPlace/c" + std::to_string(count), download(R, R.recv, count), v);
  gChecks++;
  if (oneRankCopies() != before) {
    gFailures++;
    fprintf(stderr, "FAIL SelfInPlace/c%zu: %llu copies for a message in place\n", count,
            (unsigned long long)(oneRankCopies() - before));
  }
}

void runSendRecv(std::vector<Rank>& ranks, size_t count) {
  const int n = (int)ranks.size();
  std::vector<std::vector<float>> in(n);
  for (int r = 0; r < n; r++) {
    in[r] = randomData(count);
    upload(ranks[r], ranks[r].send, in[r]);
    upload(ranks[r], ranks[r].recv, randomData(count));
  }
  // A ring shift: every rank sends to r+1 and receives from r-1 in one group.
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    Rank& R = ranks[r];
    NCCL_OK_OR_EXIT(ncclSend(R.send, count, gType, (r + 1) % n, R.comm, R.stream));
    NCCL_OK_OR_EXIT(ncclRecv(R.recv, count, gType, (r + n - 1) % n, R.comm, R.stream));
  }
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  for (int r = 0; r < n; r++)
    check("SendRecv/c" + std::to_string(count) + "/rank" + std::to_string(r),
          download(ranks[r], ranks[r].recv, count), in[(r + n - 1) % n]);
}

// One message of n elements from rank `from` to rank `to` in one group
// (recv posted first); checks the data and how many transfers went by copy
// engine (wantCe: that many; -1: not checked).
void messageCase(std::vector<Rank>& ranks, int from, int to, size_t n, const std::string& what, int wantCe) {
  Rank& S = ranks[from];
  Rank& R = ranks[to];
  std::vector<float> v = randomData(n);
  upload(S, S.send, v);
  upload(R, R.recv, randomData(n));
  const uint64_t before = copyEngineTransfers();
  NCCL_OK_OR_EXIT(ncclGroupStart());
  NCCL_OK_OR_EXIT(ncclRecv(R.recv, n, gType, from, R.comm, R.stream));
  NCCL_OK_OR_EXIT(ncclSend(S.send, n, gType, to, S.comm, S.stream));
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  check(what, download(R, R.recv, n), v);
  const uint64_t moved = copyEngineTransfers() - before;
  if (wantCe >= 0 && moved != (uint64_t)wantCe) {
    gFailures++;
    fprintf(stderr, "FAIL %s: %llu transfers by copy engine, expected %d\n", what.c_str(), (unsigned long long)moved,
            wantCe);
  }
}

// AllReduce on the copy-engine path (core/allreduce_ce_split.h: on 2 ranks, a
// ReduceScatter by the kernels, then each reduced half copied across):
// single AllReduces in and out of place with several ops, an odd count and a
// small one (never by copy engine), then two AllReduces in one group (in
// place and out of place, different ops). expectCe: 2 ranks move two halves
// per eligible AllReduce by copy engine, other rank counts none.
void runAllReduceCe(std::vector<Rank>& ranks, bool expectCe) {
  const int n = (int)ranks.size();
  const size_t big = 70000;
  auto expectMoved = [&](uint64_t before, uint64_t want, const std::string& what) {
    const uint64_t moved = copyEngineTransfers() - before;
    if (expectCe && moved != (n == 2 ? want : 0)) {
      gFailures++;
      fprintf(stderr, "FAIL %s: %llu transfers by copy engine, expected %llu\n", what.c_str(),
              (unsigned long long)moved, (unsigned long long)(n == 2 ? want : 0));
    }
  };
  struct Single {
    size_t count;
    bool inPlace;
    ncclRedOp_t op;
    uint64_t halves;
  };
  for (const Single& c : {Single{big, false, ncclSum, 2}, Single{big, true, ncclAvg, 2}, Single{big, false, ncclMax, 2},
                          Single{big, true, ncclProd, 2}, Single{big + 1, false, ncclSum, 0},
                          Single{1000, true, ncclSum, 0}}) {
    const uint64_t before = copyEngineTransfers();
    runCase(ranks, "AllReduce", c.count, c.inPlace, c.op, 0);
    expectMoved(before, c.halves, "AllReduceCe/" + std::string(opName(c.op)) + "/c" + std::to_string(c.count));
  }
  // Two in one group: sum out of place send[0, big) -> recv[0, big), min in
  // place on send[big, 2 big).
  std::vector<std::vector<float>> a(n), b(n);
  for (int r = 0; r < n; r++) {
    a[r] = randomData(big);
    b[r] = randomData(big);
    upload(ranks[r], ranks[r].send, a[r]);
    upload(ranks[r], ranks[r].send + big * gElem, b[r]);
  }
  const uint64_t before = copyEngineTransfers();
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (Rank& R : ranks) {
    NCCL_OK_OR_EXIT(ncclAllReduce(R.send, R.recv, big, gType, ncclSum, R.comm, R.stream));
    char* second = R.send + big * gElem;
    NCCL_OK_OR_EXIT(ncclAllReduce(second, second, big, gType, ncclMin, R.comm, R.stream));
  }
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  std::vector<float> sum(big), mn(big);
  for (size_t i = 0; i < big; i++) {
    sum[i] = a[0][i];
    mn[i] = b[0][i];
    for (int r = 1; r < n; r++) {
      sum[i] = reduce(ncclSum, sum[i], a[r][i]);
      mn[i] = reduce(ncclMin, mn[i], b[r][i]);
    }
  }
  for (int r = 0; r < n; r++) {
    check("AllReduceCe/two-in-group/sum/rank" + std::to_string(r), download(ranks[r], ranks[r].recv, big), sum);
    check("AllReduceCe/two-in-group/min-inplace/rank" + std::to_string(r),
          download(ranks[r], ranks[r].send + big * gElem, big), mn);
  }
  expectMoved(before, 4, "AllReduceCe/two-in-group");
}

// A large message from rank 0 to itself in one group with other work for
// rank 0's kernels: a small message to rank 1 (withColl false) or an
// AllReduce on every rank (true). expectCe: the self message went by a
// side-stream kernel, nothing by copy engine.
void selfWithOtherWork(std::vector<Rank>& ranks, size_t big, bool withColl, bool expectCe) {
  const int n = (int)ranks.size();
  Rank& A = ranks[0];
  Rank& B = ranks[1];
  const size_t small = 1000;
  const std::string what = std::string("P2pOrder/self-with-") + (withColl ? "allreduce" : "message");
  std::vector<float> self = randomData(big), msg = randomData(small);
  std::vector<std::vector<float>> ar(n);
  upload(A, A.send, self);
  upload(A, A.recv, randomData(big));
  upload(A, A.send + big * gElem, msg);
  upload(B, B.recv + big * gElem, randomData(small));
  for (int r = 0; r < n; r++) {
    ar[r] = randomData(small);
    upload(ranks[r], ranks[r].send + (big + small) * gElem, ar[r]);
  }
  const uint64_t before = copyEngineTransfers(), selfBefore = selfCopyLaunches();
  NCCL_OK_OR_EXIT(ncclGroupStart());
  NCCL_OK_OR_EXIT(ncclSend(A.send, big, gType, 0, A.comm, A.stream));
  if (withColl) {
    for (Rank& R : ranks) {
      char* x = R.send + (big + small) * gElem;
      NCCL_OK_OR_EXIT(ncclAllReduce(x, x, small, gType, ncclSum, R.comm, R.stream));
    }
  } else {
    NCCL_OK_OR_EXIT(ncclSend(A.send + big * gElem, small, gType, 1, A.comm, A.stream));
    NCCL_OK_OR_EXIT(ncclRecv(B.recv + big * gElem, small, gType, 0, B.comm, B.stream));
  }
  NCCL_OK_OR_EXIT(ncclRecv(A.recv, big, gType, 0, A.comm, A.stream));
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  check(what + "/self", download(A, A.recv, big), self);
  if (withColl) {
    std::vector<float> sum(small);
    for (size_t i = 0; i < small; i++) {
      sum[i] = ar[0][i];
      for (int r = 1; r < n; r++) sum[i] = reduce(ncclSum, sum[i], ar[r][i]);
    }
    for (int r = 0; r < n; r++)
      check(what + "/allreduce/rank" + std::to_string(r),
            download(ranks[r], ranks[r].send + (big + small) * gElem, small), sum);
  } else {
    check(what + "/message", download(B, B.recv + big * gElem, small), msg);
  }
  const uint64_t moved = copyEngineTransfers() - before, selfMoved = selfCopyLaunches() - selfBefore;
  if (expectCe && (moved != 0 || selfMoved != 1)) {
    gFailures++;
    fprintf(stderr, "FAIL %s: %llu transfers by copy engine, %llu by a side-stream kernel, expected 0 and 1\n",
            what.c_str(), (unsigned long long)moved, (unsigned long long)selfMoved);
  }
}

// Message order between ranks 0 and 1 (NCCL: the k-th send from a to b
// meets the k-th recv at b from a), with some messages large enough for the
// copy-engine path (core/ce_sendrecv.h) and some not:
//  1. one group, three messages of different sizes (1000, 70001, 7);
//  2. a large send alone (a group of one), then a group with the next large
//     send and both recvs: the counts disagree, so no copy engine, and the
//     kernels match them in order;
//  3. one more large message: the counts agree again;
//  4. a large message from rank 0 to itself: alone by the group's kernel,
//     with other work for it in the group by a side-stream kernel;
//  5. a large Broadcast from rank 1, out of place (2 ranks: by copy engine);
//  6. (3+ ranks) rank 0 sends to two ranks in one group (never by copy engine).
// expectCe: the large transfers of 1, 3 and 5 (only those) went by copy
// engine, 4 with other work by a side-stream kernel.
void runP2pOrder(std::vector<Rank>& ranks, bool expectCe) {
  Rank& A = ranks[0];
  Rank& B = ranks[1];
  const size_t esz = gElem;
  auto sendAt = [&](size_t off) { return A.send + off * esz; };
  auto recvAt = [&](size_t off) { return B.recv + off * esz; };
  const std::vector<size_t> sizes = {1000, 70001, 7};
  std::vector<float> all;
  std::vector<size_t> offs;
  for (size_t n : sizes) {
    offs.push_back(all.size());
    std::vector<float> v = randomData(n);
    all.insert(all.end(), v.begin(), v.end());
  }
  upload(A, A.send, all);
  upload(B, B.recv, randomData(all.size()));
  uint64_t ce0 = copyEngineTransfers();
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (size_t i = 0; i < sizes.size(); i++)
    NCCL_OK_OR_EXIT(ncclSend(sendAt(offs[i]), sizes[i], gType, 1, A.comm, A.stream));
  for (size_t i = 0; i < sizes.size(); i++)
    NCCL_OK_OR_EXIT(ncclRecv(recvAt(offs[i]), sizes[i], gType, 0, B.comm, B.stream));
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  check("P2pOrder/three-sizes", download(B, B.recv, all.size()), all);
  const uint64_t ce1 = copyEngineTransfers();
  if (expectCe && ce1 - ce0 != 1) {
    gFailures++;
    fprintf(stderr, "FAIL P2pOrder/three-sizes: %llu messages by copy engine, expected 1\n", (unsigned long long)(ce1 - ce0));
  }

  const size_t big = 70001;
  std::vector<float> d = randomData(big), e = randomData(big);
  upload(A, A.send, d);
  upload(A, A.send + big * esz, e);
  upload(B, B.recv, randomData(2 * big));
  NCCL_OK_OR_EXIT(ncclSend(A.send, big, gType, 1, A.comm, A.stream));   // alone: waits on the GPU for its recv
  NCCL_OK_OR_EXIT(ncclGroupStart());
  NCCL_OK_OR_EXIT(ncclSend(A.send + big * esz, big, gType, 1, A.comm, A.stream));
  NCCL_OK_OR_EXIT(ncclRecv(B.recv, big, gType, 0, B.comm, B.stream));
  NCCL_OK_OR_EXIT(ncclRecv(B.recv + big * esz, big, gType, 0, B.comm, B.stream));
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  check("P2pOrder/lone-send-first", download(B, B.recv, big), d);
  check("P2pOrder/lone-send-second", download(B, B.recv + big * esz, big), e);
  const uint64_t ce2 = copyEngineTransfers();
  if (ce2 != ce1) {
    gFailures++;
    fprintf(stderr, "FAIL P2pOrder/lone-send: %llu messages by copy engine with unmatched earlier sends\n",
            (unsigned long long)(ce2 - ce1));
  }

  messageCase(ranks, 0, 1, big, "P2pOrder/matched-again", expectCe ? 1 : -1);
  // 4. A large message to itself (AlltoAll's own block) stays with the
  //    kernels (measured faster, docs/performance-history.md).
  messageCase(ranks, 0, 0, big, "P2pOrder/self", 0);
  // 4b. The same message with other work for rank 0's kernels in the group
  //     (a small message to rank 1, then an AllReduce): a kernel on the
  //     side stream copies it meanwhile.
  selfWithOtherWork(ranks, big, false, expectCe);
  selfWithOtherWork(ranks, big, true, expectCe);

  // 5. A large Broadcast from rank 1 (2 ranks: by copy engine).
  const int n = (int)ranks.size();
  const uint64_t ce5 = copyEngineTransfers();
  std::vector<float> g = randomData(big);
  upload(B, B.send, g);
  for (Rank& R : ranks) upload(R, R.recv, randomData(big));
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (Rank& R : ranks) NCCL_OK_OR_EXIT(ncclBroadcast(R.send, R.recv, big, gType, 1, R.comm, R.stream));
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  for (int r = 0; r < n; r++) check("P2pOrder/broadcast/rank" + std::to_string(r), download(ranks[r], ranks[r].recv, big), g);
  if (expectCe && n == 2 && copyEngineTransfers() - ce5 != 1) {
    gFailures++;
    fprintf(stderr, "FAIL P2pOrder/broadcast: not by copy engine\n");
  }
  if (n < 3) return;

  // 6. Rank 0 sends to ranks 1 and 2 in one group: a fan-out stays with the
  //    kernels (they move both parts at once).
  const uint64_t ce6 = copyEngineTransfers();
  Rank& C = ranks[2];
  std::vector<float> x = randomData(big), y = randomData(big);
  upload(A, A.send, x);
  upload(A, A.send + big * esz, y);
  upload(B, B.recv, randomData(big));
  upload(C, C.recv, randomData(big));
  NCCL_OK_OR_EXIT(ncclGroupStart());
  NCCL_OK_OR_EXIT(ncclSend(A.send, big, gType, 1, A.comm, A.stream));
  NCCL_OK_OR_EXIT(ncclSend(A.send + big * esz, big, gType, 2, A.comm, A.stream));
  NCCL_OK_OR_EXIT(ncclRecv(B.recv, big, gType, 0, B.comm, B.stream));
  NCCL_OK_OR_EXIT(ncclRecv(C.recv, big, gType, 0, C.comm, C.stream));
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  check("P2pOrder/fan-out/rank1", download(B, B.recv, big), x);
  check("P2pOrder/fan-out/rank2", download(C, C.recv, big), y);
  if (copyEngineTransfers() != ce6) {
    gFailures++;
    fprintf(stderr, "FAIL P2pOrder/fan-out: went by copy engine\n");
  }
}

// One group with 8 collectives of 8 datatypes per rank (the GPU coll test's
// Batch/group-8-collectives): one kernel per datatype and rank, issued
// back to back. Checks the float AllReduce and the int8 max AllReduce
// (in place) against a host reference; every op must complete.
// ncclCommRevoke with AllReduces in flight on every rank (one thread drives
// them all), then ncclCommShrink around rank 1 (nobody with 2 ranks) in one
// group, and checked collectives on the shrunk communicators.
void runRevokeShrink(std::vector<Rank>& ranks) {
  const int n = (int)ranks.size();
  for (int it = 0; it < 3; it++) {
    NCCL_OK_OR_EXIT(ncclGroupStart());
    for (Rank& R : ranks) NCCL_OK_OR_EXIT(ncclAllReduce(R.send, R.recv, 70001, gType, ncclSum, R.comm, R.stream));
    NCCL_OK_OR_EXIT(ncclGroupEnd());
  }
  for (Rank& R : ranks) NCCL_OK_OR_EXIT(ncclCommRevoke(R.comm, NCCL_REVOKE_DEFAULT));
  for (Rank& R : ranks) {
    ncclResult_t async = ncclInProgress;
    NCCL_OK_OR_EXIT(ncclCommGetAsyncError(R.comm, &async));
    gChecks++;
    if (async != ncclSuccess) {
      fprintf(stderr, "FAIL revoke: async error %s after ncclCommRevoke\n", ncclGetErrorString(async));
      gFailures++;
    }
  }
  syncAll(ranks);
  gChecks++;
  if (ncclAllReduce(ranks[0].send, ranks[0].recv, 16, gType, ncclSum, ranks[0].comm, ranks[0].stream) !=
      ncclInvalidUsage) {
    fprintf(stderr, "FAIL revoke: a collective on a revoked communicator was not refused\n");
    gFailures++;
  }
  std::vector<int> excluded;
  if (n >= 3) excluded.push_back(1);
  std::vector<Rank> rest;
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    if (std::find(excluded.begin(), excluded.end(), r) != excluded.end()) continue;
    rest.push_back(ranks[r]);
    NCCL_OK_OR_EXIT(gpu::setDevice(ranks[r].dev));
    NCCL_OK_OR_EXIT(ncclCommShrink(ranks[r].comm, excluded.data(), (int)excluded.size(), &rest.back().comm, nullptr,
                                   NCCL_SHRINK_DEFAULT));
  }
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  for (size_t i = 0; i < rest.size(); i++) {
    int rank = -1, count = 0;
    NCCL_OK_OR_EXIT(ncclCommUserRank(rest[i].comm, &rank));
    NCCL_OK_OR_EXIT(ncclCommCount(rest[i].comm, &count));
    gChecks++;
    if (rank != (int)i || count != (int)rest.size()) {
      fprintf(stderr, "FAIL shrink: rank %d of %d, expected %zu of %zu\n", rank, count, i, rest.size());
      gFailures++;
    }
  }
  for (size_t count : {(size_t)1, (size_t)4099, (size_t)70001}) {
    runCase(rest, "AllReduce", count, false, ncclSum, 0);
    runCase(rest, "AlltoAll", count, true, ncclSum, 0);
  }
  for (Rank& R : rest) NCCL_OK_OR_EXIT(ncclCommDestroy(R.comm));
  printf("emu_coll_test: revoke with work in flight on %d ranks, shrink to %zu: done\n", n, rest.size());
}

// --hang-allreduce (header comment).
void runHangAllReduce(std::vector<Rank>& ranks) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  auto secs = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  Rank& R = ranks[0];
  NCCL_OK_OR_EXIT(gpu::setDevice(R.dev));
  const gpu::Stream st = static_cast<gpu::Stream>(R.stream);
  NCCL_OK_OR_EXIT(ncclAllReduce(R.send, R.recv, 4099, gType, ncclSum, R.comm, R.stream));
  ncclResult_t async = ncclSuccess;
  while (secs() < 60) {
    NCCL_OK_OR_EXIT(ncclCommGetAsyncError(R.comm, &async));
    if (async != ncclSuccess && async != ncclInProgress) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  gChecks++;
  if (async == ncclSuccess || async == ncclInProgress) {
    fprintf(stderr, "FAIL hang: no error 60 s after a lone AllReduce\n");
    gFailures++;
  }
  const double detected = secs();
  // The kernel left its polls: the stream drains.
  gpu::Event probe = nullptr;
  NCCL_OK_OR_EXIT(gpu::eventCreate(&probe));
  ncclResult_t q = ncclInProgress;
  while (secs() < detected + 20) {
    if (gpu::eventRecord(probe, st) != ncclSuccess) break;
    q = gpu::eventQuery(probe);
    if (q != ncclInProgress) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  gChecks++;
  if (q != ncclSuccess) {
    fprintf(stderr, "FAIL hang: the stream did not drain within 20 s of the error (%s)\n", ncclGetErrorString(q));
    gFailures++;
  }
  (void)gpu::eventDestroy(probe);
  for (Rank& r : ranks) {
    NCCL_OK_OR_EXIT(gpu::setDevice(r.dev));
    NCCL_OK_OR_EXIT(ncclCommAbort(r.comm));
    r.comm = nullptr;
  }
  printf("emu_coll_test: lone AllReduce: %s after %.1f s, stream drained after %.1f s\n", ncclGetErrorString(async),
         detected, secs());
}

void runMixedGroup(std::vector<Rank>& ranks, int rounds) {
  const int n = (int)ranks.size();
  struct Op {
    const char* coll;
    ncclDataType_t type;
    size_t elem;
    ncclRedOp_t op;
    size_t count;
    bool inPlace;
    int root;
  };
  const Op ops[] = {{"AllReduce", ncclFloat32, 4, ncclSum, 1023, false, 0},
                    {"Broadcast", ncclInt32, 4, ncclSum, 777, false, n - 1},
                    {"Reduce", ncclBfloat16, 2, ncclSum, 100, false, 0},
                    {"AllGather", ncclFloat16, 2, ncclSum, 65, false, 0},
                    {"ReduceScatter", ncclFloat64, 8, ncclAvg, 33, false, 0},
                    {"AllReduce", ncclInt8, 1, ncclMax, 2049, true, 0},
                    {"AllReduce", ncclFloat32, 4, ncclSum, 70001, false, 0},
                    {"Reduce", ncclUint64, 8, ncclProd, 5, true, n - 1}};
  const int kOps = (int)(sizeof(ops) / sizeof(ops[0]));
  std::vector<std::vector<char*>> sb(n, std::vector<char*>(kOps)), rb(n, std::vector<char*>(kOps));
  for (int r = 0; r < n; r++) {
    NCCL_OK_OR_EXIT(gpu::setDevice(ranks[r].dev));
    for (int k = 0; k < kOps; k++) {
      const size_t bytes = ops[k].count * n * ops[k].elem;
      void* p = nullptr;
      NCCL_OK_OR_EXIT(gpu::deviceAlloc(&p, bytes));
      sb[r][k] = static_cast<char*>(p);
      NCCL_OK_OR_EXIT(gpu::deviceAlloc(&p, bytes));
      rb[r][k] = static_cast<char*>(p);
      std::vector<char> junk(bytes);
      for (char& c : junk) c = (char)(gRng() % 7);   // small: int8 max, products stay finite
      NCCL_OK_OR_EXIT(gpu::memcpy(sb[r][k], junk.data(), bytes));
      NCCL_OK_OR_EXIT(gpu::memcpy(rb[r][k], junk.data(), bytes));
    }
  }
  for (int round = 0; round < rounds; round++) {
    std::vector<std::vector<float>> f32in(n);
    std::vector<std::vector<int8_t>> i8in(n);
    for (int r = 0; r < n; r++) {
      NCCL_OK_OR_EXIT(gpu::setDevice(ranks[r].dev));
      f32in[r] = randomData(1023);
      NCCL_OK_OR_EXIT(gpu::memcpy(sb[r][0], f32in[r].data(), 1023 * 4));
      i8in[r].resize(2049);
      for (int8_t& x : i8in[r]) x = (int8_t)((int)(gRng() % 200) - 100);
      NCCL_OK_OR_EXIT(gpu::memcpy(rb[r][5], i8in[r].data(), 2049));
    }
    NCCL_OK_OR_EXIT(ncclGroupStart());
    for (int k = 0; k < kOps; k++) {
      const Op& o = ops[k];
      for (int r = 0; r < n; r++) {
        Rank& R = ranks[r];
        const char* s = o.inPlace ? rb[r][k] : sb[r][k];
        char* d = rb[r][k];
        if (!strcmp(o.coll, "AllReduce")) NCCL_OK_OR_EXIT(ncclAllReduce(s, d, o.count, o.type, o.op, R.comm, R.stream));
        else if (!strcmp(o.coll, "Broadcast")) NCCL_OK_OR_EXIT(ncclBroadcast(s, d, o.count, o.type, o.root, R.comm,
                                                                             R.stream));
        else if (!strcmp(o.coll, "Reduce")) NCCL_OK_OR_EXIT(ncclReduce(s, d, o.count, o.type, o.op, o.root, R.comm,
                                                                       R.stream));
        else if (!strcmp(o.coll, "AllGather")) NCCL_OK_OR_EXIT(ncclAllGather(s, d, o.count, o.type, R.comm, R.stream));
        else NCCL_OK_OR_EXIT(ncclReduceScatter(s, d, o.count, o.type, o.op, R.comm, R.stream));
      }
    }
    NCCL_OK_OR_EXIT(ncclGroupEnd());
    syncAll(ranks);
    for (int r = 0; r < n; r++) {
      std::vector<float> want(1023), got(1023);
      for (size_t i = 0; i < 1023; i++) {
        float v = 0;
        for (int k = 0; k < n; k++) v += f32in[k][i];
        want[i] = v;
      }
      NCCL_OK_OR_EXIT(gpu::setDevice(ranks[r].dev));
      NCCL_OK_OR_EXIT(gpu::memcpy(got.data(), rb[r][0], 1023 * 4));
      check("mixed-group/f32-allreduce/rank" + std::to_string(r), got, want);
      std::vector<int8_t> g8(2049);
      NCCL_OK_OR_EXIT(gpu::memcpy(g8.data(), rb[r][5], 2049));
      std::vector<float> w8(2049), gf(2049);
      for (size_t i = 0; i < 2049; i++) {
        int8_t v = i8in[0][i];
        for (int k = 1; k < n; k++) v = std::max(v, i8in[k][i]);
        w8[i] = v;
        gf[i] = g8[i];
      }
      check("mixed-group/i8-max-inplace/rank" + std::to_string(r), gf, w8);
    }
  }
  for (int r = 0; r < n; r++) {
    NCCL_OK_OR_EXIT(gpu::setDevice(ranks[r].dev));
    for (int k = 0; k < kOps; k++) {
      (void)gpu::deviceFree(sb[r][k]);
      (void)gpu::deviceFree(rb[r][k]);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  countTuningDecisions();   // which algorithms ran (checked at the end)
  int nranks = 2;
  bool profile = false;   // --profile: one AllReduce and one send/recv ring only (the profiler test)
  std::string expectAlgo;
  std::string expectProto;
  bool mixedGroup = false;  // --mixed-group: first, a group of 8 collectives of 8 datatypes (needs every kernel)
  bool groupInit = false;   // --group-init: ncclCommInitRank per device inside a group (not ncclCommInitAll)
  bool ceOnly = false;      // --copy-engine: AlltoAll, Broadcast, send/recv and the task-order cases
  bool expectCe = false;    // --expect-ce: the order cases' large transfers must go by copy engine
  int ranksPerGpu = 1;      // --ranks-per-gpu=K: rank r on device r / K
  std::string trafficAlgo;  // --traffic=ring|tree: AllReduces whose bytes per link class and NIC are checked
  bool smallCounts = false; // --small: counts up to 1000 only (many ranks: CI time)
  bool patGroup = false;    // --pat-group: runPatGroup
  bool revokeShrink = false; // --revoke-shrink: only runRevokeShrink
  bool hangAllReduce = false; // --hang-allreduce: only runHangAllReduce
  bool memAllocBuffers = false;  // --mem-alloc: buffers from ncclMemAlloc
  std::string expectInitError;  // --expect-init-error=TEXT: init must be refused with TEXT
  // --colls=A,B: only these collectives' cases ("SendRecv": the p2p cases).
  // The tree tests run AllReduce only: the other collectives have only the
  // ring, which the other tests cover (CI time).
  std::string collList;
  auto wants = [&collList](const char* name) {
    if (collList.empty()) return true;
    const std::string list = "," + collList + ",";
    return list.find("," + std::string(name) + ",") != std::string::npos;
  };
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--colls=", 8)) collList = argv[i] + 8;
    if (!strncmp(argv[i], "--ranks=", 8)) nranks = atoi(argv[i] + 8);
    if (!strcmp(argv[i], "--profile")) profile = true;
    if (!strcmp(argv[i], "--type=bf16")) {
      gType = ncclBfloat16;
      gElem = 2;
    }
    if (!strncmp(argv[i], "--expect-algo=", 14)) expectAlgo = argv[i] + 14;
    if (!strncmp(argv[i], "--expect-proto=", 15)) expectProto = argv[i] + 15;
    if (!strcmp(argv[i], "--mixed-group")) mixedGroup = true;
    if (!strcmp(argv[i], "--group-init")) groupInit = true;
    if (!strcmp(argv[i], "--copy-engine")) ceOnly = true;
    if (!strcmp(argv[i], "--expect-ce")) expectCe = true;
    if (!strncmp(argv[i], "--ranks-per-gpu=", 16)) ranksPerGpu = atoi(argv[i] + 16);
    if (!strcmp(argv[i], "--small")) smallCounts = true;
    if (!strcmp(argv[i], "--pat-group")) patGroup = true;
    if (!strncmp(argv[i], "--traffic=", 10)) trafficAlgo = argv[i] + 10;
    if (!strcmp(argv[i], "--revoke-shrink")) revokeShrink = true;
    if (!strcmp(argv[i], "--hang-allreduce")) hangAllReduce = true;
    if (!strcmp(argv[i], "--mem-alloc")) memAllocBuffers = true;
    if (!strncmp(argv[i], "--expect-init-error=", 20)) expectInitError = argv[i] + 20;
  }
  if (ranksPerGpu < 1) {
    fprintf(stderr, "emu_coll_test: --ranks-per-gpu must be >= 1\n");
    return 2;
  }
  emu::installCpuKernelRunner();
  int ndev = 0;
  NCCL_OK_OR_EXIT(gpu::getDeviceCount(&ndev));
  if (ndev * ranksPerGpu < nranks) {
    fprintf(stderr, "emu_coll_test: %d emulated devices x %d ranks per GPU, %d ranks requested (set UNICCL_EMU_DEVICES)\n",
            ndev, ranksPerGpu, nranks);
    return 2;
  }
  std::vector<int> devs(nranks);
  for (int i = 0; i < nranks; i++) devs[i] = i / ranksPerGpu;
  std::vector<ncclComm_t> comms(nranks);
  ncclResult_t initRes = ncclSuccess;
  if (groupInit) {
    ncclUniqueId id;
    NCCL_OK_OR_EXIT(ncclGetUniqueId(&id));
    NCCL_OK_OR_EXIT(ncclGroupStart());
    for (int i = 0; i < nranks; i++) {
      NCCL_OK_OR_EXIT(gpu::setDevice(devs[i]));
      if (ranksPerGpu > 1) NCCL_OK_OR_EXIT(ncclCommInitRankMulti(&comms[i], nranks, id, i, i % ranksPerGpu));
      else NCCL_OK_OR_EXIT(ncclCommInitRank(&comms[i], nranks, id, i));
    }
    initRes = ncclGroupEnd();
  } else {
    initRes = ncclCommInitAll(comms.data(), nranks, devs.data());
  }
  if (!expectInitError.empty()) {
    const std::string msg = ncclGetLastError(nullptr);
    const bool ok = initRes == ncclInvalidUsage && msg.find(expectInitError) != std::string::npos;
    printf("emu_coll_test: init of %d ranks, %d per GPU: %s (%s) - %s\n", nranks, ranksPerGpu,
           ncclGetErrorString(initRes), msg.c_str(), ok ? "refused as expected" : "FAILED: expected a refusal");
    // A failed grouped init leaves each rank a failed communicator to
    // destroy, as NCCL does (ncclCommInitAll frees its own).
    for (ncclComm_t c : comms)
      if (c != nullptr) ncclCommDestroy(c);
    return ok ? 0 : 1;
  }
  NCCL_OK_OR_EXIT(initRes);

  const std::vector<size_t> counts =
      smallCounts ? std::vector<size_t>{0, 1, 7, 1000} : std::vector<size_t>{0, 1, 7, 1000, 4099, 70001};
  size_t maxCount = 0;
  for (size_t c : counts) maxCount = std::max(maxCount, c);
  std::vector<Rank> ranks(nranks);
  for (int r = 0; r < nranks; r++) {
    Rank& R = ranks[r];
    R.dev = devs[r];
    R.comm = comms[r];
    NCCL_OK_OR_EXIT(gpu::setDevice(R.dev));
    gpu::Stream st = nullptr;
    NCCL_OK_OR_EXIT(gpu::streamCreate(&st));
    R.stream = static_cast<uniccl_stream_t>(st);
    // runP2pOrder moves two 70001-element messages whatever the counts (--small too).
    R.cap = std::max(maxCount * nranks, size_t(4 * 70001));
    void* p = nullptr;
    if (memAllocBuffers) {
      NCCL_OK_OR_EXIT(ncclMemAlloc(&p, R.cap * sizeof(float)));
      R.send = static_cast<char*>(p);
      NCCL_OK_OR_EXIT(ncclMemAlloc(&p, R.cap * sizeof(float)));
      R.recv = static_cast<char*>(p);
      MemAllocInfo info{};
      const bool vmm = memAllocFind(R.send, &info) && info.vmm && info.device == R.dev;
      check("mem-alloc/rank" + std::to_string(r) + " is a mapping of the rank's GPU", std::vector<float>{vmm ? 1.0f : 0.0f},
            std::vector<float>{1.0f});
    } else {
      NCCL_OK_OR_EXIT(gpu::deviceAlloc(&p, R.cap * sizeof(float)));
      R.send = static_cast<char*>(p);
      NCCL_OK_OR_EXIT(gpu::deviceAlloc(&p, R.cap * sizeof(float)));
      R.recv = static_cast<char*>(p);
    }
  }

  if (hangAllReduce) {
    runHangAllReduce(ranks);
    printf("emu_coll_test: %d checks, %d failures\n", gChecks, gFailures);
    return gFailures == 0 ? 0 : 1;
  }
  if (revokeShrink) {
    runRevokeShrink(ranks);
    for (Rank& R : ranks) {
      NCCL_OK_OR_EXIT(gpu::setDevice(R.dev));
      NCCL_OK_OR_EXIT(ncclCommDestroy(R.comm));
    }
    printf("emu_coll_test: %d checks, %d failures\n", gChecks, gFailures);
    return gFailures == 0 ? 0 : 1;
  }
  if (mixedGroup) runMixedGroup(ranks, 3);
  if (patGroup) runPatGroup(ranks);
  if (profile) {
    runCase(ranks, "AllReduce", 4099, false, ncclSum, 0);
    runSendRecv(ranks, 1000);
  }
  const char* colls[] = {"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AlltoAll"};
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  for (const char* coll : profile ? std::vector<const char*>{} : std::vector<const char*>(std::begin(colls), std::end(colls))) {
    if (ceOnly && strcmp(coll, "AlltoAll") && strcmp(coll, "Broadcast")) continue;
    if (!wants(coll)) continue;
    const bool reduces = !strcmp(coll, "AllReduce") || !strcmp(coll, "Reduce") || !strcmp(coll, "ReduceScatter");
    for (size_t count : counts) {
      for (int inPlace = 0; inPlace < 2; inPlace++) {
        if (reduces) {
          for (ncclRedOp_t op : ops) {
            // Every op at the small and odd sizes; the large one with sum only (time).
            if (count > 4099 && op != ncclSum) continue;
            runCase(ranks, coll, count, inPlace, op, nranks - 1);
          }
        } else {
          for (int root = 0; root < (strcmp(coll, "Broadcast") ? 1 : nranks); root++)
            runCase(ranks, coll, count, inPlace, ncclSum, root);
        }
      }
    }
  }
  if (!profile && wants("SendRecv"))
    for (size_t count : counts) runSendRecv(ranks, count);
  if (!profile && !ceOnly) {
    for (size_t count : {(size_t)1, (size_t)7, (size_t)4099})
      for (int inPlace = 0; inPlace < 2; inPlace++) {
        if (wants("AllReduce")) runPreMulSum(ranks, "AllReduce", count, inPlace);
        if (wants("ReduceScatter")) runPreMulSum(ranks, "ReduceScatter", count, inPlace);
      }
  }
  if (!profile && nranks == 1 && wants("SendRecv"))
    for (size_t count : counts) runSelfMessagesOneRank(ranks[0], count);
  if (!profile && nranks > 1 && wants("SendRecv")) runP2pOrder(ranks, expectCe);
  if (ceOnly) runAllReduceCe(ranks, expectCe);
  // Many back-to-back collectives without a sync: work FIFO reuse, slot wrap,
  // persistent step counters (and the proxy's for NET). Every iteration sums
  // its own slice, with data that differs per rank and per iteration, so a
  // launch that did nothing, or a slot read from an earlier iteration, shows
  // (small integers: exact in bf16 up to 16 ranks).
  if (!profile && !ceOnly && wants("AllReduce")) {
    constexpr size_t kCount = 1000;
    constexpr int kIters = 50;
    auto value = [](int r, int it, size_t i) { return (float)((i + 3 * it + 5 * r) % 16); };
    for (int r = 0; r < nranks; r++) {
      std::vector<float> in(kCount * kIters);
      for (int it = 0; it < kIters; it++)
        for (size_t i = 0; i < kCount; i++) in[it * kCount + i] = value(r, it, i);
      upload(ranks[r], ranks[r].recv, in);
    }
    for (int it = 0; it < kIters; it++) {
      NCCL_OK_OR_EXIT(ncclGroupStart());
      for (Rank& R : ranks) {
        char* slice = R.recv + it * kCount * gElem;
        NCCL_OK_OR_EXIT(ncclAllReduce(slice, slice, kCount, gType, ncclSum, R.comm, R.stream));
      }
      NCCL_OK_OR_EXIT(ncclGroupEnd());
    }
    syncAll(ranks);
    std::vector<float> want(kCount * kIters, 0.0f);
    for (int it = 0; it < kIters; it++)
      for (size_t i = 0; i < kCount; i++)
        for (int r = 0; r < nranks; r++) want[it * kCount + i] += value(r, it, i);
    for (int r = 0; r < nranks; r++)
      check("repeat/rank" + std::to_string(r), download(ranks[r], ranks[r].recv, kCount * kIters), want);
  }

  if (!trafficAlgo.empty()) {
    std::vector<emu::TrafficRank> tr;
    for (Rank& R : ranks) tr.push_back(emu::TrafficRank{R.dev, R.comm, R.stream, R.send, R.recv, R.cap});
    emu::checkAllReduceTraffic(tr, trafficAlgo, &gChecks, &gFailures);
  }

  for (Rank& R : ranks) {
    NCCL_OK_OR_EXIT(gpu::setDevice(R.dev));
    NCCL_OK_OR_EXIT(ncclCommDestroy(R.comm));
    if (memAllocBuffers) {
      NCCL_OK_OR_EXIT(ncclMemFree(R.send));
      NCCL_OK_OR_EXIT(ncclMemFree(R.recv));
    } else {
      (void)gpu::deviceFree(R.send);
      (void)gpu::deviceFree(R.recv);
    }
    (void)gpu::streamDestroy(static_cast<gpu::Stream>(R.stream));
  }
  // Which algorithms ran: every rank's AllReduce decisions (the other
  // collectives have only the ring, whatever NCCL_ALGO says).
  const uint64_t arRing = tuningDecisions(TaskKind::AllReduce, dev::kAlgoRing);
  const uint64_t arTree = tuningDecisions(TaskKind::AllReduce, dev::kAlgoTree);
  uint64_t otherTree = 0;
  for (TaskKind k : {TaskKind::Broadcast, TaskKind::Reduce, TaskKind::AllGather, TaskKind::ReduceScatter})
    otherTree += tuningDecisions(k, dev::kAlgoTree);
  printf("emu_coll_test: AllReduce ran %llu times on the ring, %llu times on the tree\n", (unsigned long long)arRing,
         (unsigned long long)arTree);
  if (!expectAlgo.empty()) {
    gChecks++;
    const uint64_t agRing = tuningDecisions(TaskKind::AllGather, dev::kAlgoRing), pat = patDecisions(TaskKind::AllGather);
    const uint64_t rsRing = tuningDecisions(TaskKind::ReduceScatter, dev::kAlgoRing);
    const uint64_t rsPat = patDecisions(TaskKind::ReduceScatter);
    printf("emu_coll_test: AllGather ran %llu times as PAT rounds, %llu times on the ring\n", (unsigned long long)pat,
           (unsigned long long)agRing);
    printf("emu_coll_test: ReduceScatter ran %llu times as PAT rounds (%llu wanted), %llu times on the ring "
           "(%llu wanted)\n", (unsigned long long)rsPat, (unsigned long long)gRsPatWanted,
           (unsigned long long)rsRing, (unsigned long long)gRsRingWanted);
    const bool rsAsWanted = rsPat == gRsPatWanted && rsRing == gRsRingWanted;
    const bool ok = otherTree == 0 && (expectAlgo == "ring"    ? arTree == 0 && arRing > 0 && pat + rsPat == 0
                                       : expectAlgo == "pat"   ? arTree == 0 && pat > 0 && agRing == 0 && rsAsWanted
                                       : expectAlgo == "tree"  ? arRing == 0 && arTree > 0
                                       : expectAlgo == "mixed" ? arRing > 0 && arTree > 0
                                                               : false);
    if (!ok) {
      gFailures++;
      fprintf(stderr, "FAIL --expect-algo=%s: AllReduce ring %llu, tree %llu; other collectives on the tree %llu\n",
              expectAlgo.c_str(), (unsigned long long)arRing, (unsigned long long)arTree,
              (unsigned long long)otherTree);
    }
  }
  // Which protocols the collectives ran (every rank's decisions).
  const uint64_t pLL = tuningProtoDecisions(dev::kProtoLL), pLL128 = tuningProtoDecisions(dev::kProtoLL128),
                 pSimple = tuningProtoDecisions(dev::kProtoSimple);
  printf("emu_coll_test: collectives ran LL %llu, LL128 %llu, Simple %llu times\n", (unsigned long long)pLL,
         (unsigned long long)pLL128, (unsigned long long)pSimple);
  if (!expectProto.empty()) {
    gChecks++;
    const bool ok = expectProto == "LL"      ? pLL > 0 && pLL128 == 0 && pSimple == 0
                    : expectProto == "LL128"  ? pLL128 > 0 && pLL == 0 && pSimple == 0
                    : expectProto == "Simple" ? pSimple > 0 && pLL == 0 && pLL128 == 0
                    : expectProto == "ll128-mixed" ? pLL128 > 0 && pLL + pSimple > 0
                                                   : false;
    if (!ok) {
      gFailures++;
      fprintf(stderr, "FAIL --expect-proto=%s: LL %llu, LL128 %llu, Simple %llu\n", expectProto.c_str(),
              (unsigned long long)pLL, (unsigned long long)pLL128, (unsigned long long)pSimple);
    }
  }
  printf("emu_coll_test: %d ranks, %d checks, %d failures\n", nranks, gChecks, gFailures);
  return gFailures == 0 ? 0 : 1;
}
