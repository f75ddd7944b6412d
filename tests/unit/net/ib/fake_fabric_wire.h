// The wire between the processes of a cross-process fake fabric: whole
// messages over Unix stream sockets in the abstract namespace, one listener
// per fabric address of this process (a GID or LID of its fake ports) named
// "uniccl-fake-fabric-<job token>-<address>", so that parallel jobs with
// different tokens never meet.
//
// Nothing here blocks: a message is queued and as much of it as the socket
// takes is written at once; pump() writes the rest, accepts newcomers, reads
// whole messages and reports connections whose peer process went away (end of
// file, reset, broken pipe), each once. Writes never raise SIGPIPE.
//
// Not thread-safe: the fake verbs call it under their own lock.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace uniccl {
namespace ib {
namespace fake {

class FabricWire {
 public:
  explicit FabricWire(const std::string& jobToken);
  ~FabricWire();  // closes every socket
  FabricWire(const FabricWire&) = delete;
  FabricWire& operator=(const FabricWire&) = delete;

  // Serves the peers that send to `address`. False (with *error) when the
  // name is taken (another process of the job claims the same address).
  bool listen(const std::string& address, std::string* error);

  // The open connection to the process serving `address`, or a new one;
  // -1 when no process serves it (it never did, or it is gone), or on
  // another failure (*error says which; empty for "nobody there").
  int connect(const std::string& address, std::string* error);

  // Queues one message on `conn` (a connection made or accepted here); a
  // connection that closed takes nothing.
  void send(int conn, const void* head, size_t headBytes, const void* body, size_t bodyBytes);

  struct Message {
    int conn = -1;  // the connection it came on: answers go back on it
    std::vector<char> bytes;
  };
  // Writes what is queued, accepts, reads every whole message waiting.
  void pump(std::vector<Message>* received, std::vector<int>* closed);

  // Closes every connection (the listeners stay): used when nothing in this
  // process can be the source or target of an operation any more.
  void closeConnections();

  int connections() const { return (int)conns_.size(); }

 private:
  struct Conn {
    int fd = -1;
    std::string out;  // queued bytes not yet written
    std::vector<char> in;  // bytes read, not yet a whole message
    bool broken = false;  // the peer is gone: reported by the next pump
  };
  void flush(Conn& c);
  void readAll(int id, Conn& c, std::vector<Message>* received);
  void drop(int id);

  std::string token_;
  std::vector<int> listeners_;
  std::map<int, Conn> conns_;
  std::map<std::string, int> outbound_;  // address -> connection made here
  int nextId_ = 1;
};

}  // namespace fake
}  // namespace ib
}  // namespace uniccl
