// What a ncclUniqueId holds for uniccl: the root's address, the
// communicator's secret (every bootstrap, NET and import-service connection
// proves it by challenge-response, auth.h) and the magic that every
// bootstrap message carries, derived from the secret so that it reveals
// nothing of it.
#pragma once

#include <cstdint>

#include "common/util/auth.h"
#include "common/util/socket_address.h"
#include "uniccl.h"

namespace uniccl {

constexpr uint8_t kUniqueIdVersion = 2;
// The id was derived from NCCL_COMM_ID: every rank can rebuild it, and rank 0
// of an init starts the root if nobody listens yet.
constexpr uint8_t kUniqueIdFromEnv = 1;
// NCCL_COMM_ID without UNICCL_COMM_SECRET: the secret is derived from the
// address text, which anyone can compute (NCCL's behaviour: no protection).
constexpr uint8_t kUniqueIdPublicSecret = 2;

struct UniqueIdContents {
  uint8_t version;
  uint8_t flags;
  uint8_t reserved[6];
  uint64_t magic;  // wireMagic(secret)
  SocketAddress root;
  AuthSecret secret;
};
static_assert(sizeof(UniqueIdContents) <= sizeof(ncclUniqueId), "must fit in ncclUniqueId");

// The bootstrap wire magic of a communicator with this secret (never 0).
uint64_t wireMagic(const AuthSecret& secret);

// A new id with a random secret, its root started on the first bootstrap
// interface (ncclGetUniqueId, and the ids of split children).
[[nodiscard]] ncclResult_t newRandomUniqueId(ncclUniqueId* out);

// Writes `c` at the start of `id`, the rest zero.
void encodeUniqueId(const UniqueIdContents& c, ncclUniqueId* id);
// Fails (ncclInvalidArgument, WARN) for bytes that ncclGetUniqueId did not make.
[[nodiscard]] ncclResult_t decodeUniqueId(const ncclUniqueId& id, UniqueIdContents* out);

// Builds the id from NCCL_COMM_ID ("host:port", "[v6]:port"); *found = false
// (and ncclSuccess) when the variable is unset.
[[nodiscard]] ncclResult_t bootstrapIdFromEnv(ncclUniqueId* id, bool* found);

}  // namespace uniccl
