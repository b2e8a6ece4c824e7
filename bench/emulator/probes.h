// What the emulator watches about itself, so a run can say whether the emulated network or the box that
// emulates it was the binding resource (bench/PERFORMANCE.md 1.3 derives the rule).
//
// All emulated hosts share this machine's cores. A real cluster gives every host its own, so a run whose
// time went to the box's CPU (processes of several hosts queueing for 2 cores, softirq work of the shaped
// links, the delay program) measures the emulator, not the network. Such runs are marked EMULATOR-BOUND,
// shown, and kept out of fits and checks.
//
//   RunSampler sampler([&] { return link_byte_counters(); });   // /proc/stat + counters every 50 ms
//   ... run the job ...
//   sampler.Stop();
//   double busy = sampler.BusyFraction(window_start, window_end);   // 0..1 of all cores, -1: no samples
//   double stall = sampler.StallFraction(window_start, window_end); // 0..1 CPU pressure, -1: unknown
//   std::vector<int64_t> bytes = sampler.CounterDeltas(window_start, window_end);
//   BoundVerdict v = ClassifyRun({busy, link_util, delayed, late, share, stall});
//
// RunSampler is thread-safe; ClassifyRun is pure.
#ifndef PSRING_BENCH_PROBES_H_
#define PSRING_BENCH_PROBES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/host_cpu.h"

namespace psring::bench {

// The parsers of /proc/stat and /proc/pressure/cpu live in common/host_cpu.h (workers read their own host's
// CPU with them too).
using ::psring::BusyFraction;
using ::psring::CpuTimes;
using ::psring::ParseCpuPressureTotal;
using ::psring::ParseProcStat;

// Samples the box's CPU times and the caller's counters (e.g. the link byte counters of every host) on a
// thread of its own, so both can be read over the same window afterwards.
class RunSampler {
 public:
  // `counters` is called on the sampler's thread; an empty function samples the CPU only.
  explicit RunSampler(std::function<std::vector<int64_t>()> counters = {},
                      absl::Duration interval = absl::Milliseconds(50));  // kSampleInterval
  ~RunSampler();  // stops
  RunSampler(const RunSampler&) = delete;
  RunSampler& operator=(const RunSampler&) = delete;

  // Ends sampling (takes one last sample). Blocks until the thread has ended; idempotent.
  void Stop();
  // Busy fraction of all cores between the samples nearest to `from` and `to` (the window widened to the
  // sample interval); -1 when fewer than two samples fall in it.
  double BusyFraction(absl::Time from, absl::Time to) const ABSL_LOCKS_EXCLUDED(mu_);
  // Each counter's growth over the same window; empty when fewer than two samples fall in it.
  std::vector<int64_t> CounterDeltas(absl::Time from, absl::Time to) const ABSL_LOCKS_EXCLUDED(mu_);
  // The share (0..1) of the window spent in sample intervals where the box's cores were >= kSaturatedCpu busy
  // while no counter grew faster than kLinkUsed x `counter_rate` (bytes per second: the link rate); -1 when
  // fewer than two samples fall in the window or the rate is unknown. This sees a CPU-bound exchange phase even
  // when the step also holds idle phases (replayed compute is timed waits).
  double CpuBoundShare(absl::Time from, absl::Time to, double counter_rate) const ABSL_LOCKS_EXCLUDED(mu_);
  // The share (0..1) of the window during which some runnable task waited for a core (CPU pressure, PSI
  // "some"); -1 when fewer than two samples fall in it or the kernel has no /proc/pressure/cpu.
  double StallFraction(absl::Time from, absl::Time to) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Sample {
    absl::Time time;
    CpuTimes cpu;
    int64_t stall_us = -1;  // PSI "some" total; -1: no /proc/pressure/cpu
    std::vector<int64_t> counters;
  };
  void TakeSample() ABSL_LOCKS_EXCLUDED(mu_);
  // The samples bounding [from, to], or {nullptr, nullptr}.
  std::pair<const Sample*, const Sample*> Window(absl::Time from, absl::Time to) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<std::vector<int64_t>()> counters_;
  const absl::Duration interval_;
  mutable absl::Mutex mu_;
  std::vector<Sample> samples_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

// The rule (bench/PERFORMANCE.md 1.2). A run is EMULATOR-BOUND when
//   (a) the box's cores were >= kSaturatedCpu busy over the measured steps while the busiest host link
//       direction carried data for < kLinkUsed of the exchange time: the exchange was slow, the wire idle,
//       and the shared CPU had nothing left: on a real cluster (a CPU per host) this run would have been
//       faster;
//   or (b) the same held, 50 ms interval by interval, for >= kBoundShare of the measured window (a step whose
//       exchange phase is CPU-bound while its replayed compute phases idle);
//   or (c) the delay program released >= kLateShare of the run's packets more than 1 ms late (the latency the
//       run saw was not the one configured);
//   or (d) some runnable task waited for a core during >= kMaxCpuStall of the measured window (the kernel's
//       CPU pressure, PSI "some") while the busiest link direction carried data for < kLinkUsed of the
//       exchange time.
// "The exchange time" in (a), (b) and (d) is the share of it the network alone lets the link be busy
// (BoundInputs::link_allowed, from the calibrated model's window and latency bounds; 1 without a model): an
// idle link the network explains (a window-bound flow at 20-50 ms) is no evidence against the box. (c) is the
// emulator's own invariant and needs no model. Every delay the box's CPU adds to the run's critical path is time in which a task of
//       that path was runnable and not running, inside PSI's "some" time, so the stall share bounds how much
//       the shared cores can have stretched the run; a full link says the wire bound it whatever the stall
//       (gRPC's many threads wake in bursts: a link-bound PS run at 95 % of the link showed 23 % stall).
inline constexpr absl::Duration kSampleInterval = absl::Milliseconds(50);
inline constexpr double kSaturatedCpu = 0.90;
inline constexpr double kLinkUsed = 0.80;
inline constexpr double kBoundShare = 0.25;
inline constexpr double kLateShare = 0.01;
inline constexpr double kMaxCpuStall = 0.10;

struct BoundInputs {
  double box_cpu = -1;          // 0..1 busy of all cores over the measured steps; -1: unknown
  double link_util = -1;        // busiest link direction's bytes / (exchange time x link rate); -1: unknown
  int64_t delayed_packets = 0;  // packets the delay program released during the run (0: no delay program)
  int64_t late_packets = 0;     // of which more than 1 ms late
  double cpu_bound_share = -1;  // RunSampler::CpuBoundShare over the measured steps; -1: unknown
  double cpu_stall = -1;        // RunSampler::StallFraction over the measured steps; -1: unknown
  // The share of the exchange time the network alone lets the busiest link carry data, (0, 1]
  // (ScalingOptions::network_link_share); 1: no model, the whole time.
  double link_allowed = 1;
};

struct BoundVerdict {
  bool emulator_bound = false;
  std::string reason;  // why, in words with the figures ("" when not bound)
};

BoundVerdict ClassifyRun(const BoundInputs& in);

}  // namespace psring::bench

#endif  // PSRING_BENCH_PROBES_H_
