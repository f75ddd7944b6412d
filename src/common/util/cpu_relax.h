// A spin-wait hint: lets the sibling hyperthread run and saves power while a
// thread polls a flag another thread will set soon.
#pragma once

namespace uniccl {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace uniccl
