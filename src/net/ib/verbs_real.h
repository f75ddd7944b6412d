// The seam over libibverbs (verbs_real.cc, the only user of <infiniband/verbs.h>).
// libibverbs is loaded at run time (dlopen on first use), not linked, so that
// libuniccl.so and the drop-in load on machines without it, as NCCL does:
// there the IB net just reports zero devices and the Socket net is used.
#pragma once

#include <cerrno>
#include <memory>

#include "net/ib/verbs_seam.h"

namespace uniccl {
namespace ib {

// A process-wide instance (never destroyed) over "libibverbs.so.1", else
// "libibverbs.so".
Verbs* realVerbs();

// Tests only: a separate instance that loads `library` (a dlopen name or path)
// instead, so the missing-library and missing-symbol paths can be exercised.
std::unique_ptr<Verbs> newRealVerbsForTesting(const char* library);

// getDeviceList's result when libibverbs or one of its required entry points
// could not be loaded (the reason is logged once at INFO, NET subsystem).
constexpr int kVerbsUnavailable = ELIBACC;  // "Can not access a needed shared library"

}  // namespace ib
}  // namespace uniccl
