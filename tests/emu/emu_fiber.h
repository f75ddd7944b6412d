// User-level threads for the CPU emulator's kernel runner: the emulated
// threads of one block run as fibers on one OS thread and switch only where
// a GPU thread would wait (barriers, polls). On a machine with few cores a
// block's 64 emulated threads as 64 OS threads spent most of their time in
// the kernel (futex wake-ups, scheduler); as fibers a switch is a few
// register moves (x86-64) or swapcontext elsewhere.
//
// Stacks are mmap'd with a guard page below, kept in a process-wide pool
// across launches. Switches are annotated for AddressSanitizer and
// ThreadSanitizer, so sanitizer builds see each fiber's stack as a stack.
#pragma once

#include <cstddef>

namespace uniccl::emu {

class Fiber {
 public:
  // A fiber that will run entry(arg) on its own stack when first switched to.
  // entry must not return: it ends with finishTo().
  Fiber(void (*entry)(void*), void* arg);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // The calling OS thread's own context, to switch back to.
  static Fiber* forThisThread();

  // Saves the running context into `from` and runs `to`.
  static void switchTo(Fiber* from, Fiber* to);
  // Leaves a finished fiber for good (its stack may be reused at once).
  [[noreturn]] static void finishTo(Fiber* from, Fiber* to);

  struct Impl;

 private:
  Fiber() = default;
  Impl* impl_ = nullptr;
};

}  // namespace uniccl::emu
