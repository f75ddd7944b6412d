#include "emu_fiber.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

// Sanitizer fiber annotations, where the build has a sanitizer.
#if defined(__SANITIZE_ADDRESS__)
#define UNICCL_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNICCL_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define UNICCL_EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNICCL_EMU_TSAN 1
#endif
#endif
#ifdef UNICCL_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef UNICCL_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#if defined(__x86_64__) && defined(__linux__)
// Saves the callee-saved registers, MXCSR and the x87 control word on the
// current stack, stores the stack pointer in *saveSp, loads loadSp and
// restores the same from there. A new fiber's stack is laid out as such a
// save whose return address is uniccl_emu_fiber_start (fiberStack below).
extern "C" void uniccl_emu_switch(void** saveSp, void* loadSp);
extern "C" void uniccl_emu_fiber_start();
asm(R"(
  .text
  .globl uniccl_emu_switch
  .type uniccl_emu_switch, @function
uniccl_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size uniccl_emu_switch, .-uniccl_emu_switch

  .globl uniccl_emu_fiber_start
  .type uniccl_emu_fiber_start, @function
uniccl_emu_fiber_start:
  movq %r13, %rdi
  andq $-16, %rsp
  callq *%r12
  ud2
  .size uniccl_emu_fiber_start, .-uniccl_emu_fiber_start
)");
#define UNICCL_EMU_FAST_SWITCH 1
#endif

namespace uniccl::emu {

namespace {

// Kernel code keeps little on its stack; 512 KiB is far more than any
// emulated thread uses, and only touched pages take memory.
constexpr size_t kStackBytes = 512 << 10;

// Stacks outlive launches: a launch of 8 blocks x 64 threads would otherwise
// map and unmap 512 stacks.
struct StackPool {
  std::mutex mutex;
  std::vector<void*> free;
};
StackPool& stackPool() {
  static StackPool* pool = new StackPool();   // never destroyed: fibers may end during exit
  return *pool;
}

size_t pageBytes() {
  static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return page;
}

// Returns the lowest address of a usable stack of kStackBytes (a guard page below it).
void* takeStack() {
  {
    StackPool& pool = stackPool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (!pool.free.empty()) {
      void* s = pool.free.back();
      pool.free.pop_back();
      return s;
    }
  }
  const size_t guard = pageBytes();
  void* m = mmap(nullptr, kStackBytes + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (m == MAP_FAILED) {
    perror("emu fiber: mmap of a stack");
    abort();
  }
  mprotect(m, guard, PROT_NONE);   // an overflow faults instead of corrupting a neighbour
  return static_cast<char*>(m) + guard;
}

void giveStack(void* s) {
  StackPool& pool = stackPool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.free.push_back(s);
}

#ifdef UNICCL_EMU_FAST_SWITCH
// The fast switch keeps no shadow stack: where the kernel enforces one
// (x86 CET user shadow stacks), fibers switch with swapcontext instead.
bool shadowStackActive() {
  constexpr int kArchShstkStatus = 0x5005;
  unsigned long features = 0;
  return syscall(SYS_arch_prctl, kArchShstkStatus, &features) == 0 && (features & 1) != 0;
}
bool useFastSwitch() {
  static const bool fast = !shadowStackActive();
  return fast;
}
#endif

}  // namespace

struct Fiber::Impl {
  void* stack = nullptr;   // lowest usable address; null for an OS thread's own context
  void* sp = nullptr;      // the fast switch's saved stack pointer
  ucontext_t uc;           // swapcontext's saved context
  void (*entry)(void*) = nullptr;
  void* arg = nullptr;
#ifdef UNICCL_EMU_ASAN
  void* fakeStack = nullptr;
  const void* stackBottom = nullptr;
  size_t stackSize = 0;
#endif
#ifdef UNICCL_EMU_TSAN
  void* tsanFiber = nullptr;
  bool ownsTsanFiber = false;
#endif
};

namespace {


// The annotations around a switch from `from` to `to`; `dying`: `from` never runs again.
void beforeSwitch(Fiber::Impl* from, Fiber::Impl* to, bool dying) {
#ifdef UNICCL_EMU_ASAN
  __sanitizer_start_switch_fiber(dying ? nullptr : &from->fakeStack, to->stackBottom, to->stackSize);
#endif
#ifdef UNICCL_EMU_TSAN
  __tsan_switch_to_fiber(to->tsanFiber, 0);
#endif
  (void)from;
  (void)to;
  (void)dying;
}

void afterSwitch(Fiber::Impl* self) {
#ifdef UNICCL_EMU_ASAN
  const void* oldBottom = nullptr;
  size_t oldSize = 0;
  __sanitizer_finish_switch_fiber(self->fakeStack, &oldBottom, &oldSize);
  if (self->stack == nullptr && self->stackBottom == nullptr) {   // an OS thread's context learns its stack
    self->stackBottom = oldBottom;
    self->stackSize = oldSize;
  }
#endif
  (void)self;
}

// Where a new fiber starts: it completes the switch that started it.
void fiberMain(void* p) {
  auto* impl = static_cast<Fiber::Impl*>(p);
  afterSwitch(impl);
  impl->entry(impl->arg);
  abort();   // entries end with Fiber::finishTo
}

void ucontextEntry(unsigned lo, unsigned hi) { fiberMain(reinterpret_cast<void*>((uintptr_t)lo | ((uintptr_t)hi << 32))); }

void rawSwitch(Fiber::Impl* from, Fiber::Impl* to) {
#ifdef UNICCL_EMU_FAST_SWITCH
  if (useFastSwitch()) {
    uniccl_emu_switch(&from->sp, to->sp);
    return;
  }
#endif
  swapcontext(&from->uc, &to->uc);
}

}  // namespace

Fiber::Fiber(void (*entry)(void*), void* arg) : impl_(new Impl()) {
  impl_->entry = entry;
  impl_->arg = arg;
  impl_->stack = takeStack();
  char* top = static_cast<char*>(impl_->stack) + kStackBytes;
#ifdef UNICCL_EMU_ASAN
  impl_->stackBottom = impl_->stack;
  impl_->stackSize = kStackBytes;
#endif
#ifdef UNICCL_EMU_TSAN
  impl_->tsanFiber = __tsan_create_fiber(0);
  impl_->ownsTsanFiber = true;
#endif
#ifdef UNICCL_EMU_FAST_SWITCH
  if (useFastSwitch()) {
    // The frame uniccl_emu_switch pops: control words, r15, r14, r13 (this
    // fiber), r12 (fiberMain), rbx, rbp, the return address, and 8 bytes of padding so
    // that uniccl_emu_fiber_start starts as a called function would.
    uint64_t* sp = reinterpret_cast<uint64_t*>(top) - 9;
    sp[0] = 0x037F00001F80ull;   // MXCSR 0x1F80 (low word), x87 control word 0x037F
    sp[1] = 0;
    sp[2] = 0;
    sp[3] = reinterpret_cast<uint64_t>(impl_);
    sp[4] = reinterpret_cast<uint64_t>(&fiberMain);
    sp[5] = 0;
    sp[6] = 0;
    sp[7] = reinterpret_cast<uint64_t>(&uniccl_emu_fiber_start);
    sp[8] = 0;
    impl_->sp = sp;
    return;
  }
#endif
  getcontext(&impl_->uc);
  impl_->uc.uc_stack.ss_sp = impl_->stack;
  impl_->uc.uc_stack.ss_size = kStackBytes;
  impl_->uc.uc_link = nullptr;
  const uintptr_t p = reinterpret_cast<uintptr_t>(impl_);
  makecontext(&impl_->uc, reinterpret_cast<void (*)()>(&ucontextEntry), 2, (unsigned)(p & 0xffffffffu),
              (unsigned)(p >> 32));
}

Fiber::~Fiber() {
  if (impl_ == nullptr) return;
  if (impl_->stack) giveStack(impl_->stack);
#ifdef UNICCL_EMU_TSAN
  if (impl_->ownsTsanFiber) __tsan_destroy_fiber(impl_->tsanFiber);
#endif
  delete impl_;
}

Fiber* Fiber::forThisThread() {
  thread_local Fiber self;
  if (self.impl_ == nullptr) {
    self.impl_ = new Impl();
#ifdef UNICCL_EMU_TSAN
    self.impl_->tsanFiber = __tsan_get_current_fiber();
#endif
  }
  return &self;
}

void Fiber::switchTo(Fiber* from, Fiber* to) {
  beforeSwitch(from->impl_, to->impl_, false);
  rawSwitch(from->impl_, to->impl_);
  afterSwitch(from->impl_);
}

void Fiber::finishTo(Fiber* from, Fiber* to) {
  beforeSwitch(from->impl_, to->impl_, true);
  rawSwitch(from->impl_, to->impl_);
  abort();   // a finished fiber is never switched to again
}

}  // namespace uniccl::emu
