// What the collective kernels carry code for, shared by the kernels (which
// instantiate nothing else) and the planner (which plans nothing else).
#pragma once

#include "device/dev_types.h"

namespace uniccl::dev {

// Datatypes 0..5 (ncclInt8 .. ncclUint64) are integers: ncclAvg over them
// is a sum then a division (kOpSumPostDiv); over the others a PreMulSum.
constexpr bool isIntegerDataType(int dtype) { return dtype >= 0 && dtype <= 5; }

// Which ring/tree collective items the collective kernels carry code for
// (one kernel per datatype and protocol: device/kernel_coll.in). The host
// plans only items for which this holds (core/planner.cc checks every one),
// and the kernels instantiate nothing else, so no compile time goes to
// combinations the host can never choose:
//  - the 2-rank exchange AllReduce runs on LL, and on Simple where the
//    ring crosses the network (tuning.cc: the network carries Simple only);
//  - kOpSumPostDiv is ncclAvg over integers only (core/redop.cc);
//  - the tree is AllReduce's alone.
// The collectives that reduce (and so run a reduction op).
constexpr bool collReduces(int coll) {
  return coll == kCollAllReduce || coll == kCollReduce || coll == kCollReduceScatter;
}

constexpr bool collKernelRuns(int coll, int algo, int proto, int op, int dtype, bool exchange) {
  if (coll == kCollP2p || algo == kAlgoSymmetric || proto < 0 || proto >= kNumProtos) return false;
  if (coll != kCollAllReduce && (algo != kAlgoRing || exchange)) return false;
  if (exchange && ((proto != kProtoLL && proto != kProtoSimple) || algo != kAlgoRing)) return false;
  const bool reducing = collReduces(coll);
  if (reducing && op == kOpSumPostDiv && !isIntegerDataType(dtype)) return false;
  return !reducing || (op >= kOpSum && op <= kOpSumPostDiv);
}

// The reduction ops (RedOp) this compile of the collective kernels carries
// code for: a bit mask, every op unless the build says otherwise
// (-Dkernel_ops, for fast compile checks; the emulator's kernels have every
// op). Device code only: the host asks the kernels it linked
// (kernels.h, collectiveKernelOps), since one host library serves the GPU
// kernels and the emulator's.
#ifndef UNICCL_KERNEL_OPS
#define UNICCL_KERNEL_OPS ((1u << kNumRedOps) - 1)
#endif
constexpr bool kernelOpBuilt(int op) { return op >= 0 && op < kNumRedOps && ((UNICCL_KERNEL_OPS >> op) & 1u) != 0; }

}  // namespace uniccl::dev
