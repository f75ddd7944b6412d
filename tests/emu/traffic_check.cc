// What "the algorithm's minimum" means, per channel c of an AllReduce of N
// bytes on n ranks over H hosts (docs/topology.md, traffic accounting):
//
// Ring. Each rank sends 2(n-1) chunks to its ring successor: its bytes on c
// are 2(n-1)/n of the channel's share N_c, exactly when N_c splits into n
// whole 16-byte chunks (the counts below are multiples of n x 16 bytes x
// every channel count up to 4). A ring enters and leaves each host once,
// so H of its n edges cross hosts: the network carries H x 2(n-1)/n x N,
// and a rank's network bytes are its share on the channels whose ring
// leaves its host through it, on that channel's NIC.
//
// Tree. Every byte goes once up and once down every tree edge: each edge
// carries N_c each way, only tree edges carry anything, and the network
// carries 2 x (H-1) x N (the host tree's H-1 edges, once per level).
#include "traffic_check.h"

#include <cstdio>
#include <map>
#include <set>

#include "common/core/comm.h"
#include "common/core/comm_transport.h"
#include "common/gpu.h"
#include "common/topo/nics.h"
#include "common/topo/rings.h"
#include "common/transport/traffic.h"

namespace uniccl::emu {
namespace {

int gChecks = 0, gFailures = 0;

void expectEq(const std::string& what, unsigned long long got, unsigned long long want) {
  gChecks++;
  if (got != want) {
    gFailures++;
    fprintf(stderr, "FAIL traffic %s: %llu bytes, expected %llu\n", what.c_str(), got, want);
  }
}

void readAll(const std::vector<TrafficRank>& ranks, std::vector<Traffic>* out) {
  out->resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); r++) {
    if (readTraffic(ranks[r].comm, &(*out)[r]) != ncclSuccess) {
      gChecks++;
      gFailures++;
      fprintf(stderr, "FAIL traffic: rank %zu's counters could not be read\n", r);
    }
  }
}

bool runAllReduce(const std::vector<TrafficRank>& ranks, size_t count) {
  bool ok = ncclGroupStart() == ncclSuccess;
  for (const TrafficRank& R : ranks)
    ok = ok && ncclAllReduce(R.send, R.recv, count, ncclFloat, ncclSum, R.comm, R.stream) == ncclSuccess;
  ok = ncclGroupEnd() == ncclSuccess && ok;
  for (const TrafficRank& R : ranks) {
    ok = ok && gpu::setDevice(R.dev) == ncclSuccess;
    ok = ok && gpu::streamSynchronize(static_cast<gpu::Stream>(R.stream)) == ncclSuccess;
  }
  return ok;
}

// The peers rank r's channel c may send to, and how many of them are on another host.
std::set<int> algoPeers(const ncclComm* comm, int c, const std::string& algo) {
  const dev::Channel& ch = comm->channelsHost[c];
  if (algo == "ring") return {ch.ringNext};
  std::set<int> s;
  for (int p : {ch.treeUp, ch.treeDown[0], ch.treeDown[1]})
    if (p >= 0) s.insert(p);
  return s;
}

void checkOne(const std::vector<TrafficRank>& ranks, const std::string& algo, size_t count) {
  const int n = (int)ranks.size();
  const topo::System& sys = ranks[0].comm->topology;
  const int H = sys.nHosts();
  const int nch = ranks[0].comm->nChannels;
  const unsigned long long N = (unsigned long long)count * sizeof(float);
  const std::string tag = algo + "/" + std::to_string(N) + "B";
  std::vector<Traffic> before, after;
  readAll(ranks, &before);
  if (!runAllReduce(ranks, count)) {
    gChecks++;
    gFailures++;
    fprintf(stderr, "FAIL traffic %s: the AllReduce failed\n", tag.c_str());
    return;
  }
  readAll(ranks, &after);
  std::vector<Traffic> d(n);
  for (int r = 0; r < n; r++) d[r] = after[r].since(before[r]);

  // Each channel's share as its bytes show it: the ring's per-rank bytes
  // (equal on every rank), the tree's bytes on each edge (equal everywhere).
  std::vector<unsigned long long> share(nch, 0);
  unsigned long long total = 0, net = 0, intra = 0;
  for (int r = 0; r < n; r++) {
    total += d[r].net + d[r].intraHost();
    net += d[r].net;
    intra += d[r].intraHost();
  }
  expectEq(tag + " all ranks' bytes (2(n-1) x N)", total, 2ull * (n - 1) * N);
  for (int c = 0; c < nch; c++) {
    const std::set<int> peers0 = algoPeers(ranks[0].comm, c, algo);   // rank 0's share stands for all
    share[c] = peers0.empty() ? 0 : d[0].bytes[c][*peers0.begin()];
  }
  unsigned long long shares = 0;
  for (int c = 0; c < nch; c++) shares += share[c];
  // Ring: the shares are 2(n-1)/n of the channels' parts of N.
  if (algo == "ring") expectEq(tag + " ring shares x n / 2(n-1) (N)", shares * n / (2ull * (n - 1)), N);
  else expectEq(tag + " tree edge bytes over channels (N)", shares, N);

  const topo::System& S = sys;
  const std::vector<std::vector<int>> rings = topo::buildRings(S, nch);
  const std::vector<std::vector<int>> nicOf = topo::assignNics(S, rings);
  unsigned long long boundaryNet = 0;
  for (int r = 0; r < n; r++) {
    const ncclComm* comm = ranks[r].comm;
    const int h = S.ranks[r].host;
    unsigned long long wantNet = 0, wantIntra = 0;
    std::map<std::string, unsigned long long> wantNic;
    for (int c = 0; c < nch; c++) {
      const std::set<int> peers = algoPeers(comm, c, algo);
      for (int p = 0; p < n; p++) {
        const unsigned long long want = peers.count(p) ? share[c] : 0;
        if (d[r].bytes[c][p] != want)
          expectEq(tag + " rank " + std::to_string(r) + " channel " + std::to_string(c) + " to rank " + std::to_string(p),
                   d[r].bytes[c][p], want);
        if (want == 0) continue;
        if (S.ranks[p].host != h) {
          wantNet += want;
          const int k = nicOf[c][h];
          if (k >= 0) wantNic[S.hosts[h].nics[k].name] += want;
        } else {
          wantIntra += want;
        }
      }
    }
    expectEq(tag + " rank " + std::to_string(r) + " network", d[r].net, wantNet);
    expectEq(tag + " rank " + std::to_string(r) + " intra-host", d[r].intraHost(), wantIntra);
    boundaryNet += wantNet;
    for (const auto& [name, b] : d[r].nic)
      if (b != 0 || wantNic.count(name)) expectEq(tag + " rank " + std::to_string(r) + " NIC " + name, b, wantNic[name]);
    for (const auto& [name, b] : wantNic)
      if (!d[r].nic.count(name)) expectEq(tag + " rank " + std::to_string(r) + " NIC " + name, 0, b);
  }
  // The algorithm's minimum across hosts.
  if (algo == "ring") expectEq(tag + " network total (H rings' boundary edges x share)", net, (unsigned long long)H * shares);
  else expectEq(tag + " network total (2 (H-1) N)", net, 2ull * (H - 1) * N);
  expectEq(tag + " network total vs per-rank expectations", net, boundaryNet);
  printf("emu_coll_test: traffic %s AllReduce of %llu B on %d hosts x %d ranks, %d channels: network %llu B "
         "(%.3f x N), intra-host %llu B (%.3f x N)\n",
         algo.c_str(), N, H, n, nch, net, (double)net / (double)N, intra, (double)intra / (double)N);
  for (int r = 0; r < n; r++) {
    std::string nics;
    for (const auto& [name, b] : d[r].nic)
      if (b != 0) nics += " " + name + "=" + std::to_string(b);
    printf("  rank %d (host %s): network %llu B, P2P %llu B, SHM %llu B;%s\n", r, S.hosts[S.ranks[r].host].name.c_str(),
           (unsigned long long)d[r].net, (unsigned long long)d[r].p2p, (unsigned long long)d[r].shm,
           nics.empty() ? " no NIC" : nics.c_str());
  }
}

}  // namespace

void checkAllReduceTraffic(const std::vector<TrafficRank>& ranks, const std::string& algo, int* checks, int* failures) {
  gChecks = gFailures = 0;
  const size_t n = ranks.size();
  // Multiples of n ranks x 4 floats (16 bytes) x 12 (every channel count up
  // to 4 divides them): every ring chunk is whole, the ring's shares exact.
  for (size_t count : {n * 48, n * 48 * 64}) {
    if (count > ranks[0].capElems) continue;
    checkOne(ranks, algo, count);
  }
  *checks += gChecks;
  *failures += gFailures;
}

}  // namespace uniccl::emu
