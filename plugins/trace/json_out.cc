#include "json_out.h"

#include "trace_clock.h"

namespace trace {

namespace {

// "00" "01" ... "99": two digits per step.
struct DigitPairs {
  char d[200];
  constexpr DigitPairs() : d() {
    for (int i = 0; i < 100; i++) {
      d[2 * i] = (char)('0' + i / 10);
      d[2 * i + 1] = (char)('0' + i % 10);
    }
  }
};
constexpr DigitPairs kDigitPairs;

const char kHex[] = "0123456789abcdef";

}  // namespace

void JsonOut::grow(size_t n) {
  const size_t used = buf_ ? size() : 0;
  size_t cap = buf_ ? (size_t)(limit_ - buf_.get()) : 0;
  if (cap == 0) cap = n > 64 ? n : 64;
  while (cap - used < n) cap *= 2;
  std::unique_ptr<char[]> b(new char[cap]);
  if (used != 0) memcpy(b.get(), buf_.get(), used);
  buf_ = std::move(b);
  end_ = buf_.get() + used;
  limit_ = buf_.get() + cap;
}

namespace {

// x < 10^8 as exactly eight digits at p: 32-bit arithmetic, two digits a step.
void eightDigits(char* p, uint32_t x) {
  const uint32_t hi = x / 10000, lo = x % 10000;
  memcpy(p, &kDigitPairs.d[(hi / 100) * 2], 2);
  memcpy(p + 2, &kDigitPairs.d[(hi % 100) * 2], 2);
  memcpy(p + 4, &kDigitPairs.d[(lo / 100) * 2], 2);
  memcpy(p + 6, &kDigitPairs.d[(lo % 100) * 2], 2);
}

// x < 10^8 without leading zeros at p; returns the digits written.
unsigned upToEightDigits(char* p, uint32_t x) {
  char tmp[8];
  eightDigits(tmp, x);
  unsigned skip = 0;
  while (skip < 7 && tmp[skip] == '0') skip++;
  memcpy(p, tmp + skip, 8 - skip);
  return 8 - skip;
}

}  // namespace

void JsonOut::u64(uint64_t v) {
  // In chunks of eight digits: timestamps and GPU timers have 15 to 19.
  room(20);
  if (v < 100000000) {
    end_ += upToEightDigits(end_, (uint32_t)v);
    return;
  }
  const uint64_t high = v / 100000000;
  const uint32_t low = (uint32_t)(v % 100000000);
  if (high < 100000000) {
    end_ += upToEightDigits(end_, (uint32_t)high);
  } else {
    end_ += upToEightDigits(end_, (uint32_t)(high / 100000000));
    eightDigits(end_, (uint32_t)(high % 100000000));
    end_ += 8;
  }
  eightDigits(end_, low);
  end_ += 8;
}

void JsonOut::usOf(int64_t ns) {
  uint64_t v = (uint64_t)ns;
  if (ns < 0) {
    ch('-');
    v = 0 - (uint64_t)ns;
  }
  u64(v / 1000);
  const unsigned frac = (unsigned)(v % 1000);
  room(4);
  end_[0] = '.';
  end_[1] = (char)('0' + frac / 100);
  end_[2] = kDigitPairs.d[(frac % 100) * 2];
  end_[3] = kDigitPairs.d[(frac % 100) * 2 + 1];
  end_ += 4;
}

void JsonOut::usSinceOrigin(int64_t ns) { usOf(ns - kTraceOriginNs); }

void JsonOut::str(const char* s) {
  ch('"');
  if (s != nullptr) {
    for (; *s; s++) {
      const unsigned char c = (unsigned char)*s;
      if (c == '"' || c == '\\') {
        const char esc[2] = {'\\', (char)c};
        raw(esc, 2);
      } else if (c < 0x20) {
        const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        raw(esc, 6);
      } else {
        ch((char)c);
      }
    }
  }
  ch('"');
}

void JsonOut::ptr(const void* p) {
  uintptr_t v = reinterpret_cast<uintptr_t>(p);
  if (v == 0) {
    lit("(nil)");
    return;
  }
  char tmp[2 + 2 * sizeof(v)];
  char* q = tmp + sizeof(tmp);
  while (v != 0) {
    *--q = kHex[v & 15];
    v >>= 4;
  }
  *--q = 'x';
  *--q = '0';
  raw(q, (size_t)(tmp + sizeof(tmp) - q));
}

}  // namespace trace
