// One GPU per MPI rank: AllReduce random floats with uniccl (or any NCCL),
// then check the result against MPI_Allreduce of the same host data.
//   mpirun -np 8 ./mpi_allreduce
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "gpu_rt.h"  // benchMalloc, benchMemcpy*, ...: the CUDA or HIP runtime call

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, __VA_ARGS__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NCCL(call) do { ncclResult_t r = (call); \
  CHECK(r == ncclSuccess, "%s: %s (%s)\n", #call, ncclGetErrorString(r), ncclGetLastError(nullptr)); } while (0)
#define GPU(call) do { benchError_t e = (call); CHECK(e == benchSuccess, "%s: %s\n", #call, benchGetErrorString(e)); } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks, localRank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  MPI_Comm local;  // ranks on this node pick GPUs 0, 1, 2, ...
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &localRank);
  MPI_Comm_free(&local);
  GPU(benchSetDevice(localRank));

  // Rank 0 creates the id; everyone joins the communicator with it.
  ncclUniqueId id;
  if (rank == 0) NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  NCCL(ncclCommInitRank(&comm, nranks, id, rank));

  const size_t count = 1 << 20;
  std::vector<float> host(count), result(count), expected(count);
  std::mt19937 rng(1234 + rank);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& x : host) x = dist(rng);

  void* buf;
  benchStream_t stream;
  GPU(benchMalloc(&buf, count * sizeof(float)));
  GPU(benchStreamCreate(&stream));
  GPU(benchMemcpyToDevice(buf, host.data(), count * sizeof(float)));
  NCCL(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, stream));  // in place
  GPU(benchStreamSynchronize(stream));
  GPU(benchMemcpyToHost(result.data(), buf, count * sizeof(float)));

  MPI_Allreduce(host.data(), expected.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  size_t wrong = 0;  // summation order differs: allow float rounding
  for (size_t i = 0; i < count; i++)
    wrong += !(std::fabs(result[i] - expected[i]) <= 1e-5f * nranks);
  size_t allWrong = 0;
  MPI_Reduce(&wrong, &allWrong, 1, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("AllReduce of %zu floats on %d ranks: %s (%zu wrong)\n", count, nranks,
                        allWrong ? "FAILED" : "OK", allWrong);

  NCCL(ncclCommDestroy(comm));
  GPU(benchFree(buf));
  GPU(benchStreamDestroy(stream));
  MPI_Bcast(&allWrong, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return allWrong ? 1 : 0;
}
