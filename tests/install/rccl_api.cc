// Built against an installed uniccl (ci/check_install.sh) as a program
// written for RCCL: <rccl/rccl.h>, its feature macros and the names only RCCL
// has, linked so that the installed library must export them.
#include <rccl/rccl.h>

#include <cstdio>

#if !defined(RCCL_ALLTOALLV) || !defined(RCCL_BFLOAT16) || !defined(RCCL_FLOAT8)
#error "rccl/rccl.h must advertise RCCL's features"
#endif

static void* const kLinked[] = {(void*)&ncclAllToAll, (void*)&ncclAllToAllv, (void*)&ncclCommInitRankMulti};

int main() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) return 1;
  static_assert(ncclFp8E4M3 == ncclFloat8e4m3, "RCCL's fp8 names are NCCL's datatypes");
  std::printf("rccl_api: ncclGetVersion %d, %zu RCCL entry points linked\n", version,
              sizeof(kLinked) / sizeof(kLinked[0]));
  return 0;
}
