#include "common/core/tuning.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <mutex>
#include <string>

#include "common/core/comm.h"
#include "common/core/comm_lsa.h"
#include "common/core/comm_transport.h"
#include "common/core/redop.h"
#include "common/core/reducescatter_pat.h"
#include "common/topo/cost.h"
#include "common/topo/trees.h"
#include "common/symmetric/symmetric.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"
#include "common/util/name_list.h"

namespace uniccl {

static_assert(knobSpec(Knob::NCCL_MAX_NCHANNELS).intDefault == dev::kMaxChannels,
              "NCCL_MAX_NCHANNELS defaults to every channel the kernels have");

namespace {

struct TuningEnv {
  bool allowLL = true;
  bool allowSimple = true;
  bool allowLL128 = true;
  size_t ll128PerRankBytes = 0;    // UNICCL_LL128_THRESHOLD: LL128 up to this many bytes per rank
  int ll128MinRanks = 2;           // UNICCL_LL128_MIN_RANKS
  size_t ll128ChannelBytes = 0;    // UNICCL_LL128_CHANNEL_BYTES
  size_t llThreshold = 0;          // UNICCL_LL_THRESHOLD; 0: by transport (below)
  size_t llThresholdUnderLL128 = 0;  // LL's limit where LL128 runs (readEnv)
  size_t p2pLLThreshold = 0;       // NCCL_P2P_LL_THRESHOLD: p2p messages up to this use LL
  size_t simpleChannelBytes = 0;   // a Simple collective gets one channel per this many bytes
  size_t llChannelBytes = 0;
  AlgoMask algos;
  // Default choice for AllReduce (docs/algorithms.md): the tree from
  // treeMinRanks ranks up to treeMaxBytes, the ring otherwise (readEnv sets
  // both from their knobs). On 4 H200s (all pairs NVLink) the tree led the
  // ring in graphs up to 128 KiB; 8 ranks are not measured.
  int treeMinRanks = 8;
  size_t treeMaxBytes = 0;
  // UNICCL_TREE_MAX_BYTES was set: it places the switch to the ring across
  // hosts too, where the cost model places it otherwise.
  bool treeMaxBytesSet = false;
  topo::LinkCosts linkCosts = topo::defaultLinkCosts();   // UNICCL_LINK_COSTS
  bool allreduceExchange = true;   // UNICCL_ALLREDUCE_EXCHANGE
  size_t netExchangeMaxBytes = 0;  // UNICCL_NET_EXCHANGE_MAX_BYTES
  size_t netLLMaxBytes = 0;        // UNICCL_NET_LL_MAX_BYTES
  bool symmetric = false;          // UNICCL_SYMMETRIC (opt-in: docs/device_api.md, "Measured")
  size_t symmetricMaxBytes = 0;    // UNICCL_SYMMETRIC_MAX_BYTES
  size_t symmetricTwoShotBytes = 0;  // UNICCL_SYMMETRIC_TWO_SHOT_BYTES
  size_t patScratchMaxBytes = 0;   // UNICCL_PAT_SCRATCH_MAX_BYTES
};

// Counted only once a test asked (countTuningDecisions): a shared atomic
// add per collective would otherwise sit on every thread's hot path.
std::atomic<bool> gCountDecisions{false};
std::atomic<uint64_t> gDecisions[kNumTaskKinds][dev::kNumAlgos];
std::atomic<uint64_t> gProtoDecisions[dev::kNumProtos];   // collectives (tuneCollective) per protocol
std::atomic<uint64_t> gPatDecisions[kNumTaskKinds];   // AllGathers and ReduceScatters planned as PAT rounds

TuningEnv readEnv() {
  TuningEnv e;
  e.llThreshold = (size_t)std::max<int64_t>(0, knobInt(Knob::UNICCL_LL_THRESHOLD));
  // LL up to 512 KiB per message (NCCL: 16 KiB): in a threshold sweep on 2 H200s LL was faster at every
  // size up to 512 KiB (SendRecv 32 KiB graph 4.6 vs 8.5 us by Simple), Simple from 1 MiB.
  e.p2pLLThreshold = (size_t)std::max<int64_t>(0, knobInt(Knob::NCCL_P2P_LL_THRESHOLD));
  e.simpleChannelBytes = (size_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_SIMPLE_CHANNEL_BYTES));
  // A channel per 2 KiB of LL: AllReduce 8-32 KiB in graphs on 4 H200s 10% faster than with 4 KiB per channel.
  e.llChannelBytes = (size_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_LL_CHANNEL_BYTES));
  // LL128 above LL's range up to this many bytes per rank, from 2 ranks:
  // where it beat both LL and Simple with every protocol forced on 2 and 4
  // H200s (docs/algorithms.md, "Protocols"); 8 ranks are extrapolated.
  // Where LL128 runs, LL stops at 512 KiB (LL128 beat it at 1 MiB in every
  // collective and tied at 512 KiB); an explicit UNICCL_LL_THRESHOLD is
  // both limits.
  e.ll128PerRankBytes = (size_t)std::max<int64_t>(0, knobInt(Knob::UNICCL_LL128_THRESHOLD));
  e.ll128MinRanks = (int)std::max<int64_t>(2, knobInt(Knob::UNICCL_LL128_MIN_RANKS));
  e.ll128ChannelBytes = (size_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_LL128_CHANNEL_BYTES));
  e.llThresholdUnderLL128 = e.llThreshold > 0 ? e.llThreshold : (size_t)512 << 10;
  if (const char* p = knobValue(Knob::NCCL_PROTO)) {
    const ProtoMask m = parseProtoList(p);
    e.allowLL = m.ll;
    e.allowSimple = m.simple;
    e.allowLL128 = m.ll128;
  }
  if (const char* a = knobValue(Knob::NCCL_ALGO)) e.algos = parseAlgoList(a);
  e.treeMinRanks = (int)std::max<int64_t>(2, knobInt(Knob::UNICCL_TREE_MIN_RANKS));
  e.treeMaxBytes = (size_t)std::max<int64_t>(0, knobInt(Knob::UNICCL_TREE_MAX_BYTES));
  e.treeMaxBytesSet = knobValue(Knob::UNICCL_TREE_MAX_BYTES) != nullptr;
  if (const char* lc = knobValue(Knob::UNICCL_LINK_COSTS)) {
    std::string err;
    if (!topo::applyLinkCosts(lc, &e.linkCosts, &err))
      WARN("UNICCL_LINK_COSTS=%s: %s; using the default link costs (docs/topology.md, \"Cost model\")", lc,
           err.c_str());
  }
  e.allreduceExchange = knobInt(Knob::UNICCL_ALLREDUCE_EXCHANGE) != 0;
  e.netExchangeMaxBytes = (size_t)std::max<int64_t>(0, knobInt(Knob::UNICCL_NET_EXCHANGE_MAX_BYTES));
  e.netLLMaxBytes = (size_t)std::max<int64_t>(0, knobInt(Knob::UNICCL_NET_LL_MAX_BYTES));
  e.symmetric = knobInt(Knob::UNICCL_SYMMETRIC) != 0;
  e.symmetricMaxBytes = (size_t)std::max<int64_t>(0, knobInt(Knob::UNICCL_SYMMETRIC_MAX_BYTES));
  e.symmetricTwoShotBytes = (size_t)std::max<int64_t>(0, knobInt(Knob::UNICCL_SYMMETRIC_TWO_SHOT_BYTES));
  e.patScratchMaxBytes = (size_t)std::max<int64_t>(0, knobInt(Knob::UNICCL_PAT_SCRATCH_MAX_BYTES));
  return e;
}

const TuningEnv& tuningEnv() {
  static const TuningEnv env = readEnv();
  return env;
}

// Where LL stops: over P2P up to 1 MiB, where on 2 and 4 H200s it beat
// Simple's per-step handshakes at 128 KiB-1 MiB by 1.2-2.4x (LL's flags
// halve its bandwidth, which only shows above that; docs/performance-history.md,
// "Tuning notes"); through host memory (SHM) 64 KiB, the crossover measured there.
size_t llThreshold(const ncclComm* comm, const TuningEnv& env) {
  if (env.llThreshold > 0) return env.llThreshold;
  return comm->allP2p ? (size_t)1 << 20 : (size_t)64 << 10;
}

size_t divUp(size_t a, size_t b) { return (a + b - 1) / b; }
size_t roundUp(size_t a, size_t b) { return divUp(a, b) * b; }

// Says once per process that NCCL_PROTO allowed only protocols this
// communicator cannot run (LL128 alone where LL128 is not available).
void noteProtoFallback() {
  static std::atomic<bool> told{false};
  if (!told.exchange(true, std::memory_order_relaxed))
    INFO(kSubsysTune | kSubsysEnv, "NCCL_PROTO allows only LL128, which this communicator cannot run "
                                   "(Transports::ll128: every pair P2P on GPUs that store 128-byte lines whole): "
                                   "using LL and Simple");
}

// Some tree edge goes through the network (then LL is off, as on a ring
// that does). Only asked when no ring edge does, i.e. on one host, where
// nRanks is small.
bool treeEdgeUsesNet(const ncclComm* comm) {
  const int n = comm->nRanks;
  for (int c = 0; c < comm->nChannels; c++) {
    const std::vector<TreeNode> tree = topo::buildTree(comm->topology, c);
    for (int r = 0; r < n; r++) {
      const int p = tree[r].parent;
      if (p >= 0 && transportBetween(comm, r, p) == TransportKind::Net) return true;
    }
  }
  return false;
}

// Whether an edge of some channel's tree (common/topo/trees.h) crosses the
// network. Fixed once the communicator is wired:
// walked once (every rank's parent), then cached in the communicator.
bool treeUsesNet(const ncclComm* comm) {
  int8_t known = comm->tuningCache.treeUsesNet.load(std::memory_order_relaxed);
  if (known >= 0) return known != 0;
  const bool net = treeEdgeUsesNet(comm);
  if (comm->transports.reachKnown()) comm->tuningCache.treeUsesNet.store(net ? 1 : 0, std::memory_order_relaxed);
  return net;
}

// The channels a Simple collective of `bytes` gets (tuneCollective's rule).
int simpleChannels(const ncclComm* comm, const TuningEnv& env, size_t bytes) {
  return (int)std::clamp<size_t>(divUp(std::max<size_t>(bytes, 1), env.simpleChannelBytes), 1,
                                 (size_t)std::max(comm->nChannels, 1));
}

// The largest size a model still wins at: powers of two up to 2^40 until
// it loses, then bisection below that one. *lastWin is 0 when it never
// wins; returns false when it won at every size tried (*lastWin = 2^40).
template <typename Wins>
bool largestWinningSize(Wins wins, size_t* lastWin) {
  size_t lo = 0, hi = 0;
  for (int k = 0; k <= 40 && hi == 0; k++) {
    if (wins((size_t)1 << k)) lo = (size_t)1 << k;
    else hi = (size_t)1 << k;
  }
  if (hi != 0 && lo != 0) {
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      (wins(mid) ? lo : hi) = mid;
    }
  }
  *lastWin = lo;
  return hi != 0;
}

// Across hosts, the largest AllReduce the tree runs: up to where the
// topology's cost model (topo/cost.h) has the ring catch up. The same on
// every rank (same topology, channels and knobs); computed once per
// communicator (a search over sizes), then cached in it.
size_t treeMaxBytesAcrossHosts(const ncclComm* comm, const TuningEnv& env) {
  const int64_t known = comm->tuningCache.treeMaxBytes.load(std::memory_order_relaxed);
  if (known >= 0) return (size_t)known;
  const topo::Shape shape = topo::shapeOf(comm->topology);
  auto treeWins = [&](size_t b) {
    const int c = simpleChannels(comm, env, b);
    const double tree = topo::estimate(shape, env.linkCosts, topo::Algo::Tree, topo::Coll::AllReduce, (double)b, c).us();
    const double ring = topo::estimate(shape, env.linkCosts, topo::Algo::Ring, topo::Coll::AllReduce, (double)b, c).us();
    return tree <= ring;
  };
  size_t lo = 0;
  largestWinningSize(treeWins, &lo);
  comm->tuningCache.treeMaxBytes.store((int64_t)lo, std::memory_order_relaxed);
  INFO(kSubsysTune, "Rank %d: AllReduce across %d hosts uses the tree up to %zu bytes (cost model)", comm->rank,
       shape.nHosts, lo);
  return lo;
}

uint8_t chooseAlgo(const ncclComm* comm, const TuningEnv& env, TaskKind kind, size_t bytes) {
  if (kind != TaskKind::AllReduce) {
    if (!env.algos.ring) {
      // NCCL_ALGO allows no Ring: say once per collective that this one runs on it anyway.
      static std::atomic<uint32_t> told{0};
      const uint32_t bit = 1u << (int)kind;
      if ((told.fetch_or(bit, std::memory_order_relaxed) & bit) == 0) {
        if (env.algos.pat && (kind == TaskKind::AllGather || kind == TaskKind::ReduceScatter))
          INFO(kSubsysTune | kSubsysColl, "NCCL_ALGO allows no Ring, but this %s cannot run as PAT rounds (a "
               "ReduceScatter with ncclAvg or a PreMulSum op, or more scratch than UNICCL_PAT_SCRATCH_MAX_BYTES): "
               "using Ring", taskKindName(kind));
        else
          INFO(kSubsysTune | kSubsysColl, "NCCL_ALGO allows no Ring, but uniccl has only a Ring algorithm for %s: "
               "using Ring", taskKindName(kind));
      }
    }
    return dev::kAlgoRing;
  }
  if (!treeAlgoPossible(comm->nRanks)) return dev::kAlgoRing;
  if (!env.algos.ring) return dev::kAlgoTree;
  if (comm->nRanks < env.treeMinRanks) return dev::kAlgoRing;
  if (comm->topology.nHosts() > 1 && !env.treeMaxBytesSet)
    return bytes <= treeMaxBytesAcrossHosts(comm, env) ? dev::kAlgoTree : dev::kAlgoRing;
  return bytes <= env.treeMaxBytes ? dev::kAlgoTree : dev::kAlgoRing;
}

}  // namespace

AlgoMask parseAlgoList(const char* value) {
  AlgoMask m;
  std::string s(value);
  if (s.find_first_of(":;") != std::string::npos) {
    WARN("NCCL_ALGO=%s: per-collective algorithm lists are not supported by uniccl; using the default selection",
         value);
    return m;
  }
  // Items trimmed of spaces and tabs, names ignoring case (NCCL's parser).
  NameListSyntax syntax;
  syntax.trim = " \t";
  const NameList list = parseNameList(value, syntax);
  const bool exclude = list.exclude;
  // Names of NCCL's other algorithms: accepted and ignored (INFO).
  static const char* const kOthers[] = {"CollNetDirect", "CollNetChain", "NVLS", "NVLSTree"};
  bool ring = false, tree = false, pat = false, unknown = false, other = false;
  for (const std::string& item : list.items) {
    if (strcasecmp(item.c_str(), "Ring") == 0) ring = true;
    else if (strcasecmp(item.c_str(), "Tree") == 0) tree = true;
    else if (strcasecmp(item.c_str(), "PAT") == 0) pat = true;
    else if (std::any_of(std::begin(kOthers), std::end(kOthers), [&](const char* o) { return strcasecmp(item.c_str(), o) == 0; }))
      other = true;
    else unknown = true;
  }
  if (unknown) {
    WARN("NCCL_ALGO=%s: unknown algorithm name (uniccl implements Ring, Tree and PAT); using the default selection",
         value);
    return AlgoMask{};
  }
  m.ring = exclude ? !ring : ring;
  m.tree = exclude ? !tree : tree;
  m.pat = exclude ? !pat : pat;
  if (!m.ring && !m.tree && !m.pat) {
    WARN("NCCL_ALGO=%s leaves no algorithm uniccl implements (Ring, Tree, PAT); using the default selection", value);
    return AlgoMask{};
  }
  if (other && !exclude)
    INFO(kSubsysTune | kSubsysEnv,
         "NCCL_ALGO=%s: only Ring, Tree and PAT are implemented by uniccl; ignoring the others", value);
  return m;
}

bool treeAlgoPossible(int nRanks) {
  const TuningEnv& env = tuningEnv();
  if (nRanks < 2 || !env.algos.tree) return false;
  return !env.algos.ring || (nRanks >= env.treeMinRanks && env.treeMaxBytes > 0);
}

void countTuningDecisions() { gCountDecisions.store(true, std::memory_order_relaxed); }

uint64_t tuningDecisions(TaskKind kind, int algo) {
  if ((int)kind >= kNumTaskKinds || algo < 0 || algo >= dev::kNumAlgos) return 0;
  return gDecisions[(int)kind][algo].load(std::memory_order_relaxed);
}

uint64_t patDecisions(TaskKind kind) {
  if ((int)kind >= kNumTaskKinds) return 0;
  return gPatDecisions[(int)kind].load(std::memory_order_relaxed);
}

void countPatDecision(TaskKind kind) {
  if (gCountDecisions.load(std::memory_order_relaxed) && (int)kind < kNumTaskKinds)
    gPatDecisions[(int)kind].fetch_add(1, std::memory_order_relaxed);
}

// Across one rank per host, the largest AllGather or ReduceScatter PAT
// runs by default: up to where the cost model has the ring catch up (its
// rounds' p2p channels against the ring's), 0 where it never leads. The
// model costs the two collectives alike (topo/cost.h), so one limit serves
// both. Computed once per communicator (a search over sizes), then cached
// in it.
static size_t patMaxBytes(const ncclComm* comm, const TuningEnv& env) {
  const int64_t known = comm->tuningCache.patMaxBytes.load(std::memory_order_relaxed);
  if (known >= 0) return (size_t)known;
  const topo::Shape shape = topo::shapeOf(comm->topology);
  auto patWins = [&](size_t b) {
    const double pat = topo::estimate(shape, env.linkCosts, topo::Algo::Pat, topo::Coll::AllGather, (double)b,
                                      std::max(comm->p2pChannels, 1)).us();
    const double ring = topo::estimate(shape, env.linkCosts, topo::Algo::Ring, topo::Coll::AllGather, (double)b,
                                       simpleChannels(comm, env, b)).us();
    return pat < ring;
  };
  size_t lo = 0;
  if (shape.ranksPerHost == 1 && shape.nHosts > 2) {
    if (!largestWinningSize(patWins, &lo)) lo = SIZE_MAX;   // ahead at every size the search tried
  }
  comm->tuningCache.patMaxBytes.store((int64_t)std::min<size_t>(lo, INT64_MAX), std::memory_order_relaxed);
  if (lo == SIZE_MAX)
    INFO(kSubsysTune, "Rank %d: AllGather and ReduceScatter over %d hosts of one rank use PAT at every size "
         "(cost model)", comm->rank, shape.nHosts);
  else
    INFO(kSubsysTune, "Rank %d: AllGather and ReduceScatter over %d hosts of %d rank(s) use PAT up to %zu bytes "
         "(cost model)", comm->rank, shape.nHosts, shape.ranksPerHost, lo);
  return lo;
}

bool allReduceUsesTree(const ncclComm* comm, size_t bytes) {
  if (!treeAlgoPossible(comm->nRanks)) return false;
  return chooseAlgo(comm, tuningEnv(), TaskKind::AllReduce, bytes) == dev::kAlgoTree;
}

bool collUsesPat(const ncclComm* comm, const Task& t) {
  // Other collectives never: the planner asks for every one (AllReduce: the hot path).
  if (t.kind != TaskKind::AllGather && t.kind != TaskKind::ReduceScatter) return false;
  const TuningEnv& env = tuningEnv();
  if (comm->nRanks < 2 || !env.algos.pat || t.count == 0) return false;
  const size_t block = t.count * dataTypeSize(t.dtype);
  if (t.kind == TaskKind::ReduceScatter) {
    if (!patReducesWith(t.redOp)) return false;
    if (patReduceScatterScratchBytes(comm->nRanks, block) > env.patScratchMaxBytes) return false;
  }
  if (!env.algos.ring) return true;
  // The whole buffer, as planner.cc's tuningBytes counts these collectives.
  return block * (size_t)comm->nRanks <= patMaxBytes(comm, env);
}

uint64_t tuningProtoDecisions(int proto) {
  if (proto < 0 || proto >= dev::kNumProtos) return 0;
  return gProtoDecisions[proto].load(std::memory_order_relaxed);
}

void loadTuningEnv() { (void)tuningEnv(); }

const topo::LinkCosts& linkCosts() { return tuningEnv().linkCosts; }

// Channels over P2P links: 128 where every GPU of the communicator has a
// multiprocessor for each (H100/H200: 132), else 64. On two H200s 128 blocks
// move one-way transfers at 367-371 GB/s where 64 stop at 352-362 (the SM
// store ceiling, docs/performance-history.md). Every rank computes the same count
// from the same allgathered peer info.
static int defaultP2pChannels(const ncclComm* comm) {
  int minSms = INT_MAX;
  for (const PeerInfo& p : comm->peers) minSms = std::min(minSms, (int)p.smCount);
  return minSms >= dev::kMaxChannels ? dev::kMaxChannels : 64;
}

ncclResult_t chooseChannelCount(const ncclComm* comm, int* nChannels) {
  int n = comm->allP2p                       ? (int)knobInt(Knob::UNICCL_P2P_NCHANNELS, defaultP2pChannels(comm))
          : comm->transports.ringUsesNet() ? (int)knobInt(Knob::UNICCL_NET_NCHANNELS)
                                           : (int)knobInt(Knob::UNICCL_SHM_NCHANNELS);
  int lo = (int)knobInt(Knob::NCCL_MIN_NCHANNELS);
  int hi = (int)knobInt(Knob::NCCL_MAX_NCHANNELS);
  if (comm->config.minCTAs > 0) lo = std::max(lo, comm->config.minCTAs);
  if (comm->config.maxCTAs > 0) hi = std::min(hi, comm->config.maxCTAs);
  n = std::max(n, lo);
  n = std::min(n, hi);
  n = std::clamp(n, 1, (int)dev::kMaxChannels);
  if (n > comm->channelFit) {
    if (std::min(lo, (int)dev::kMaxChannels) > comm->channelFit) {
      WARN("Rank %d: at least %d channels were asked for (NCCL_MIN_NCHANNELS / minCTAs), but only %d fit with "
           "every rank sharing its GPU resident at once: ask for fewer, or put fewer ranks on a GPU",
           comm->rank, lo, comm->channelFit);
      return ncclInvalidUsage;
    }
    INFO(kSubsysInit | kSubsysTune, "Rank %d: %d channels capped at %d (ranks sharing a GPU must fit together)",
         comm->rank, n, comm->channelFit);
    n = comm->channelFit;
  }
  *nChannels = n;
  return ncclSuccess;
}

// A collective whose links cross the network: LL for small messages (the
// proxy sends an LL step once its lines are there and the receiving kernel
// polls the lines, one host-memory round trip where Simple's tail and data
// take two; common/proxy/ll_lines.h), Simple above. Never LL128.
static uint8_t netCollProto(const TuningEnv& env, const ChannelLayout& L, size_t bytes) {
  if (!env.allowLL || !L.netCarriesLL()) return dev::kProtoSimple;
  if (!env.allowSimple || bytes <= env.netLLMaxBytes) return dev::kProtoLL;
  return dev::kProtoSimple;
}

CollTuning tuneCollective(const ncclComm* comm, TaskKind kind, size_t bytes) {
  const TuningEnv& env = tuningEnv();
  const ChannelLayout& L = comm->transports.layout();
  CollTuning t;
  t.algo = chooseAlgo(comm, env, kind, bytes);
  const bool tree = t.algo == dev::kAlgoTree;
  // The network carries Simple and LL (netCollProto), never LL128.
  const bool net = comm->transports.ringUsesNet() || (tree && treeUsesNet(comm));
  ProtoChoice pc;
  pc.mask = ProtoMask{env.allowLL, env.allowSimple, env.allowLL128};
  pc.llThreshold = llThreshold(comm, env);
  pc.llThresholdUnderLL128 = env.llThresholdUnderLL128;
  pc.ll128PerRankBytes = env.ll128PerRankBytes;
  pc.ll128MinRanks = env.ll128MinRanks;
  const uint8_t proto = net ? netCollProto(env, L, bytes) : chooseCollProto(comm, pc, bytes);
  const bool ll = proto == dev::kProtoLL;
  // Two ranks, LL, or small messages across the network: each sends its
  // whole share and combines what arrives (one hop where reduce-scatter +
  // all-gather take two; same bytes on the wire). Across the network every
  // hop is a proxy round trip (2 hosts x 1 GPU over sockets: 8 B to 256 KiB
  // in 22-81 us against the ring's 39-124); from 2 MiB the ring's two
  // pipelined halves are faster (16 MiB: 2.7 ms against 3.4). Commutative
  // ops give both ranks the same bits.
  const bool netExchange = net && proto == dev::kProtoSimple && bytes <= env.netExchangeMaxBytes;
  t.exchange = (ll || netExchange) && !tree && kind == TaskKind::AllReduce && comm->nRanks == 2 &&
               env.allreduceExchange;
  // The ring cuts a channel's share into nRanks chunks per step round; the
  // tree (like Broadcast/Reduce) streams the share in slices of its own.
  size_t perRankChunks =
      (tree || t.exchange || kind == TaskKind::Broadcast || kind == TaskKind::Reduce) ? 1 : (size_t)comm->nRanks;
  auto channels = [&](size_t bytesPerChannel) {
    int n = (int)std::clamp<size_t>(divUp(bytes, bytesPerChannel), 1, comm->nChannels);
    // Channel c runs tree c % 2: an even count puts both trees (different
    // roots and interior ranks) to work, when each gets some data.
    if (tree && n % 2 == 1 && n < comm->nChannels && bytes >= (size_t)64 * (n + 1)) n++;
    return n;
  };
  if (ll) {
    size_t slot = L.llBytes / dev::kSteps / 2;  // data bytes per LL slot
    t.proto = dev::kProtoLL;
    // Across the network every channel's step is a message of its own
    // through the proxy: small LL messages go on one channel.
    t.nChannels = channels(net ? std::max(env.llChannelBytes, env.netLLMaxBytes) : env.llChannelBytes);
    t.sliceBytes = (uint32_t)std::min(slot, roundUp(std::max<size_t>(divUp(bytes, t.nChannels * perRankChunks), 1), 16));
  } else if (proto == dev::kProtoLL128) {
    // Data bytes per LL128 slot: 120 of every 128-byte line (device/prims.h's stepCapacity).
    size_t slot = L.ll128Bytes / dev::kSteps / dev::kLL128LineBytes * dev::kLL128DataWords * 8;
    t.proto = dev::kProtoLL128;
    t.nChannels = channels(env.ll128ChannelBytes);
    t.sliceBytes = (uint32_t)std::min(slot, roundUp(std::max<size_t>(divUp(bytes, t.nChannels * perRankChunks), 1), 16));
  } else {
    size_t slot = L.simpleBytes / dev::kSteps;
    t.proto = dev::kProtoSimple;
    t.nChannels = channels(env.simpleChannelBytes);
    t.sliceBytes = (uint32_t)std::min(slot, roundUp(std::max<size_t>(divUp(bytes, t.nChannels * perRankChunks), 1), 4096));
  }
  if (gCountDecisions.load(std::memory_order_relaxed)) {
    gDecisions[(int)kind][t.algo].fetch_add(1, std::memory_order_relaxed);
    gProtoDecisions[t.proto].fetch_add(1, std::memory_order_relaxed);
  }
  TRACE(kSubsysTune, "%s %zu bytes on %d ranks: %s/%s, %d channels, slice %u", taskKindName(kind), bytes, comm->nRanks,
        tree ? "Tree" : t.exchange ? "Ring(exchange)" : "Ring", protoName(t.proto), t.nChannels, t.sliceBytes);
  return t;
}

bool tuneSymmetric(const ncclComm* comm, const Task& t, dev::Work* w) {
  // A communicator without windows first: the eager path of one pays for
  // nothing else here (not even the environment's static guard).
  if (comm->symmetric == nullptr || comm->nRanks < 2) return false;
  const TuningEnv& env = tuningEnv();
  if (!env.symmetric) return false;
  const bool allGather = t.kind == TaskKind::AllGather;
  const bool reduceScatter = t.kind == TaskKind::ReduceScatter;
  if (!allGather && !reduceScatter && t.kind != TaskKind::AllReduce) return false;
  if (!allGather && t.redOp != dev::kOpSum && t.redOp != dev::kOpProd && t.redOp != dev::kOpMax &&
      t.redOp != dev::kOpMin)
    return false;
  // Each buffer's bytes: AllGather's output and ReduceScatter's input hold
  // nRanks x count elements; the larger one is what tuningBytes says.
  const size_t rankBytes = t.count * dataTypeSize(t.dtype);
  const size_t allBytes = allGather || reduceScatter ? rankBytes * comm->nRanks : rankBytes;
  const size_t sendBytes = reduceScatter ? allBytes : rankBytes;
  const size_t recvBytes = allGather ? allBytes : rankBytes;
  if (allBytes > env.symmetricMaxBytes) return false;
  if (lsaPlace(comm).size != comm->nRanks) return false;
  SymWindow* bar = collBarrierWindow(comm->symmetric);
  SymSpan send, recv;
  if (bar == nullptr || !findSymmetricSpan(comm->symmetric, t.sendbuff, sendBytes, &send) ||
      !findSymmetricSpan(comm->symmetric, t.recvbuff, recvBytes, &recv))
    return false;
  memset(w, 0, sizeof(*w));
  w->coll = allGather ? dev::kCollAllGather : reduceScatter ? dev::kCollReduceScatter : dev::kCollAllReduce;
  w->proto = dev::kProtoSimple;
  // A channel per 16 KiB (not measured on a GPU yet): blocks share the
  // elements (of one rank, for AllGather and ReduceScatter) as the ring's
  // do (channelShare).
  const int nch = (int)std::clamp<size_t>(divUp(allBytes, (size_t)16 << 10), 1, comm->nChannels);
  w->channelLo = 0;
  w->channelHi = (uint8_t)(nch - 1);
  w->s.redOp = t.redOp;
  w->s.dtype = (uint8_t)t.dtype;
  w->s.scalarKind = t.scalarKind;
  w->s.algo = dev::kAlgoSymmetric;
  // In place, an AllGather's inputs lie at different offsets on each rank
  // (rank p's at share p of its output): the kernel reads them from the
  // output's window. A ReduceScatter's input lies at the same offset on
  // every rank, in place or not (its output, share `rank` of it, is only
  // written by this rank).
  const bool inPlace = allGather && (const char*)t.sendbuff == (const char*)t.recvbuff + (size_t)comm->rank * sendBytes;
  const SymSpan& in = inPlace ? recv : send;
  w->s.sendStride4G = in.stride4G;
  w->s.sendFlat = in.flatBase + in.offset;
  w->s.recvbuff = t.recvbuff;
  w->s.count = t.count;
  w->s.inPlace = inPlace ? 1 : 0;
  // AllReduce: two-shot in place (one-shot would overwrite inputs peers
  // still read) and from UNICCL_SYMMETRIC_TWO_SHOT_BYTES out of place.
  if (t.kind == TaskKind::AllReduce && (t.sendbuff == t.recvbuff || allBytes >= env.symmetricTwoShotBytes)) {
    w->s.recvStride4G = recv.stride4G;
    w->s.recvFlat = recv.flatBase + recv.offset;
  }
  if (gCountDecisions.load(std::memory_order_relaxed))
    gDecisions[(int)t.kind][dev::kAlgoSymmetric].fetch_add(1, std::memory_order_relaxed);
  TRACE(kSubsysTune, "%s %zu bytes on %d ranks: Symmetric%s, %d channels", taskKindName(t.kind), allBytes,
        comm->nRanks, w->s.recvFlat != nullptr ? " (two-shot)" : "", nch);
  return true;
}

uint8_t p2pProto(const ncclComm* comm, int peer, size_t bytes) {
  const TuningEnv& env = tuningEnv();
  // LL128 only when NCCL_PROTO leaves nothing else (as NCCL, whose p2p
  // runs LL or Simple), and only where the communicator has LL128 slots
  // (every pair P2P, so never toward a network peer).
  if (!env.allowLL && !env.allowSimple) {
    if (env.allowLL128 && comm->transports.ll128()) return dev::kProtoLL128;
    noteProtoFallback();
    if (bytes > env.p2pLLThreshold) return dev::kProtoSimple;
  } else if (!env.allowLL || (env.allowSimple && bytes > env.p2pLLThreshold)) {
    return dev::kProtoSimple;
  }
  if (transportBetween(comm, comm->rank, peer) == TransportKind::Net) return dev::kProtoSimple;
  return dev::kProtoLL;
}

uint8_t chooseCollProto(const ncclComm* comm, const ProtoChoice& pc, size_t bytes) {
  const bool ll128Here = comm->transports.ll128();
  bool ll = pc.mask.ll, simple = pc.mask.simple;
  const bool ll128 = pc.mask.ll128 && ll128Here;
  if (!ll && !simple && !ll128) {
    noteProtoFallback();
    ll = simple = true;
  }
  const bool ll128Runs = ll128 && comm->nRanks >= pc.ll128MinRanks;
  const size_t llTop = ll128Runs && ll ? pc.llThresholdUnderLL128 : pc.llThreshold;
  if (bytes <= llTop) {
    if (ll) return dev::kProtoLL;
    if (ll128) return dev::kProtoLL128;
    return simple ? dev::kProtoSimple : dev::kProtoLL;
  }
  if (ll128Runs && bytes <= pc.ll128PerRankBytes * (size_t)comm->nRanks) return dev::kProtoLL128;
  if (simple) return dev::kProtoSimple;
  return ll128 ? dev::kProtoLL128 : dev::kProtoLL;
}

const char* protoName(uint8_t proto) {
  switch (proto) {
    case dev::kProtoLL: return "LL";
    case dev::kProtoLL128: return "LL128";
    case dev::kProtoSimple: return "Simple";
    default: return "unknown";
  }
}

ProtoMask parseProtoList(const char* value) {
  // Items as NCCL compares them: whole, ignoring case, spaces kept.
  const NameList list = parseNameList(value, NameListSyntax{});
  const bool exclude = list.exclude;
  const bool ll = list.hasIgnoringCase("LL"), simple = list.hasIgnoringCase("Simple"),
             ll128 = list.hasIgnoringCase("LL128");
  ProtoMask m;
  m.ll = exclude ? !ll : ll;
  m.simple = exclude ? !simple : simple;
  m.ll128 = exclude ? !ll128 : ll128;
  if (!m.ll && !m.simple && !m.ll128) {
    WARN("NCCL_PROTO=%s leaves no protocol (LL, LL128, Simple): using all", value);
    m = ProtoMask{};
  }
  return m;
}

uint32_t p2pSliceBytes(const ncclComm* comm) {
  return (uint32_t)(comm->transports.layout().simpleBytes / dev::kSteps);
}

}  // namespace uniccl
