// Injected stragglers (issue 35): a rank that computes slower than the others, per-step noise with a heavy
// tail, and periodic pauses, as real wall time on that rank, so the exchanges meet the stragglers a shared
// cluster has (a noisy neighbour, a throttled GPU, a host's periodic work).
//
//   --straggler=RANK:FACTOR   rank RANK's compute takes FACTOR (>= 1) times as long
//   --step_noise=SIGMA[:SEED] every rank's compute of a step is stretched by max(1, exp(SIGMA * Z)), Z a
//                             standard normal drawn per step from a generator seeded with SEED + rank (SEED 1):
//                             a log-normal tail, never faster than unperturbed
//   --pause=EVERY:SECONDS     every EVERY-th step (steps EVERY, 2 EVERY, ...) each rank pauses SECONDS first
//
// How the time is spent: replayed compute (trainer/gradient_only.cc) stretches every layer's forward and
// backward wait by the step's factor, so buckets become ready later as on a slower device; training the MLP
// sleeps before each step's forward pass for (factor - 1) x this rank's previous step's forward + backward
// time (the first step has none), so bucketed and flat steps are delayed alike. Pauses are sleeps before the
// step. The sum of what was injected over the measured steps is in the result line (injected_delay_s).
//
// Thread-safety: a Straggler belongs to one rank's training thread.
#ifndef PSRING_TRAINER_STRAGGLER_H_
#define PSRING_TRAINER_STRAGGLER_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/statusor.h"

namespace psring::trainer {

struct StragglerOptions {
  int slow_rank = -1;        // -1: none
  double factor = 1;         // the slow rank's compute factor (>= 1)
  double noise_sigma = 0;    // log-normal sigma of every rank's per-step stretch (0: none)
  uint64_t noise_seed = 1;
  int64_t pause_every = 0;   // 0: no pauses
  double pause_s = 0;
  bool any() const { return (slow_rank >= 0 && factor > 1) || noise_sigma > 0 || (pause_every > 0 && pause_s > 0); }
};

// The three flags' values ("" each: none). kInvalidArgument naming the flag and what to write.
absl::StatusOr<StragglerOptions> ParseStragglerFlags(const std::string& straggler, const std::string& step_noise,
                                                     const std::string& pause);

class Straggler {
 public:
  Straggler(const StragglerOptions& options, int rank);

  // The factor this rank's compute of `step` is stretched by (>= 1). Call once per step, in step order: the
  // noise draws advance.
  double StepFactor(int64_t step);
  // The pause before `step` in seconds (0 for most steps).
  double PauseSeconds(int64_t step) const;
  bool active() const { return active_; }

 private:
  StragglerOptions options_;
  int rank_;
  bool active_;
  std::mt19937_64 generator_;
  std::normal_distribution<double> normal_;
};

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_STRAGGLER_H_
