// Words the GPU writes into host-visible memory behind the compiler's back
// (progress counters, done flags): read with a relaxed atomic load so the
// compiler reads memory every time and never tears the word.
#pragma once

#include <cstdint>

namespace uniccl {

inline uint64_t readGpuWord(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

}  // namespace uniccl
