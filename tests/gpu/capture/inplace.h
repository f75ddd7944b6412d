// In-place AlltoAll (core/inplace_stage.h) and one-rank communicators
// (core/one_rank.h) in graph capture and eagerly (capture_test's third part).
#pragma once

// n GPUs, one thread: a captured in-place AlltoAll replayed with fresh
// inputs, with eager in-place AlltoAlls of another size between replays
// (the comm's scratch must not be what the graph reads); then a one-rank
// communicator on GPU 0 capturing in-place and out-of-place collectives.
// false on the first wrong value or failed call.
bool runInPlaceAndOneRank(int n);
