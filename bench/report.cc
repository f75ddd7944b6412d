// The nccl-tests table and the JSON rows (-J).
#include <cstdarg>
#include <cstdio>

#include "common.h"

namespace bench {

static std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

std::string tableHeader(bool reportCpu) {
  const std::string prefix2 = fmt("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  const std::string prefix3 = fmt("#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  std::string h2 = std::string("  ") + fmt("%7s", "time") + (reportCpu ? fmt("  %7s", "cpu") : "") +
                   fmt("  %6s  %6s  %6s", "algbw", "busbw", "#wrong");
  std::string h3 = std::string("  ") + fmt("%7s", "(us)") + (reportCpu ? fmt("  %7s", "(us)") : "") +
                   fmt("  %6s  %6s  %6s", "(GB/s)", "(GB/s)", "");
  const size_t w = h2.size();
  auto centered = [w](const char* title) {
    std::string t(title);
    size_t left = (w - t.size()) / 2;
    return std::string(left, ' ') + t + std::string(w - left - t.size(), ' ');
  };
  std::string line1 = "#" + std::string(prefix2.size() - 1, ' ') + centered("out-of-place") + centered("in-place");
  return line1 + "\n" + prefix2 + h2 + h2 + "\n" + prefix3 + h3 + h3 + "\n";
}

static std::string timeStr(double us) {
  if (us < 1e4) return fmt("%7.2f", us);
  if (us < 1e5) return fmt("%7.1f", us);
  return fmt("%7.0f", us);
}

static std::string formatHalf(const RowHalf& h, bool reportCpu) {
  if (!h.valid) {
    return fmt("  %7s", "N/A") + (reportCpu ? fmt("  %7s", "N/A") : "") +
           fmt("  %6s  %6s  %6s", "N/A", "N/A", "N/A");
  }
  std::string s = "  " + timeStr(h.timeUs);
  if (reportCpu) s += "  " + timeStr(h.cpuUs);
  std::string wrong = h.wrong < 0 ? "N/A" : fmt("%lld", h.wrong);
  return s + fmt("  %6.2f  %6.2f  %6s", h.algbw, h.busbw, wrong.c_str());
}

std::string formatRow(const Row& r, bool reportCpu) {
  return fmt("%12zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, r.type, r.redop, r.root) +
         formatHalf(r.oop, reportCpu) + formatHalf(r.ip, reportCpu);
}

static std::string halfJson(const RowHalf& h) {
  if (!h.valid) return "null";
  return fmt("{\"time_us\": %.3f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f, \"cpu_us\": %.3f, \"wrong\": %lld}",
             h.timeUs, h.algbw, h.busbw, h.cpuUs, h.wrong);
}

std::string rowJson(const CollSpec& c, const Row& r, int nranks, int graphLaunches) {
  return fmt("{\"collective\": \"%s\", \"nranks\": %d, \"graph_launches\": %d, \"size\": %zu, "
             "\"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d, ",
             c.name, nranks, graphLaunches, r.bytes, r.count, r.type, r.redop, r.root) +
         "\"out_of_place\": " + halfJson(r.oop) + ", \"in_place\": " + halfJson(r.ip) + "}";
}

}  // namespace bench
