#include "common/watchdog/work_desc.h"

#include <cstdio>

#include "common/util/type_names.h"
#include "device/dev_types.h"

namespace uniccl {

namespace {

const char* collName(uint8_t coll) {
  switch (coll) {
    case dev::kCollAllReduce: return "AllReduce";
    case dev::kCollBroadcast: return "Broadcast";
    case dev::kCollReduce: return "Reduce";
    case dev::kCollAllGather: return "AllGather";
    case dev::kCollReduceScatter: return "ReduceScatter";
    case dev::kCollP2p: return "SendRecv";
    default: return "unknown";
  }
}

}  // namespace

void formatWorkDesc(const WorkDesc& d, char* buf, size_t len) {
  int used;
  if (d.coll == dev::kCollP2p) {
    used = snprintf(buf, len, "%s(seq %llu, send %llu bytes to peer %d, recv from peer %d)", collName(d.coll),
                    (unsigned long long)d.seq, (unsigned long long)d.count, d.sendPeer, d.recvPeer);
  } else {
    used = snprintf(buf, len, "%s(%s, count %llu, seq %llu, ring prev %d next %d)", collName(d.coll),
                    dataTypeName((ncclDataType_t)d.dtype), (unsigned long long)d.count, (unsigned long long)d.seq,
                    d.recvPeer, d.sendPeer);
  }
  if (d.nWorks > 1 && used > 0 && (size_t)used < len)
    snprintf(buf + used, len - used, " +%u more work items in the same launch", (unsigned)(d.nWorks - 1));
}

}  // namespace uniccl
