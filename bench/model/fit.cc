#include "bench/model/fit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/model/model_file.h"
#include "bench/model/validate.h"
#include "common/status_macros.h"

namespace psring::bench::model {
namespace {

// The searched parameters in log space; kNone (a log value past the grid) means "no limit".
constexpr double kNone = INFINITY;
constexpr int kEfficiency = 0, kWindow = 1, kCpu = 2, kShare = 3, kQueueing = 4, kContention = 5, kRound = 6,
              kDrain = 7;
constexpr int kCoordinates = 8;
using Theta = std::array<double, kCoordinates>;
// The smallest share (burst, window queueing, stream contention) the search keeps apart from none (log of
// 1e-3): below it the term changes a step by less than a thousandth of what it adds at 1.
bool IsShare(int k) { return k == kShare || k == kQueueing || k == kContention; }
// The shortest window round cost the search keeps apart from none (log of 1 us): below it a round trip of the
// shortest calibrated latency (1 ms) changes by less than a thousandth.
const double kRoundFloorLog = std::log(1e-6);
const double kShareFloorLog = std::log(1e-3);
// The drain's windows per stream (collective.h drain_windows): below a thousandth of a window none, and at
// most 64 (a drain that large is another term's job: the search would only chase noise there).
const double kDrainFloorLog = std::log(1e-3);
const double kDrainCeilingLog = std::log(64.0);

// Terms the fit holds off (dropped: the data could not identify them).
struct Forced {
  bool software = false;
  bool window = false;
  bool cpu = false;
  bool share = false;
  bool queueing = false;
  bool contention = false;
  bool round = false;
  bool drain = false;
};

struct Search {
  Topology topology;
  const std::vector<const MeasuredRun*>* runs;
  Forced forced;
  const std::vector<double>* weights;  // per run (RunWeights), the same length as runs

  ExchangeParams ParamsAt(const Theta& log_theta, double software_s) const {
    ExchangeParams p;
    p.software_s = software_s;
    p.efficiency = std::exp(log_theta[kEfficiency]);
    p.window_bytes = std::isinf(log_theta[kWindow]) ? 0 : std::exp(log_theta[kWindow]);
    p.cpu_bytes_per_second = std::isinf(log_theta[kCpu]) ? 0 : std::exp(log_theta[kCpu]);
    p.burst_share = std::isinf(log_theta[kShare]) ? 0 : std::exp(log_theta[kShare]);  // none: no credit
    p.window_queueing = std::isinf(log_theta[kQueueing]) ? 0 : std::exp(log_theta[kQueueing]);
    p.stream_contention = std::isinf(log_theta[kContention]) ? 0 : std::exp(log_theta[kContention]);
    p.window_round_s = std::isinf(log_theta[kRound]) ? 0 : std::exp(log_theta[kRound]);
    p.drain_windows = std::isinf(log_theta[kDrain]) ? 0 : std::exp(log_theta[kDrain]);
    // window_update_share stays 0: the window round's cost took the place of the share that the fits of
    // 2026-11-28 to 2026-11-30 set to gRPC's 1/2 (collective.h window_round_s).
    return p;
  }

  // The best software_s >= 0 for the other parameters (closed form: the model is linear in it), and the cost.
  double Cost(const Theta& log_theta, double* software_s) const {
    ExchangeParams p = ParamsAt(log_theta, 0);
    double smm = 0, smr = 0;
    std::vector<std::pair<double, double>> rows;  // (rest / T, messages / T)
    for (size_t i = 0; i < runs->size(); ++i) {
      const MeasuredRun* run = (*runs)[i];
      const double w = (*weights)[i];
      const double rest = PredictCollectiveUnchecked(topology, p, run->conditions).seconds / run->seconds;
      const double m = CountsOf(topology, run->conditions.nodes,
                                ServersOf(topology, run->conditions.nodes, run->conditions.servers),
                                run->conditions.bytes)
                           .messages /
                       run->seconds;
      smm += w * m * m;
      smr += w * m * (1 - rest);
      rows.push_back({rest, m});
    }
    *software_s = smm > 0 && !forced.software ? std::max(0.0, smr / smm) : 0;
    double cost = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto [rest, m] = rows[i];
      cost += (*weights)[i] * (rest + m * *software_s - 1) * (rest + m * *software_s - 1);
    }
    return cost;
  }
};

std::vector<double> Residuals(Topology topology, const std::vector<const MeasuredRun*>& runs,
                              const ExchangeParams& p) {
  std::vector<double> r;
  for (const MeasuredRun* run : runs) {
    r.push_back(RelativeError(PredictCollectiveUnchecked(topology, p, run->conditions).seconds, run->seconds));
  }
  return r;
}

// Inverse of a small symmetric matrix by Gauss-Jordan; false when singular (relative to its largest diagonal).
bool Invert(std::vector<std::vector<double>> a, std::vector<std::vector<double>>* inverse) {
  const size_t n = a.size();
  std::vector<std::vector<double>> inv(n, std::vector<double>(n, 0));
  double scale = 0;
  for (size_t i = 0; i < n; ++i) inv[i][i] = 1, scale = std::max(scale, std::abs(a[i][i]));
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (!(std::abs(a[pivot][c]) > 1e-12 * scale)) return false;
    std::swap(a[c], a[pivot]);
    std::swap(inv[c], inv[pivot]);
    const double d = a[c][c];
    for (size_t k = 0; k < n; ++k) {
      a[c][k] /= d;
      inv[c][k] /= d;
    }
    for (size_t r = 0; r < n; ++r) {
      if (r == c || a[r][c] == 0) continue;
      const double f = a[r][c];
      for (size_t k = 0; k < n; ++k) {
        a[r][k] -= f * a[c][k];
        inv[r][k] -= f * inv[c][k];
      }
    }
  }
  *inverse = inv;
  return true;
}

// Standard errors of the parameters not held at a bound: s^2 (J^T W J)^-1 with s^2 = sum w r^2 / (n - p), J
// the Jacobian of the relative residuals (central differences) and W the runs' weights (RunWeights). A
// parameter that moves no residual (it never binds) makes J^T W J singular: then nothing is determined.
void StandardErrors(Topology topology, const std::vector<const MeasuredRun*>& runs,
                    const std::vector<double>& weights, ExchangeFit* fit) {
  std::vector<std::pair<double ExchangeParams::*, ParameterFit*>> free;
  auto add = [&](double ExchangeParams::*member, ParameterFit* parameter) {
    if (!parameter->at_bound) free.push_back({member, parameter});
  };
  add(&ExchangeParams::software_s, &fit->software_s);
  add(&ExchangeParams::efficiency, &fit->efficiency);
  add(&ExchangeParams::window_bytes, &fit->window_bytes);
  add(&ExchangeParams::cpu_bytes_per_second, &fit->cpu_bytes_per_second);
  add(&ExchangeParams::burst_share, &fit->burst_share);
  add(&ExchangeParams::window_queueing, &fit->window_queueing);
  add(&ExchangeParams::stream_contention, &fit->stream_contention);
  add(&ExchangeParams::window_round_s, &fit->window_round_s);
  add(&ExchangeParams::drain_windows, &fit->drain_windows);
  const size_t n = runs.size(), p = free.size();
  if (p == 0 || n <= p) return;
  std::vector<std::vector<double>> jacobian(p);
  for (size_t j = 0; j < p; ++j) {
    ExchangeParams hi = fit->params, lo = fit->params;
    // Relative steps, so parameters of very different units (seconds, bytes/s) are equally conditioned.
    const double h = 1e-4;
    hi.*(free[j].first) *= 1 + h;
    lo.*(free[j].first) *= 1 - h;
    const std::vector<double> rh = Residuals(topology, runs, hi), rl = Residuals(topology, runs, lo);
    for (size_t i = 0; i < n; ++i) jacobian[j].push_back((rh[i] - rl[i]) / (2 * h));
  }
  std::vector<std::vector<double>> jtj(p, std::vector<double>(p, 0)), cov;
  for (size_t a = 0; a < p; ++a) {
    for (size_t b = 0; b < p; ++b) {
      for (size_t i = 0; i < n; ++i) jtj[a][b] += weights[i] * jacobian[a][i] * jacobian[b][i];
    }
  }
  if (!Invert(jtj, &cov)) return;
  double rss = 0;
  const std::vector<double> residuals = Residuals(topology, runs, fit->params);
  for (size_t i = 0; i < n; ++i) rss += weights[i] * residuals[i] * residuals[i];
  const double s2 = rss / (n - p);
  for (size_t j = 0; j < p; ++j) {
    if (cov[j][j] >= 0) free[j].second->std_error = free[j].second->value * std::sqrt(s2 * cov[j][j]);
  }
  // The steps were relative, so s2 (J^T J)^-1 is the covariance of the parameters' logarithms.
  fit->covariance_terms.clear();
  fit->log_covariance.clear();
  for (size_t a = 0; a < p; ++a) {
    fit->covariance_terms.push_back(ParamName(free[a].first));
    for (size_t b = 0; b < p; ++b) fit->log_covariance.push_back(s2 * cov[a][b]);
  }
}

// A share in [0, 1] as fitted: held at a bound at 0 (none) or 1, and then exactly 1.
ParameterFit ShareFit(double* value) {
  *value = std::min(*value, 1.0);
  return {*value, -1, *value == 0 || *value == 1};
}

// One fit with `forced` terms held off: grid, pattern search, standard errors and covariance.
ExchangeFit FitWith(Topology topology, const std::vector<const MeasuredRun*>& used,
                    const std::vector<double>& weights, const Forced& forced);

// A run over an unlimited link (loopback): CPU-bound on the shared box, its own noise regime.
bool Unshaped(const MeasuredRun& run) { return !(run.conditions.link_bytes_per_second > 0); }

// The relative residuals' standard deviation over the shaped runs and over the unshaped ones (-1 where a
// regime has fewer than kMinRegimeRuns runs), each sqrt(sum r^2 / n_regime x n / (n - p)).
std::pair<double, double> ScatterByRegime(Topology topology, const std::vector<const MeasuredRun*>& used,
                                          const ExchangeFit& fit) {
  const std::vector<double> r = Residuals(topology, used, fit.params);
  double sum[2] = {0, 0};
  int count[2] = {0, 0};
  for (size_t i = 0; i < used.size(); ++i) {
    const int k = Unshaped(*used[i]) ? 1 : 0;
    sum[k] += r[i] * r[i];
    ++count[k];
  }
  const double n = static_cast<double>(used.size()), p = static_cast<double>(fit.covariance_terms.size());
  const double dof = n > p ? n / (n - p) : 1;
  const auto sd = [&](int k) { return count[k] >= kMinRegimeRuns ? std::sqrt(sum[k] / count[k] * dof) : -1; };
  return {sd(0), sd(1)};
}

}  // namespace

absl::StatusOr<ExchangeFit> FitExchange(Topology topology, const std::vector<MeasuredRun>& runs) {
  std::vector<const MeasuredRun*> used;
  bool shaped = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    const MeasuredRun& run = runs[i];
    if (run.topology != topology) continue;
    const std::string which = absl::StrCat("calibration run ", i, " (", TopologyName(topology), ")");
    if (absl::Status s = ValidateConditions(topology, run.conditions); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(which, ": ", s.message()));
    }
    if (run.conditions.cpu_speedup != 1) {
      return absl::InvalidArgumentError(absl::StrCat(which, ": cpu_speedup must be 1 (runs are measured here)"));
    }
    if (!(std::isfinite(run.seconds) && run.seconds > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(which, ": measured time ", run.seconds, " s is not > 0"));
    }
    if (topology == Topology::kRing && run.conditions.nodes == 1) continue;  // a ring of one exchanges nothing
    const Counts counts =
        CountsOf(topology, run.conditions.nodes,
                 ServersOf(topology, run.conditions.nodes, run.conditions.servers), run.conditions.bytes);
    shaped = shaped || (run.conditions.link_bytes_per_second > 0 && counts.link_bytes > 0);
    used.push_back(&run);
  }
  if (!shaped) {
    return absl::InvalidArgumentError(absl::StrCat(
        TopologyName(topology), ": no calibration run moves bytes over a rate-limited link, so the link "
        "efficiency cannot be fitted; calibrate at N >= 2 with a link rate (e.g. --link=100mbit)"));
  }

  // Fit, then drop the least identified term while one is unidentified (relative standard error above
  // kMaxRelativeStdError, or none at all), refitting the rest each time. The efficiency is never dropped (a
  // rate-limited run always needs it).
  const auto fit_with_drops = [&](const std::vector<double>& weights) -> absl::StatusOr<ExchangeFit> {
    Forced forced;
    std::vector<std::pair<ParameterFit ExchangeFit::*, ParameterFit>> dropped;
    for (;;) {
      ExchangeFit fit = FitWith(topology, used, weights, forced);
      ParameterFit ExchangeFit::*worst = nullptr;
      double worst_rse = kMaxRelativeStdError;
      for (ParameterFit ExchangeFit::*term :
           {&ExchangeFit::software_s, &ExchangeFit::window_bytes, &ExchangeFit::cpu_bytes_per_second,
            &ExchangeFit::burst_share, &ExchangeFit::window_queueing, &ExchangeFit::stream_contention,
            &ExchangeFit::window_round_s, &ExchangeFit::drain_windows}) {
        const ParameterFit& t = fit.*term;
        if (t.at_bound) continue;
        const double rse = t.std_error >= 0 && t.value > 0 ? t.std_error / t.value : INFINITY;
        if (rse > worst_rse) worst = term, worst_rse = rse;
      }
      if (worst == nullptr) {
        for (const auto& [term, before] : dropped) {
          ParameterFit& t = fit.*term;
          t.dropped = true;
          t.dropped_value = before.value;
          t.dropped_std_error = before.std_error;
        }
        absl::StatusOr<ErrorSummary> errors = SummarizeErrors(Residuals(topology, used, fit.params));
        if (!errors.ok()) return errors.status();
        fit.median_abs_rel_error = errors->median_abs;
        fit.max_abs_rel_error = errors->max_abs;
        return fit;
      }
      dropped.push_back({worst, fit.*worst});
      if (worst == &ExchangeFit::software_s) forced.software = true;
      if (worst == &ExchangeFit::window_bytes) forced.window = true;
      if (worst == &ExchangeFit::cpu_bytes_per_second) forced.cpu = true;
      if (worst == &ExchangeFit::burst_share) forced.share = true;
      if (worst == &ExchangeFit::window_queueing) forced.queueing = true;
      if (worst == &ExchangeFit::stream_contention) forced.contention = true;
      if (worst == &ExchangeFit::window_round_s) forced.round = true;
      if (worst == &ExchangeFit::drain_windows) forced.drain = true;
    }
  };
  // Two noise regimes: runs over shaped links (the network: a few per cent) and loopback runs (CPU-bound on
  // the shared cores: tens of per cent on 2 cores). One unweighted fit estimates each regime's scatter; the
  // final fit weighs every run by 1 / its regime's variance (relative to the shaped runs'), so the loopback
  // runs' noise neither drowns the network terms' standard errors nor widens the intervals of shaped
  // predictions (PERFORMANCE.md 9.14). With one regime only, the weights are 1 and the fit is the plain one.
  std::vector<double> weights(used.size(), 1.0);
  ASSIGN_OR_RETURN(ExchangeFit fit, fit_with_drops(weights));
  const auto [shaped_sd, unshaped_sd] = ScatterByRegime(topology, used, fit);
  if (shaped_sd > 0 && unshaped_sd > 0) {
    for (size_t i = 0; i < used.size(); ++i) {
      if (Unshaped(*used[i])) weights[i] = (shaped_sd * shaped_sd) / (unshaped_sd * unshaped_sd);
    }
    ASSIGN_OR_RETURN(fit, fit_with_drops(weights));
    const auto [shaped_after, unshaped_after] = ScatterByRegime(topology, used, fit);
    fit.residual_rel_sd = shaped_after;
    fit.loopback_residual_rel_sd = unshaped_after;
  }
  return fit;
}

namespace {

ExchangeFit FitWith(Topology topology, const std::vector<const MeasuredRun*>& used,
                    const std::vector<double>& weights, const Forced& forced) {
  const Search search{topology, &used, forced, &weights};
  // Coarse grid: efficiency 1 .. 0.02, window 1 KiB .. 1 GiB and CPU 1 MB/s .. 1 TB/s (factor 2 and
  // 10^0.25 apart), each with "none"; the burst share and the window queueing none (0) and 1/32 .. 1
  // (factor 2), each only where it can act (elsewhere it changes nothing and stays none).
  std::vector<double> efficiencies, windows = {kNone}, cpus = {kNone};
  for (int i = 0; i <= 40; ++i) efficiencies.push_back(std::log(0.02) * i / 40);
  for (int i = 10; i <= 30 && !forced.window; ++i) windows.push_back(i * std::log(2.0));
  for (int i = 0; i <= 24 && !forced.cpu; ++i) cpus.push_back(std::log(1e6) + i * 0.25 * std::log(10.0));
  // The burst share acts on the ring only, the window queueing on the PS only, each where a run can show it.
  bool bursts = false, latency = false;
  for (const MeasuredRun* run : used) {
    bursts = bursts || run->conditions.link_burst_bytes > 0;
    latency = latency || (run->conditions.latency_s > 0 && run->conditions.link_bytes_per_second > 0);
  }
  const bool ring = topology == Topology::kRing;
  const auto share_grid = [](bool searched) {
    std::vector<double> grid = {kNone};
    for (int i = 5; i >= 0 && searched; --i) grid.push_back(-i * std::log(2.0));
    return grid;
  };
  const std::vector<double> shares = share_grid(ring && bursts && !forced.share);
  const std::vector<double> queueings = share_grid(!ring && latency && !forced.queueing);
  // The stream contention is small per stream (a few per cent of the smaller time, times F - 1): the pattern
  // search starts from none, 1/64 and 1/8.
  std::vector<double> contentions = {kNone};
  if (!ring && latency && !forced.contention) contentions = {kNone, std::log(1.0 / 64), std::log(1.0 / 8)};
  // The window round's cost starts at 1 ms where a run can show it (the PS with latency and a link rate); the
  // pattern search moves it with the window, whose rounds it lengthens.
  const double round = !ring && latency && !forced.round ? std::log(1e-3) : kNone;
  // The drain (the PS where its link can bind with a window in flight) starts from none and from one window
  // per stream, like the contention a grid of its own would multiply the grid's cost.
  std::vector<double> drains = {kNone};
  if (!ring && latency && !forced.drain) drains = {kNone, 0.0};
  double step_of_sweep = 0.5;  // the pattern search's current step (log space)
  // A coordinate moved to `value` within its limits: the efficiency and the shares at most 1 (log 0), a share
  // or the window round below its floor none (walking towards 0, log -inf, it would take a step per
  // improvement forever).
  const auto clamp = [](int k, double value) {
    if (k == kEfficiency || IsShare(k)) value = std::min(value, 0.0);
    if (k == kDrain) value = std::min(value, kDrainCeilingLog);
    if ((IsShare(k) && value < kShareFloorLog) || (k == kRound && value < kRoundFloorLog) ||
        (k == kDrain && value < kDrainFloorLog)) {
      value = kNone;
    }
    return value;
  };
  // One exploratory sweep (Hooke and Jeeves 1961): each coordinate moved by +-step where that lowers the
  // cost.
  const auto explore = [&](Theta from, double from_cost) {
    for (int k = 0; k < kCoordinates; ++k) {
      if (std::isinf(from[k])) continue;
      for (double direction : {-1.0, 1.0}) {
        Theta trial = from;
        trial[k] = clamp(k, trial[k] + direction * step_of_sweep);
        double sw;
        const double cost = search.Cost(trial, &sw);
        if (cost < from_cost) from_cost = cost, from = trial;
      }
    }
    return std::make_pair(from, from_cost);
  };
  // Exploratory sweeps at a step halved down to 1e-7, each success followed by pattern moves: the move that
  // just helped is repeated from where it led, and explored around, while that lowers the cost. Along a
  // narrow valley (the window and the window round's cost trade the same round trips) coordinate moves alone
  // creep a step at a time; the pattern move doubles its stride each time it succeeds.
  const auto pattern_search = [&](Theta from, double from_cost) {
    for (step_of_sweep = 0.5; step_of_sweep > 1e-7; step_of_sweep /= 2) {
      for (;;) {
        auto [next, next_cost] = explore(from, from_cost);
        if (!(next_cost < from_cost)) break;
        for (;;) {
          Theta jump = next;
          for (int k = 0; k < kCoordinates; ++k) {
            if (!std::isinf(next[k]) && !std::isinf(from[k])) jump[k] = clamp(k, 2 * next[k] - from[k]);
          }
          from = next, from_cost = next_cost;
          double sw;
          const auto [after, after_cost] = explore(jump, search.Cost(jump, &sw));
          if (!(after_cost < from_cost)) break;
          next = after, next_cost = after_cost;
        }
      }
    }
    return std::make_pair(from, from_cost);
  };
  // The grid's best point for each combination of the burst share, the window queueing and the stream
  // contention (each none or a grid value), then a pattern search from every one of them: a search started
  // where a term is none never turns it on, so a term the coarse grid missed (a window a factor 2 off beside
  // it) would stay none.
  Theta best{};
  double best_cost = INFINITY, software_s = 0;
  for (double b : shares) {
    for (double q : queueings) {
      Theta start{};
      double start_cost = INFINITY;
      for (double e : efficiencies) {
        for (double w : windows) {
          for (double c : cpus) {
            double sw;
            const double cost = search.Cost({e, w, c, b, q, kNone, round, kNone}, &sw);
            if (cost < start_cost) start_cost = cost, start = {e, w, c, b, q, kNone, round, kNone};
          }
        }
      }
      // The stream contention starts from the same point at each of its values (a grid of its own would
      // multiply the grid's cost by their number; the pattern search moves the other terms with it).
      for (double x : contentions) {
        for (double d : drains) {
          Theta from = start;
          from[kContention] = x;
          from[kDrain] = d;
          double sw;
          const auto [found, found_cost] = pattern_search(from, search.Cost(from, &sw));
          if (found_cost < best_cost) best_cost = found_cost, best = found;
        }
      }
    }
  }
  // A limit that changes nothing is "none": the runs never saw it bind.
  for (int k : {kWindow, kCpu, kShare, kQueueing, kContention, kRound, kDrain}) {
    Theta trial = best;
    trial[k] = kNone;
    double sw;
    if (search.Cost(trial, &sw) <= best_cost * (1 + 1e-9) + 1e-15) best = trial;
  }
  best_cost = search.Cost(best, &software_s);

  ExchangeFit fit;
  fit.topology = topology;
  fit.params = search.ParamsAt(best, software_s);
  fit.runs = static_cast<int>(used.size());
  fit.software_s = {fit.params.software_s, -1, fit.params.software_s == 0};
  fit.efficiency = {fit.params.efficiency, -1, fit.params.efficiency >= 1};
  fit.window_bytes = {fit.params.window_bytes, -1, fit.params.window_bytes == 0};
  fit.cpu_bytes_per_second = {fit.params.cpu_bytes_per_second, -1, fit.params.cpu_bytes_per_second == 0};
  if (fit.efficiency.at_bound) fit.params.efficiency = fit.efficiency.value = 1;
  fit.burst_share = ShareFit(&fit.params.burst_share);
  fit.window_queueing = ShareFit(&fit.params.window_queueing);
  fit.stream_contention = ShareFit(&fit.params.stream_contention);
  fit.window_round_s = {fit.params.window_round_s, -1, fit.params.window_round_s == 0};
  fit.drain_windows = {fit.params.drain_windows, -1, fit.params.drain_windows == 0};
  StandardErrors(topology, used, weights, &fit);
  double rss = 0;
  const std::vector<double> residuals = Residuals(topology, used, fit.params);
  for (size_t i = 0; i < used.size(); ++i) rss += weights[i] * residuals[i] * residuals[i];
  const size_t free = fit.covariance_terms.size();
  fit.residual_rel_sd = used.size() > free ? std::sqrt(rss / (used.size() - free)) : 0;
  return fit;
}

proto::ModelParameter ToProto(const ParameterFit& p) {
  proto::ModelParameter out;
  out.set_value(p.value);
  if (p.std_error >= 0) out.set_std_error(p.std_error);
  out.set_at_bound(p.at_bound);
  if (p.dropped) {
    out.set_dropped(true);
    out.set_dropped_value(p.dropped_value);
    if (p.dropped_std_error >= 0) out.set_dropped_std_error(p.dropped_std_error);
  }
  return out;
}

}  // namespace

std::vector<ExtrapolationScatter> MeasureExtrapolation(Topology topology,
                                                       const std::vector<MeasuredRun>& runs) {
  struct Dimension {
    const char* name;
    double (*value)(const Conditions&);
  };
  const Dimension dimensions[] = {
      {"N", [](const Conditions& c) { return static_cast<double>(c.nodes); }},
      {"latency", [](const Conditions& c) { return c.latency_s; }},
      {"size", [](const Conditions& c) { return c.bytes; }},
      {"link", [](const Conditions& c) { return c.link_bytes_per_second; }},
  };
  std::vector<ExtrapolationScatter> out;
  for (const Dimension& d : dimensions) {
    std::set<double> values;
    for (const MeasuredRun& run : runs) {
      if (run.topology == topology && !Unshaped(run) && d.value(run.conditions) > 0) {
        values.insert(d.value(run.conditions));
      }
    }
    if (values.size() < 2) continue;
    // Held out: the values above the largest over sqrt(2), at least the largest; each held-out run is
    // predicted at its own factor over the largest value kept (a factor near 1 would divide noise by ~0).
    const double top = *values.rbegin();
    double kept_max = 0;
    for (double v : values) {
      if (v <= top / std::sqrt(2.0) || v == *values.begin()) kept_max = std::max(kept_max, v);
    }
    std::vector<MeasuredRun> inner;
    std::vector<const MeasuredRun*> held;
    for (const MeasuredRun& run : runs) {
      if (run.topology != topology) continue;
      (!Unshaped(run) && d.value(run.conditions) > kept_max ? held.push_back(&run) : inner.push_back(run));
    }
    absl::StatusOr<ExchangeFit> fit = FitExchange(topology, inner);
    if (!fit.ok()) continue;
    double sum_sq = 0, sum_log_factor_sq = 0;
    int judged = 0;
    for (const MeasuredRun* run : held) {
      const double predicted = PredictCollectiveUnchecked(topology, fit->params, run->conditions).seconds;
      if (!(predicted > 0)) continue;  // nothing exchanged (the ring at N = 1): no time to judge
      ++judged;
      const double e = std::log(run->seconds / predicted);
      const double log_factor = std::log(d.value(run->conditions) / kept_max);
      sum_sq += e * e;
      sum_log_factor_sq += log_factor * log_factor;
    }
    if (judged == 0) continue;
    ExtrapolationScatter x;
    x.dimension = d.name;
    x.factor = top / kept_max;
    x.held_out_runs = judged;
    x.rms_log_error = std::sqrt(sum_sq / judged);
    x.inner_scatter = fit->residual_rel_sd;
    x.log_sd_per_log_factor =
        std::sqrt(std::max(0.0, sum_sq - judged * x.inner_scatter * x.inner_scatter) / sum_log_factor_sq);
    out.push_back(x);
  }
  return out;
}

absl::StatusOr<proto::CostModelFile> FitModel(const std::vector<MeasuredRun>& runs, const FileInfo& info) {
  proto::CostModelFile file;
  file.set_version(kModelFileVersion);
  file.set_host(info.host);
  file.set_date(info.date);
  if (!info.note.empty()) file.set_note(info.note);
  if (!info.hosts_tcp.empty()) file.set_hosts_tcp(info.hosts_tcp);
  for (Topology topology : AllTopologies()) {
    absl::StatusOr<ExchangeFit> fit = FitExchange(topology, runs);
    if (!fit.ok()) return fit.status();
    proto::ExchangeModel* e = file.add_exchanges();
    e->set_exchange(TopologyName(topology));
    *e->mutable_software_s() = ToProto(fit->software_s);
    *e->mutable_efficiency() = ToProto(fit->efficiency);
    *e->mutable_window_bytes() = ToProto(fit->window_bytes);
    *e->mutable_cpu_bytes_per_second() = ToProto(fit->cpu_bytes_per_second);
    *e->mutable_burst_share() = ToProto(fit->burst_share);
    *e->mutable_window_queueing() = ToProto(fit->window_queueing);
    *e->mutable_stream_contention() = ToProto(fit->stream_contention);
    if (topology != Topology::kRing) *e->mutable_window_round_s() = ToProto(fit->window_round_s);
    if (topology != Topology::kRing) *e->mutable_drain_windows() = ToProto(fit->drain_windows);
    e->set_median_abs_rel_error(fit->median_abs_rel_error);
    e->set_max_abs_rel_error(fit->max_abs_rel_error);
    for (const std::string& term : fit->covariance_terms) e->add_covariance_terms(term);
    for (double v : fit->log_covariance) e->add_log_covariance(v);
    e->set_residual_rel_sd(fit->residual_rel_sd);
    if (fit->loopback_residual_rel_sd >= 0) e->set_loopback_residual_rel_sd(fit->loopback_residual_rel_sd);
    std::set<double> links, latencies, bytes;
    std::set<int> nodes, servers;
    for (const MeasuredRun& run : runs) {
      if (run.topology != topology) continue;
      links.insert(run.conditions.link_bytes_per_second);
      latencies.insert(run.conditions.latency_s);
      bytes.insert(run.conditions.bytes);
      nodes.insert(run.conditions.nodes);
      servers.insert(ServersOf(topology, run.conditions.nodes, run.conditions.servers));
    }
    proto::Coverage* c = e->mutable_coverage();
    for (double v : links) c->add_link_bytes_per_second(v);
    for (double v : latencies) c->add_latency_s(v);
    for (double v : bytes) c->add_bytes(v);
    for (int v : nodes) c->add_nodes(v);
    for (int v : servers) c->add_servers(v);
    c->set_runs(fit->runs);
    for (const ExtrapolationScatter& x : MeasureExtrapolation(topology, runs)) {
      proto::ExtrapolationScatter* p = e->add_extrapolation();
      p->set_dimension(x.dimension);
      p->set_log_sd_per_log_factor(x.log_sd_per_log_factor);
      p->set_factor(x.factor);
      p->set_held_out_runs(x.held_out_runs);
      p->set_rms_log_error(x.rms_log_error);
      p->set_inner_scatter(x.inner_scatter);
    }
  }
  if (absl::Status s = ValidateModelFile(file); !s.ok()) return s;
  return file;
}

}  // namespace psring::bench::model
