// What the plugin's entry points write into the calling thread's ring
// (event_ring.h), the writer thread moves into its spill as it is
// (spill_format.h) and reads back to format: plain data in cells of 32
// bytes. A start is one to three cells, a state or a stop one, so that an
// event costs its caller a few stores into memory it has written before.
//
// Event handles are not pointers: a handle is the event's id, tagged
// (handleOf), so it needs no memory, never points at reused memory, and a
// child's parent id is read from the handle without touching the parent.
#pragma once

#include <cstdint>

namespace trace {

constexpr unsigned kCellBytes = 32;
struct alignas(kCellBytes) Cell {
  unsigned char bytes[kCellBytes];
};

enum class RecordKind : uint8_t {
  kPad = 1,  // fills the ring's end when the next record would not fit before it
  kStart,
  kState,
  kStop,
  kSkippedStart,   // a start its rank no longer takes (maxEvents reached): counted, no id, no event
};

struct RecordHead {
  RecordKind kind;
  uint8_t cells;     // length of the record in cells, this one included
  uint16_t ctxSlot;  // kStart, kSkippedStart: the context's slot in the tracer
  uint16_t code;     // kStart: the ncclProfile* type; kState: the state
  uint16_t small;    // kStart: graphCaptured (GroupApi, CollApi, P2pApi), isSend (ProxyOp), channel (KernelCh)
};
static_assert(sizeof(RecordHead) == 8, "a record head is 8 bytes");

// The first cell of every start. A start carries no id: the writer counts
// the starts of each ring as the ring counts the ids it hands out.
struct StartRecord {
  RecordHead head;
  uint64_t ticks;     // when it started (trace_clock.h)
  uint64_t parentId;  // 0: none
  uint64_t word;      // GroupApi: groupDepth; CollApi: root; KernelLaunch: stream; Coll/P2p: the Group
                      // event's id; ProxyStep: step; KernelCh: GPU start timer; NetPlugin: id
};

// The second cell of CollApi / P2pApi. The names are the library's (NCCL's
// and uniccl's come from static tables, which NCCL's example plugin relies on
// as well): the writer formats them later.
struct ApiTail {
  const char* func;
  const char* datatype;
  void* stream;
  uint64_t count;
};

// Coll: the second and third cells.
struct CollNames {
  const char* func;
  const char* datatype;
  const char* algo;
  const char* proto;
};
struct CollTail {
  uint64_t seq;
  uint64_t count;
  int32_t root;
  int32_t nChannels;
  uint64_t unused;
};

// P2p: the second cell.
struct P2pTail {
  const char* func;
  const char* datatype;
  uint64_t count;
  int32_t peer;
  int32_t nChannels;
};

// ProxyOp: the second cell.
struct ProxyOpTail {
  int32_t channel;
  int32_t peer;
  int32_t nSteps;
  int32_t chunkSize;
  uint64_t unused[2];
};

// A state (head.code: the state) or a stop of the event `id`.
struct UpdateRecord {
  RecordHead head;
  uint64_t id;
  uint64_t ticks;  // when (trace_clock.h)
  uint64_t value;  // kState: transSize / appendedProxyOps / GPU stop timer, by state
};

static_assert(sizeof(StartRecord) == kCellBytes && sizeof(ApiTail) == kCellBytes &&
                  sizeof(CollNames) == kCellBytes && sizeof(CollTail) == kCellBytes &&
                  sizeof(P2pTail) == kCellBytes && sizeof(ProxyOpTail) == kCellBytes &&
                  sizeof(UpdateRecord) == kCellBytes,
              "every record part is one cell");

constexpr unsigned kMaxRecordCells = 3;

// Ids: the ring's index above kRingIdShift, its count of starts below, so that
// ids are unique in the process without a shared counter, and stay below
// 2^53 (trace viewers read them as doubles) for 4096 rings.
constexpr unsigned kRingIdShift = 40;

// A handle: bit 0 set (a pointer never has it), the id above it, and above
// bit kHandleGenShift the tracer's generation, so that a handle of an earlier
// tracer (tracing stopped with the last communicator and started again) is
// not taken for the new tracer's event of the same id.
constexpr unsigned kHandleGenShift = 54;
constexpr uint64_t kHandleGenMask = 0x1ff;
constexpr uint64_t kIdMask = (1ull << (kHandleGenShift - 1)) - 1;

inline void* handleOf(uint64_t id, uint64_t generation) {
  return reinterpret_cast<void*>((uintptr_t)((generation & kHandleGenMask) << kHandleGenShift | id << 1 | 1));
}
// The id of a handle of this generation's; 0 for anything else (nullptr, a
// pointer, which is even, or an earlier tracer's handle).
inline uint64_t idOfHandle(const void* h, uint64_t generation) {
  const uint64_t v = (uint64_t)reinterpret_cast<uintptr_t>(h);
  if ((v & 1) == 0 || (v >> kHandleGenShift & kHandleGenMask) != (generation & kHandleGenMask)) return 0;
  return v >> 1 & kIdMask;
}

}  // namespace trace
