/* Built against an installed uniccl (ci/check_install.sh) as a C11 program. */
#include <nccl.h>
#include <stdio.h>

int main(void) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) return 1;
  printf("c_api: ncclGetVersion %d (%s)\n", version, ncclGetErrorString(ncclSuccess));
  return 0;
}
