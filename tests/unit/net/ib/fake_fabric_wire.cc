#include "fake_fabric_wire.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace uniccl {
namespace ib {
namespace fake {

namespace {

constexpr uint32_t kMaxMessageBytes = 1u << 30;  // more is a corrupt stream, not a message
constexpr int kBacklog = 128;

// An abstract-namespace address: no file, gone with the last process holding it.
socklen_t abstractAddress(const std::string& token, const std::string& address, sockaddr_un* sa) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  std::string name = "uniccl-fake-fabric-" + token + "-" + address;
  if (name.size() > sizeof(sa->sun_path) - 1) name.resize(sizeof(sa->sun_path) - 1);
  memcpy(sa->sun_path + 1, name.data(), name.size());
  return (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

int newSocket() { return socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0); }

}  // namespace

FabricWire::FabricWire(const std::string& jobToken) : token_(jobToken) {}

FabricWire::~FabricWire() {
  closeConnections();
  for (int fd : listeners_) close(fd);
}

bool FabricWire::listen(const std::string& address, std::string* error) {
  int fd = newSocket();
  if (fd < 0) {
    *error = std::string("socket: ") + strerror(errno);
    return false;
  }
  sockaddr_un sa;
  socklen_t len = abstractAddress(token_, address, &sa);
  if (bind(fd, (sockaddr*)&sa, len) != 0 || ::listen(fd, kBacklog) != 0) {
    *error = "listening as fabric address " + address + ": " + strerror(errno);
    close(fd);
    return false;
  }
  listeners_.push_back(fd);
  return true;
}

int FabricWire::connect(const std::string& address, std::string* error) {
  error->clear();
  auto known = outbound_.find(address);
  if (known != outbound_.end() && !conns_[known->second].broken) return known->second;
  int fd = newSocket();
  if (fd < 0) {
    *error = std::string("socket: ") + strerror(errno);
    return -1;
  }
  sockaddr_un sa;
  socklen_t len = abstractAddress(token_, address, &sa);
  // A Unix stream connect completes at once (or fails at once) when the
  // listener's backlog has room: there is no in-progress state to wait on.
  if (::connect(fd, (sockaddr*)&sa, len) != 0) {
    int err = errno;
    close(fd);
    if (err != ECONNREFUSED && err != ENOENT)
      *error = "connecting to fabric address " + address + ": " + strerror(err);
    return -1;
  }
  int id = nextId_++;
  conns_[id].fd = fd;
  outbound_[address] = id;
  return id;
}

void FabricWire::send(int conn, const void* head, size_t headBytes, const void* body, size_t bodyBytes) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || it->second.broken) return;
  Conn& c = it->second;
  uint32_t total = (uint32_t)(headBytes + bodyBytes);
  c.out.append(reinterpret_cast<const char*>(&total), sizeof(total));
  c.out.append(static_cast<const char*>(head), headBytes);
  if (bodyBytes > 0) c.out.append(static_cast<const char*>(body), bodyBytes);
  flush(c);
}

void FabricWire::flush(Conn& c) {
  size_t done = 0;
  while (done < c.out.size() && !c.broken) {
    ssize_t n = ::send(c.fd, c.out.data() + done, c.out.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;  // the peer has not read yet: the rest goes in a later pump
    } else {
      c.broken = true;  // EPIPE, ECONNRESET: the peer process is gone
    }
  }
  c.out.erase(0, done);
}

void FabricWire::readAll(int id, Conn& c, std::vector<Message>* received) {
  char buf[64 * 1024];
  while (!c.broken) {
    ssize_t n = recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      c.in.insert(c.in.end(), buf, buf + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    c.broken = true;  // end of file or reset: the peer process is gone (or closed every connection)
  }
  size_t at = 0;
  while (c.in.size() - at >= sizeof(uint32_t)) {
    uint32_t total;
    memcpy(&total, c.in.data() + at, sizeof(total));
    if (total > kMaxMessageBytes) {
      c.broken = true;
      break;
    }
    if (c.in.size() - at - sizeof(total) < total) break;
    Message m;
    m.conn = id;
    const char* p = c.in.data() + at + sizeof(total);
    m.bytes.assign(p, p + total);
    received->push_back(std::move(m));
    at += sizeof(total) + total;
  }
  c.in.erase(c.in.begin(), c.in.begin() + (ptrdiff_t)at);
}

void FabricWire::pump(std::vector<Message>* received, std::vector<int>* closed) {
  for (int lfd : listeners_) {
    for (;;) {
      int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;  // EAGAIN: nobody else waiting (or out of fds: they wait in the backlog)
      conns_[nextId_++].fd = fd;
    }
  }
  std::vector<int> gone;
  for (auto& kv : conns_) {
    flush(kv.second);
    readAll(kv.first, kv.second, received);
    if (kv.second.broken) gone.push_back(kv.first);
  }
  for (int id : gone) {
    drop(id);
    closed->push_back(id);
  }
}

void FabricWire::drop(int id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  close(it->second.fd);
  conns_.erase(it);
  for (auto o = outbound_.begin(); o != outbound_.end();) o = o->second == id ? outbound_.erase(o) : std::next(o);
}

void FabricWire::closeConnections() {
  for (auto& kv : conns_) {
    flush(kv.second);  // answers already queued go out if the socket takes them
    close(kv.second.fd);
  }
  conns_.clear();
  outbound_.clear();
}

}  // namespace fake
}  // namespace ib
}  // namespace uniccl
