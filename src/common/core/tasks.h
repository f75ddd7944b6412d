// A collective or point-to-point call as recorded by the API entry point,
// before the planner turns the tasks of a group into work items.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/gpu.h"
#include "device/dev_types.h"
#include "uniccl.h"

namespace uniccl {

enum class TaskKind : uint8_t {
  AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, Recv,
};
constexpr int kNumTaskKinds = (int)TaskKind::Recv + 1;   // Recv stays last

const char* taskKindName(TaskKind kind);

struct Task {
  TaskKind kind;
  ncclDataType_t dtype;
  uint8_t redOp;          // dev::RedOp after lowering
  uint8_t scalarKind;     // dev::ScalarKind
  // The op is an ncclRedOpCreatePreMulSum op: it scales by the user's scalar,
  // so even on one rank the result is no copy of the input (core/one_rank.h).
  uint8_t userRedOp;
  // Send of an in-place AlltoAll: sendbuff points into the user's buffer,
  // which this group's receives overwrite. k > 0: it lies in the k-th
  // StagedRange of the TaskList, and the group end reads it from a staged
  // copy instead (core/inplace_stage.h).
  uint32_t stage;
  uint64_t scalar;        // raw scalar bits / device pointer / n (PreMulSum, SumPostDiv: dev::ScalarKind)
  const void* sendbuff;
  void* recvbuff;
  size_t count;           // elements (per rank for AllGather / ReduceScatter)
  int root;               // Broadcast/Reduce: the root. Send/Recv: the peer (read it as peer())
  gpu::Stream stream;
  uint64_t seq;           // communicator-wide sequence number, for logs

  int peer() const { return root; }   // Send/Recv: the other rank of the message
};

// A part of a user buffer that the group end copies aside before any of the
// group's transfers (in-place AlltoAll: the blocks a rank sends to its peers).
struct StagedRange {
  const char* src;
  size_t bytes;
  gpu::Stream stream;   // the AlltoAll's stream: the copy runs there
};

// Tasks of one communicator in the open group. Vectors keep their capacity
// across groups so steady-state enqueue does not allocate.
struct TaskList {
  std::vector<Task> colls;
  std::vector<Task> p2p;
  std::vector<StagedRange> staged;   // indexed by Task::stage - 1
  bool empty() const { return colls.empty() && p2p.empty(); }
  void clear() {
    colls.clear();
    p2p.clear();
    staged.clear();
  }
};

}  // namespace uniccl
