// Stragglers in the cost model (issue 35, item 5): what a step costs when the ranks do not compute equally
// fast, from the injected distribution (trainer/straggler.h) and the frozen calibrated exchange model, with
// no parameter fitted to straggler runs.
//
// Rank i's compute of a step is stretched by a factor f_i = factor_i * max(1, exp(sigma * Z)) (the slow
// rank's factor, 1 elsewhere; Z a standard normal drawn per rank and step). The stretch slows forward,
// backward and every bucket's release alike, so a rank's step at factor m is T(m) = PredictStep(shape with
// forward, backward and releases times m) (bench/model/schedule.h: the bucketed overlap included), and T
// never decreases with m. The exchanges meet the stretch three ways:
//
//   sync (ring, sync PS)   every rank waits for the slowest: step = E[T(M)], M = max_i f_i, the N-th order
//                          statistic of the N draws (a bucket leaves when the slowest rank released it)
//                          for the ring; the sync PS takes in early ranks' pushes while the last computes
//                          (half its throughput time, x_in, queued per push), so with draws sorted
//                          m_(1) <= ... <= m_(N): step = E[max_j T(m_(j)) - x_in + (N - j + 1) / N * x_in]
//   sync PS, B backups     a step closes with the first N - B pushes (TensorFlow's SyncReplicasOptimizer):
//                          the quorum's step is E[T(f_(N-B))], the (N-B)-th order statistic; a rank late for
//                          a step is answered at once and goes on at its own pace, its pushes dropped
//   async PS, staleness s  each rank runs at its own pace E[T(f_i)], held back only when it is more than s
//                          steps ahead of the slowest
//
// Order statistics of independent ranks with known CDFs are exact: P(X_(k) <= x) = P(at most N - k ranks
// exceed x), and E[g(X_(k))] is the mean of g over `count` quantile nodes of X_(k) (the midpoint rule in
// probability, each node found by bisection on that CDF): deterministic, no random numbers. Where one order
// statistic is not what a run measures (the sync PS needs all N draws jointly; with backup workers or the
// async PS a rank that falls behind keeps its own pace, and the harness reports each rank's mean step and
// their maximum), the model averages draws from a fixed seed (the PS) or simulates the runs step by step
// (backup, async), so those results are deterministic too.
//
//   std::vector<FactorDistribution> ranks(4, FactorDistribution::Stretch(1, 0.3));
//   ASSIGN_OR_RETURN(double e, ExpectedOrderStatistic(ranks, 4));   // E[max of 4 draws]
//   StragglerConditions s;
//   s.injected.slow_rank = 1;  s.injected.factor = 2;  s.injected.noise_sigma = 0.3;
//   ASSIGN_OR_RETURN(StragglerStep t, PredictStragglerStep(Topology::kRing, params, conditions, shape, s));
//   t.step_s, t.cluster_step_s, t.unperturbed_step_s ...
//
// Thread-safety: pure functions (the simulation's generator is local to each call).
#ifndef PSRING_BENCH_MODEL_STRAGGLER_MODEL_H_
#define PSRING_BENCH_MODEL_STRAGGLER_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/model/collective.h"
#include "bench/model/schedule.h"
#include "trainer/straggler.h"

namespace psring::bench::model {

// One rank's compute factor as a distribution with a closed-form CDF and quantile.
class FactorDistribution {
 public:
  // factor * max(1, exp(sigma Z)): trainer/straggler.h's stretch (never faster than `factor`; with
  // probability 1/2 exactly `factor`). sigma 0: the constant `factor`.
  static FactorDistribution Stretch(double factor, double sigma);
  // Uniform on [lo, hi] and exponential with `rate` (for checks against closed forms).
  static FactorDistribution Uniform(double lo, double hi);
  static FactorDistribution Exponential(double rate);

  double Cdf(double x) const;
  // The smallest x with Cdf(x) >= u, u in (0, 1).
  double Quantile(double u) const;
  // No value lies below it.
  double Lower() const;
  // Closed forms. Stretch: E = f (1/2 + e^{s^2/2} Phi(s)), E[X^2] = f^2 (1/2 + e^{2 s^2} Phi(2 s)).
  double Mean() const;
  double Variance() const;
  // kInvalidArgument for parameters that describe no distribution (factor < 1 is allowed: any > 0).
  absl::Status Validate() const;
  bool operator==(const FactorDistribution& o) const { return kind_ == o.kind_ && a_ == o.a_ && b_ == o.b_; }

 private:
  enum class Kind { kStretch, kUniform, kExponential };
  FactorDistribution(Kind kind, double a, double b) : kind_(kind), a_(a), b_(b) {}
  Kind kind_;
  double a_, b_;
};

// The standard normal's CDF and its inverse (p in (0, 1)).
double NormalCdf(double x);
double NormalQuantile(double p);

// P(X_(k) <= x) for independent X_i ~ ranks[i]: at least k of the N values are <= x (k = N: the maximum,
// k = 1: the minimum). k outside [1, N] gives 0.
double OrderStatisticCdf(const std::vector<FactorDistribution>& ranks, int k, double x);

// The quantile nodes of X_(k) at probabilities (j + 0.5) / count, j = 0..count-1, ascending: the mean of g
// over them is E[g(X_(k))] by the midpoint rule. kInvalidArgument for no ranks, k outside [1, N], count < 1,
// an invalid distribution.
inline constexpr int kQuadratureNodes = 1024;
absl::StatusOr<std::vector<double>> OrderStatisticNodes(const std::vector<FactorDistribution>& ranks, int k,
                                                        int count = kQuadratureNodes);
// E[X_(k)] over the nodes; OrderStatisticNodes' errors.
absl::StatusOr<double> ExpectedOrderStatistic(const std::vector<FactorDistribution>& ranks, int k,
                                              int count = kQuadratureNodes);

// Each rank's factor distribution under `injected` at N = nodes: Stretch(factor, sigma) for the slow rank,
// Stretch(1, sigma) for the others.
std::vector<FactorDistribution> RankFactors(const trainer::StragglerOptions& injected, int nodes);

// How the exchange meets the stragglers.
enum class StepRule { kSync, kBackup, kAsync };

struct StragglerConditions {
  trainer::StragglerOptions injected;  // as the workers got it (--straggler, --step_noise, --pause)
  StepRule rule = StepRule::kSync;     // kBackup: sync PS with backup_workers; kAsync: the async PS
  int backup_workers = 0;              // B of kBackup, 1 <= B < N
  int staleness = 1;                   // s of kAsync (>= 0)
  // Steps per simulated run and runs (kBackup and kAsync; each run starts with every rank together, as the
  // harness's measured steps do after their barrier). steps: the harness's --steps.
  int steps = 50;
  int runs = 400;
  uint64_t seed = 1;  // the simulation's draws (fixed: deterministic)
  // kSync on a PS topology: draws of all N ranks averaged for the joint order statistics (see above).
  int sync_draws = 4096;
};

struct StragglerStep {
  // What the harness reports as a run's step time: the slowest rank's mean step (sync: the step).
  double step_s = 0;
  // The rate the cluster makes steps at: sync the step, kBackup the time between closes, kAsync N over the
  // sum of the ranks' rates (the time per N pushes: one synchronous step's worth of updates).
  double cluster_step_s = 0;
  double mean_rank_step_s = 0;  // mean over ranks of each rank's mean step
  std::vector<double> rank_step_s;
  double unperturbed_step_s = 0;  // PredictStep without stragglers
  // Sync: the standard deviation of one step's time (a mean over S steps has sd / sqrt(S)); else the
  // standard deviation of step_s over the simulated runs (of `steps` steps each).
  double sd_s = 0;
  double pause_s_per_step = 0;  // the pauses' amortised share, included above
};

// The step of `topology` at `conditions` (N = conditions.nodes) for `shape` under `stragglers`. kBackup and
// kAsync need a PS topology. kInvalidArgument for a slow rank outside [0, N), a factor < 1, a negative
// sigma, B outside [1, N), negative staleness, steps or runs < 1, a rule the topology does not have; and
// PredictStep's errors.
absl::StatusOr<StragglerStep> PredictStragglerStep(Topology topology, const ExchangeParams& params,
                                                   const Conditions& conditions, const StepShape& shape,
                                                   const StragglerConditions& stragglers);

// `shape` with forward, backward and every release time multiplied by `factor`.
StepShape StretchedShape(const StepShape& shape, double factor);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_STRAGGLER_MODEL_H_
