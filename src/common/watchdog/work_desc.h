// What the watchdog says about a stuck launch: the operation, its size, its
// sequence number and the peers it waits on. Filled on the launch thread
// (from the work items and the comm), printed on the watchdog thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uniccl {

struct WorkDesc {
  uint8_t coll = 0;        // dev::Coll of the launch's first work item
  uint8_t dtype = 0;       // ncclDataType_t (collectives)
  uint8_t redOp = 0;       // dev::RedOp (collectives)
  uint16_t nWorks = 0;     // work items in the launch (a group or fused collectives)
  uint64_t count = 0;      // elements (collectives) or send bytes (p2p)
  uint64_t seq = 0;        // communicator sequence number of the first operation
  int32_t sendPeer = -1;   // ring next (collectives) / send peer (p2p), -1: none
  int32_t recvPeer = -1;   // ring prev (collectives) / recv peer (p2p), -1: none
};

// "AllReduce(float, count 1048576, seq 7, ring prev 1 next 1)" plus
// "+N more work items" when the launch carried several.
void formatWorkDesc(const WorkDesc& d, char* buf, size_t len);

}  // namespace uniccl
