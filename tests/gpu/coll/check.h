// Compares a buffer read back from the GPU with what it must hold: guard
// bytes and untouched ranges still poisoned, copied ranges bit-exact,
// reduced ranges exact (integers, max, min) or within the type's tolerance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cases.h"

namespace colltest {

// Prints at most `limit` mismatch lines per case, each with a prefix naming
// the case and rank, so a broken case cannot flood the log.
struct Report {
  std::string prefix;
  int limit = 4;
  int printed = 0;
  void line(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
};

// Relative tolerance of a sum-like reduction of `dt` over `nranks` ranks,
// applied to the sum of the magnitudes of the terms.
double tolerance(ncclDataType_t dt, int nranks);
// One line describing the tolerances, for the summary.
std::string toleranceSummary();

// `span` holds the whole buffer as read back (guards included, from b.off).
// `inputs[q]` is rank q's send data (needed for every rank a segment names).
// Returns the number of wrong elements (a corrupted guard counts as one).
size_t checkBuffer(const OpSpec& op, int nranks, const Buf& b, const uint8_t* span,
                   const std::vector<Segment>& segs, const std::vector<const uint8_t*>& inputs,
                   const char* bufName, Report& rep);

}  // namespace colltest
