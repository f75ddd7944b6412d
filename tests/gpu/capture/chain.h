// Chains of collectives where each one reads what the previous one wrote
// (capture_test's second part): with programmatic dependent launch a kernel
// starts before the previous one ended, so any read it makes too early shows
// up here as a wrong value.
#pragma once

#include <vector>

// Runs the chains on the ranks of `devs` (rank r on GPU devs[r]; a GPU may
// repeat when ranks share it), one communicator each, this thread drives all:
// in a captured graph replayed with fresh inputs, and eagerly. Prints one
// line per mode; false on the first wrong value or failed call.
bool runDependentChains(const std::vector<int>& devs);
