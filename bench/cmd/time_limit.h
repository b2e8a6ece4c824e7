// A time limit for a sequence of sweeps (validate's and calibrate's --time_limit): before each sweep, the
// model's estimate of it, scaled by the pace of the sweeps already run (their wall time over their estimates,
// never below 1; kFirstSweepPace before any ran), is weighed against the time left. A sweep that would end
// past the limit is not started; a later, shorter one still may. For a machine lent for a fixed time: a call
// that would be killed at its timeout with nothing to show stops in time and reports what it measured.
//
//   SweepClock clock(absl::Minutes(9));
//   for (...) {
//     if (std::string why = clock.WhyNot(estimate_s); !why.empty()) { report "not run: " + why; continue; }
//     clock.Start();  ... run the sweep ...  clock.Ran(estimate_s);
//   }
#ifndef PSRING_BENCH_CMD_TIME_LIMIT_H_
#define PSRING_BENCH_CMD_TIME_LIMIT_H_

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace psring::bench {

// How much longer than the model's estimate a sweep is taken to run before one has run: held-out plan 23's
// three runs on the 2-core box took 652-666 s against its estimate of 550 s (1.19-1.21x; bench/PERFORMANCE.md
// 9.30).
inline constexpr double kFirstSweepPace = 1.25;

class SweepClock {
 public:
  // The limit counts from construction; absl::InfiniteDuration(): none (every sweep starts).
  explicit SweepClock(absl::Duration limit, absl::Time start = absl::Now()) : limit_(limit), start_(start) {}

  // "" when a sweep the model estimates at `estimate_s` seconds may start at `now`; else why it may not, e.g.
  // "at 410 s it would end about 602 s in (the model's 150 s x 1.28, the pace of the sweeps so far), past the
  // time limit 580 s".
  std::string WhyNot(double estimate_s, absl::Time now = absl::Now()) const;
  // The pace a sweep's estimate is scaled by: the sweeps run so far, else kFirstSweepPace.
  double Pace() const;
  // Marks the start of a sweep that may start, and its end with the estimate it was weighed with.
  void Start(absl::Time now = absl::Now()) { sweep_start_ = now; }
  void Ran(double estimate_s, absl::Time now = absl::Now());
  double ElapsedSeconds(absl::Time now = absl::Now()) const { return absl::ToDoubleSeconds(now - start_); }

 private:
  absl::Duration limit_;
  absl::Time start_;
  absl::Time sweep_start_ = absl::InfinitePast();
  double estimated_done_s_ = 0;
  double actual_done_s_ = 0;
};

}  // namespace psring::bench

#endif  // PSRING_BENCH_CMD_TIME_LIMIT_H_
