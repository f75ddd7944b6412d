#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  // The machine's other interfaces may not route: keep every test on loopback.
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
