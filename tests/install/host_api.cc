// Built against an installed uniccl (ci/check_install.sh): includes every
// public header, references the host API and the Device API's host part so
// the linker must find them in the installed library, and runs the calls
// that need no GPU. Exit 0: the library reports the header's version.
#include <nccl.h>
#include <nccl_device.h>
#include <uniccl_net.h>
#include <uniccl_profiler.h>

#include <cstdio>
#include <cstring>

// Entry points a program using the Device API calls; taking their addresses
// makes the link fail if the installed library lacks one.
static void* const kLinked[] = {
    (void*)&ncclGetUniqueId,     (void*)&ncclCommInitRank,        (void*)&ncclAllReduce,
    (void*)&ncclCommDestroy,     (void*)&ncclMemAlloc,            (void*)&ncclCommWindowRegister,
    (void*)&ncclDevCommCreate,   (void*)&ncclDevCommDestroy,      (void*)&ncclCommWindowDeregister,
    (void*)&ncclCommInitRankConfig, (void*)&ncclGroupEnd,
    (void*)static_cast<ncclTeam_t (*)(ncclComm_t)>(&ncclTeamLsa),  // overloaded: the host one
};

int main() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) {
    std::fprintf(stderr, "host_api: ncclGetVersion gave %d, the header says %d\n", version, NCCL_VERSION_CODE);
    return 1;
  }
  const char* text = ncclGetErrorString(ncclInvalidArgument);
  if (text == nullptr || std::strlen(text) == 0) {
    std::fprintf(stderr, "host_api: ncclGetErrorString gave no text\n");
    return 1;
  }
  // Team arithmetic of nccl_device.h runs on the host: 8 ranks in LSA teams of 4.
  ncclTeam world{8, 5, 1};
  ncclTeam lsa = ncclTeamInnerFactor(world, 4);
  if (lsa.nRanks != 4 || lsa.rank != 1 || !ncclTeamRankIsMember(lsa, world, 4) ||
      ncclTeamRankIsMember(lsa, world, 3)) {
    std::fprintf(stderr, "host_api: ncclTeamInnerFactor gave {%d, %d, %d}\n", lsa.nRanks, lsa.rank, lsa.stride);
    return 1;
  }
  std::printf("host_api: ncclGetVersion %d, %zu entry points linked\n", version, sizeof(kLinked) / sizeof(kLinked[0]));
  return 0;
}
