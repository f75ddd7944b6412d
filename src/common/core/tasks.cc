#include "common/core/tasks.h"

namespace uniccl {

const char* taskKindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::AllReduce: return "AllReduce";
    case TaskKind::Broadcast: return "Broadcast";
    case TaskKind::Reduce: return "Reduce";
    case TaskKind::AllGather: return "AllGather";
    case TaskKind::ReduceScatter: return "ReduceScatter";
    case TaskKind::Send: return "Send";
    case TaskKind::Recv: return "Recv";
  }
  return "?";
}

}  // namespace uniccl
