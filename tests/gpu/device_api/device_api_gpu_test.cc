// The Device API on a GPU: windows from ncclMemAlloc + ncclCommWindowRegister
// and device communicators from ncclDevCommCreate (LSA barriers), then a
// kernel per rank that stores to every LSA peer's window, meets them at its
// barrier and checks what they stored (lsa_kernel.cu), for many rounds, all
// ranks' kernels running at once. On one GPU the ranks share it
// (--ranks-per-gpu=K, UNICCL_RANKS_PER_GPU); with several GPUs one rank per
// GPU unless asked. Exits 77 without a GPU.
//
//   device_api_gpu_test [--ranks-per-gpu=K] [--rounds=N] [--blocks=B]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lsa_kernel.h"
#include "nccl.h"
#include "nccl_device.h"

namespace {

int gFailures = 0;
#define CHECK(cond, ...)                                               \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                    \
      fputc('\n', stderr);                                             \
      gFailures++;                                                     \
    }                                                                  \
  } while (0)
#define NCCL_OK(call)                                                                                 \
  do {                                                                                                \
    ncclResult_t r_ = (call);                                                                         \
    if (r_ != ncclSuccess) {                                                                          \
      fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
              ncclGetLastError(nullptr));                                                             \
      return 1;                                                                                       \
    }                                                                                                 \
  } while (0)
#define CUDA_OK(call)                                                                                        \
  do {                                                                                                       \
    cudaError_t e_ = (call);                                                                                 \
    if (e_ != cudaSuccess) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));            \
      return 1;                                                                                              \
    }                                                                                                        \
  } while (0)

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
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int ngpus = 0;
  if (cudaGetDeviceCount(&ngpus) != cudaSuccess || ngpus == 0) {
    printf("SKIP: no GPU\n");
    return 77;
  }
  const int perGpu = intArg(argc, argv, "--ranks-per-gpu", ngpus == 1 ? 4 : 1);
  const int rounds = intArg(argc, argv, "--rounds", 200);
  const int blocks = intArg(argc, argv, "--blocks", 4);
  const int threads = 128;
  const int n = ngpus * perGpu;
  if (perGpu > 1) setenv("UNICCL_RANKS_PER_GPU", std::to_string(perGpu).c_str(), 0);
  std::vector<int> devs(n);
  for (int r = 0; r < n; r++) devs[r] = r / perGpu;
  std::vector<ncclComm_t> comms(n);
  NCCL_OK(ncclCommInitAll(comms.data(), n, devs.data()));

  // Each window holds [block][writer][thread] words.
  const size_t bytes = (size_t)blocks * n * threads * sizeof(uint32_t);
  std::vector<void*> buf(n);
  std::vector<ncclWindow_t> win(n);
  std::vector<ncclDevComm> dc(n);
  std::vector<cudaStream_t> stream(n);
  std::vector<unsigned long long*> errors(n);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = blocks;
  for (int r = 0; r < n; r++) {
    CUDA_OK(cudaSetDevice(devs[r]));
    NCCL_OK(ncclMemAlloc(&buf[r], bytes));
    CUDA_OK(cudaMemset(buf[r], 0, bytes));
    CUDA_OK(cudaStreamCreateWithFlags(&stream[r], cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc(&errors[r], sizeof(unsigned long long)));
    CUDA_OK(cudaMemset(errors[r], 0, sizeof(unsigned long long)));
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; r++) NCCL_OK(ncclCommWindowRegister(comms[r], buf[r], bytes, &win[r], NCCL_WIN_COLL_SYMMETRIC));
  for (int r = 0; r < n; r++) NCCL_OK(ncclDevCommCreate(comms[r], &reqs, &dc[r]));
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < n; r++) {
    CHECK(dc[r].lsaSize == n, "rank %d: LSA team of %d, expected all %d ranks (P2P between the GPUs?)", r,
          dc[r].lsaSize, n);
    if (dc[r].lsaSize != n) return 1;
  }

  // Every rank's kernel before any wait: they spin on each other.
  for (int r = 0; r < n; r++) {
    CUDA_OK(cudaSetDevice(devs[r]));
    const char* e = launchLsaExchange(dc[r], win[r], blocks, threads, rounds, errors[r], stream[r]);
    CHECK(e == nullptr, "rank %d: launch: %s", r, e);
  }
  unsigned long long total = 0;
  for (int r = 0; r < n; r++) {
    CUDA_OK(cudaSetDevice(devs[r]));
    CUDA_OK(cudaStreamSynchronize(stream[r]));
    unsigned long long e = 0;
    CUDA_OK(cudaMemcpy(&e, errors[r], sizeof(e), cudaMemcpyDeviceToHost));
    CHECK(e == 0, "rank %d: %llu of %llu words differ", r, e, (unsigned long long)rounds * blocks * threads * n);
    total += e;
  }

  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; r++) NCCL_OK(ncclDevCommDestroy(comms[r], &dc[r]));
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < n; r++) {
    NCCL_OK(ncclCommWindowDeregister(comms[r], win[r]));
    CUDA_OK(cudaSetDevice(devs[r]));
    NCCL_OK(ncclMemFree(buf[r]));
    CUDA_OK(cudaFree(errors[r]));
    CUDA_OK(cudaStreamDestroy(stream[r]));
  }
  for (ncclComm_t c : comms) NCCL_OK(ncclCommDestroy(c));
  printf("%d ranks (%d per GPU), %d blocks x %d rounds: %llu wrong words; %s\n", n, perGpu, blocks, rounds, total,
         gFailures ? "FAILED" : "PASS");
  return gFailures ? 1 : 0;
}
