// The error API: NCCL's exact strings, the last error, the version.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "common/util/debug.h"
#include "uniccl.h"

TEST(ErrorApi, StringsAreNcclsExactWording) {
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
  EXPECT_STREQ(ncclGetErrorString(ncclUnhandledCudaError),
               "unhandled cuda error (run with NCCL_DEBUG=INFO for details)");
  EXPECT_STREQ(ncclGetErrorString(ncclSystemError), "unhandled system error (run with NCCL_DEBUG=INFO for details)");
  EXPECT_STREQ(ncclGetErrorString(ncclInternalError),
               "internal error - please report this issue to the NCCL developers");
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidArgument), "invalid argument (run with NCCL_DEBUG=WARN for details)");
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidUsage), "invalid usage (run with NCCL_DEBUG=WARN for details)");
  EXPECT_STREQ(ncclGetErrorString(ncclRemoteError), "remote process exited or there was a network error");
  EXPECT_STREQ(ncclGetErrorString(ncclInProgress), "NCCL operation in progress");
  EXPECT_STREQ(ncclGetErrorString((ncclResult_t)8), "unknown result code");
  EXPECT_STREQ(ncclGetErrorString((ncclResult_t)-1), "unknown result code");
  EXPECT_STREQ(ncclGetErrorString((ncclResult_t)12345), "unknown result code");
  // The profiling alias is the same function.
  EXPECT_STREQ(pncclGetErrorString(ncclRemoteError), ncclGetErrorString(ncclRemoteError));
}

TEST(ErrorApi, Version) {
  int v = -1;
  EXPECT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, 22809);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclGetVersion"), std::string::npos);
}

TEST(ErrorApi, LastErrorIsTheThreadsLastWarn) {
  WARN("first problem");
  WARN("second problem %d", 2);
  EXPECT_STREQ(ncclGetLastError(nullptr), "second problem 2");
  std::string other;
  std::thread([&] { other = ncclGetLastError(nullptr); }).join();
  EXPECT_EQ(other, "");
}
