// The test cases: what each one issues (one or more operations), where its
// buffers sit in a per-GPU arena (with guard regions), what every buffer must
// hold afterwards, and the list of cases for a mode and a number of ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"
#include "numerics.h"

namespace colltest {

enum class Coll {
  AllReduce, Broadcast, Reduce, AllGather, ReduceScatter,
  SendRecvRing,   // send to rank+1, receive from rank-1, one group
  SendRecvPairs,  // block p of sendbuff to every peer p (self included), one group
  AlltoAll, Gather, Scatter,
  Count
};
const char* collName(Coll c);
bool isReduction(Coll c);

enum class Op { Sum, Prod, Max, Min, Avg, PreMulHost, PreMulDevice, None };
const char* opName(Op op);
Range rangeFor(Coll c, Op op);

enum class Place { OutOfPlace, InPlace, Unaligned };
const char* placeName(Place p);

struct OpSpec {
  Coll coll = Coll::AllReduce;
  ncclDataType_t dt = ncclFloat32;
  Op op = Op::None;
  size_t count = 0;
  int root = 0;
  Place place = Place::OutOfPlace;
  ncclResult_t expect = ncclSuccess;  // not ncclSuccess: must be rejected, buffers untouched
  bool issue = true;                  // false: scratch buffers of a bad-input case, never issued
};

// Bad-input checks: each calls the API wrongly on every local rank, expects
// the documented error code and a message from ncclGetLastError, then runs a
// valid AllReduce to show nothing was enqueued.
enum class Bad {
  None, NullComm, NullSendbuff, NullRecvbuff, DtypeTooLarge, DtypeNegative, OpInvalid, PreMulWrongType,
  DestroyBuiltinOp, BcastRootHigh, BcastRootNegative, ReduceRootHigh, GatherRootHigh, ScatterRootHigh,
  SendPeerHigh, RecvPeerNegative, AllGatherNullRecv, AlltoAllNullSend, CountOverflow, HostMemory,
  WrongGpu, GroupEndWithoutStart, ErrorInsideGroup, Count
};
const char* badName(Bad b);

// InitRefused: no operation; the communicator init itself must be refused
// (mode B with ranks of several processes on one GPU and no MPS server).
enum class Kind { Ops, BadInput, Perf, InitRefused };

struct Case {
  std::string name;   // full name: mode/transport/...
  std::string label;  // summary column: collective, "Batch", "BadInput", "Perf"
  uint64_t seed = 0;  // from the name without mode/transport: same data in every mode
  Kind kind = Kind::Ops;
  Bad bad = Bad::None;
  bool grouped = false;  // all ops in one ncclGroupStart/End; else one group per op
  std::vector<OpSpec> ops;
  double timeoutS = 0;   // watchdog limit for this case
};

struct BuildOptions {
  std::string mode;       // "A-all", "A-group", "B"
  std::string transport;  // label: "p2p" or "shm"
  int nranks = 1;
  int nLocalGpus = 1;     // distinct GPUs this process drives (wrong-GPU check needs 2)
  bool quick = false;     // no 1 Mi / 64 Mi / 1 GiB counts
  bool huge = true;       // 64 Mi element cases
  bool full = false;      // every type x op x count x placement x root
  bool perf = true;       // the 1 GiB AllReduce (mode A-all, >= 2 ranks)
  double timeoutS = 30;   // base per-case watchdog limit (s)
  std::vector<std::string> include, exclude;  // fnmatch patterns on the case name
};

std::vector<Case> buildCases(const BuildOptions& o);

// -------------------------------------------------------------- buffers
// A buffer in the arena: [guard][shift][elems * size][guard]; the pointer the
// API sees is at off + kGuard + shift.
constexpr size_t kGuard = 256;
constexpr uint8_t kPoison = 0xA5;

struct Buf {
  size_t off = 0;
  size_t elems = 0;
  size_t shift = 0;  // bytes, for misaligned placements
  size_t dataOff() const { return off + kGuard + shift; }
  size_t spanBytes(size_t esz) const { return kGuard + shift + elems * esz + kGuard; }
};

struct OpLayout {
  bool inPlace = false;
  Buf send, recv;                  // the same buffer when in place
  size_t sendElemOff = 0, recvElemOff = 0;  // where the API pointers sit inside them
  size_t sendElems = 0, recvElems = 0;      // what the operation reads / writes
  Buf scalar;                      // device scalar of PreMulDevice
};

struct CaseLayout {
  std::vector<OpLayout> ops;
  size_t bytes = 0;  // arena bytes this case needs
};

CaseLayout layoutCase(const Case& c, int nranks);

// What an element range of a buffer must hold after the case.
struct Segment {
  enum Kind { Poison, Copy, Reduce } kind;
  size_t begin, end;  // elements of the buffer
  int src;            // Copy: whose input
  size_t srcOff;      // Copy/Reduce: input element matching `begin`
};

// Expected final contents of the op's buffers on `rank` (send first; one
// list when in place).
std::vector<std::vector<Segment>> expectedSegments(const OpSpec& op, const OpLayout& l, int rank, int nranks);
// The buffers of the op in the same order as expectedSegments.
std::vector<const Buf*> opBuffers(const OpLayout& l);
// In place: where the API's send / receive pointers sit inside the one buffer
// (elements), e.g. AllGather sendbuff = recvbuff + rank*count.
size_t inPlaceSendOff(const OpSpec& op, int rank);
size_t inPlaceRecvOff(const OpSpec& op, int rank);

// Premulsum scalar of `rank` (rank-dependent: each rank scales its own input).
double preMulScalar(ncclDataType_t dt, int rank);

}  // namespace colltest
