// The fake fabric across processes (fake_verbs.h, "Across processes"): what
// travels between them and what each side does with it.
#include <cstdio>
#include <cstring>

#include "fake_verbs_model.h"

namespace uniccl {
namespace ib {
namespace fake {

namespace {

constexpr uint32_t kMagic = 0x46616b65;  // "Fake"

enum class Kind : uint8_t { kOperation = 1, kAnswer = 2 };

// Every message starts with this; a write's or send's bytes (operation) or a
// read's bytes (answer) follow.
struct Header {
  uint32_t magic = kMagic;
  Kind kind = Kind::kOperation;
  WrOpcode opcode = WrOpcode::kRdmaWrite;
  uint8_t signaled = 0;
  uint8_t reserved = 0;
  uint32_t srcQpn = 0;  // the QP that posted the operation
  uint32_t dstQpn = 0;  // operation: its target; answer: the QP that posted it
  uint64_t opId = 0;    // the poster's number for it, echoed by the answer
  uint64_t remoteAddr = 0;
  uint32_t rkey = 0;
  uint32_t immData = 0;
  uint32_t length = 0;
  uint32_t srcPsn = 0;
  int32_t status = 0;      // answer: the poster's completion status
  char srcAddress[48] = {};  // operation: the poster's fabric address
};

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; i++) {
    snprintf(b, sizeof(b), "%02x", p[i]);
    s += b;
  }
  return s;
}

}  // namespace

std::string fabricAddress(const Gid& gid) { return "gid-" + hex(gid.raw, sizeof(gid.raw)); }
std::string fabricAddress(uint16_t lid) { return "lid-" + std::to_string(lid); }

bool FakeVerbs::joinFabric(const std::string& jobToken, std::string* error) {
  std::lock_guard<std::mutex> lock(s_->mutex);
  if (s_->wire || !s_->qps.empty()) {
    *error = "joinFabric: once, before the first QP";
    return false;
  }
  auto wire = std::make_unique<FabricWire>(jobToken);
  for (const FakeDevice& d : s_->devices) {
    for (const FakePort& p : d.ports) {
      std::vector<std::string> addresses;
      if (p.linkLayer == LinkLayer::kEthernet)
        for (const auto& g : p.gids) addresses.push_back(fabricAddress(g.first));
      else
        addresses.push_back(fabricAddress(p.lid));
      for (const std::string& a : addresses)
        if (s_->ownAddresses.insert(a).second && !wire->listen(a, error)) return false;
    }
  }
  s_->wire = std::move(wire);
  return true;
}

void FakeVerbs::State::connectRemote(FQp* qp, const std::string& remote, const std::string& self) {
  qp->remote = remote;
  qp->self = self;
  std::string error;
  qp->conn = wire->connect(remote, &error);
  if (qp->conn >= 0) return;
  if (!error.empty()) violate("QP " + std::to_string(qp->qpn) + ": " + error);
  peerGone(qp);  // nobody serves that address: every send will run out of retries
}

void FakeVerbs::State::peerGone(FQp* qp) {
  if (qp->peerGone) return;
  qp->peerGone = true;
  qp->conn = -1;
  qp->goneAt = std::chrono::steady_clock::now();
}

void FakeVerbs::State::expireRetries() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& kv : qps) {
    FQp* q = kv.second;
    // timeout 0 is "wait forever" in verbs; RTS not reached: nothing was sent yet.
    if (!q->peerGone || q->retriesOut || q->timeout == 0) continue;
    // 4.096 us x 2^timeout per attempt, 1 + retryCnt attempts.
    const double sec = 4.096e-6 * (double)(1ull << q->timeout) * (1 + q->retryCnt);
    if (now - q->goneAt < std::chrono::duration<double>(sec)) continue;
    q->retriesOut = true;
    q->state = QpState::kErr;
    for (const AwaitedWr& w : q->awaiting) {
      Wc wc;
      wc.wrId = w.wr.wrId;
      wc.status = kWcRetryExcErr;
      wc.opcode = senderOpcode(w.wr.opcode);
      wc.byteLen = w.wr.length;
      wc.vendorErr = 0x81;
      complete(q->scq, wc);
      q->outstanding--;
    }
    q->awaiting.clear();
  }
}

void FakeVerbs::State::postRemote(FQp* qp, const SendWr& wr) {
  Header h;
  h.kind = Kind::kOperation;
  h.opcode = wr.opcode;
  h.signaled = wr.signaled ? 1 : 0;
  h.srcQpn = qp->qpn;
  h.dstQpn = qp->destQpn;
  h.opId = qp->nextOpId++;
  h.remoteAddr = wr.remoteAddr;
  h.rkey = wr.rkey;
  h.immData = wr.immData;
  h.length = wr.length;
  h.srcPsn = qp->sqPsn;
  snprintf(h.srcAddress, sizeof(h.srcAddress), "%s", qp->self.c_str());
  // The bytes are taken now: the caller may not touch them before the completion anyway.
  const bool carries = wr.opcode != WrOpcode::kRdmaRead && wr.length > 0;
  qp->outstanding++;
  qp->awaiting.push_back({h.opId, wr});
  wire->send(qp->conn, &h, sizeof(h), carries ? (const void*)(uintptr_t)wr.localAddr : nullptr,
             carries ? wr.length : 0);
}

void FakeVerbs::State::answer(const Inbound& in, int status, const std::vector<char>& readData) {
  Header h;
  h.kind = Kind::kAnswer;
  h.opcode = in.wr.opcode;
  h.srcQpn = in.srcQpn;
  h.dstQpn = in.srcQpn;
  h.opId = in.opId;
  h.status = status;
  wire->send(in.conn, &h, sizeof(h), readData.data(), readData.size());
}

void FakeVerbs::State::forgetRemote(FQp* qp) {
  if (!wire) return;
  for (const Inbound& in : qp->inbound)
    if (in.src == nullptr) answer(in, kWcRetryExcErr, {});  // nobody will take them: as a missing QP
  if (qps.empty()) wire->closeConnections();
}

namespace {

void onOperation(FakeVerbs::State& s, int conn, const Header& h, const char* body, size_t bodyBytes) {
  Inbound in;
  in.wr.opcode = h.opcode;
  in.wr.remoteAddr = h.remoteAddr;
  in.wr.rkey = h.rkey;
  in.wr.immData = h.immData;
  in.wr.length = h.length;
  in.wr.signaled = h.signaled != 0;
  in.srcQpn = h.srcQpn;
  in.srcPsn = h.srcPsn;
  in.srcAddress.assign(h.srcAddress, strnlen(h.srcAddress, sizeof(h.srcAddress)));
  in.conn = conn;
  in.opId = h.opId;
  auto it = s.qps.find(h.dstQpn);
  if (it == s.qps.end()) {  // destroyed (or never was): a real HCA drops it, the sender's retries run out
    s.answer(in, kWcRetryExcErr, {});
    return;
  }
  const bool carries = h.opcode != WrOpcode::kRdmaRead && h.length > 0;
  if (bodyBytes != (carries ? h.length : 0)) {
    s.violate("fake fabric: an operation of " + std::to_string(h.length) + " bytes came with " +
              std::to_string(bodyBytes));
    s.answer(in, kWcRetryExcErr, {});
    return;
  }
  in.payload.assign(body, body + bodyBytes);
  it->second->inbound.push_back(std::move(in));  // lands when this process polls one of its CQs
}

void onAnswer(FakeVerbs::State& s, const Header& h, const char* body, size_t bodyBytes) {
  auto it = s.qps.find(h.dstQpn);
  if (it == s.qps.end()) return;  // destroyed: its completions went with it
  FQp* q = it->second;
  if (q->awaiting.empty()) return;  // flushed when the QP entered the error state
  if (q->awaiting.front().opId != h.opId) {
    s.violate("QP " + std::to_string(q->qpn) + ": answer to operation " + std::to_string(h.opId) +
              " while operation " + std::to_string(q->awaiting.front().opId) + " is the oldest in flight");
    return;
  }
  AwaitedWr w = q->awaiting.front();
  q->awaiting.pop_front();
  q->outstanding--;
  int status = h.status;
  if (status == kWcSuccess && w.wr.opcode == WrOpcode::kRdmaRead) {
    if (bodyBytes != w.wr.length) {
      s.violate("QP " + std::to_string(q->qpn) + ": a read answered with " + std::to_string(bodyBytes) +
                " bytes for " + std::to_string(w.wr.length));
      status = kWcRetryExcErr;
    } else if (bodyBytes > 0) {
      memcpy((void*)(uintptr_t)w.wr.localAddr, body, bodyBytes);
    }
  }
  s.finish(q, w.wr, status);
}

// The peer process behind `conn` is gone: what it had not answered, and
// every later send, runs out of retries.
void onClosed(FakeVerbs::State& s, int conn) {
  for (auto& kv : s.qps)
    if (kv.second->conn == conn) s.peerGone(kv.second);
}

}  // namespace

void FakeVerbs::State::pump() {
  if (!wire) return;
  std::vector<FabricWire::Message> received;
  std::vector<int> closed;
  wire->pump(&received, &closed);
  for (const FabricWire::Message& m : received) {
    Header h;
    if (m.bytes.size() < sizeof(h)) {
      violate("fake fabric: a message of " + std::to_string(m.bytes.size()) + " bytes, shorter than a header");
      continue;
    }
    memcpy(&h, m.bytes.data(), sizeof(h));
    const char* body = m.bytes.data() + sizeof(h);
    const size_t bodyBytes = m.bytes.size() - sizeof(h);
    if (h.magic != kMagic) {
      violate("fake fabric: a message without the fabric's magic");
    } else if (h.kind == Kind::kOperation) {
      onOperation(*this, m.conn, h, body, bodyBytes);
    } else if (h.kind == Kind::kAnswer) {
      onAnswer(*this, h, body, bodyBytes);
    } else {
      violate("fake fabric: a message of unknown kind " + std::to_string((int)h.kind));
    }
  }
  for (int conn : closed) onClosed(*this, conn);
  expireRetries();
  // No QP left here: nobody may send to us, so answer what came and hang up.
  if (qps.empty() && wire->connections() > 0) wire->closeConnections();
}

}  // namespace fake
}  // namespace ib
}  // namespace uniccl
