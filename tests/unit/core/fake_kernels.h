// The fake kernels' knobs for tests (fake_kernels.cc stands in for the
// GPU kernels, which host unit tests do not link).
#pragma once

namespace uniccl::dev {

// What collectiveKernelOps() answers (bit op: dev::RedOp op); every op
// unless a test says otherwise, as a build with -Dkernel_ops=all.
extern unsigned fakeKernelOps;

}  // namespace uniccl::dev
