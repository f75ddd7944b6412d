// RCCL's API (include/rccl/rccl.h) end to end on the CPU emulator: a
// program written for RCCL compiles against uniccl's header unchanged, and
// ncclAllToAllv / ncclAllToAll move the right data on 2, 3 and 4 ranks
// (whatever transport the environment selects: P2P, or NET with
// NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1). Results are checked against a host
// model, including the gaps between received blocks (untouched) and zero
// counts (a rank that sends or receives nothing). Bad arguments get
// ncclInvalidArgument and a ncclGetLastError text, and nothing runs.
//
//   emu_rccl_test      (UNICCL_EMU_DEVICES >= 4)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/gpu.h"
#include "emu_runtime.h"
#include "rccl/rccl.h"
#include "test_check.h"

// What RCCL programs test for, and RCCL's fp8 names with RCCL's values.
#if !defined(RCCL_BFLOAT16) || !defined(RCCL_FLOAT8) || !defined(RCCL_GATHER_SCATTER) || !defined(RCCL_ALLTOALLV)
#error "rccl/rccl.h must define RCCL's feature macros"
#endif
static_assert(ncclFp8E4M3 == 10 && ncclFp8E5M2 == 11, "RCCL's fp8 datatype values");
static_assert(ncclDataType_t::ncclFp8E4M3 == ncclFloat8e4m3, "scoped spelling used by RCCL programs");

using namespace uniccl;

namespace {

int gFailures = 0;
int gChecks = 0;
std::mt19937 gRng(20261124);
const float kSentinel = -12345.0f;

void check(bool ok, const std::string& what) {
  gChecks++;
  if (!ok) {
    gFailures++;
    fprintf(stderr, "FAIL %s\n", what.c_str());
  }
}

struct Rank {
  int dev;
  ncclComm_t comm;
  uniccl_stream_t stream;
  float* send = nullptr;
  float* recv = nullptr;
};

const size_t kCap = 1 << 18;   // elements of each buffer

void put(Rank& r, float* dst, const std::vector<float>& v) {
  NCCL_OK_OR_EXIT(gpu::setDevice(r.dev));
  NCCL_OK_OR_EXIT(gpu::memcpy(dst, v.data(), v.size() * sizeof(float)));
}
std::vector<float> get(Rank& r, const float* src, size_t n) {
  std::vector<float> v(n);
  NCCL_OK_OR_EXIT(gpu::setDevice(r.dev));
  NCCL_OK_OR_EXIT(gpu::memcpy(v.data(), src, n * sizeof(float)));
  return v;
}
void syncAll(std::vector<Rank>& ranks) {
  for (Rank& r : ranks) {
    NCCL_OK_OR_EXIT(gpu::setDevice(r.dev));
    NCCL_OK_OR_EXIT(gpu::streamSynchronize(static_cast<gpu::Stream>(r.stream)));
  }
}

// Counts C[i][j] (elements rank i sends to rank j) and each rank's
// displacements; `gap` elements left free between blocks, blocks laid out
// in reverse peer order when `reverse` (displacements need not follow rank
// order).
struct Plan {
  std::vector<std::vector<size_t>> C;
  std::vector<std::vector<size_t>> sdispl, rdispl;   // [rank][peer]
  size_t sendLen = 0, recvLen = 0;                   // max buffer extent over ranks
};

Plan layout(std::vector<std::vector<size_t>> C, size_t gap, bool reverse) {
  const int n = (int)C.size();
  Plan p;
  p.C = std::move(C);
  p.sdispl.assign(n, std::vector<size_t>(n, 0));
  p.rdispl.assign(n, std::vector<size_t>(n, 0));
  for (int i = 0; i < n; i++) {
    size_t s = gap, r = gap;
    for (int k = 0; k < n; k++) {
      const int j = reverse ? n - 1 - k : k;
      p.sdispl[i][j] = s;
      s += p.C[i][j] + gap;
      p.rdispl[i][j] = r;
      r += p.C[j][i] + gap;
    }
    p.sendLen = std::max(p.sendLen, s);
    p.recvLen = std::max(p.recvLen, r);
  }
  return p;
}

// One ncclAllToAllv over all ranks (one group, one thread), checked against
// the host model: block i of rank j's recvbuff is block j of rank i's
// sendbuff; everything else of recvbuff keeps the sentinel.
void runAllToAllv(std::vector<Rank>& ranks, const Plan& p, const std::string& name) {
  const int n = (int)ranks.size();
  if (p.sendLen > kCap || p.recvLen > kCap) {
    fprintf(stderr, "emu_rccl_test: case %s exceeds the buffers\n", name.c_str());
    exit(2);
  }
  std::vector<std::vector<float>> in(n);
  std::uniform_int_distribution<int> d(-1000, 1000);
  for (int i = 0; i < n; i++) {
    in[i].resize(p.sendLen);
    for (float& x : in[i]) x = (float)d(gRng);
    put(ranks[i], ranks[i].send, in[i]);
    put(ranks[i], ranks[i].recv, std::vector<float>(p.recvLen, kSentinel));
  }
  std::vector<std::vector<size_t>> sc(n, std::vector<size_t>(n)), rc(n, std::vector<size_t>(n));
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      sc[i][j] = p.C[i][j];
      rc[i][j] = p.C[j][i];
    }
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int i = 0; i < n; i++) {
    Rank& R = ranks[i];
    NCCL_OK_OR_EXIT(ncclAllToAllv(R.send, sc[i].data(), p.sdispl[i].data(), R.recv, rc[i].data(), p.rdispl[i].data(),
                                  ncclFloat, R.comm, R.stream));
  }
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  for (int j = 0; j < n; j++) {
    std::vector<float> want(p.recvLen, kSentinel);
    for (int i = 0; i < n; i++)
      std::copy_n(in[i].begin() + p.sdispl[i][j], p.C[i][j], want.begin() + p.rdispl[j][i]);
    const std::vector<float> got = get(ranks[j], ranks[j].recv, p.recvLen);
    size_t bad = 0, first = 0;
    for (size_t k = 0; k < want.size(); k++)
      if (got[k] != want[k] && bad++ == 0) first = k;
    check(bad == 0, "AllToAllv/" + name + "/" + std::to_string(n) + "ranks/rank" + std::to_string(j) + ": " +
                        std::to_string(bad) + " wrong, first at " + std::to_string(first) + " got " +
                        std::to_string(bad ? got[first] : 0.f) + " want " + std::to_string(bad ? want[first] : 0.f));
  }
}

void runAllToAll(std::vector<Rank>& ranks, size_t count) {
  const int n = (int)ranks.size();
  std::vector<std::vector<float>> in(n);
  for (int i = 0; i < n; i++) {
    in[i].resize(count * n);
    for (size_t k = 0; k < in[i].size(); k++) in[i][k] = (float)(i * 100000 + (int)k);
    put(ranks[i], ranks[i].send, in[i]);
    put(ranks[i], ranks[i].recv, std::vector<float>(count * n + 1, kSentinel));
  }
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (Rank& R : ranks) NCCL_OK_OR_EXIT(ncclAllToAll(R.send, R.recv, count, ncclFloat, R.comm, R.stream));
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  for (int j = 0; j < n; j++) {
    std::vector<float> want(count * n + 1, kSentinel);
    for (int i = 0; i < n; i++) std::copy_n(in[i].begin() + j * count, count, want.begin() + i * count);
    check(get(ranks[j], ranks[j].recv, want.size()) == want,
          "AllToAll/c" + std::to_string(count) + "/" + std::to_string(n) + "ranks/rank" + std::to_string(j));
  }
}

// Bad arguments on one rank: refused before anything is recorded, so the
// other ranks need not take part and nothing hangs.
void runBadInput(Rank& R, int n) {
  std::vector<size_t> counts(n, 1), displs(n, 0);
  for (int j = 0; j < n; j++) displs[j] = j;
  auto refused = [&](ncclResult_t res, const char* what) {
    const char* text = ncclGetLastError(R.comm);
    check(res == ncclInvalidArgument && text && strstr(text, "ncclAllToAllv"),
          std::string("bad input refused: ") + what + " (got " + ncclGetErrorString(res) + ", '" +
              (text ? text : "") + "')");
  };
  refused(ncclAllToAllv(R.send, nullptr, displs.data(), R.recv, counts.data(), displs.data(), ncclFloat, R.comm,
                        R.stream), "null sendcounts");
  refused(ncclAllToAllv(R.send, counts.data(), displs.data(), R.recv, counts.data(), nullptr, ncclFloat, R.comm,
                        R.stream), "null rdispls");
  refused(ncclAllToAllv(R.send, counts.data(), displs.data(), R.send + 1, counts.data(), displs.data(), ncclFloat,
                        R.comm, R.stream), "overlapping buffers");
  std::vector<size_t> huge(n, SIZE_MAX - 1);
  refused(ncclAllToAllv(R.send, counts.data(), huge.data(), R.recv, counts.data(), displs.data(), ncclFloat, R.comm,
                        R.stream), "displacement overflow");
  refused(ncclAllToAllv(nullptr, counts.data(), displs.data(), R.recv, counts.data(), displs.data(), ncclFloat,
                        R.comm, R.stream), "null sendbuff with counts");
  refused(ncclAllToAllv(R.send, counts.data(), displs.data(), R.recv, counts.data(), displs.data(),
                        (ncclDataType_t)99, R.comm, R.stream), "bad datatype");
}

void runRanks(int n) {
  std::vector<int> devs(n);
  for (int i = 0; i < n; i++) devs[i] = i;
  std::vector<ncclComm_t> comms(n);
  NCCL_OK_OR_EXIT(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<Rank> ranks(n);
  for (int r = 0; r < n; r++) {
    Rank& R = ranks[r];
    R.dev = r;
    R.comm = comms[r];
    NCCL_OK_OR_EXIT(gpu::setDevice(r));
    gpu::Stream st = nullptr;
    NCCL_OK_OR_EXIT(gpu::streamCreate(&st));
    R.stream = static_cast<uniccl_stream_t>(st);
    void* p = nullptr;
    NCCL_OK_OR_EXIT(gpu::deviceAlloc(&p, kCap * sizeof(float)));
    R.send = static_cast<float*>(p);
    NCCL_OK_OR_EXIT(gpu::deviceAlloc(&p, kCap * sizeof(float)));
    R.recv = static_cast<float*>(p);
  }

  auto matrix = [n](auto f) {
    std::vector<std::vector<size_t>> C(n, std::vector<size_t>(n));
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) C[i][j] = f(i, j);
    return C;
  };
  // Uneven, with zeros scattered (to self too), packed and with gaps.
  const size_t sizes[] = {0, 1, 7, 300, 1000, 4099};
  std::uniform_int_distribution<int> pick(0, 5);
  for (int rep = 0; rep < 3; rep++) {
    auto C = matrix([&](int, int) { return sizes[pick(gRng)]; });
    runAllToAllv(ranks, layout(C, 0, false), "random" + std::to_string(rep));
    runAllToAllv(ranks, layout(C, 3, true), "random-gaps-reversed" + std::to_string(rep));
  }
  // Rank 1 sends and receives nothing; the others exchange different sizes.
  runAllToAllv(ranks, layout(matrix([](int i, int j) -> size_t { return i == 1 || j == 1 ? 0 : 100 * (i + 1) + j; }),
                             2, false), "rank1-idle");
  // Only rank 0 sends (a scatter of uneven pieces), a large block among them.
  runAllToAllv(ranks, layout(matrix([](int i, int j) -> size_t { return i == 0 ? (j == 1 ? 70001 : 5 * j) : 0; }),
                             1, false), "from-rank0");
  // Everything zero: a valid call that moves nothing.
  runAllToAllv(ranks, layout(matrix([](int, int) -> size_t { return 0; }), 1, false), "all-zero");
  for (size_t count : {(size_t)0, (size_t)1, (size_t)1000}) runAllToAll(ranks, count);
  runBadInput(ranks[0], n);
  // The communicator still works after the refusals.
  runAllToAllv(ranks, layout(matrix([](int i, int j) -> size_t { return (size_t)(i + 2 * j); }), 0, false),
               "after-bad-input");

  for (Rank& R : ranks) {
    NCCL_OK_OR_EXIT(gpu::setDevice(R.dev));
    NCCL_OK_OR_EXIT(ncclCommDestroy(R.comm));
    (void)gpu::deviceFree(R.send);
    (void)gpu::deviceFree(R.recv);
    (void)gpu::streamDestroy(static_cast<gpu::Stream>(R.stream));
  }
}

}  // namespace

int main() {
  emu::installCpuKernelRunner();
  int ndev = 0;
  NCCL_OK_OR_EXIT(gpu::getDeviceCount(&ndev));
  if (ndev < 4) {
    fprintf(stderr, "emu_rccl_test: %d emulated devices, 4 needed (set UNICCL_EMU_DEVICES=4)\n", ndev);
    return 2;
  }
  for (int n : {2, 3, 4}) runRanks(n);
  printf("emu_rccl_test: %d checks, %d failures\n", gChecks, gFailures);
  return gFailures == 0 && gChecks > 0 ? 0 : 1;
}
