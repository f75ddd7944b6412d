// Pins the NCCL 2.28 ABI of include/uniccl.h: sizes, field offsets (LP64),
// enum values, macros and function signatures. Every expected number is
// written out literally from NVIDIA's nccl.h 2.28.9, never derived from our
// header, so an accidental edit of the header fails here.

// Included by its NCCL name first: the compiler must find uniccl's nccl.h,
// not the vendor's one (e.g. /usr/local/cuda/include/nccl.h).
#include <nccl.h>
#ifndef UNICCL_H_
#error "<nccl.h> did not resolve to uniccl's include/nccl.h: fix the include order"
#endif
#include <rccl/rccl.h>  // RCCL programs' spelling resolves to the same header
#include <uniccl.h>

#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace {

static_assert(sizeof(void*) == 8 && sizeof(size_t) == 8, "the offsets below are for LP64");

// ------------------------------------------------------------ macros
static_assert(NCCL_MAJOR == 2, "");
static_assert(NCCL_MINOR == 28, "");
static_assert(NCCL_PATCH == 9, "");
static_assert(NCCL_VERSION_CODE == 22809, "");
static_assert(NCCL_VERSION(2, 28, 9) == 22809, "");
static_assert(NCCL_VERSION(2, 9, 0) == 20900, "");
static_assert(NCCL_VERSION(2, 8, 4) == 2804, "pre-2.9 encoding");
static_assert(NCCL_VERSION(1, 3, 0) == 1300, "pre-2.9 encoding");
static_assert(UNICCL_VERSION_MAJOR == 0 && UNICCL_VERSION_MINOR == 1 && UNICCL_VERSION_PATCH == 0, "");
static_assert(NCCL_UNIQUE_ID_BYTES == 128, "");
static_assert(NCCL_CONFIG_UNDEF_INT == INT_MIN, "");
static_assert(NCCL_SPLIT_NOCOLOR == -1, "");
static_assert(NCCL_WIN_DEFAULT == 0x00 && NCCL_WIN_COLL_SYMMETRIC == 0x01, "");
static_assert(NCCL_WIN_REQUIRED_ALIGNMENT == 4096, "");
static_assert(NCCL_CTA_POLICY_DEFAULT == 0 && NCCL_CTA_POLICY_EFFICIENCY == 1 && NCCL_CTA_POLICY_ZERO == 2, "");
static_assert(NCCL_SHRINK_DEFAULT == 0 && NCCL_SHRINK_ABORT == 1, "");
static_assert(NCCL_REVOKE_DEFAULT == 0, "");

TEST(Abi, StringAndPointerMacros) {
  EXPECT_STREQ(NCCL_SUFFIX, "");
  EXPECT_EQ(NCCL_UNDEF_FLOAT, -1.0f);
  ncclComm_t comm = NCCL_COMM_NULL;
  const char* undefPtr = NCCL_CONFIG_UNDEF_PTR;
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(undefPtr, nullptr);
}

// ------------------------------------------------------------ layouts
static_assert(sizeof(ncclUniqueId) == 128, "");
static_assert(sizeof(ncclComm_t) == 8 && sizeof(ncclWindow_t) == 8, "");
static_assert(sizeof(uniccl_stream_t) == 8, "stream handles are pointers");

static_assert(sizeof(ncclConfig_t) == 80, "");
static_assert(offsetof(ncclConfig_t, size) == 0, "");
static_assert(offsetof(ncclConfig_t, magic) == 8, "");
static_assert(offsetof(ncclConfig_t, version) == 12, "");
static_assert(offsetof(ncclConfig_t, blocking) == 16, "");
static_assert(offsetof(ncclConfig_t, cgaClusterSize) == 20, "");
static_assert(offsetof(ncclConfig_t, minCTAs) == 24, "");
static_assert(offsetof(ncclConfig_t, maxCTAs) == 28, "");
static_assert(offsetof(ncclConfig_t, netName) == 32, "");
static_assert(offsetof(ncclConfig_t, splitShare) == 40, "");
static_assert(offsetof(ncclConfig_t, trafficClass) == 44, "");
static_assert(offsetof(ncclConfig_t, commName) == 48, "");
static_assert(offsetof(ncclConfig_t, collnetEnable) == 56, "");
static_assert(offsetof(ncclConfig_t, CTAPolicy) == 60, "");
static_assert(offsetof(ncclConfig_t, shrinkShare) == 64, "");
static_assert(offsetof(ncclConfig_t, nvlsCTAs) == 68, "");
static_assert(offsetof(ncclConfig_t, nChannelsPerNetPeer) == 72, "");
static_assert(offsetof(ncclConfig_t, nvlinkCentricSched) == 76, "");
static_assert(std::is_same<decltype(ncclConfig_t::netName), const char*>::value, "");
static_assert(std::is_same<decltype(ncclConfig_t::commName), const char*>::value, "");
static_assert(std::is_same<decltype(ncclConfig_t::size), size_t>::value, "");
static_assert(std::is_same<decltype(ncclConfig_t::magic), unsigned int>::value, "");
static_assert(std::is_same<decltype(ncclConfig_t::version), unsigned int>::value, "");

static_assert(sizeof(ncclSimInfo_t) == 24, "");
static_assert(offsetof(ncclSimInfo_t, size) == 0, "");
static_assert(offsetof(ncclSimInfo_t, magic) == 8, "");
static_assert(offsetof(ncclSimInfo_t, version) == 12, "");
static_assert(offsetof(ncclSimInfo_t, estimatedTime) == 16, "");
static_assert(std::is_same<decltype(ncclSimInfo_t::estimatedTime), float>::value, "");

// The struct tags are part of the API (forward declarations in user code).
static_assert(std::is_same<ncclConfig_t, struct ncclConfig_v22800>::value, "");
static_assert(std::is_same<ncclSimInfo_t, struct ncclSimInfo_v22200>::value, "");
static_assert(std::is_same<ncclComm_t, struct ncclComm*>::value, "");
static_assert(std::is_same<ncclWindow_t, struct ncclWindow_vidmem*>::value, "");

// ------------------------------------------------------------ enums
static_assert(sizeof(ncclResult_t) == 4 && sizeof(ncclDataType_t) == 4, "");
static_assert(sizeof(ncclRedOp_t) == 4 && sizeof(ncclScalarResidence_t) == 4, "");

TEST(Abi, ResultValues) {
  EXPECT_EQ(ncclSuccess, 0);
  EXPECT_EQ(ncclUnhandledCudaError, 1);
  EXPECT_EQ(ncclSystemError, 2);
  EXPECT_EQ(ncclInternalError, 3);
  EXPECT_EQ(ncclInvalidArgument, 4);
  EXPECT_EQ(ncclInvalidUsage, 5);
  EXPECT_EQ(ncclRemoteError, 6);
  EXPECT_EQ(ncclInProgress, 7);
  EXPECT_EQ(ncclNumResults, 8);
}

TEST(Abi, DataTypeValues) {
  EXPECT_EQ(ncclInt8, 0);
  EXPECT_EQ(ncclChar, 0);
  EXPECT_EQ(ncclUint8, 1);
  EXPECT_EQ(ncclInt32, 2);
  EXPECT_EQ(ncclInt, 2);
  EXPECT_EQ(ncclUint32, 3);
  EXPECT_EQ(ncclInt64, 4);
  EXPECT_EQ(ncclUint64, 5);
  EXPECT_EQ(ncclFloat16, 6);
  EXPECT_EQ(ncclHalf, 6);
  EXPECT_EQ(ncclFloat32, 7);
  EXPECT_EQ(ncclFloat, 7);
  EXPECT_EQ(ncclFloat64, 8);
  EXPECT_EQ(ncclDouble, 8);
  EXPECT_EQ(ncclBfloat16, 9);
  EXPECT_EQ(ncclFloat8e4m3, 10);
  EXPECT_EQ(ncclFloat8e5m2, 11);
  EXPECT_EQ(ncclNumTypes, 12);
}

TEST(Abi, RedOpValues) {
  EXPECT_EQ(ncclSum, 0);
  EXPECT_EQ(ncclProd, 1);
  EXPECT_EQ(ncclMax, 2);
  EXPECT_EQ(ncclMin, 3);
  EXPECT_EQ(ncclAvg, 4);
  EXPECT_EQ(ncclNumOps, 5);
  EXPECT_EQ(static_cast<long long>(ncclMaxRedOp), 0x7fffffffLL);
  EXPECT_EQ(ncclNumOps_dummy, 5);
}

TEST(Abi, ScalarResidenceValues) {
  EXPECT_EQ(ncclScalarDevice, 0);
  EXPECT_EQ(ncclScalarHostImmediate, 1);
}

// ------------------------------------------------------------ initializers
TEST(Abi, ConfigInitializer) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(c.size, 80u);
  EXPECT_EQ(c.magic, 0xcafebeefu);
  EXPECT_EQ(c.version, 22809u);
  EXPECT_EQ(c.blocking, INT_MIN);
  EXPECT_EQ(c.cgaClusterSize, INT_MIN);
  EXPECT_EQ(c.minCTAs, INT_MIN);
  EXPECT_EQ(c.maxCTAs, INT_MIN);
  EXPECT_EQ(c.netName, nullptr);
  EXPECT_EQ(c.splitShare, INT_MIN);
  EXPECT_EQ(c.trafficClass, INT_MIN);
  EXPECT_EQ(c.commName, nullptr);
  EXPECT_EQ(c.collnetEnable, INT_MIN);
  EXPECT_EQ(c.CTAPolicy, INT_MIN);
  EXPECT_EQ(c.shrinkShare, INT_MIN);
  EXPECT_EQ(c.nvlsCTAs, INT_MIN);
  EXPECT_EQ(c.nChannelsPerNetPeer, INT_MIN);
  EXPECT_EQ(c.nvlinkCentricSched, INT_MIN);
}

TEST(Abi, SimInfoInitializer) {
  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(s.size, 24u);
  EXPECT_EQ(s.magic, 0x74685283u);
  EXPECT_EQ(s.version, 22809u);
  EXPECT_EQ(s.estimatedTime, -1.0f);
}

// ------------------------------------------------------------ signatures
// Each function and its p-twin must have exactly NCCL's C signature.
#define PIN(name, ret, ...)                                                          \
  static_assert(std::is_same<decltype(&name), ret (*)(__VA_ARGS__)>::value, #name);  \
  static_assert(std::is_same<decltype(&p##name), ret (*)(__VA_ARGS__)>::value, "p" #name)

using S = uniccl_stream_t;
using R = ncclResult_t;
PIN(ncclMemAlloc, R, void**, size_t);
PIN(ncclMemFree, R, void*);
PIN(ncclGetVersion, R, int*);
PIN(ncclGetUniqueId, R, ncclUniqueId*);
PIN(ncclCommInitRankConfig, R, ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
PIN(ncclCommInitRank, R, ncclComm_t*, int, ncclUniqueId, int);
PIN(ncclCommInitAll, R, ncclComm_t*, int, const int*);
PIN(ncclCommFinalize, R, ncclComm_t);
PIN(ncclCommDestroy, R, ncclComm_t);
PIN(ncclCommAbort, R, ncclComm_t);
PIN(ncclCommRevoke, R, ncclComm_t, int);
PIN(ncclCommSplit, R, ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*);
PIN(ncclCommShrink, R, ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
PIN(ncclCommInitRankScalable, R, ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*);
PIN(ncclGetErrorString, const char*, ncclResult_t);
PIN(ncclGetLastError, const char*, ncclComm_t);
PIN(ncclCommGetAsyncError, R, ncclComm_t, ncclResult_t*);
PIN(ncclCommCount, R, const ncclComm_t, int*);
PIN(ncclCommCuDevice, R, const ncclComm_t, int*);
PIN(ncclCommUserRank, R, const ncclComm_t, int*);
PIN(ncclCommRegister, R, const ncclComm_t, void*, size_t, void**);
PIN(ncclCommDeregister, R, const ncclComm_t, void*);
PIN(ncclCommWindowRegister, R, ncclComm_t, void*, size_t, ncclWindow_t*, int);
PIN(ncclCommWindowDeregister, R, ncclComm_t, ncclWindow_t);
PIN(ncclRedOpCreatePreMulSum, R, ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t);
PIN(ncclRedOpDestroy, R, ncclRedOp_t, ncclComm_t);
PIN(ncclReduce, R, const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, S);
PIN(ncclBcast, R, void*, size_t, ncclDataType_t, int, ncclComm_t, S);
PIN(ncclBroadcast, R, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, S);
PIN(ncclAllReduce, R, const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, S);
PIN(ncclReduceScatter, R, const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, S);
PIN(ncclAllGather, R, const void*, void*, size_t, ncclDataType_t, ncclComm_t, S);
PIN(ncclAlltoAll, R, const void*, void*, size_t, ncclDataType_t, ncclComm_t, S);
PIN(ncclGather, R, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, S);
PIN(ncclScatter, R, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, S);
PIN(ncclSend, R, const void*, size_t, ncclDataType_t, int, ncclComm_t, S);
PIN(ncclRecv, R, void*, size_t, ncclDataType_t, int, ncclComm_t, S);
PIN(ncclGroupStart, R, void);
PIN(ncclGroupEnd, R, void);
PIN(ncclGroupSimulateEnd, R, ncclSimInfo_t*);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
PIN(ncclResetDebugInit, void, void);
#pragma GCC diagnostic pop
#undef PIN

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
