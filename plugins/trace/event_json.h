// How one event reads in the Chrome-trace file (docs/profiler.md shows an
// excerpt): the same names, categories and args for every event type, and
// where each is drawn.
#pragma once

#include "json_out.h"
#include "pending_event.h"

namespace trace {

// Tracks (Chrome's "tid") other than the host threads: one per GPU channel
// for KernelCh, one per proxy channel and direction for ProxyOp / ProxyStep.
constexpr long kGpuTrackBase = 1000000000L;    // + channel
constexpr long kProxyTrackBase = 1000001000L;  // + 2 * channel + isSend

// ProxyOp, ProxyStep and NetPlugin are async slices ("b" / "e"): pipelined
// operations of one channel overlap. The rest are complete slices ("X").
bool isAsync(uint32_t type);

// The track of a ProxyOp.
long proxyOpTrack(const PendingEvent& e);

// A complete event ("X"), from e.placedStart to e.placedStop, on e.track.
// `unfinished`: it never stopped (the communicator went first).
void appendComplete(JsonOut& out, const PendingEvent& e, int pid, bool unfinished);
// The begin of an async event, with the states recorded so far.
void appendAsyncBegin(JsonOut& out, const PendingEvent& e, int pid, bool unfinished);
// Its end at e.placedStop, with the states recorded after the begin was written.
void appendAsyncEnd(JsonOut& out, const PendingEvent& e, int pid, bool unfinished);
// The name Perfetto shows for a track.
void appendTrackName(JsonOut& out, int pid, long track);

}  // namespace trace
