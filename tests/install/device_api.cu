// Built against an installed uniccl (ci/check_install.sh) the way nccl-tests
// builds: nvcc, -I<prefix>/include, -L<prefix>/lib -lnccl (uniccl's drop-in).
// A kernel on the Device API's device side (window pointers, a cooperative
// group, an LSA barrier session, a GIN signal) and the host code that makes
// its device communicator. Only compiled and linked: running the kernel needs
// GPUs and a communicator.
#include <nccl.h>
#include <nccl_device.h>

#include <cstdio>

__global__ void exchange(ncclDevComm comm, ncclWindow_t win, int* out) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, comm, ncclTeamTagLsa(), blockIdx.x);
  for (int peer = 0; peer < comm.lsaSize; peer++) {
    int* w = (int*)ncclGetLsaPointer(win, 0, peer);
    w[comm.lsaRank * blockDim.x + threadIdx.x] = comm.rank;
  }
  bar.sync(cta, cuda::memory_order_acq_rel);
  ncclGin gin(comm, 0);
  if (threadIdx.x == 0) gin.signal(ncclTeamWorld(comm), (comm.rank + 1) % comm.nRanks, ncclGin_SignalInc{0});
  out[threadIdx.x] = ((int*)ncclGetLocalPointer(win, 0))[threadIdx.x];
}

// The host part: what a program runs before launching such a kernel.
ncclResult_t launch(ncclComm_t comm, ncclWindow_t win, int* out, cudaStream_t stream) {
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  reqs.ginSignalCount = 1;
  ncclDevComm devComm;
  ncclResult_t rc = ncclDevCommCreate(comm, &reqs, &devComm);
  if (rc != ncclSuccess) return rc;
  exchange<<<1, 128, 0, stream>>>(devComm, win, out);
  return ncclDevCommDestroy(comm, &devComm);
}

int main(int argc, char** argv) {
  int version = 0;
  ncclGetVersion(&version);
  std::printf("device_api: ncclGetVersion %d%s\n", version, argc > 1 ? "" : " (kernel not launched)");
  if (argc > 1) return launch(nullptr, nullptr, nullptr, nullptr) == ncclSuccess ? 0 : 1;
  return version == NCCL_VERSION_CODE ? 0 : 1;
}
