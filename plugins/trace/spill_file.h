// Where the writer thread puts the rings' records while the program runs
// (ring_drainer.h) until the collector reads them back and formats them
// (collector.h): a file without a name in the trace's directory. The
// system frees its blocks when it is closed, also when the process ends
// without finalizing, so no spill is ever left behind.
//
// Why a file and not memory: the records arrive at up to a few hundred MB a
// second, and until the program pauses or finalizes they must stay
// somewhere. Written in large pieces, the kernel copies them into its page
// cache at about twice the speed of copying them into new anonymous memory
// (a page fault per 4 KiB); memory mapped once and reused would be faster
// still, but would have to hold the whole run. The page cache holds no
// memory of the process and gives way when memory is short.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace trace {

class SpillFile {
 public:
  // A spill in `dir`; nullptr (errno set) when none can be made there.
  static std::unique_ptr<SpillFile> create(const std::string& dir);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  // Appends the parts, all of them or none (what a failed write left is
  // cut off again); false when the file cannot take them (disk full). The
  // parts are used up: their lengths and bases change.
  bool append(iovec* parts, size_t count);
  uint64_t size() const { return size_; }
  // Up to n bytes from `offset`: how many were read (fewer at the end; 0 on an error).
  size_t read(uint64_t offset, void* to, size_t n) const;
  // Empties the file; its blocks go back to the file system. False when it
  // could not be emptied (it keeps its contents then).
  bool clear();

 private:
  explicit SpillFile(int fd) : fd_(fd) {}
  int fd_;
  uint64_t size_ = 0;
};

}  // namespace trace
