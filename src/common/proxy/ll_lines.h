// LL lines as the proxy meets them on network connections. A line is 16
// bytes: data word 0, flag, data word 1, flag (device/prims.h, storeLLLine),
// and the flag of step s is s + 1 truncated to 32 bits, so a slot's lines of
// an earlier step never pass for this one's.
//
// Send: an LL step advances no tail; the proxy sends it once every line of
// the size the kernel published carries the step's flag. Receive: a message
// whose lines all carry the step's flag is copied into the LL slot too,
// where an LL consumer polls it (a consumer of the Simple protocol reads
// the staging slot after the tail, as for every other message). A Simple
// message that happens to look like LL lines is copied as well, harmlessly:
// its flags are those of its own step, which no later LL consumer of that
// slot waits for.
#pragma once

#include <cstdint>
#include <cstring>

namespace uniccl {

constexpr int64_t kLLLineBytes = 16;

inline uint32_t llFlag(uint64_t step) { return static_cast<uint32_t>(step + 1); }

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "a half line is data | flag << 32");

// The flag of a half line (a data word and its flag, written as one 8-byte unit).
inline uint32_t llHalfFlag(uint64_t half) { return static_cast<uint32_t>(half >> 32); }

// Whether every line of [lines, lines + bytes) carries `flag` in both
// halves (bytes: a multiple of kLLLineBytes). Each half is loaded whole,
// with acquire order: what reads the lines later sees the data each flag
// guards.
inline bool llLinesReady(const char* lines, int64_t bytes, uint32_t flag) {
  for (int64_t off = 0; off < bytes; off += kLLLineBytes) {
    const uint64_t* h = reinterpret_cast<const uint64_t*>(lines + off);
    if (llHalfFlag(__atomic_load_n(&h[0], __ATOMIC_ACQUIRE)) != flag ||
        llHalfFlag(__atomic_load_n(&h[1], __ATOMIC_ACQUIRE)) != flag)
      return false;
  }
  return true;
}

// Copies lines to where a consumer polls them: each half line (a data word
// and its flag) in one 8-byte store, so the consumer never sees a flag
// without its data.
inline void copyLLLines(char* dst, const char* src, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 8) {
    uint64_t v;
    memcpy(&v, src + off, sizeof(v));
    __atomic_store_n(reinterpret_cast<uint64_t*>(dst + off), v, __ATOMIC_RELEASE);
  }
}

}  // namespace uniccl
