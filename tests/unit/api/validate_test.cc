// Bad input to the public API on a usable communicator:
// a hand-built Ready communicator of 2 ranks on fake GPU 0 (tests/unit/fake),
// buffers from the fake's allocators on GPU 0 and GPU 1, mapped host memory
// and plain malloc. Every bad call must return the exact NCCL error code,
// leave a new ncclGetLastError text that names the problem, and enqueue
// nothing (no launch, empty task lists). Valid calls next to them must
// launch, so that "nothing launched" means something.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <functional>
#include <thread>
#include <string>
#include <vector>

#include "common/core/comm.h"
#include "common/core/validate.h"
#include "device/kernels.h"
#include "fake_gpu.h"
#include "uniccl.h"

// The kernels live in device_lib (compiled by the GPU compiler), which host
// unit tests do not link. The fake GPU only logs launches: any distinct
// addresses serve as kernels.
namespace uniccl::dev {
namespace {
char gCollKernels[ncclNumTypes][3];   // [type][protocol]
char gSymKernels[ncclNumTypes];
char gP2pKernel;
}  // namespace
const void* collectiveKernel(ncclDataType_t type, int proto) {
  return (int)type >= 0 && (int)type < ncclNumTypes && proto >= 0 && proto < 3 ? &gCollKernels[type][proto] : nullptr;
}
const void* symmetricKernel(ncclDataType_t type) {
  return (int)type >= 0 && (int)type < ncclNumTypes ? &gSymKernels[type] : nullptr;
}
const void* p2pKernel() { return &gP2pKernel; }
unsigned collectiveKernelOps() { return ~0u; }
}  // namespace uniccl::dev

namespace uniccl {
namespace {

constexpr size_t kCount = 1024;                  // elements of every test buffer (float)
constexpr size_t kBytes = kCount * sizeof(float);

// A WARN from a call the tests do not check, so that each check sees a
// message its own call wrote, not one left over from an earlier check.
constexpr const char* kMarker = "ncclGetVersion: version is a null pointer";
void resetLastError() { ncclGetVersion(nullptr); }

const ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,    ncclUint32,
                                    ncclInt64,   ncclUint64,  ncclFloat16,  ncclFloat32,
                                    ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

class ApiValidate : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setDeviceCount(2);
    fake::setAutoComplete(true);   // launches finish at once: destroy never waits
    ASSERT_EQ(gpu::setDevice(1), ncclSuccess);
    ASSERT_EQ(gpu::deviceAlloc(&dev1, kBytes), ncclSuccess);
    ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
    ASSERT_EQ(gpu::deviceAlloc(&send0, kBytes), ncclSuccess);
    ASSERT_EQ(gpu::deviceAlloc(&recv0, kBytes), ncclSuccess);
    ASSERT_EQ(gpu::deviceAlloc(&big0, 2 * kBytes), ncclSuccess);   // room for 2-rank gathers
    void* mappedDev = nullptr;
    ASSERT_EQ(gpu::hostAllocMapped(&mapped, &mappedDev, 2 * kBytes), ncclSuccess);
    ASSERT_EQ(mappedDev, mapped);   // the fake has one address space
    host = std::malloc(2 * kBytes);
    ASSERT_NE(host, nullptr);
    gpu::Stream s = nullptr;
    ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
    stream = static_cast<uniccl_stream_t>(s);

    comm = new ncclComm();
    comm->rank = 0;
    comm->nRanks = 2;
    comm->gpuDev = 0;
    comm->commHash = 0x5eed;
    comm->nChannels = 1;      // what init wires; the tuning clamps to it
    comm->p2pChannels = 1;
    comm->asyncError.store(ncclSuccess);
    comm->state.store(CommState::Ready);
  }

  void TearDown() override {
    if (comm != nullptr) {
      comm->state.store(CommState::Ready);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
      comm = nullptr;
    }
    std::free(host);
    fake::reset();
  }

  // `call` returns `want`, writes a new ncclGetLastError text containing
  // `keyword`, and enqueues nothing.
  void reject(ncclResult_t want, const char* keyword, const std::string& what,
              const std::function<ncclResult_t()>& call) {
    SCOPED_TRACE(what);
    resetLastError();
    size_t launchesBefore = fake::launchCount();
    uint64_t opsBefore = comm->opCount;
    ncclResult_t got = call();
    EXPECT_EQ(got, want) << "got " << ncclGetErrorString(got);
    const char* last = ncclGetLastError(comm);
    ASSERT_NE(last, nullptr);
    std::string text(last);
    EXPECT_FALSE(text.empty());
    EXPECT_EQ(text.find(kMarker), std::string::npos) << "no new error text";
    EXPECT_NE(text.find(keyword), std::string::npos) << "last error '" << text << "' lacks '" << keyword << "'";
    EXPECT_EQ(fake::launchCount(), launchesBefore) << "a rejected call launched";
    EXPECT_TRUE(comm->tasks.empty()) << "a rejected call left a task";
    EXPECT_EQ(comm->opCount, opsBefore) << "a rejected call took a sequence number";
  }

  // `call` succeeds and launches exactly `launches` kernels.
  void accept(const std::string& what, const std::function<ncclResult_t()>& call, size_t launches = 1) {
    SCOPED_TRACE(what);
    size_t before = fake::launchCount();
    ncclResult_t got = call();
    EXPECT_EQ(got, ncclSuccess) << "got " << ncclGetErrorString(got) << ": " << ncclGetLastError(comm);
    EXPECT_EQ(fake::launchCount(), before + launches);
    EXPECT_TRUE(comm->tasks.empty());
  }

  float* f(void* p, size_t offsetElems = 0) { return static_cast<float*>(p) + offsetElems; }

  ncclComm* comm = nullptr;
  void* send0 = nullptr;
  void* recv0 = nullptr;
  void* big0 = nullptr;
  void* dev1 = nullptr;
  void* mapped = nullptr;
  void* host = nullptr;
  uniccl_stream_t stream = nullptr;
};

// One collective of each kind with the same send/recv/count/type/op/root, so
// the bad-argument tests can sweep all of them.
struct Coll {
  const char* name;
  size_t recvFactor;   // recv elements per count (AllGather: nRanks)
  size_t sendFactor;
  std::function<ncclResult_t(const void*, void*, size_t, int, int, int, ncclComm_t,
                             uniccl_stream_t)>
      fn;
};

std::vector<Coll> collectives() {
  return {
      {"ncclAllReduce", 1, 1,
       [](const void* s, void* r, size_t n, int t, int op, int, ncclComm_t c, uniccl_stream_t st) {
         return ncclAllReduce(s, r, n, (ncclDataType_t)t, (ncclRedOp_t)op, c, st);
       }},
      {"ncclBroadcast", 1, 1,
       [](const void* s, void* r, size_t n, int t, int, int root, ncclComm_t c, uniccl_stream_t st) {
         return ncclBroadcast(s, r, n, (ncclDataType_t)t, root, c, st);
       }},
      {"ncclReduce", 1, 1,
       [](const void* s, void* r, size_t n, int t, int op, int root, ncclComm_t c,
          uniccl_stream_t st) { return ncclReduce(s, r, n, (ncclDataType_t)t, (ncclRedOp_t)op, root, c, st); }},
      {"ncclAllGather", 2, 1,
       [](const void* s, void* r, size_t n, int t, int, int, ncclComm_t c, uniccl_stream_t st) {
         return ncclAllGather(s, r, n, (ncclDataType_t)t, c, st);
       }},
      {"ncclReduceScatter", 1, 2,
       [](const void* s, void* r, size_t n, int t, int op, int, ncclComm_t c, uniccl_stream_t st) {
         return ncclReduceScatter(s, r, n, (ncclDataType_t)t, (ncclRedOp_t)op, c, st);
       }},
  };
}

// ------------------------------------------------------------ valid calls

TEST_F(ApiValidate, ValidCallsLaunch) {
  for (const Coll& c : collectives()) {
    void* s = c.sendFactor > 1 ? big0 : send0;
    void* r = c.recvFactor > 1 ? big0 : recv0;
    accept(c.name, [&] { return c.fn(s, r, kCount, ncclFloat32, ncclSum, 0, comm, stream); });
  }
  accept("ncclBcast", [&] { return ncclBcast(recv0, kCount, ncclFloat32, 1, comm, stream); });
  // NULL stream: the default stream, as in NCCL.
  accept("NULL stream", [&] { return ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, nullptr); });
  // Mapped (pinned, device-visible) host memory is GPU-accessible.
  accept("mapped host memory",
         [&] { return ncclAllReduce(mapped, recv0, kCount, ncclFloat32, ncclAvg, comm, stream); });
  // In place.
  accept("in place", [&] { return ncclAllReduce(recv0, recv0, kCount, ncclFloat32, ncclMax, comm, stream); });
  // Non-root ranks never touch the root-only buffers: NCCL ignores them.
  accept("Broadcast non-root, NULL sendbuff",
         [&] { return ncclBroadcast(nullptr, recv0, kCount, ncclFloat32, 1, comm, stream); });
  accept("Reduce non-root, NULL recvbuff",
         [&] { return ncclReduce(send0, nullptr, kCount, ncclFloat32, ncclSum, 1, comm, stream); });
  // Count 0 with NULL buffers is a valid (empty) operation: dropped, as in
  // NCCL (every rank passes the same count), but it still takes a sequence
  // number so the watchdog's numbers match the application's calls.
  {
    const uint64_t seqBefore = comm->opCount;
    accept("count 0, NULL buffers", [&] { return ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, stream); },
           0);
    accept("count 0 Broadcast", [&] { return ncclBroadcast(nullptr, nullptr, 0, ncclFloat32, 1, comm, stream); }, 0);
    EXPECT_EQ(comm->opCount, seqBefore + 2);
  }
  // Unaligned buffers: NCCL accepts any byte address, so must uniccl.
  accept("unaligned buffers", [&] {
    return ncclAllReduce(static_cast<char*>(send0) + 1, static_cast<char*>(recv0) + 3, kCount - 1, ncclFloat32,
                         ncclSum, comm, stream);
  });
  accept("unaligned int8 exactly to the end", [&] {
    return ncclAllReduce(static_cast<char*>(send0) + 7, static_cast<char*>(recv0) + 7, kBytes - 7, ncclInt8,
                         ncclSum, comm, stream);
  });
  // A reduction operator made on this comm.
  float scalar = 0.5f;
  ncclRedOp_t op;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
  accept("PreMulSum", [&] { return ncclAllReduce(send0, recv0, kCount, ncclFloat32, op, comm, stream); });
  EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
  // Send/recv to self come in pairs within one group (no connection needed).
  accept("self send/recv", [&] {
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclSend(send0, kCount, ncclFloat32, 0, comm, stream), ncclSuccess);
    EXPECT_EQ(ncclRecv(recv0, kCount, ncclFloat32, 0, comm, stream), ncclSuccess);
    EXPECT_EQ(comm->tasks.p2p.size(), 2u);   // recorded, not launched yet
    return ncclGroupEnd();
  });
  // A group of collectives of one type is one launch.
  accept("group of two", [&] {
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(send0, recv0, kCount / 2, ncclFloat32, ncclMin, comm, stream), ncclSuccess);
    EXPECT_EQ(comm->tasks.colls.size(), 2u);
    return ncclGroupEnd();
  });
}

// ------------------------------------------------------ datatype and redop

TEST_F(ApiValidate, InvalidDatatype) {
  const int bad[] = {-1, ncclNumTypes, ncclNumTypes + 1, 1000, INT32_MIN, INT32_MAX};
  for (int t : bad) {
    std::string tag = " datatype " + std::to_string(t);
    for (const Coll& c : collectives()) {
      void* r = c.recvFactor > 1 ? big0 : recv0;
      void* s = c.sendFactor > 1 ? big0 : send0;
      reject(ncclInvalidArgument, "datatype", c.name + tag,
             [&] { return c.fn(s, r, kCount, t, ncclSum, 0, comm, stream); });
    }
    reject(ncclInvalidArgument, "datatype", "ncclBcast" + tag,
           [&] { return ncclBcast(recv0, kCount, (ncclDataType_t)t, 0, comm, stream); });
    reject(ncclInvalidArgument, "datatype", "ncclSend" + tag,
           [&] { return ncclSend(send0, kCount, (ncclDataType_t)t, 1, comm, stream); });
    reject(ncclInvalidArgument, "datatype", "ncclRecv" + tag,
           [&] { return ncclRecv(recv0, kCount, (ncclDataType_t)t, 1, comm, stream); });
    reject(ncclInvalidArgument, "datatype", "ncclAlltoAll" + tag,
           [&] { return ncclAlltoAll(send0, big0, kCount / 2, (ncclDataType_t)t, comm, stream); });
    reject(ncclInvalidArgument, "datatype", "ncclGather" + tag,
           [&] { return ncclGather(send0, big0, kCount, (ncclDataType_t)t, 0, comm, stream); });
    reject(ncclInvalidArgument, "datatype", "ncclScatter" + tag,
           [&] { return ncclScatter(big0, recv0, kCount, (ncclDataType_t)t, 0, comm, stream); });
    float scalar = 2.0f;
    ncclRedOp_t op = ncclSum;
    reject(ncclInvalidArgument, "datatype", "ncclRedOpCreatePreMulSum" + tag, [&] {
      return ncclRedOpCreatePreMulSum(&op, &scalar, (ncclDataType_t)t, ncclScalarHostImmediate, comm);
    });
    EXPECT_EQ(op, ncclSum) << "the op was written";
  }
}

TEST_F(ApiValidate, InvalidReductionOperator) {
  float scalar = 3.0f;
  ncclRedOp_t created, destroyed;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&created, &scalar, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&destroyed, &scalar, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
  ASSERT_EQ(ncclRedOpDestroy(destroyed, comm), ncclSuccess);
  struct Bad {
    int op;
    const char* why;
  };
  const Bad bad[] = {
      {-1, "negative"},
      {INT32_MIN, "INT_MIN"},
      {created + 5, "never created"},
      {ncclMaxRedOp, "ncclMaxRedOp"},
      {destroyed, "destroyed"},
  };
  for (const Bad& b : bad) {
    for (const Coll& c : collectives()) {
      if (std::string(c.name) == "ncclBroadcast" || std::string(c.name) == "ncclAllGather") continue;   // no op
      void* s = c.sendFactor > 1 ? big0 : send0;
      reject(ncclInvalidArgument, "reduction operator", std::string(c.name) + " op " + b.why,
             [&] { return c.fn(s, recv0, kCount, ncclFloat32, b.op, 0, comm, stream); });
    }
  }
  // An operator made for float is not one for double.
  reject(ncclInvalidArgument, "created for float", "op of another datatype",
         [&] { return ncclAllReduce(send0, recv0, kCount / 2, ncclFloat64, created, comm, stream); });
  // Destroying twice, a built-in, or garbage.
  reject(ncclInvalidArgument, "ncclRedOpDestroy", "destroy twice", [&] { return ncclRedOpDestroy(destroyed, comm); });
  reject(ncclInvalidArgument, "built-in", "destroy ncclSum", [&] { return ncclRedOpDestroy(ncclSum, comm); });
  reject(ncclInvalidArgument, "ncclRedOpDestroy", "destroy -7", [&] { return ncclRedOpDestroy((ncclRedOp_t)-7, comm); });
  EXPECT_EQ(ncclRedOpDestroy(created, comm), ncclSuccess);
  // PreMulSum construction: NULL out/scalar, bad residence, host scalar declared device.
  ncclRedOp_t op;
  reject(ncclInvalidArgument, "NULL", "PreMulSum NULL op",
         [&] { return ncclRedOpCreatePreMulSum(nullptr, &scalar, ncclFloat32, ncclScalarHostImmediate, comm); });
  reject(ncclInvalidArgument, "NULL", "PreMulSum NULL scalar",
         [&] { return ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat32, ncclScalarHostImmediate, comm); });
  reject(ncclInvalidArgument, "residence", "PreMulSum residence 7",
         [&] { return ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, (ncclScalarResidence_t)7, comm); });
  reject(ncclInvalidArgument, "residence", "PreMulSum residence -1",
         [&] { return ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, (ncclScalarResidence_t)-1, comm); });
  reject(ncclInvalidArgument, "not GPU-accessible", "PreMulSum device scalar in malloc memory",
         [&] { return ncclRedOpCreatePreMulSum(&op, host, ncclFloat32, ncclScalarDevice, comm); });
  EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, send0, ncclFloat32, ncclScalarDevice, comm), ncclSuccess);
  EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
}

// ------------------------------------------------------------ ranks

TEST_F(ApiValidate, RootAndPeerOutOfRange) {
  const int bad[] = {-1, 2, 3, INT32_MIN, INT32_MAX};
  for (int r : bad) {
    std::string tag = " rank " + std::to_string(r);
    reject(ncclInvalidArgument, "root", "ncclBroadcast" + tag,
           [&] { return ncclBroadcast(send0, recv0, kCount, ncclFloat32, r, comm, stream); });
    reject(ncclInvalidArgument, "root", "ncclBcast" + tag,
           [&] { return ncclBcast(recv0, kCount, ncclFloat32, r, comm, stream); });
    reject(ncclInvalidArgument, "root", "ncclReduce" + tag,
           [&] { return ncclReduce(send0, recv0, kCount, ncclFloat32, ncclSum, r, comm, stream); });
    reject(ncclInvalidArgument, "root", "ncclGather" + tag,
           [&] { return ncclGather(send0, big0, kCount, ncclFloat32, r, comm, stream); });
    reject(ncclInvalidArgument, "root", "ncclScatter" + tag,
           [&] { return ncclScatter(big0, recv0, kCount, ncclFloat32, r, comm, stream); });
    reject(ncclInvalidArgument, "peer", "ncclSend" + tag,
           [&] { return ncclSend(send0, kCount, ncclFloat32, r, comm, stream); });
    reject(ncclInvalidArgument, "peer", "ncclRecv" + tag,
           [&] { return ncclRecv(recv0, kCount, ncclFloat32, r, comm, stream); });
  }
}

// ------------------------------------------------------------ counts

// What a count must fail on: its byte size overflows size_t, or (it fits)
// the 4 KiB buffers are too small for it.
const char* countProblem(size_t count, size_t typeSize, size_t factor) {
  return count > SIZE_MAX / (typeSize * factor) ? "overflows size_t" : "past the end";
}

// For every type size: the largest count whose byte size fits passes the
// overflow check (and fails on the buffer size instead); one more overflows.
TEST_F(ApiValidate, CountsThatOverflowSizeT) {
  for (ncclDataType_t t : kAllTypes) {
    const size_t sz = typeSize(t);
    std::string tag = " type " + std::to_string((int)t);
    for (const Coll& c : collectives()) {
      const size_t factor = std::max(c.recvFactor, c.sendFactor);   // 2 ranks: AllGather / ReduceScatter
      const size_t fits = SIZE_MAX / (sz * factor);
      std::vector<size_t> counts = {fits, SIZE_MAX, SIZE_MAX / 2 + 1, SIZE_MAX / sz};
      if (fits < SIZE_MAX) counts.push_back(fits + 1);   // 1-byte types never overflow alone
      for (size_t n : counts) {
        const char* want = countProblem(n, sz, factor);
        reject(ncclInvalidArgument, want, c.name + tag + " count " + std::to_string(n),
               [&] { return c.fn(send0, recv0, n, t, ncclSum, 0, comm, stream); });
      }
      if (factor > 1) {
        // Fits for one rank, not times nRanks: the per-rank multiplication.
        EXPECT_STREQ(countProblem(SIZE_MAX / sz, sz, 1), "past the end");
        EXPECT_STREQ(countProblem(SIZE_MAX / sz, sz, factor), "overflows size_t");
      }
    }
    const size_t fits1 = SIZE_MAX / sz, fits2 = SIZE_MAX / (2 * sz);
    for (size_t n : {fits1, fits1 + 1, SIZE_MAX / 2 + 1, SIZE_MAX}) {
      if (n == 0) continue;   // fits1 + 1 wrapped (1-byte types)
      const char* want = countProblem(n, sz, 1);
      std::string ntag = tag + " count " + std::to_string(n);
      reject(ncclInvalidArgument, want, "ncclBcast" + ntag, [&] { return ncclBcast(recv0, n, t, 0, comm, stream); });
      reject(ncclInvalidArgument, want, "ncclSend" + ntag, [&] { return ncclSend(send0, n, t, 1, comm, stream); });
      reject(ncclInvalidArgument, want, "ncclRecv" + ntag, [&] { return ncclRecv(recv0, n, t, 1, comm, stream); });
    }
    for (size_t n : {fits2, fits2 + 1, fits1, fits1 + 1}) {
      if (n == 0) continue;
      // AlltoAll, Gather and Scatter move nRanks * count elements somewhere:
      // checked on every rank, root or not.
      const char* want = countProblem(n, sz, 2);
      std::string ntag = tag + " count " + std::to_string(n);
      reject(ncclInvalidArgument, want, "ncclAlltoAll" + ntag, [&] { return ncclAlltoAll(send0, big0, n, t, comm, stream); });
      reject(ncclInvalidArgument, want, "ncclGather root" + ntag, [&] { return ncclGather(send0, big0, n, t, 0, comm, stream); });
      reject(ncclInvalidArgument, want, "ncclScatter root" + ntag, [&] { return ncclScatter(big0, recv0, n, t, 0, comm, stream); });
      reject(ncclInvalidArgument, want, "ncclGather non-root" + ntag, [&] { return ncclGather(send0, big0, n, t, 1, comm, stream); });
      reject(ncclInvalidArgument, want, "ncclScatter non-root" + ntag, [&] { return ncclScatter(big0, recv0, n, t, 1, comm, stream); });
    }
  }
  // A count whose byte size wraps: SIZE_MAX/2 + 1 elements of a 4-byte type.
  reject(ncclInvalidArgument, "overflows size_t", "SIZE_MAX/2+1 floats",
         [&] { return ncclAllReduce(send0, recv0, SIZE_MAX / 2 + 1, ncclFloat32, ncclSum, comm, stream); });
  reject(ncclInvalidArgument, "overflows size_t", "AllGather SIZE_MAX/8+1 floats on 2 ranks",
         [&] { return ncclAllGather(send0, big0, SIZE_MAX / 8 + 1, ncclFloat32, comm, stream); });
  reject(ncclInvalidArgument, "overflows size_t", "ReduceScatter SIZE_MAX/8+1 floats on 2 ranks",
         [&] { return ncclReduceScatter(big0, recv0, SIZE_MAX / 8 + 1, ncclFloat32, ncclSum, comm, stream); });
}

// ------------------------------------------------------------ buffers

TEST_F(ApiValidate, NullBuffersWithNonzeroCount) {
  for (const Coll& c : collectives()) {
    void* s = c.sendFactor > 1 ? big0 : send0;
    void* r = c.recvFactor > 1 ? big0 : recv0;
    reject(ncclInvalidArgument, "sendbuff is NULL", std::string(c.name) + " NULL sendbuff",
           [&] { return c.fn(nullptr, r, kCount, ncclFloat32, ncclSum, 0, comm, stream); });
    reject(ncclInvalidArgument, "recvbuff is NULL", std::string(c.name) + " NULL recvbuff",
           [&] { return c.fn(s, nullptr, kCount, ncclFloat32, ncclSum, 0, comm, stream); });
  }
  reject(ncclInvalidArgument, "NULL", "ncclBcast NULL",
         [&] { return ncclBcast(nullptr, kCount, ncclFloat32, 1, comm, stream); });   // every rank writes it
  reject(ncclInvalidArgument, "sendbuff is NULL", "ncclSend NULL",
         [&] { return ncclSend(nullptr, kCount, ncclFloat32, 1, comm, stream); });
  reject(ncclInvalidArgument, "recvbuff is NULL", "ncclRecv NULL",
         [&] { return ncclRecv(nullptr, kCount, ncclFloat32, 1, comm, stream); });
  reject(ncclInvalidArgument, "NULL", "ncclAlltoAll NULL sendbuff",
         [&] { return ncclAlltoAll(nullptr, big0, kCount, ncclFloat32, comm, stream); });
  reject(ncclInvalidArgument, "NULL", "ncclAlltoAll NULL recvbuff",
         [&] { return ncclAlltoAll(big0, nullptr, kCount, ncclFloat32, comm, stream); });
  reject(ncclInvalidArgument, "NULL", "ncclGather root NULL recvbuff",
         [&] { return ncclGather(send0, nullptr, kCount, ncclFloat32, 0, comm, stream); });
  reject(ncclInvalidArgument, "NULL", "ncclGather NULL sendbuff",
         [&] { return ncclGather(nullptr, big0, kCount, ncclFloat32, 1, comm, stream); });
  reject(ncclInvalidArgument, "NULL", "ncclScatter root NULL sendbuff",
         [&] { return ncclScatter(nullptr, recv0, kCount, ncclFloat32, 0, comm, stream); });
  reject(ncclInvalidArgument, "NULL", "ncclScatter NULL recvbuff",
         [&] { return ncclScatter(big0, nullptr, kCount, ncclFloat32, 1, comm, stream); });
}

TEST_F(ApiValidate, HostWrongDeviceAndTooSmallBuffers) {
  int onStack[16];
  struct Bad {
    const char* why;
    void* ptr;
    const char* keyword;
  };
  const Bad bad[] = {
      {"malloc", host, "ordinary host memory"},
      {"stack", onStack, "ordinary host memory"},
      {"GPU 1", dev1, "is on GPU 1"},
      {"freed", nullptr, "ordinary host memory"},   // filled in below
  };
  void* freed = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&freed, kBytes), ncclSuccess);
  ASSERT_EQ(gpu::deviceFree(freed), ncclSuccess);
  for (Bad b : bad) {
    if (b.ptr == nullptr) b.ptr = freed;
    const size_t n = 16;   // small: only the kind of memory is wrong
    for (const Coll& c : collectives()) {
      reject(ncclInvalidArgument, b.keyword, std::string(c.name) + " sendbuff " + b.why,
             [&] { return c.fn(b.ptr, recv0, n, ncclFloat32, ncclSum, 0, comm, stream); });
      reject(ncclInvalidArgument, b.keyword, std::string(c.name) + " recvbuff " + b.why,
             [&] { return c.fn(send0, b.ptr, n, ncclFloat32, ncclSum, 0, comm, stream); });
    }
    reject(ncclInvalidArgument, b.keyword, std::string("ncclSend ") + b.why,
           [&] { return ncclSend(b.ptr, n, ncclFloat32, 1, comm, stream); });
    reject(ncclInvalidArgument, b.keyword, std::string("ncclRecv ") + b.why,
           [&] { return ncclRecv(b.ptr, n, ncclFloat32, 1, comm, stream); });
    reject(ncclInvalidArgument, b.keyword, std::string("ncclAlltoAll sendbuff ") + b.why,
           [&] { return ncclAlltoAll(b.ptr, recv0, n, ncclFloat32, comm, stream); });
    reject(ncclInvalidArgument, b.keyword, std::string("ncclAlltoAll recvbuff ") + b.why,
           [&] { return ncclAlltoAll(send0, b.ptr, n, ncclFloat32, comm, stream); });
    reject(ncclInvalidArgument, b.keyword, std::string("ncclGather ") + b.why,
           [&] { return ncclGather(send0, b.ptr, n, ncclFloat32, 0, comm, stream); });
    reject(ncclInvalidArgument, b.keyword, std::string("ncclScatter ") + b.why,
           [&] { return ncclScatter(b.ptr, recv0, n, ncclFloat32, 0, comm, stream); });
  }

  // Runs past the end of its allocation: one element too many, or an offset
  // start with the full count.
  for (const Coll& c : collectives()) {
    void* s = c.sendFactor > 1 ? big0 : send0;
    void* r = c.recvFactor > 1 ? big0 : recv0;
    reject(ncclInvalidArgument, "past the end", std::string(c.name) + " count + 1",
           [&] { return c.fn(s, r, kCount + 1, ncclFloat32, ncclSum, 0, comm, stream); });
    reject(ncclInvalidArgument, "past the end", std::string(c.name) + " sendbuff offset",
           [&] { return c.fn(f(s, 1), r, kCount, ncclFloat32, ncclSum, 0, comm, stream); });
    reject(ncclInvalidArgument, "past the end", std::string(c.name) + " recvbuff offset",
           [&] { return c.fn(s, f(r, 1), kCount, ncclFloat32, ncclSum, 0, comm, stream); });
    reject(ncclInvalidArgument, "past the end", std::string(c.name) + " double in a float buffer",
           [&] { return c.fn(s, r, kCount, ncclFloat64, ncclSum, 0, comm, stream); });
  }
  // AllGather's recvbuff holds nRanks * count: a count-sized one is too small.
  reject(ncclInvalidArgument, "recvbuff", "AllGather recvbuff of one rank's size",
         [&] { return ncclAllGather(send0, recv0, kCount, ncclFloat32, comm, stream); });
  reject(ncclInvalidArgument, "sendbuff", "ReduceScatter sendbuff of one rank's size",
         [&] { return ncclReduceScatter(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream); });
  reject(ncclInvalidArgument, "past the end", "ncclBcast",
         [&] { return ncclBcast(f(recv0, 2), kCount, ncclFloat32, 1, comm, stream); });
  reject(ncclInvalidArgument, "past the end", "ncclSend",
         [&] { return ncclSend(send0, kCount + 1, ncclFloat32, 1, comm, stream); });
  reject(ncclInvalidArgument, "past the end", "ncclRecv",
         [&] { return ncclRecv(f(recv0, kCount - 1), 2, ncclFloat32, 1, comm, stream); });
  reject(ncclInvalidArgument, "past the end", "ncclAlltoAll (nRanks * count)",
         [&] { return ncclAlltoAll(send0, big0, kCount, ncclFloat32, comm, stream); });
  reject(ncclInvalidArgument, "past the end", "ncclGather root recvbuff",
         [&] { return ncclGather(send0, recv0, kCount, ncclFloat32, 0, comm, stream); });
  reject(ncclInvalidArgument, "past the end", "ncclScatter root sendbuff",
         [&] { return ncclScatter(send0, recv0, kCount, ncclFloat32, 0, comm, stream); });
  // A buffer validated once (cached) and then used past its end is still caught.
  accept("cache warm-up", [&] { return ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream); });
  reject(ncclInvalidArgument, "past the end", "cached range, count + 1",
         [&] { return ncclAllReduce(send0, recv0, kCount + 1, ncclFloat32, ncclSum, comm, stream); });
}

// AlltoAll / Gather / Scatter are built from grouped send/recv: after
// validation they record their parts and run once.
TEST_F(ApiValidate, GroupedCollectivesLaunchWhenValid) {
  // With 2 ranks the first send to rank 1 would open a connection (there is
  // no bootstrap here): on a 1-rank comm every part is a copy to self, which
  // needs no kernel (core/one_rank.h: one memcpyAsync each).
  comm->nRanks = 1;
  const uint64_t copies = fake::callCount("memcpyAsync");
  accept("ncclAlltoAll", [&] { return ncclAlltoAll(send0, recv0, kCount, ncclFloat32, comm, stream); }, 0);
  accept("ncclGather", [&] { return ncclGather(send0, recv0, kCount, ncclFloat32, 0, comm, stream); }, 0);
  accept("ncclScatter", [&] { return ncclScatter(send0, recv0, kCount, ncclFloat32, 0, comm, stream); }, 0);
  EXPECT_EQ(fake::callCount("memcpyAsync"), copies + 3);
  // In place (NCCL 2.28 accepts it): the own block is already there.
  accept("ncclAlltoAll in place", [&] { return ncclAlltoAll(recv0, recv0, kCount, ncclFloat32, comm, stream); }, 0);
  EXPECT_EQ(fake::callCount("memcpyAsync"), copies + 3);
  reject(ncclInvalidArgument, "root", "ncclGather root 1 of 1",
         [&] { return ncclGather(send0, recv0, kCount, ncclFloat32, 1, comm, stream); });
  comm->nRanks = 2;
}

// ------------------------------------------------------------ comm state

TEST_F(ApiValidate, UnusableCommunicatorStates) {
  struct State {
    CommState state;
    int asyncError;
    ncclResult_t want;
    const char* keyword;
  };
  const State states[] = {
      {CommState::Initializing, ncclInProgress, ncclInvalidArgument, "still initializing"},
      {CommState::Failed, ncclSystemError, ncclSystemError, "failed to initialize"},
      {CommState::Finalized, ncclSuccess, ncclInvalidUsage, "finalized"},
      {CommState::Aborted, ncclSuccess, ncclInvalidUsage, "aborted"},
      {CommState::Ready, ncclRemoteError, ncclRemoteError, "asynchronous error"},     // e.g. the watchdog fired
      {CommState::Ready, ncclUnhandledCudaError, ncclUnhandledCudaError, "asynchronous error"},
  };
  float scalar = 1.0f;
  for (const State& st : states) {
    comm->state.store(st.state);
    comm->asyncError.store(st.asyncError);
    if (st.state == CommState::Aborted) comm->hostAbort.store(1);   // as ncclCommAbort / the watchdog leave it
    std::string tag = " in state " + std::to_string((int)st.state) + "/" + std::to_string(st.asyncError);
    for (const Coll& c : collectives()) {
      void* s = c.sendFactor > 1 ? big0 : send0;
      void* r = c.recvFactor > 1 ? big0 : recv0;
      reject(st.want, st.keyword, c.name + tag,
             [&] { return c.fn(s, r, kCount, ncclFloat32, ncclSum, 0, comm, stream); });
    }
    reject(st.want, st.keyword, "ncclBcast" + tag, [&] { return ncclBcast(recv0, kCount, ncclFloat32, 0, comm, stream); });
    reject(st.want, st.keyword, "ncclSend" + tag, [&] { return ncclSend(send0, kCount, ncclFloat32, 0, comm, stream); });
    reject(st.want, st.keyword, "ncclRecv" + tag, [&] { return ncclRecv(recv0, kCount, ncclFloat32, 0, comm, stream); });
    reject(st.want, st.keyword, "ncclAlltoAll" + tag,
           [&] { return ncclAlltoAll(send0, big0, kCount / 2, ncclFloat32, comm, stream); });
    reject(st.want, st.keyword, "ncclGather" + tag, [&] { return ncclGather(send0, big0, kCount, ncclFloat32, 0, comm, stream); });
    reject(st.want, st.keyword, "ncclScatter" + tag, [&] { return ncclScatter(big0, recv0, kCount, ncclFloat32, 0, comm, stream); });
    ncclRedOp_t op;
    reject(st.want, st.keyword, "ncclRedOpCreatePreMulSum" + tag,
           [&] { return ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm); });
    void* handle = nullptr;
    reject(st.want, st.keyword, "ncclCommRegister" + tag, [&] { return ncclCommRegister(comm, send0, kBytes, &handle); });
    ncclComm_t child = nullptr;
    reject(st.want, st.keyword, "ncclCommSplit" + tag, [&] { return ncclCommSplit(comm, 0, 0, &child, nullptr); });
    EXPECT_EQ(child, nullptr);
    reject(st.want, st.keyword, "ncclCommFinalize" + tag, [&] { return ncclCommFinalize(comm); });
    // Queries still answer, and report the async error.
    int v = -1;
    EXPECT_EQ(ncclCommCount(comm, &v), ncclSuccess);
    EXPECT_EQ(v, 2);
    ncclResult_t async = ncclNumResults;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, st.asyncError);
    comm->hostAbort.store(0);
  }
}

// Handles of destroyed communicators: tests/unit/api/stale_handle_test.cc.

// ------------------------------------------------------------ the rest

TEST_F(ApiValidate, QueriesWithNullOutputs) {
  reject(ncclInvalidArgument, "NULL", "ncclCommCount", [&] { return ncclCommCount(comm, nullptr); });
  reject(ncclInvalidArgument, "NULL", "ncclCommCuDevice", [&] { return ncclCommCuDevice(comm, nullptr); });
  reject(ncclInvalidArgument, "NULL", "ncclCommUserRank", [&] { return ncclCommUserRank(comm, nullptr); });
  reject(ncclInvalidArgument, "NULL", "ncclCommGetAsyncError", [&] { return ncclCommGetAsyncError(comm, nullptr); });
  int n = -1, dev = -1, rank = -1;
  ncclResult_t async = ncclNumResults;
  EXPECT_EQ(ncclCommCount(comm, &n), ncclSuccess);
  EXPECT_EQ(ncclCommCuDevice(comm, &dev), ncclSuccess);
  EXPECT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
  EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(dev, 0);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(async, ncclSuccess);
}

TEST_F(ApiValidate, SplitArguments) {
  ncclComm_t child = reinterpret_cast<ncclComm_t>(&child);   // must not be written on error
  const int badColors[] = {-2, -100, INT32_MIN};
  for (int color : badColors) {
    reject(ncclInvalidArgument, "color", "ncclCommSplit color " + std::to_string(color),
           [&] { return ncclCommSplit(comm, color, 0, &child, nullptr); });
    EXPECT_EQ(child, reinterpret_cast<ncclComm_t>(&child));
  }
  reject(ncclInvalidArgument, "newcomm", "ncclCommSplit NULL newcomm",
         [&] { return ncclCommSplit(comm, 0, 0, nullptr, nullptr); });
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;   // not from NCCL_CONFIG_INITIALIZER
  reject(ncclInvalidArgument, "config", "ncclCommSplit bad config",
         [&] { return ncclCommSplit(comm, 0, 0, &child, &config); });
}

TEST_F(ApiValidate, RegisterArguments) {
  void* handle = nullptr;
  reject(ncclInvalidArgument, "ncclCommRegister", "NULL buffer", [&] { return ncclCommRegister(comm, nullptr, kBytes, &handle); });
  reject(ncclInvalidArgument, "ncclCommRegister", "NULL handle", [&] { return ncclCommRegister(comm, send0, kBytes, nullptr); });
  reject(ncclInvalidArgument, "ncclCommRegister", "size 0", [&] { return ncclCommRegister(comm, send0, 0, &handle); });
  reject(ncclInvalidArgument, "not GPU device memory", "malloc", [&] { return ncclCommRegister(comm, host, kBytes, &handle); });
  reject(ncclInvalidArgument, "GPU 1", "GPU 1", [&] { return ncclCommRegister(comm, dev1, kBytes, &handle); });
  reject(ncclInvalidArgument, "past the end", "size + 1", [&] { return ncclCommRegister(comm, send0, kBytes + 1, &handle); });
  reject(ncclInvalidArgument, "past the end", "offset", [&] { return ncclCommRegister(comm, f(send0, 1), kBytes, &handle); });
  // A size whose end wraps around the address space is not "inside".
  reject(ncclInvalidArgument, "ncclCommRegister", "SIZE_MAX", [&] { return ncclCommRegister(comm, send0, SIZE_MAX, &handle); });
  reject(ncclInvalidArgument, "ncclCommRegister", "wraps to the start",
         [&] { return ncclCommRegister(comm, f(send0, 4), SIZE_MAX - 8, &handle); });
  EXPECT_EQ(handle, nullptr);
  ASSERT_EQ(ncclCommRegister(comm, send0, kBytes, &handle), ncclSuccess);
  ASSERT_NE(handle, nullptr);
  EXPECT_EQ(ncclCommDeregister(comm, handle), ncclSuccess);
  reject(ncclInvalidArgument, "ncclCommDeregister", "deregister twice", [&] { return ncclCommDeregister(comm, handle); });
  int bogus;
  reject(ncclInvalidArgument, "ncclCommDeregister", "foreign handle", [&] { return ncclCommDeregister(comm, &bogus); });
  // As NCCL: deregistering NULL (a failed or skipped registration) is a no-op.
  EXPECT_EQ(ncclCommDeregister(comm, nullptr), ncclSuccess);
}

TEST_F(ApiValidate, MemAllocAndFree) {
  void* p = nullptr;
  reject(ncclInvalidArgument, "ncclMemAlloc", "NULL out", [&] { return ncclMemAlloc(nullptr, 64); });
  ASSERT_EQ(ncclMemAlloc(&p, 256), ncclSuccess);
  ASSERT_NE(p, nullptr);
  gpu::PointerInfo info;
  ASSERT_EQ(gpu::pointerGetInfo(p, &info), ncclSuccess);
  EXPECT_EQ(info.kind, gpu::MemoryKind::Device);
  reject(ncclInvalidArgument, "ncclMemFree", "interior pointer", [&] { return ncclMemFree(static_cast<char*>(p) + 16); });
  reject(ncclInvalidArgument, "ncclMemFree", "malloc memory", [&] { return ncclMemFree(host); });
  reject(ncclInvalidArgument, "ncclMemFree", "mapped host memory", [&] { return ncclMemFree(mapped); });
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  reject(ncclInvalidArgument, "ncclMemFree", "double free", [&] { return ncclMemFree(p); });
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);   // as free(NULL)
  void* zero = &zero;
  EXPECT_EQ(ncclMemAlloc(&zero, 0), ncclSuccess);
  EXPECT_EQ(zero, nullptr);
}

TEST_F(ApiValidate, GroupMisuse) {
  reject(ncclInvalidUsage, "ncclGroupEnd", "end without start", [&] { return ncclGroupEnd(); });
  // Bad calls inside a group record nothing; the group then launches only
  // what was valid.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);   // nested
  reject(ncclInvalidArgument, "datatype", "bad call in a group",
         [&] { return ncclAllReduce(send0, recv0, kCount, (ncclDataType_t)-3, ncclSum, comm, stream); });
  reject(ncclInvalidArgument, "peer", "bad send in a group", [&] { return ncclSend(send0, kCount, ncclFloat32, 9, comm, stream); });
  size_t before = fake::launchCount();
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);     // inner end: nothing happens yet
  EXPECT_EQ(fake::launchCount(), before);
  // The outer end returns the first failed call's error (NCCL's group rule).
  ncclResult_t end = ncclGroupEnd();
  EXPECT_EQ(end, ncclInvalidArgument) << ncclGetErrorString(end);
  EXPECT_EQ(fake::launchCount(), before);
  EXPECT_TRUE(comm->tasks.empty());
  // A group whose every call failed, then a valid call: the error does not linger.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  reject(ncclInvalidArgument, "recvbuff", "bad recv in a group", [&] { return ncclRecv(host, 4, ncclFloat32, 1, comm, stream); });
  end = ncclGroupEnd();
  EXPECT_EQ(end, ncclInvalidArgument) << ncclGetErrorString(end);
  EXPECT_EQ(fake::launchCount(), before);
  accept("after the group", [&] { return ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream); });
  // Simulate end without a start, and with a bad info struct.
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  reject(ncclInvalidUsage, "ncclGroupSimulateEnd", "simulate without start", [&] { return ncclGroupSimulateEnd(&sim); });
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  ncclSimInfo_t badSim = sim;
  badSim.magic = 0;
  EXPECT_EQ(ncclGroupSimulateEnd(&badSim), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess);   // discards the group
  EXPECT_EQ(fake::launchCount(), before + 1);
  EXPECT_TRUE(comm->tasks.empty());
}

// ncclGroupSimulateEnd reports the cost model's estimate (core/cost_model.h)
// of what the group holds and launches nothing: 0 for an empty group, more
// for more bytes and for more operations.
TEST_F(ApiValidate, GroupSimulateEndEstimates) {
  auto simulate = [&](const std::function<void()>& record) {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    size_t before = fake::launchCount();
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    record();
    EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess);
    EXPECT_EQ(fake::launchCount(), before);
    EXPECT_TRUE(comm->tasks.empty());
    return sim.estimatedTime;
  };
  auto allReduce = [&](size_t count) {
    EXPECT_EQ(ncclAllReduce(send0, recv0, count, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  };
  EXPECT_EQ(simulate([] {}), 0.0f);
  const float small = simulate([&] { allReduce(1); });
  const float large = simulate([&] { allReduce(kCount); });
  const float two = simulate([&] { allReduce(kCount); allReduce(kCount); });
  const float p2p = simulate([&] { EXPECT_EQ(ncclSend(send0, kCount, ncclFloat32, 1, comm, stream), ncclSuccess); });
  EXPECT_GT(small, 0.0f);
  EXPECT_LT(small, 1e3f);
  EXPECT_GT(large, small);
  EXPECT_GT(two, large);
  EXPECT_GT(p2p, 0.0f);
  EXPECT_NE(small, NCCL_UNDEF_FLOAT);
  // The same group launched for real afterwards still works.
  accept("after simulations",
         [&] { return ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream); });
}

// NCCL remembers an error returned by any call inside a group: ncclGroupEnd
// then returns it and discards the whole group (ncclGroupErrCheck in NCCL's
// enqueue.cc / group.cc); so does uniccl (groupErrCheck in group.cc).
TEST_F(ApiValidate, GroupWithAFailedCallIsDiscardedLikeNccl) {
  size_t before = fake::launchCount();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  EXPECT_EQ(ncclBroadcast(send0, recv0, kCount, ncclFloat32, 5, comm, stream), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_EQ(fake::launchCount(), before);
  EXPECT_TRUE(comm->tasks.empty());
}

TEST_F(ApiValidate, FinalizeThenUse) {
  accept("before finalize", [&] { return ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream); });
  ASSERT_EQ(ncclCommFinalize(comm), ncclSuccess);
  EXPECT_EQ(comm->state.load(), CommState::Finalized);
  reject(ncclInvalidUsage, "finalized", "collective after finalize",
         [&] { return ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream); });
  reject(ncclInvalidUsage, "finalized", "finalize twice", [&] { return ncclCommFinalize(comm); });
  // Destroy after finalize is the normal path (TearDown destroys it).
}

// Non-blocking finalize (config.blocking = 0, as NCCL): ncclInProgress at
// once, the async error stays ncclInProgress while a launch is unfinished,
// then turns ncclSuccess; no new operation is accepted meanwhile.
TEST_F(ApiValidate, NonBlockingFinalize) {
  comm->config.blocking = false;
  fake::setAutoComplete(false);
  accept("before finalize", [&] { return ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream); });
  ASSERT_EQ(fake::pendingEventCount(), 1u);
  ASSERT_EQ(ncclCommFinalize(comm), ncclInProgress);
  ncclResult_t async = ncclSuccess;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  EXPECT_EQ(async, ncclInProgress) << "finalize ended before the launch did";
  reject(ncclInvalidUsage, "finalized", "collective during finalize",
         [&] { return ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream); });
  reject(ncclInvalidUsage, "finalized", "finalize twice", [&] { return ncclCommFinalize(comm); });
  fake::completeEventsUpTo(fake::lastSerial());
  for (int i = 0; i < 5000 && async == ncclInProgress; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  }
  EXPECT_EQ(async, ncclSuccess);
  EXPECT_EQ(comm->state.load(), CommState::Finalized);
}

// Aborting a communicator whose non-blocking finalize still waits for a
// launch that never ends returns (the fake's synchronize gives up after its
// timeout, as a real kernel would exit on the abort flag) and frees it.
TEST_F(ApiValidate, AbortDuringNonBlockingFinalize) {
  comm->config.blocking = false;
  fake::setAutoComplete(false);
  fake::setSyncTimeoutMs(200);
  accept("before finalize", [&] { return ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, stream); });
  ASSERT_EQ(ncclCommFinalize(comm), ncclInProgress);
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  comm = nullptr;   // TearDown has nothing left to destroy
}

// A non-blocking init fails on its own thread; the caller learns why from
// ncclGetLastError once ncclCommGetAsyncError reported the failure.
TEST_F(ApiValidate, NonBlockingInitFailureKeepsItsCause) {
  ncclUniqueId bogus;
  memset(&bogus, 0x5a, sizeof(bogus));   // not made by ncclGetUniqueId
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t nb = nullptr;
  ncclResult_t res = ncclCommInitRankConfig(&nb, 2, bogus, 0, &cfg);
  ASSERT_EQ(res, ncclInProgress) << ncclGetErrorString(res);
  ASSERT_NE(nb, nullptr);
  ncclResult_t async = ncclInProgress;
  for (int i = 0; i < 5000 && async == ncclInProgress; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(ncclCommGetAsyncError(nb, &async), ncclSuccess);
  }
  EXPECT_EQ(async, ncclInvalidArgument) << ncclGetErrorString(async);
  std::string text = ncclGetLastError(nb);
  EXPECT_NE(text.find("Invalid ncclUniqueId"), std::string::npos) << text;
  EXPECT_EQ(ncclCommDestroy(nb), ncclSuccess);
}

// Ranks that share a GPU each need a stream of their own: the same stream
// for two of them in one group, or the legacy default stream, is refused
// before anything launches (their kernels would wait for each other).
TEST_F(ApiValidate, RanksSharingAGpuNeedTheirOwnStreams) {
  ncclComm* peer = new ncclComm();
  peer->rank = 1;
  peer->nRanks = 2;
  peer->gpuDev = 0;
  peer->commHash = 0x5eed;
  peer->nChannels = 1;
  peer->p2pChannels = 1;
  peer->asyncError.store(ncclSuccess);
  peer->state.store(CommState::Ready);
  comm->gpuShared = peer->gpuShared = true;
  auto both = [&](uniccl_stream_t s0, uniccl_stream_t s1) {
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, s0), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, peer, s1), ncclSuccess);
    return ncclGroupEnd();
  };
  size_t before = fake::launchCount();
  resetLastError();
  EXPECT_EQ(both(stream, stream), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("same stream"), std::string::npos) << ncclGetLastError(comm);
  resetLastError();
  EXPECT_EQ(both(stream, nullptr), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("legacy default stream"), std::string::npos)
      << ncclGetLastError(comm);
  resetLastError();   // a group of one (the path without ncclGroupStart)
  EXPECT_EQ(ncclAllReduce(send0, recv0, kCount, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("legacy default stream"), std::string::npos)
      << ncclGetLastError(comm);
  EXPECT_EQ(fake::launchCount(), before);
  EXPECT_TRUE(comm->tasks.empty());
  EXPECT_TRUE(peer->tasks.empty());
  // A stream of its own for each: both launch.
  gpu::Stream s = nullptr;
  ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
  EXPECT_EQ(both(stream, static_cast<uniccl_stream_t>(s)), ncclSuccess) << ncclGetLastError(comm);
  EXPECT_EQ(fake::launchCount(), before + 2);
  EXPECT_EQ(ncclCommDestroy(peer), ncclSuccess);
}

TEST_F(ApiValidate, AbortAndDestroyHandles) {
  // NULL: no-ops, as in NCCL.
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(nullptr), ncclSuccess);
  // A live comm in any state can be destroyed or aborted.
  ncclComm* other = new ncclComm();
  other->rank = 1;
  other->nRanks = 2;
  other->gpuDev = 0;
  other->state.store(CommState::Failed);
  other->asyncError.store(ncclSystemError);
  EXPECT_EQ(ncclCommAbort(other), ncclSuccess);
  other = new ncclComm();
  other->rank = 0;
  other->nRanks = 2;
  other->gpuDev = 0;
  other->state.store(CommState::Initializing);
  other->asyncError.store(ncclInProgress);
  EXPECT_EQ(ncclCommDestroy(other), ncclSuccess);
}

// The allocations checkBuffer remembers (core/validate.h): a buffer inside
// one is covered, one that runs past its end is not (the runtime checks it
// again), and the oldest of kRanges gives way to a new one.
TEST(CheckedRanges, CoverRememberedAllocationsOnly) {
  CheckedRanges c;
  EXPECT_FALSE(c.covers(0x1000, 1));
  c.remember(0x1000, 0x2000);
  EXPECT_TRUE(c.covers(0x1000, 0x1000));
  EXPECT_TRUE(c.covers(0x1fff, 1));
  EXPECT_FALSE(c.covers(0x1fff, 2));   // past the end
  EXPECT_FALSE(c.covers(0x0fff, 1));   // before the start
  EXPECT_FALSE(c.covers(0x2000, 1));
  for (unsigned i = 1; i < CheckedRanges::kRanges; i++) c.remember(0x10000 * i, 0x10000 * i + 0x100);
  EXPECT_TRUE(c.covers(0x1000, 1));   // still one of the last kRanges
  c.remember(0x900000, 0x900100);
  EXPECT_FALSE(c.covers(0x1000, 1));  // the oldest gave way
  EXPECT_TRUE(c.covers(0x900000, 0x100));
  EXPECT_TRUE(c.covers(0x10000, 0x100));
}

}  // namespace
}  // namespace uniccl
