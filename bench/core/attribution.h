// Which rank held each synchronous step back, by arrival (issue 35): every worker reports when its gradient
// of each measured step was complete (WorkerResult.step_ready_unix_s); the rank ready last is the one the
// others waited for. Phase times cannot say it: an allreduce makes every rank's step equally long, and a PS
// step ends for everyone when the last push is in.
//
//   StepAttribution a = AttributeSteps({ready_rank0, ready_rank1, ...});
//   if (a.straggler >= 0) ...  // last in more than half the steps
//
// Thread-safety: a pure function.
#ifndef PSRING_BENCH_CORE_ATTRIBUTION_H_
#define PSRING_BENCH_CORE_ATTRIBUTION_H_

#include <vector>

namespace psring::bench {

struct StepAttribution {
  int steps = 0;                 // steps every rank reported
  std::vector<int> last_counts;  // per rank: the steps it was ready last in
  std::vector<int> last_rank;    // per step: the rank ready last
  std::vector<double> lag_s;     // per step: how long after the median rank the last one was ready
  int straggler = -1;            // the rank last in more than half the steps, with a lag of at least
                                 // kMinStragglerLag (else -1: no rank stands out)
  double share = 0;              // its share of the steps (0 without one)
  double median_lag_s = 0;       // median of lag_s over the steps it was last in (0 without one)
};

// A rank ready last by less than this is not holding anyone back (clock jitter, thread wake-ups).
inline constexpr double kMinStragglerLag = 0.002;

// `ready[r][s]`: rank r's ready time of measured step s (seconds, one clock). Ranks with fewer steps than the
// others limit the steps attributed; fewer than two ranks attribute nothing.
StepAttribution AttributeSteps(const std::vector<std::vector<double>>& ready);

// The time between step closes from each rank's own mean step time: a synchronous step closes once the first
// N - B ranks are in (B: the PS's backup workers, 0 for every other exchange), so the job moves at the
// (N-B)-th fastest rank's pace; with B = 0 that is the slowest rank's. 0 when no rank reported; B is clamped
// to [0, N-1].
double QuorumStepSeconds(std::vector<double> rank_step_s, int backup_workers);

}  // namespace psring::bench

#endif  // PSRING_BENCH_CORE_ATTRIBUTION_H_
