// Shared declarations of the *_perf benchmarks (nccl-tests / rccl-tests style).
//
// The benchmarks use only the nccl.h API plus the GPU runtime through
// gpu_rt.h, so the same sources build against uniccl and against NCCL/RCCL.
// A collective is described by one CollSpec (one small file each); the
// driver (common.cc) owns launch modes, buffers, timing, checking and output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#if defined(BENCH_RCCL_HEADER)
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif

#include "gpu_rt.h"

namespace bench {

// ------------------------------------------------------------------ datatypes
enum class Kind { Signed, Unsigned, Float };

struct TypeInfo {
  const char* name;     // as printed in the table and accepted by -d
  ncclDataType_t type;
  int bytes;
  Kind kind;
  int expBits, manBits, bias;  // floating formats only
  bool hasInf;                 // false for e4m3 ("fn": no infinities)
};

const std::vector<TypeInfo>& allTypes();
const TypeInfo* findType(const std::string& name);

// Exact decode of a stored floating value / encode with round-to-nearest-even.
double decodeFloat(const TypeInfo& t, uint64_t bits);
uint64_t encodeFloat(const TypeInfo& t, double v);

// ------------------------------------------------------------------ reductions
enum class Op { None, Sum, Prod, Max, Min, Avg, PreMulSum };
const char* opName(Op op);
bool parseOp(const std::string& s, std::vector<Op>* out);  // one name or "all"

// ------------------------------------------------------------------ collectives
// Element counts of one call (nccl-tests' GetCollByteCount). In-place runs use
// one buffer `base`: send = base + rank * sendInplaceStride, recv = base + rank *
// recvInplaceStride (e.g. AllGather: sendbuff == recvbuff + rank * sendcount).
struct CollSizes {
  size_t sendCount = 0, recvCount = 0, paramCount = 0;
  size_t sendInplaceStride = 0, recvInplaceStride = 0;
  size_t totalBytes = 0;  // the "size" column; algbw = totalBytes / time
};

// Where the output elements of one rank come from: either a copy of element
// (srcStart + j) of rank srcRank's input, or the reduction over all ranks of
// their element (srcStart + j).
struct Segment {
  size_t outStart, len;
  bool reduce;
  int srcRank;
  size_t srcStart;
};

struct Expectation {
  std::vector<Segment> segments;
  bool outputUnused = false;  // e.g. non-root Reduce/Gather: recvbuff must stay untouched
};

struct CallArgs {
  const void* sendbuff;
  void* recvbuff;
  size_t count;  // CollSizes::paramCount
  ncclDataType_t type;
  ncclRedOp_t op;
  int root, rank, nranks;
  ncclComm_t comm;
  benchStream_t stream;
};

struct CollSpec {
  const char* name;        // "AllReduce"
  const char* tool;        // "all_reduce_perf"
  bool hasOp, hasRoot;
  bool inPlaceDefined;     // SendRecv has no in-place form in nccl.h
  void (*sizes)(size_t bytes, int typeBytes, int nranks, CollSizes* out);
  double (*busbwFactor)(int nranks);
  ncclResult_t (*call)(const CallArgs& a);
  Expectation (*expect)(int rank, int nranks, int root, const CollSizes& s);
};

// Not const on purpose: hip-clang also emits namespace-scope const objects
// for the GPU, where the host functions they point to do not exist.
extern CollSpec kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce,
    kAlltoAll, kSendRecv, kGather, kScatter, kShifts;
const std::vector<const CollSpec*>& allColls();

// ------------------------------------------------------------------ arguments
struct Args {
  size_t minBytes = 32 * 1024 * 1024, maxBytes = 32 * 1024 * 1024;
  size_t stepBytes = 1024 * 1024;
  double stepFactor = 1.0;
  int nGpus = 1, nThreads = 1;
  int ranksPerGpu = 1;  // -P: ranks sharing each GPU (uniccl only)
  int registration = 0; // -R: 0 none, 1 ncclCommRegister, 2 symmetric window (as nccl-tests)
  int iters = 20, warmup = 5, aggIters = 1;
  int check = 1;
  std::vector<Op> ops{Op::Sum};
  std::vector<const TypeInfo*> types;
  int root = 0;  // -1: all roots
  int blocking = 0;
  int average = 1;  // 0 rank 0, 1 avg, 2 min, 3 max
  int graphLaunches = 0;
  int reportCpu = 0;
  double timeoutSec = 0;
  std::string jsonPath;
};

// Parses "8", "64K", "1M", "1G", "2GB" (binary multiples). False on garbage.
bool parseSize(const std::string& s, size_t* out);
// Fills *args; on error prints why and returns false. *selfTest set for --self-test.
bool parseArgs(int argc, char** argv, const CollSpec& coll, Args* args, bool* selfTest);
void printUsage(const CollSpec& coll);
std::vector<size_t> sweepSizes(const Args& a);

// ------------------------------------------------------------------ data + checking
// Everything below is deterministic from (seed, rank, index), so the checker
// recomputes any expected value on the host without the other ranks' data.
struct DataGen {
  const TypeInfo* t;
  Op op;
  int nranks;
  uint64_t seed;
};
// Stored bits of input element `idx` of `rank`.
uint64_t inputBits(const DataGen& g, int rank, size_t idx);
// Host-immediate PreMulSum scalar of `rank` as stored bits of the datatype.
uint64_t preMulScalarBits(const TypeInfo& t, int rank);
void fillInput(const DataGen& g, int rank, void* dst, size_t count);

struct CheckResult {
  size_t wrong = 0;
  double maxError = 0;  // floating types: largest |got - expected| / tolerance scale
};
// Compares `out` (recvCount elements of `rank`'s output) with the expectation.
CheckResult checkOutput(const DataGen& g, int rank, const Expectation& e, const void* out);
// Relative tolerance of a reduced element (rule in data.cc); 0 = exact.
double toleranceScale(const TypeInfo& t, int nranks, Op op);

// Runs fn(begin, end) over [0, n) on up to bench::hostWorkers() threads.
void parallelFor(size_t n, const std::function<void(size_t, size_t)>& fn);
void setHostWorkers(int n);

// ------------------------------------------------------------------ output
struct RowHalf {
  bool valid = false;     // false: the placement is not defined (printed N/A)
  double timeUs = 0, algbw = 0, busbw = 0, cpuUs = 0;
  long long wrong = -1;   // -1: not checked
};
struct Row {
  size_t bytes, count;
  const char* type;
  const char* redop;
  int root;
  RowHalf oop, ip;
};
std::string tableHeader(bool reportCpu);
std::string formatRow(const Row& r, bool reportCpu);
std::string rowJson(const CollSpec& c, const Row& r, int nranks, int graphLaunches);

int selfTest();
int benchMain(int argc, char** argv, const CollSpec& coll);

}  // namespace bench
