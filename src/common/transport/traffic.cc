#include "common/transport/traffic.h"

#include <cstddef>

#include "common/check.h"
#include "common/transport/transport.h"

namespace uniccl {

Traffic Traffic::since(const Traffic& before) const {
  Traffic d = *this;
  d.p2p -= before.p2p;
  d.shm -= before.shm;
  d.net -= before.net;
  for (const auto& [name, b] : before.nic) d.nic[name] -= b;
  for (size_t c = 0; c < d.bytes.size() && c < before.bytes.size(); c++)
    for (size_t p = 0; p < d.bytes[c].size() && p < before.bytes[c].size(); p++) d.bytes[c][p] -= before.bytes[c][p];
  return d;
}

ncclResult_t Transports::readTraffic(const TransportComm& comm, Traffic* out) const {
  *out = Traffic{};
  const int nch = comm.nChannels;
  out->bytes.assign(nch, std::vector<uint64_t>(nRanks_, 0));
  for (int peer = 0; peer < (int)links_.size(); peer++) {
    const PeerLink& link = links_[peer];
    if (!link.connected) continue;
    for (int c = 0; c < nch; c++) {
      const dev::Peer* p = comm.channelsHost[c].peers + peer;   // device memory
      uint64_t b = 0;
      UCHECK(gpu::memcpy(&b, &p->send.bytesSent, sizeof(b)));
      out->bytes[c][peer] = b;
      switch (link.kind) {
        case TransportKind::P2p: out->p2p += b; break;
        case TransportKind::Shm: out->shm += b; break;
        case TransportKind::Net:
          out->net += b;
          if (link.net && c < link.net->nChannels()) out->nic[link.net->nicName(c)] += b;
          break;
        default: break;
      }
    }
  }
  return ncclSuccess;
}

}  // namespace uniccl
