// The Device API on a GPU: windows from ncclMemAlloc + ncclCommWindowRegister
// and device communicators from ncclDevCommCreate (LSA barriers), then a
// kernel per rank that stores to every LSA peer's window, meets them at its
// barrier and checks what they stored (lsa_kernel.cu), for many rounds, all
// ranks' kernels running at once. On one GPU the ranks share it
// (--ranks-per-gpu=K, UNICCL_RANKS_PER_GPU); with several GPUs one rank per
// GPU unless asked. Exits 77 without a GPU.
//
// --gin: GIN instead (gin_kernel.cu): puts of --gin-bytes (odd) from every
// rank to every rank with signals, counters, flush and a world barrier,
// through the proxy thread; run it with NCCL_P2P_DISABLE=1
// NCCL_SHM_DISABLE=1 so that ranks are LSA teams of one and GIN carries
// everything over the socket transport.
//
// --ll: the LL all-to-all instead (ll_kernel.cu): per block and epoch,
// 12-byte values (two lines each) from every rank to every rank, checked.
//
//   device_api_gpu_test [--ranks-per-gpu=K] [--rounds=N] [--blocks=B] [--gin=1 [--gin-bytes=N] | --ll=1]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../coll/rt.h"
#include "gin_kernel.h"
#include "ll_kernel.h"
#include "lsa_kernel.h"
#include "nccl.h"
#include "nccl_device.h"
#include "test_check.h"

namespace {

namespace rt = colltest::rt;

int intArg(int argc, char** argv, const char* name, int dflt) {
  const size_t n = strlen(name);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return atoi(argv[i] + n + 1);
  return dflt;
}

}  // namespace

int main(int argc, char** argv) {
  // Ranks sharing a GPU spin on each other from their own streams: each
  // needs a hardware queue of its own (before the runtime starts).
  rt::raiseWorkQueues();
  const int ngpus = rt::deviceCount();
  if (ngpus == 0) {
    printf("SKIP: no GPU\n");
    return 77;
  }
  const int perGpu = intArg(argc, argv, "--ranks-per-gpu", ngpus == 1 ? 4 : 1);
  const int rounds = intArg(argc, argv, "--rounds", 200);
  const int blocks = intArg(argc, argv, "--blocks", 4);
  const int threads = 128;
  const bool gin = intArg(argc, argv, "--gin", 0) != 0;
  const bool ll = intArg(argc, argv, "--ll", 0) != 0;
  if (gin && ll) {
    fprintf(stderr, "--gin and --ll: one kernel at a time\n");
    return 2;
  }
  const size_t ginBytes = (size_t)intArg(argc, argv, "--gin-bytes", 100003);
  const int n = ngpus * perGpu;
  if (perGpu > 1) setenv("UNICCL_RANKS_PER_GPU", std::to_string(perGpu).c_str(), 0);
  std::vector<int> devs(n);
  for (int r = 0; r < n; r++) devs[r] = r / perGpu;
  std::vector<ncclComm_t> comms(n);
  NCCL_OK_OR_EXIT(ncclCommInitAll(comms.data(), n, devs.data()));

  // Each window holds [block][writer][thread] words.
  const size_t bytes = gin ? ginBytes * (1 + 2 * (size_t)n) : (size_t)blocks * n * threads * sizeof(uint32_t);
  std::vector<void*> buf(n);
  std::vector<ncclWindow_t> win(n);
  std::vector<ncclDevComm> dc(n);
  std::vector<rtStream> stream(n);
  std::vector<unsigned long long*> errors(n);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = blocks;
  if (gin) {
    reqs.lsaBarrierCount = 0;
    reqs.barrierCount = 1;       // the world barrier (LSA + rail GIN)
    reqs.ginSignalCount = n;     // one per source rank
    reqs.ginCounterCount = 1;
  }
  ncclLLA2AHandle llHandle{};
  ncclDevResourceRequirements llReq{};
  if (ll) {
    reqs.lsaBarrierCount = 0;
    NCCL_OK_OR_EXIT(ncclLLA2ACreateRequirement(blocks, llSlots(n), &llHandle, &llReq));
    reqs.resourceRequirementsList = &llReq;
  }
  for (int r = 0; r < n; r++) {
    RT_OK_OR_EXIT(rt::setDevice(devs[r]));
    NCCL_OK_OR_EXIT(ncclMemAlloc(&buf[r], bytes));
    RT_OK_OR_EXIT(rt::memset(buf[r], 0, bytes));
    RT_OK_OR_EXIT(rt::streamCreate(&stream[r]));
    RT_OK_OR_EXIT(rt::malloc((void**)&errors[r], sizeof(unsigned long long)));
    RT_OK_OR_EXIT(rt::memset(errors[r], 0, sizeof(unsigned long long)));
  }
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int r = 0; r < n; r++)
    NCCL_OK_OR_EXIT(ncclCommWindowRegister(comms[r], buf[r], bytes, &win[r], NCCL_WIN_COLL_SYMMETRIC));
  for (int r = 0; r < n; r++) NCCL_OK_OR_EXIT(ncclDevCommCreate(comms[r], &reqs, &dc[r]));
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  for (int r = 0; r < n && !gin; r++) {
    CHECK(dc[r].lsaSize == n, "rank %d: LSA team of %d, expected all %d ranks (P2P between the GPUs?)", r,
          dc[r].lsaSize, n);
    if (dc[r].lsaSize != n) return 1;
  }

  // Every rank's kernel before any wait: they spin on each other.
  for (int r = 0; r < n; r++) {
    RT_OK_OR_EXIT(rt::setDevice(devs[r]));
    const char* e = gin  ? launchGinExchange(dc[r], win[r], ginBytes, rounds, errors[r], stream[r])
                    : ll ? launchLLExchange(dc[r], llHandle, blocks, rounds, errors[r], stream[r])
                         : launchLsaExchange(dc[r], win[r], blocks, threads, rounds, errors[r], stream[r]);
    CHECK(e == nullptr, "rank %d: launch: %s", r, e);
  }
  unsigned long long total = 0;
  for (int r = 0; r < n; r++) {
    RT_OK_OR_EXIT(rt::setDevice(devs[r]));
    RT_OK_OR_EXIT(rt::streamSync(stream[r]));
    unsigned long long e = 0;
    RT_OK_OR_EXIT(rt::toHost(&e, errors[r], sizeof(e)));
    CHECK(e == 0, "rank %d: %llu wrong %s", r, e, gin ? "bytes or counters" : ll ? "values" : "words");
    total += e;
  }

  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (int r = 0; r < n; r++) NCCL_OK_OR_EXIT(ncclDevCommDestroy(comms[r], &dc[r]));
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  for (int r = 0; r < n; r++) {
    NCCL_OK_OR_EXIT(ncclCommWindowDeregister(comms[r], win[r]));
    RT_OK_OR_EXIT(rt::setDevice(devs[r]));
    NCCL_OK_OR_EXIT(ncclMemFree(buf[r]));
    RT_OK_OR_EXIT(rt::free(errors[r]));
    RT_OK_OR_EXIT(rt::streamDestroy(stream[r]));
  }
  for (ncclComm_t c : comms) NCCL_OK_OR_EXIT(ncclCommDestroy(c));
  if (ll)
    printf("LL all-to-all: %d ranks (%d per GPU), %d blocks x %d epochs: %llu wrong values; %s\n", n, perGpu, blocks,
           rounds, total, testcheck::failures() ? "FAILED" : "PASS");
  else if (gin)
    printf("GIN: %d ranks (%d per GPU), %zu-byte puts x %d rounds: %llu wrong; %s\n", n, perGpu, ginBytes, rounds, total,
           testcheck::failures() ? "FAILED" : "PASS");
  else
    printf("%d ranks (%d per GPU), %d blocks x %d rounds: %llu wrong words; %s\n", n, perGpu, blocks, rounds, total,
           testcheck::failures() ? "FAILED" : "PASS");
  return testcheck::failures() ? 1 : 0;
}
