// Stragglers in the cost model (straggler_model.h): factor distributions, order statistics by quadrature,
// and the step-by-step simulation of backup workers and the async PS.
#include "bench/model/straggler_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psring::bench::model {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kSqrtTwoPi = 2.5066282746310002;  // sqrt(2 pi), the standard normal density's divisor

// Ranks with the same distribution, counted once (CDFs of a group are one call).
std::vector<std::pair<FactorDistribution, int>> Groups(const std::vector<FactorDistribution>& ranks) {
  std::vector<std::pair<FactorDistribution, int>> groups;
  for (const FactorDistribution& d : ranks) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == d; });
    if (it == groups.end()) {
      groups.emplace_back(d, 1);
    } else {
      ++it->second;
    }
  }
  return groups;
}

// P(at most `exceed` of the grouped ranks lie above x), by the binomial of each group convolved, truncated
// at `exceed`.
double AtMostExceed(const std::vector<std::pair<FactorDistribution, int>>& groups, int exceed, double x) {
  if (exceed == 0) {  // the maximum: every rank <= x
    double p = 1;
    for (const auto& [d, count] : groups) p *= std::pow(d.Cdf(x), count);
    return p;
  }
  std::vector<double> dp(exceed + 1, 0.0), next(exceed + 1);
  dp[0] = 1;
  for (const auto& [d, count] : groups) {
    const double p = std::clamp(d.Cdf(x), 0.0, 1.0), q = 1 - p;
    // pmf[j] = C(count, j) q^j p^(count - j), j = 0..min(count, exceed)
    std::vector<double> pmf(std::min(count, exceed) + 1, 0.0);
    for (int j = 0; j < static_cast<int>(pmf.size()); ++j) {
      if ((q == 0 && j > 0) || (p == 0 && j < count)) continue;
      const double log_choose =
          std::lgamma(count + 1.0) - std::lgamma(j + 1.0) - std::lgamma(count - j + 1.0);
      pmf[j] = std::exp(log_choose + (j > 0 ? j * std::log(q) : 0) +
                        (count - j > 0 ? (count - j) * std::log(p) : 0));
    }
    std::fill(next.begin(), next.end(), 0.0);
    for (int a = 0; a <= exceed; ++a) {
      if (dp[a] == 0) continue;
      for (int j = 0; j < static_cast<int>(pmf.size()) && a + j <= exceed; ++j) next[a + j] += dp[a] * pmf[j];
    }
    dp.swap(next);
  }
  double total = 0;
  for (double v : dp) total += v;
  return std::min(1.0, total);
}

absl::Status CheckRanks(const std::vector<FactorDistribution>& ranks, int k, int count) {
  if (ranks.empty()) return absl::InvalidArgumentError("an order statistic needs at least one rank");
  if (k < 1 || k > static_cast<int>(ranks.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("order statistic k = ", k, " of ", ranks.size(), " ranks: k must be in [1, N]"));
  }
  if (count < 1) return absl::InvalidArgumentError(absl::StrCat("quadrature nodes: ", count, " (need >= 1)"));
  for (const FactorDistribution& d : ranks) RETURN_IF_ERROR(d.Validate());
  return absl::OkStatus();
}

// A draw in (0, 1) from 53 bits of the generator (the standard fixes mt19937_64's output; the standard
// library's distributions are implementation-defined).
double UnitDraw(std::mt19937_64& generator) {
  return (static_cast<double>(generator() >> 11) + 0.5) * 0x1.0p-53;
}

absl::Status CheckStragglers(Topology topology, int nodes, const StragglerConditions& s) {
  const trainer::StragglerOptions& in = s.injected;
  if (in.slow_rank >= nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slow rank ", in.slow_rank, " is not a rank of N = ", nodes, ": give a rank in [0, ", nodes, ")"));
  }
  if (!(std::isfinite(in.factor) && in.factor >= 1) ||
      !(std::isfinite(in.noise_sigma) && in.noise_sigma >= 0) ||
      !(std::isfinite(in.pause_s) && in.pause_s >= 0) || in.pause_every < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "straggler factor ", in.factor, ", sigma ", in.noise_sigma, ", pause ", in.pause_s, " s every ",
        in.pause_every, ": need factor >= 1, sigma >= 0, pause >= 0 (as trainer/straggler.h parses)"));
  }
  if (s.rule == StepRule::kSync) {
    if (s.sync_draws < 1)
      return absl::InvalidArgumentError(absl::StrCat("sync draws ", s.sync_draws, ": need >= 1"));
    return absl::OkStatus();
  }
  if (topology == Topology::kRing) {
    return absl::InvalidArgumentError(
        "backup workers and async steps are the parameter server's: use a PS topology");
  }
  if (s.rule == StepRule::kBackup && (s.backup_workers < 1 || s.backup_workers >= nodes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backup workers B = ", s.backup_workers, " at N = ", nodes, ": need 1 <= B < N"));
  }
  if (s.rule == StepRule::kAsync && s.staleness < 0) {
    return absl::InvalidArgumentError(absl::StrCat("staleness ", s.staleness, ": need >= 0"));
  }
  if (s.steps < 1 || s.runs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulated steps ", s.steps, " and runs ", s.runs, ": need at least 1 of each"));
  }
  return absl::OkStatus();
}

// One rank's step at factor m, as a function the simulation calls per draw.
class StepOfFactor {
 public:
  StepOfFactor(Topology topology, const ExchangeParams& params, const Conditions& conditions,
               const StepShape& shape)
      : topology_(topology), params_(params), conditions_(conditions), shape_(shape) {}
  absl::StatusOr<double> operator()(double m) const {
    ASSIGN_OR_RETURN(const StepTime t,
                     PredictStep(topology_, params_, conditions_, StretchedShape(shape_, m)));
    return t.step_s;
  }

 private:
  Topology topology_;
  ExchangeParams params_;
  Conditions conditions_;
  StepShape shape_;
};

struct SimRun {
  std::vector<double> rank_step_s;
  double cluster_step_s = 0;
};

// One simulated run of `steps` steps per rank, every rank starting at 0. A rank's push of its step is ready
// for the servers at start + T(m) + pause - reply - x_in; the servers take the pushes in one at a time in the
// order they are ready, x_in / N each (so N pushes ready together take x_in, as in T), and the reply takes
// `reply_s` after the push is answered.
absl::StatusOr<SimRun> SimulateRun(const std::vector<FactorDistribution>& ranks, const StepOfFactor& step_of,
                                   const StragglerConditions& s, double pause_s, double reply_s, double x_in,
                                   std::mt19937_64& generator) {
  const int n = static_cast<int>(ranks.size());
  std::vector<double> start(n, 0), arrival(n);
  std::vector<int> done(n, 0), clock(n, 0), need(n, 0);
  std::vector<bool> blocked(n, false);
  auto draw = [&](int i) -> absl::Status {
    ASSIGN_OR_RETURN(const double t, step_of(ranks[i].Quantile(UnitDraw(generator))));
    arrival[i] = start[i] + t + pause_s - reply_s - x_in;
    return absl::OkStatus();
  };
  for (int i = 0; i < n; ++i) RETURN_IF_ERROR(draw(i));
  auto finish = [&](int i, double answered_at) -> absl::Status {
    start[i] = answered_at + reply_s;
    ++done[i];
    blocked[i] = false;
    return done[i] < s.steps ? draw(i) : absl::OkStatus();
  };
  int pending = 0;         // the shard's open step (kBackup)
  double server_free = 0;  // when the servers have taken in every push ready so far
  std::vector<int> quorum;
  double last_close = 0;
  int closes = 0;
  const int needed = n - s.backup_workers;
  for (;;) {
    int i = -1;
    for (int j = 0; j < n; ++j) {
      if (done[j] < s.steps && !blocked[j] && (i < 0 || arrival[j] < arrival[i])) i = j;
    }
    if (i < 0) break;
    const double now = server_free = std::max(server_free, arrival[i]) + x_in / n;
    if (s.rule == StepRule::kBackup) {
      if (done[i] < pending) {  // its step closed without it: dropped, answered at once
        RETURN_IF_ERROR(finish(i, now));
        continue;
      }
      quorum.push_back(i);
      blocked[i] = true;
      // Ranks that can still push the open step (a late one catches up to it by being dropped): the quorum
      // closes with what can come (never short in practice: a rank finishes its steps only after the shard
      // closed them).
      int can_come = 0;
      for (int j = 0; j < n; ++j) can_come += done[j] < s.steps && !blocked[j];
      if (static_cast<int>(quorum.size()) < needed && can_come > 0) continue;
      for (int j : quorum) RETURN_IF_ERROR(finish(j, now));
      quorum.clear();
      ++pending;
      ++closes;
      if (closes == s.steps) last_close = now + reply_s;
      continue;
    }
    // Async: applied on arrival; the push returns once no rank is more than `staleness` steps behind it.
    clock[i] = done[i] + 1;
    need[i] = clock[i] - s.staleness;
    blocked[i] = true;
    const int slowest = *std::min_element(clock.begin(), clock.end());
    for (int j = 0; j < n; ++j) {
      if (blocked[j] && slowest >= need[j]) RETURN_IF_ERROR(finish(j, now));
    }
  }
  SimRun run;
  for (int j = 0; j < n; ++j) run.rank_step_s.push_back(start[j] / s.steps);
  if (s.rule == StepRule::kBackup) {
    run.cluster_step_s = closes >= s.steps
                             ? last_close / s.steps
                             : *std::max_element(run.rank_step_s.begin(), run.rank_step_s.end());
  } else {
    double rate = 0;
    for (double t : run.rank_step_s) rate += t > 0 ? 1 / t : 0;
    run.cluster_step_s = rate > 0 ? n / rate : 0;
  }
  return run;
}

// The push half of the throughput the PS charges a step (schedule.h: sum of max(link, window, cpu) per
// bucket): what the servers take in from ranks that are ready early while a later one still computes.
double HideablePushSeconds(const StepTime& step) {
  double charged = 0;
  for (const BucketTime& b : step.buckets) {
    charged += std::max({b.collective.link_s, b.collective.window_s, b.collective.cpu_s});
  }
  return charged / 2;
}

// A synchronous step from equally likely step times (quadrature nodes or draws): every rank steps at their
// mean plus the pauses' share, and sd_s is their standard deviation.
StragglerStep WithSyncSteps(const std::vector<double>& steps, int n, StragglerStep out) {
  double sum = 0;
  for (double t : steps) sum += t;
  const double mean = sum / steps.size();
  double squares = 0;
  for (double t : steps) squares += (t - mean) * (t - mean);
  out.sd_s = std::sqrt(squares / steps.size());
  out.step_s = out.cluster_step_s = out.mean_rank_step_s = mean + out.pause_s_per_step;
  out.rank_step_s.assign(n, out.step_s);
  return out;
}

// The sync PS: the servers take in each push as it arrives (ps/sync_step.h streams every push into its own
// buffer; only the averaging waits for all N), so pushes of early ranks are received while the last rank
// still computes. With the draws sorted, m_(1) <= ... <= m_(N), and x_in / N of server time per push, the
// servers are done with the last push no earlier than the j-th rank's push is ready plus the (N - j + 1)
// pushes from it on, for every j:
//   step = max_j [ T(m_(j)) - x_in + (N - j + 1) / N * x_in ]
// (equal draws: T(m); one rank far behind: T(m_(N)) - (N - 1) / N * x_in). The joint order statistics are
// averaged over `sync_draws` draws of all N ranks from the fixed seed.
absl::StatusOr<StragglerStep> SyncPsStep(const std::vector<FactorDistribution>& ranks,
                                         const StepOfFactor& step_of, double x_in,
                                         const StragglerConditions& s, StragglerStep out) {
  const int n = static_cast<int>(ranks.size());
  std::mt19937_64 generator(s.seed);
  std::vector<double> m(n), steps;
  steps.reserve(s.sync_draws);
  for (int d = 0; d < s.sync_draws; ++d) {
    for (int i = 0; i < n; ++i) m[i] = ranks[i].Quantile(UnitDraw(generator));
    std::sort(m.begin(), m.end());
    double worst = -kInf, t = 0;
    for (int j = 0; j < n; ++j) {
      if (j == 0 || m[j] != m[j - 1]) {
        ASSIGN_OR_RETURN(t, step_of(m[j]));
      }
      worst = std::max(worst, t - x_in + static_cast<double>(n - j) / n * x_in);
    }
    steps.push_back(worst);
  }
  return WithSyncSteps(steps, n, std::move(out));
}

}  // namespace

FactorDistribution FactorDistribution::Stretch(double factor, double sigma) {
  return FactorDistribution(Kind::kStretch, factor, sigma);
}
FactorDistribution FactorDistribution::Uniform(double lo, double hi) {
  return FactorDistribution(Kind::kUniform, lo, hi);
}
FactorDistribution FactorDistribution::Exponential(double rate) {
  return FactorDistribution(Kind::kExponential, rate, 0);
}

absl::Status FactorDistribution::Validate() const {
  const bool finite = std::isfinite(a_) && std::isfinite(b_);
  const bool ok = kind_ == Kind::kStretch   ? finite && a_ > 0 && b_ >= 0
                  : kind_ == Kind::kUniform ? finite && a_ < b_
                                            : finite && a_ > 0;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("not a distribution: ",
                   kind_ == Kind::kStretch
                       ? absl::StrCat("stretch factor ", a_, " sigma ", b_, " (need factor > 0, sigma >= 0)")
                   : kind_ == Kind::kUniform ? absl::StrCat("uniform on [", a_, ", ", b_, "] (need lo < hi)")
                                             : absl::StrCat("exponential rate ", a_, " (need > 0)")));
}

double FactorDistribution::Lower() const {
  switch (kind_) {
    case Kind::kStretch:
      return a_;
    case Kind::kUniform:
      return a_;
    case Kind::kExponential:
      return 0;
  }
  return 0;
}

double FactorDistribution::Mean() const {
  switch (kind_) {
    case Kind::kStretch:
      return a_ * (0.5 + std::exp(b_ * b_ / 2) * NormalCdf(b_));
    case Kind::kUniform:
      return (a_ + b_) / 2;
    case Kind::kExponential:
      return 1 / a_;
  }
  return 0;
}

double FactorDistribution::Variance() const {
  switch (kind_) {
    case Kind::kStretch: {
      const double mean = Mean();
      return std::max(0.0, a_ * a_ * (0.5 + std::exp(2 * b_ * b_) * NormalCdf(2 * b_)) - mean * mean);
    }
    case Kind::kUniform:
      return (b_ - a_) * (b_ - a_) / 12;
    case Kind::kExponential:
      return 1 / (a_ * a_);
  }
  return 0;
}

double FactorDistribution::Cdf(double x) const {
  switch (kind_) {
    case Kind::kStretch:
      if (x < a_) return 0;
      if (b_ == 0) return 1;
      // max(1, e^{sigma Z}) <= y (y >= 1)  <=>  Z <= ln(y) / sigma
      return NormalCdf(std::log(x / a_) / b_);
    case Kind::kUniform:
      return std::clamp((x - a_) / (b_ - a_), 0.0, 1.0);
    case Kind::kExponential:
      return x <= 0 ? 0 : -std::expm1(-a_ * x);
  }
  return 0;
}

double FactorDistribution::Quantile(double u) const {
  switch (kind_) {
    case Kind::kStretch:
      return u <= 0.5 || b_ == 0 ? a_ : a_ * std::exp(b_ * NormalQuantile(u));
    case Kind::kUniform:
      return a_ + u * (b_ - a_);
    case Kind::kExponential:
      return -std::log1p(-u) / a_;
  }
  return 0;
}

double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double NormalQuantile(double p) {
  if (!(p > 0)) return -kInf;
  if (!(p < 1)) return kInf;
  // A rational first guess (Abramowitz and Stegun 26.2.22, |error| < 3e-3), then Newton on the exact CDF.
  const double tail = std::min(p, 1 - p);
  const double t = std::sqrt(-2 * std::log(tail));
  double x = t - (2.30753 + 0.27061 * t) / (1 + 0.99229 * t + 0.04481 * t * t);
  if (p < 0.5) x = -x;
  for (int i = 0; i < 6; ++i) {
    const double density = std::exp(-0.5 * x * x) / kSqrtTwoPi;
    if (density <= 0) break;
    x -= (NormalCdf(x) - p) / density;
  }
  return x;
}

double OrderStatisticCdf(const std::vector<FactorDistribution>& ranks, int k, double x) {
  const int n = static_cast<int>(ranks.size());
  if (k < 1 || k > n) return 0;
  return AtMostExceed(Groups(ranks), n - k, x);
}

absl::StatusOr<std::vector<double>> OrderStatisticNodes(const std::vector<FactorDistribution>& ranks, int k,
                                                        int count) {
  RETURN_IF_ERROR(CheckRanks(ranks, k, count));
  const auto groups = Groups(ranks);
  const int exceed = static_cast<int>(ranks.size()) - k;
  auto cdf = [&](double x) { return AtMostExceed(groups, exceed, x); };
  double lower = kInf;
  for (const FactorDistribution& d : ranks) lower = std::min(lower, d.Lower());
  std::vector<double> nodes;
  nodes.reserve(count);
  double from = lower;  // nodes ascend: each search starts at the previous node
  for (int j = 0; j < count; ++j) {
    const double u = (j + 0.5) / count;
    if (cdf(from) >= u) {
      nodes.push_back(from);
      continue;
    }
    double lo = from, hi = std::max(2 * std::abs(from), 1.0);
    while (cdf(hi) < u) {
      lo = hi;
      hi *= 2;
      if (!std::isfinite(hi)) return absl::InternalError("an order statistic's quantile is not finite");
    }
    for (int it = 0; it < 200 && hi - lo > 1e-13 * hi; ++it) {
      const double mid = 0.5 * (lo + hi);
      (cdf(mid) >= u ? hi : lo) = mid;
    }
    nodes.push_back(hi);
    from = hi;
  }
  return nodes;
}

absl::StatusOr<double> ExpectedOrderStatistic(const std::vector<FactorDistribution>& ranks, int k,
                                              int count) {
  ASSIGN_OR_RETURN(const std::vector<double> nodes, OrderStatisticNodes(ranks, k, count));
  double sum = 0;
  for (double v : nodes) sum += v;
  return sum / static_cast<double>(nodes.size());
}

std::vector<FactorDistribution> RankFactors(const trainer::StragglerOptions& injected, int nodes) {
  std::vector<FactorDistribution> ranks;
  for (int r = 0; r < nodes; ++r) {
    ranks.push_back(
        FactorDistribution::Stretch(r == injected.slow_rank ? injected.factor : 1.0, injected.noise_sigma));
  }
  return ranks;
}

StepShape StretchedShape(const StepShape& shape, double factor) {
  StepShape out = shape;
  out.forward_s *= factor;
  out.backward_s *= factor;
  for (BucketRelease& b : out.buckets) b.ready_s *= factor;
  return out;
}

absl::StatusOr<StragglerStep> PredictStragglerStep(Topology topology, const ExchangeParams& params,
                                                   const Conditions& conditions, const StepShape& shape,
                                                   const StragglerConditions& stragglers) {
  RETURN_IF_ERROR(CheckStragglers(topology, conditions.nodes, stragglers));
  const int n = conditions.nodes;
  const StepOfFactor step_of(topology, params, conditions, shape);
  StragglerStep out;
  ASSIGN_OR_RETURN(out.unperturbed_step_s, step_of(1.0));
  const trainer::StragglerOptions& in = stragglers.injected;
  // Every rank pauses before the same steps; amortised over the steps.
  out.pause_s_per_step = in.pause_every > 0 ? in.pause_s / static_cast<double>(in.pause_every) : 0;
  const std::vector<FactorDistribution> ranks = RankFactors(in, n);

  if (stragglers.rule == StepRule::kSync && topology != Topology::kRing) {
    ASSIGN_OR_RETURN(const StepTime unstretched,
                     PredictStep(topology, params, conditions, StretchedShape(shape, 1.0)));
    return SyncPsStep(ranks, step_of, HideablePushSeconds(unstretched), stragglers, out);
  }
  if (stragglers.rule == StepRule::kSync) {
    ASSIGN_OR_RETURN(const std::vector<double> nodes, OrderStatisticNodes(ranks, n));
    std::vector<double> steps;
    for (double m : nodes) {
      ASSIGN_OR_RETURN(steps.emplace_back(), step_of(m));
    }
    return WithSyncSteps(steps, n, std::move(out));
  }

  // The reply a rank waits for after its push is in: half the exchange the unstretched step exposes (a push
  // and its reply move the same bytes), less the push half the servers take in (x_in, queued per push).
  ASSIGN_OR_RETURN(const StepTime unstretched, PredictStep(topology, params, conditions, shape));
  const double x_in = HideablePushSeconds(unstretched);
  const double reply_s = std::max(0.0, out.unperturbed_step_s - shape.forward_s - shape.backward_s) / 2;
  // Bound the work (N^2 per step): fewer runs for large N, at least one.
  const double work = static_cast<double>(n) * n * stragglers.steps;
  const int runs = std::max(1, std::min(stragglers.runs, static_cast<int>(2e8 / std::max(1.0, work))));
  std::mt19937_64 generator(stragglers.seed);
  std::vector<double> rank_sum(n, 0);
  double max_sum = 0, max_sq = 0, cluster_sum = 0;
  for (int r = 0; r < runs; ++r) {
    ASSIGN_OR_RETURN(const SimRun run, SimulateRun(ranks, step_of, stragglers, out.pause_s_per_step, reply_s,
                                                   std::min(x_in, reply_s), generator));
    const double slowest = *std::max_element(run.rank_step_s.begin(), run.rank_step_s.end());
    max_sum += slowest;
    max_sq += slowest * slowest;
    cluster_sum += run.cluster_step_s;
    for (int j = 0; j < n; ++j) rank_sum[j] += run.rank_step_s[j];
  }
  out.step_s = max_sum / runs;
  out.sd_s = std::sqrt(std::max(0.0, max_sq / runs - out.step_s * out.step_s));
  out.cluster_step_s = cluster_sum / runs;
  for (int j = 0; j < n; ++j) {
    out.rank_step_s.push_back(rank_sum[j] / runs);
    out.mean_rank_step_s += rank_sum[j] / runs / n;
  }
  return out;
}

}  // namespace psring::bench::model
