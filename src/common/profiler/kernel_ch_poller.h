// The thread that turns KernelCh stamps into profiler events.
//
// One process-wide thread reads the stamp rings of every communicator that
// profiles KernelCh and reports the events, so the threads that launch work
// never run the plugin for them (on 2x H200, a 1 MiB AllReduce loop on one
// thread driving both GPUs went from 22 to 44 us per iteration with the trace
// plugin when the launching thread reported them: 32 KernelCh events per
// iteration at a few hundred ns each made the loop host-bound). NCCL reports
// them from its proxy thread for the same reason.
//
// The thread polls every kPollUs while items are pending, then sleeps until
// kick() says a launch handed out new ones. It starts with the first tracker
// and is joined when the last one goes.
#pragma once

namespace uniccl {

class KernelChTracker;

namespace kernel_ch_poller {

void add(KernelChTracker* t);
// On return the thread no longer polls `t` and never will again.
void remove(KernelChTracker* t);
// A launch handed out profiled work: cheap when the thread is polling
// anyway (an atomic load); wakes it when it sleeps.
void kick();
bool threadRunning();   // tests

}  // namespace kernel_ch_poller
}  // namespace uniccl
