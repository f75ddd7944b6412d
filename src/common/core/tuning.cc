#include "common/core/tuning.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "common/core/comm.h"
#include "common/util/debug.h"
#include "common/util/param.h"

namespace uniccl {

namespace {

struct TuningEnv {
  bool allowLL = true;
  bool allowSimple = true;
  size_t llThreshold = 0;
  size_t simpleChannelBytes = 0;   // a Simple collective gets one channel per this many bytes
  size_t llChannelBytes = 0;
};

bool listHas(const std::string& list, const char* name) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    if (strcasecmp(item.c_str(), name) == 0) return true;
    start = end + 1;
  }
  return false;
}

TuningEnv readEnv() {
  TuningEnv e;
  e.llThreshold = (size_t)paramInt("UNICCL_LL_THRESHOLD", 64 << 10);
  e.simpleChannelBytes = (size_t)std::max<int64_t>(1, paramInt("UNICCL_SIMPLE_CHANNEL_BYTES", 64 << 10));
  e.llChannelBytes = (size_t)std::max<int64_t>(1, paramInt("UNICCL_LL_CHANNEL_BYTES", 16 << 10));
  if (const char* p = getEnv("NCCL_PROTO")) {
    std::string s(p);
    bool exclude = !s.empty() && s[0] == '^';
    if (exclude) s = s.substr(1);
    bool ll = listHas(s, "LL"), simple = listHas(s, "Simple");
    e.allowLL = exclude ? !ll : ll;
    e.allowSimple = exclude ? !simple : simple;
    if (!e.allowLL && !e.allowSimple) {
      WARN("NCCL_PROTO=%s leaves no protocol this build implements (LL, Simple; LL128 is not implemented): using both", p);
      e.allowLL = e.allowSimple = true;
    } else if (listHas(s, "LL128") && !exclude) {
      INFO(kSubsysTune | kSubsysEnv, "NCCL_PROTO=%s: LL128 is not implemented by uniccl; using the others", p);
    }
  }
  if (const char* a = getEnv("NCCL_ALGO")) {
    std::string s(a);
    bool exclude = !s.empty() && s[0] == '^';
    if (exclude) s = s.substr(1);
    bool ring = listHas(s, "Ring");
    if (exclude ? ring : !ring) {
      WARN("NCCL_ALGO=%s: uniccl implements only the Ring algorithm in this version; using Ring", a);
    }
  }
  return e;
}

const TuningEnv& tuningEnv() {
  static const TuningEnv env = readEnv();
  return env;
}

size_t divUp(size_t a, size_t b) { return (a + b - 1) / b; }
size_t roundUp(size_t a, size_t b) { return divUp(a, b) * b; }

}  // namespace

void loadTuningEnv() { (void)tuningEnv(); }

int defaultChannelCount(const ncclComm* comm) {
  int n = comm->allP2p                       ? (int)paramInt("UNICCL_P2P_NCHANNELS", 32)
          : comm->transports.ringUsesNet() ? (int)paramInt("UNICCL_NET_NCHANNELS", 2)
                                           : (int)paramInt("UNICCL_SHM_NCHANNELS", 2);
  int lo = (int)paramInt("NCCL_MIN_NCHANNELS", 1);
  int hi = (int)paramInt("NCCL_MAX_NCHANNELS", dev::kMaxChannels);
  if (comm->config.minCTAs > 0) lo = std::max(lo, comm->config.minCTAs);
  if (comm->config.maxCTAs > 0) hi = std::min(hi, comm->config.maxCTAs);
  n = std::max(n, lo);
  n = std::min(n, hi);
  return std::clamp(n, 1, (int)dev::kMaxChannels);
}

CollTuning tuneCollective(const ncclComm* comm, TaskKind kind, size_t bytes) {
  const TuningEnv& env = tuningEnv();
  const ChannelLayout& L = comm->transports.layout();
  CollTuning t;
  // The network carries the Simple protocol only (the proxy sends whole
  // slots once their size is published; LL's per-line flags are not checked).
  bool ll = !comm->transports.ringUsesNet() && env.allowLL && (!env.allowSimple || bytes <= env.llThreshold);
  size_t perRankChunks = (kind == TaskKind::Broadcast || kind == TaskKind::Reduce) ? 1 : (size_t)comm->nRanks;
  if (ll) {
    size_t slot = L.llBytes / dev::kSteps / 2;  // data bytes per LL slot
    t.proto = dev::kProtoLL;
    t.nChannels = (int)std::clamp<size_t>(divUp(bytes, env.llChannelBytes), 1, comm->nChannels);
    t.sliceBytes = (uint32_t)std::min(slot, roundUp(std::max<size_t>(divUp(bytes, t.nChannels * perRankChunks), 1), 16));
  } else {
    size_t slot = L.simpleBytes / dev::kSteps;
    t.proto = dev::kProtoSimple;
    t.nChannels = (int)std::clamp<size_t>(divUp(bytes, env.simpleChannelBytes), 1, comm->nChannels);
    t.sliceBytes = (uint32_t)std::min(slot, roundUp(std::max<size_t>(divUp(bytes, t.nChannels * perRankChunks), 1), 4096));
  }
  return t;
}

uint32_t p2pSliceBytes(const ncclComm* comm) {
  return (uint32_t)(comm->transports.layout().simpleBytes / dev::kSteps);
}

}  // namespace uniccl
