// What a ncclUniqueId holds for uniccl: the root's address and the magic that
// every bootstrap message of this communicator carries.
#pragma once

#include <cstdint>

#include "common/util/socket_address.h"
#include "uniccl.h"

namespace uniccl {

constexpr uint8_t kUniqueIdVersion = 1;
// The id was derived from NCCL_COMM_ID: every rank can rebuild it, and rank 0
// of an init starts the root if nobody listens yet.
constexpr uint8_t kUniqueIdFromEnv = 1;

struct UniqueIdContents {
  uint8_t version;
  uint8_t flags;
  uint8_t reserved[6];
  uint64_t magic;
  SocketAddress root;
};
static_assert(sizeof(UniqueIdContents) <= sizeof(ncclUniqueId), "must fit in ncclUniqueId");

// Writes `c` at the start of `id`, the rest zero.
void encodeUniqueId(const UniqueIdContents& c, ncclUniqueId* id);
// Fails (ncclInvalidArgument, WARN) for bytes that ncclGetUniqueId did not make.
ncclResult_t decodeUniqueId(const ncclUniqueId& id, UniqueIdContents* out);

// Builds the id from NCCL_COMM_ID ("host:port", "[v6]:port"); *found = false
// (and ncclSuccess) when the variable is unset.
ncclResult_t bootstrapIdFromEnv(ncclUniqueId* id, bool* found);

}  // namespace uniccl
