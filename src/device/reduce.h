// Reductions: one traits struct per datatype (storage type + how to do math
// on it) and RedFn<Type, Op> applying op / pre-multiply / post-divide to
// single elements and to 8- and 16-byte packs of elements.
#pragma once

#include <cstdint>

#include "device/dev_types.h"
#include "device/port.h"
#include "device/small_float.h"

namespace uniccl::dev {

// Datatype tags: the kernel template parameter. Storage is what sits in
// memory; math happens in the native type (ints: unsigned, so sums wrap
// without UB) or in float for the narrow float formats.
// kDtype: the ncclDataType_t value (kernel_choices.h, collKernelRuns).
struct TI8 { using S = int8_t; using U = uint8_t; static constexpr int kDtype = 0; };
struct TU8 { using S = uint8_t; using U = uint8_t; static constexpr int kDtype = 1; };
struct TI32 { using S = int32_t; using U = uint32_t; static constexpr int kDtype = 2; };
struct TU32 { using S = uint32_t; using U = uint32_t; static constexpr int kDtype = 3; };
struct TI64 { using S = int64_t; using U = uint64_t; static constexpr int kDtype = 4; };
struct TU64 { using S = uint64_t; using U = uint64_t; static constexpr int kDtype = 5; };
struct TF32 { using S = float; static constexpr int kDtype = 7; };
struct TF64 { using S = double; static constexpr int kDtype = 8; };
struct TF16 { using S = uint16_t; static constexpr int kDtype = 6; };
struct TBF16 { using S = uint16_t; static constexpr int kDtype = 9; };
struct TE4M3 { using S = uint8_t; static constexpr int kDtype = 10; };
struct TE5M2 { using S = uint8_t; static constexpr int kDtype = 11; };

template <typename Tag> struct Math;  // add/mul/max/min/div on storage values

template <typename Tag> struct IntMath {
  using S = typename Tag::S;
  using U = typename Tag::U;
  static UDEV S add(S a, S b) { return (S)(U)((U)a + (U)b); }
  static UDEV S mul(S a, S b) { return (S)(U)((U)a * (U)b); }
  static UDEV S max(S a, S b) { return a > b ? a : b; }
  static UDEV S min(S a, S b) { return a < b ? a : b; }
  static UDEV S div(S a, S b) { return b == 0 ? a : (S)(a / b); }
  static constexpr bool kFromFloat = false;
};
template <> struct Math<TI8> : IntMath<TI8> {};
template <> struct Math<TU8> : IntMath<TU8> {};
template <> struct Math<TI32> : IntMath<TI32> {};
template <> struct Math<TU32> : IntMath<TU32> {};
template <> struct Math<TI64> : IntMath<TI64> {};
template <> struct Math<TU64> : IntMath<TU64> {};

template <typename S> struct NativeFloatMath {
  static UDEV S add(S a, S b) { return a + b; }
  static UDEV S mul(S a, S b) { return a * b; }
  // fmax/fmin semantics aside, NCCL uses plain comparisons too.
  static UDEV S max(S a, S b) { return a < b ? b : a; }
  static UDEV S min(S a, S b) { return b < a ? b : a; }
  static UDEV S div(S a, S b) { return a / b; }
  static constexpr bool kFromFloat = true;
  static UDEV S fromFloat(double f) { return (S)f; }
};
template <> struct Math<TF32> : NativeFloatMath<float> {};
template <> struct Math<TF64> : NativeFloatMath<double> {};

// Narrow floats: convert to float, operate, round back to nearest even.
template <typename S, float (*ToF)(S), S (*FromF)(float)> struct NarrowFloatMath {
  static UDEV S add(S a, S b) { return FromF(ToF(a) + ToF(b)); }
  static UDEV S mul(S a, S b) { return FromF(ToF(a) * ToF(b)); }
  static UDEV S max(S a, S b) { return ToF(a) < ToF(b) ? b : a; }
  static UDEV S min(S a, S b) { return ToF(b) < ToF(a) ? b : a; }
  static UDEV S div(S a, S b) { return FromF(ToF(a) / ToF(b)); }
  // A value made on the device (fp8 ncclAvg's 1/n), in float first as RCCL does.
  static constexpr bool kFromFloat = true;
  static UDEV S fromFloat(double f) { return FromF((float)f); }
};
template <> struct Math<TF16> : NarrowFloatMath<uint16_t, halfToFloat, floatToHalf> {};
template <> struct Math<TBF16> : NarrowFloatMath<uint16_t, bf16ToFloat, floatToBf16> {};
template <> struct Math<TE4M3> : NarrowFloatMath<uint8_t, e4m3ToFloat, floatToE4m3> {};
template <> struct Math<TE5M2> : NarrowFloatMath<uint8_t, e5m2ToFloat, floatToE5m2> {};

// Op is a RedOp value. Pre applies to a rank's own input as it enters the
// reduction (PreMulSum), Post to the final value (SumPostDiv).
template <typename Tag, int Op>
struct RedFn {
  using S = typename Tag::S;
  using T = Tag;
  using M = Math<Tag>;
  S scalar;

  UDEV S op(S a, S b) const {
    if constexpr (Op == kOpProd) return M::mul(a, b);
    else if constexpr (Op == kOpMax) return M::max(a, b);
    else if constexpr (Op == kOpMin) return M::min(a, b);
    else return M::add(a, b);
  }
  UDEV S pre(S a) const {
    if constexpr (Op == kOpPreMulSum) return M::mul(a, scalar);
    else return a;
  }
  UDEV S post(S a) const {
    if constexpr (Op == kOpSumPostDiv) return M::div(a, scalar);
    else return a;
  }
  static constexpr int kOp = Op;
  static constexpr bool kHasPre = Op == kOpPreMulSum;
  static constexpr bool kHasPost = Op == kOpSumPostDiv;
};

// Element-wise over a pack of bytes (Bytes = 8 or 16) holding Bytes/sizeof(S)
// elements. `Kind`: 0 = op(a, b), 1 = pre(a), 2 = post(a).
template <typename S, int Bytes>
union PackView {
  static constexpr int kN = Bytes / (int)sizeof(S);
  uint64_t u[Bytes / 8];
  S e[kN];
};

template <typename S>
UDEV PackView<S, 16> toView(const Pack16& p) {
  PackView<S, 16> v;
  v.u[0] = (uint64_t)p.x | ((uint64_t)p.y << 32);
  v.u[1] = (uint64_t)p.z | ((uint64_t)p.w << 32);
  return v;
}
template <typename S>
UDEV Pack16 toPack(const PackView<S, 16>& v) {
  return Pack16{(uint32_t)v.u[0], (uint32_t)(v.u[0] >> 32), (uint32_t)v.u[1], (uint32_t)(v.u[1] >> 32)};
}

template <typename Fn, int Bytes>
struct PackOps {
  using S = typename Fn::S;
  using V = PackView<S, Bytes>;
  static UDEV void op(const Fn& fn, V& a, const V& b) {
#pragma unroll
    for (int i = 0; i < V::kN; i++) a.e[i] = fn.op(a.e[i], b.e[i]);
  }
  static UDEV void pre(const Fn& fn, V& a) {
#pragma unroll
    for (int i = 0; i < V::kN; i++) a.e[i] = fn.pre(a.e[i]);
  }
  static UDEV void post(const Fn& fn, V& a) {
#pragma unroll
    for (int i = 0; i < V::kN; i++) a.e[i] = fn.post(a.e[i]);
  }
};

}  // namespace uniccl::dev
