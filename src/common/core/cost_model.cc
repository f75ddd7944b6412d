#include "common/core/cost_model.h"

#include <algorithm>

#include "common/core/comm.h"
#include "common/core/comm_transport.h"
#include "common/core/planner.h"
#include "common/core/redop.h"
#include "common/core/tuning.h"
#include "common/topo/cost.h"

namespace uniccl {

namespace {

// One transport's figures (docs/performance-history.md): latency per hop for each
// protocol, the bandwidth one channel reaches with Simple and the ceiling
// of the link. LL carries 4 data bytes per 8-byte line: half the bandwidth;
// LL128 120 of 128 (15/16), with LL's per-hop latency (flags, no counter
// handshake). Not yet measured for LL128 on a GPU.
struct LinkModel {
  double hopUsLL;
  double hopUsSimple;
  double channelGBs;
  double linkGBs;
};

// NVLink between two H200s: 8 B AllReduce in 4-5 us with two LL hops plus
// the launch; 64 channels reach 352 GB/s, 128 the 370 GB/s store ceiling.
constexpr LinkModel kP2p{0.7, 1.5, 5.5, 370.0};
// Through host memory: AllReduce 1 GiB at 20 GB/s busbw on 2 channels.
constexpr LinkModel kShm{1.5, 3.0, 10.0, 20.0};
// Sockets (loopback; a real NIC differs): 8 B AllReduce 43-54 us, 1 GiB 6 GB/s busbw.
constexpr LinkModel kNet{20.0, 20.0, 3.0, 6.0};
// A launch (eager enqueue and kernel start; graph replays cost less).
constexpr double kLaunchUs = 5.0;
// Device-to-device copy of a one-rank communicator (H100: 256 MiB in 180 us).
constexpr double kCopyGBs = 1500.0;

const LinkModel& linkOf(TransportKind kind) {
  switch (kind) {
    case TransportKind::Net: return kNet;
    case TransportKind::Shm: return kShm;
    default: return kP2p;
  }
}

double transferUs(const LinkModel& link, uint8_t proto, int nChannels, double hops, double busBytes) {
  double gbs = std::min(link.linkGBs, link.channelGBs * std::max(nChannels, 1));
  if (proto == dev::kProtoLL) gbs *= 0.5;
  if (proto == dev::kProtoLL128) gbs *= (double)dev::kLL128DataWords / dev::kLL128LineWords;
  return hops * (proto == dev::kProtoSimple ? link.hopUsSimple : link.hopUsLL) + busBytes / (gbs * 1e3);
}

// The figures of a link class (topo/cost.h): LL's flags save Simple's
// counter handshake, about half its hop (NVLink: 0.7 against 1.5 us).
LinkModel modelOf(const topo::ClassCost& c, double links = 1) {
  return LinkModel{c.hopUs * 0.5, c.hopUs, c.channelGBs, c.gbs * links};
}

// P2P inside one host: the NVLink figures above on a switch, the link
// class's figures (topo/cost.h) on PCIe or a direct-link mesh.
LinkModel p2pModel(const topo::Shape& s) {
  if (s.intra == topo::LinkClass::Pcie) return modelOf(linkCosts().pcie);
  if (s.intra == topo::LinkClass::Direct) return modelOf(linkCosts().direct, s.meshLinks);
  return kP2p;
}

topo::Coll collOf(TaskKind kind) {
  switch (kind) {
    case TaskKind::AllGather: return topo::Coll::AllGather;
    case TaskKind::ReduceScatter: return topo::Coll::ReduceScatter;
    case TaskKind::Broadcast: return topo::Coll::Broadcast;
    case TaskKind::Reduce: return topo::Coll::Reduce;
    default: return topo::Coll::AllReduce;
  }
}

double copyUs(size_t bytes) { return (double)bytes / (kCopyGBs * 1e3); }

}  // namespace

// An AllGather or ReduceScatter as PAT rounds (core/allgather_pat.h,
// core/reducescatter_pat.h): the model's log-depth figure across hosts of
// one rank (the ring's elsewhere, where PAT runs only when forced), plus a
// kernel launch per round after the first.
static double patUs(const ncclComm* comm, TaskKind kind, size_t bytes) {
  const topo::Estimate e = topo::estimate(topo::shapeOf(comm->topology), linkCosts(), topo::Algo::Pat, collOf(kind),
                                          (double)bytes, std::max(comm->p2pChannels, 1));
  const double base = e.applies ? e.us() : estimateCollectiveUs(comm, kind, bytes);
  return base + (topo::ceilLog2(comm->nRanks) - 1) * kLaunchUs;
}

double estimateCollectiveUs(const ncclComm* comm, TaskKind kind, size_t bytes) {
  const int n = comm->nRanks;
  if (n == 1) return copyUs(bytes);
  const CollTuning t = tuneCollective(comm, kind, bytes);
  const topo::Shape shape = topo::shapeOf(comm->topology);
  // Across hosts: the topology's model (the network's hops and NICs, the
  // hosts' chains and tree levels).
  if (shape.nHosts > 1) {
    const topo::Algo algo = t.algo == dev::kAlgoTree ? topo::Algo::Tree : topo::Algo::Ring;
    return topo::estimate(shape, linkCosts(), algo, collOf(kind), (double)bytes, t.nChannels).us();
  }
  const TransportKind transport = comm->transports.ringUsesNet() ? TransportKind::Net
                                  : comm->allP2p                ? TransportKind::P2p
                                                                : TransportKind::Shm;
  double hops = n - 1, bus = (double)bytes;
  if (t.algo == dev::kAlgoTree) {
    hops = 2.0 * topo::ceilLog2(n);
  } else if (kind == TaskKind::AllReduce) {
    hops = t.exchange ? 1 : 2.0 * (n - 1);
    bus = t.exchange ? (double)bytes : 2.0 * (n - 1) / n * (double)bytes;
  } else if (kind == TaskKind::AllGather || kind == TaskKind::ReduceScatter) {
    bus = (double)(n - 1) / n * (double)bytes;
  }
  const LinkModel link = transport == TransportKind::P2p ? p2pModel(shape) : linkOf(transport);
  return transferUs(link, t.proto, t.nChannels, hops, bus);
}

double estimateP2pUs(const ncclComm* comm, int peer, size_t bytes) {
  if (peer == comm->rank) return copyUs(bytes);
  // Hand-built test communicators have no reach matrix: taken as P2P, Simple.
  if (!comm->transports.reachKnown()) return transferUs(kP2p, dev::kProtoSimple, comm->p2pChannels, 1, (double)bytes);
  const TransportKind transport = transportBetween(comm, comm->rank, peer);
  // Between hosts: one NIC's figures (topo/cost.h).
  const bool otherHost = comm->topology.nHosts() > 1 && peer >= 0 && peer < comm->topology.nRanks() &&
                         comm->topology.ranks[peer].host != comm->topology.ranks[comm->rank].host;
  const LinkModel link = transport == TransportKind::Net && otherHost ? modelOf(linkCosts().net)
                         : transport == TransportKind::P2p           ? p2pModel(topo::shapeOf(comm->topology))
                                                                     : linkOf(transport);
  return transferUs(link, p2pProto(comm, peer, bytes), comm->p2pChannels, 1, (double)bytes);
}

double estimateGroupUs(const std::vector<ncclComm*>& comms) {
  double slowest = 0;
  bool any = false;
  for (const ncclComm* comm : comms) {
    if (comm->tasks.empty()) continue;
    any = true;
    double colls = 0, p2p = 0;
    for (const Task& t : comm->tasks.colls) {
      // One rank in place costs nothing (core/one_rank.h).
      if (comm->nRanks == 1 && t.sendbuff == t.recvbuff) continue;
      colls += collUsesPat(comm, t) ? patUs(comm, t.kind, tuningBytes(comm, t))
                                    : estimateCollectiveUs(comm, t.kind, tuningBytes(comm, t));
    }
    for (const Task& t : comm->tasks.p2p) {
      if (t.kind == TaskKind::Send && t.peer() == comm->rank) continue;   // the matching recv copies it
      p2p = std::max(p2p, estimateP2pUs(comm, t.peer(), t.count * dataTypeSize(t.dtype)));
    }
    slowest = std::max(slowest, colls + p2p);
  }
  return any ? kLaunchUs + slowest : 0.0;
}

}  // namespace uniccl
