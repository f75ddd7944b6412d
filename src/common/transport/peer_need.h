// What a rank asks of a connection to one peer: which directions it needs.
#pragma once

#include <cstdint>
#include <vector>

namespace uniccl {

// The directions of a connection a rank needs with one peer. Both ends of a
// pair ask for matching directions (a rank that sends to a peer is met by
// the peer receiving from it: ring neighbours, tree and PAT peers both ways,
// a message's sender and receiver), possibly in different groups.
enum ConnDir : uint8_t { kDirSend = 1, kDirRecv = 2, kDirBoth = 3 };
struct PeerNeed {
  int peer;
  uint8_t dirs;   // ConnDir bits
};
// Adds dirs to peer's entry of needs (or a new entry).
void addPeerNeed(std::vector<PeerNeed>* needs, int peer, uint8_t dirs);

}  // namespace uniccl
