// What the bootstrap tests make and read back of a unique id (one
// definition for every test file of the bootstrap test program).
#pragma once

#include <gtest/gtest.h>

#include "common/bootstrap/unique_id.h"
#include "nccl.h"

namespace uniccl::bootstrap_test {

inline ncclUniqueId newId() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  return id;
}

inline UniqueIdContents contentsOf(const ncclUniqueId& id) {
  UniqueIdContents c;
  EXPECT_EQ(decodeUniqueId(id, &c), ncclSuccess);
  return c;
}

}  // namespace uniccl::bootstrap_test
