#include "bench/model/crossover.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/model/model_file.h"
#include "bench/model/project.h"
#include "bench/model/straggler_model.h"
#include "bench/model/uncertainty.h"
#include "common/status_macros.h"

namespace psring::bench::model {
namespace {

absl::Status CheckAxis(const MapAxis& axis, const char* name) {
  if (axis.values.empty()) return absl::InvalidArgumentError(absl::StrCat("the map's ", name, " axis is empty"));
  for (size_t i = 0; i < axis.values.size(); ++i) {
    if (!(std::isfinite(axis.values[i]) && axis.values[i] > 0) ||
        (i > 0 && !(axis.values[i] > axis.values[i - 1]))) {
      return absl::InvalidArgumentError(
          absl::StrCat("the map's ", name, " axis must be positive and increasing; value ", i, " is ",
                       axis.values[i]));
    }
  }
  return absl::OkStatus();
}

void Set(AxisQuantity quantity, double value, Conditions* c) {
  switch (quantity) {
    case AxisQuantity::kLinkRate: c->link_bytes_per_second = value; break;
    case AxisQuantity::kLatency: c->latency_s = value; break;
    case AxisQuantity::kNodes: c->nodes = static_cast<int>(std::lround(value)); break;
    case AxisQuantity::kStragglerFactor: break;  // not a condition: StragglerLinkMap reads it itself
  }
}

absl::StatusOr<CrossoverMap> BuildMap(const proto::CostModelFile& model, const StepShape& shape,
                                      const Conditions& base, MapAxis x, MapAxis y) {
  if (absl::Status s = CheckAxis(x, "x"); !s.ok()) return s;
  if (absl::Status s = CheckAxis(y, "y"); !s.ok()) return s;
  CrossoverMap map;
  map.x = std::move(x);
  map.y = std::move(y);
  map.base = base;
  map.topologies = AllTopologies();
  for (double yv : map.y.values) {
    for (double xv : map.x.values) {
      Conditions c = base;
      Set(map.x.quantity, xv, &c);
      Set(map.y.quantity, yv, &c);
      absl::StatusOr<Projection> p = Project(model, c, shape);
      if (!p.ok()) return p.status();
      CrossoverCell cell;
      cell.winner = p->fastest;
      cell.margin = p->margin;
      cell.winner_bound = p->exchanges[p->fastest].step.bound;
      cell.determined = p->determined;
      cell.incast = p->exchanges[p->fastest].incast.marked();
      cell.round_decides = p->fastest_without_round != p->fastest;
      for (const ExchangeProjection& e : p->exchanges) {
        cell.step_s.push_back(e.step.step_s);
        cell.extrapolation = std::max(cell.extrapolation, e.extrapolation.factor);
      }
      map.cells.push_back(std::move(cell));
    }
  }
  return map;
}

}  // namespace

absl::StatusOr<std::vector<double>> LogSpaced(double lo, double hi, int count) {
  if (!(count >= 2 && lo > 0 && hi > lo && std::isfinite(hi))) {
    return absl::InvalidArgumentError(
        absl::StrCat("a log-spaced axis needs 0 < lo < hi and at least 2 values, got ", lo, "..", hi, " x ", count));
  }
  std::vector<double> values;
  for (int i = 0; i < count; ++i) values.push_back(lo * std::pow(hi / lo, static_cast<double>(i) / (count - 1)));
  values.back() = hi;
  return values;
}

absl::StatusOr<CrossoverMap> LinkLatencyMap(const proto::CostModelFile& model, const StepShape& shape,
                                            const Conditions& base, const std::vector<double>& link_rates,
                                            const std::vector<double>& latencies) {
  return BuildMap(model, shape, base, {AxisQuantity::kLinkRate, link_rates}, {AxisQuantity::kLatency, latencies});
}

absl::StatusOr<CrossoverMap> NodesLinkMap(const proto::CostModelFile& model, const StepShape& shape,
                                          const Conditions& base, const std::vector<double>& nodes,
                                          const std::vector<double>& link_rates) {
  return BuildMap(model, shape, base, {AxisQuantity::kNodes, nodes}, {AxisQuantity::kLinkRate, link_rates});
}

absl::StatusOr<StragglerCrossoverMap> StragglerLinkMap(const proto::CostModelFile& model,
                                                       const StepShape& shape, const Conditions& base,
                                                       const std::vector<double>& factors,
                                                       const std::vector<double>& link_rates,
                                                       double noise_sigma, int backup_workers) {
  RETURN_IF_ERROR(CheckAxis({AxisQuantity::kLinkRate, factors}, "straggler factor"));
  RETURN_IF_ERROR(CheckAxis({AxisQuantity::kLinkRate, link_rates}, "link rate"));
  if (factors.front() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("the straggler axis starts at factor ", factors.front(),
                                                   ": factors are >= 1 (1: no straggler)"));
  }
  if (!(std::isfinite(noise_sigma) && noise_sigma >= 0) || backup_workers < 0 ||
      backup_workers >= base.nodes) {
    return absl::InvalidArgumentError(absl::StrCat("noise sigma ", noise_sigma, " and backup workers ",
                                                   backup_workers,
                                                   ": need sigma >= 0 and 0 <= B < N = ", base.nodes));
  }
  const double largest_bucket = LargestBucketBytes(shape);
  StragglerCrossoverMap map;
  map.factors = factors;
  map.link_rates = link_rates;
  map.topologies = AllTopologies();
  map.base = base;
  map.noise_sigma = noise_sigma;
  map.backup_workers = backup_workers;
  for (double link : link_rates) {
    for (double factor : factors) {
      Conditions c = base;
      c.link_bytes_per_second = link;
      CrossoverCell cell;
      std::vector<PredictionInterval> intervals;
      for (size_t i = 0; i < map.topologies.size(); ++i) {
        StragglerConditions s;
        s.injected.slow_rank = factor > 1 ? 0 : -1;
        s.injected.factor = factor;
        s.injected.noise_sigma = noise_sigma;
        // Fewer draws than a validation: a map has many cells, and its winners need no 0.1 % figures.
        s.sync_draws = 1024;
        s.runs = 40;
        const bool backup = backup_workers > 0 && map.topologies[i] != Topology::kRing;
        if (backup) {
          s.rule = StepRule::kBackup;
          s.backup_workers = backup_workers;
        }
        // The interval is the exchange model's (its fitted parameters' covariance and scatter); the injected
        // distribution is known, and the simulation's draws are seeded, so the gradient is not noise.
        ASSIGN_OR_RETURN(const PredictionInterval interval,
                         IntervalOf(
                             model, map.topologies[i],
                             [&](const ExchangeParams& p) -> absl::StatusOr<double> {
                               ASSIGN_OR_RETURN(const StragglerStep step,
                                                PredictStragglerStep(map.topologies[i], p, c, shape, s));
                               return backup ? step.cluster_step_s : step.step_s;
                             },
                             c, largest_bucket));
        cell.step_s.push_back(interval.value);
        intervals.push_back(interval);
        cell.extrapolation =
            std::max(cell.extrapolation, ExtrapolationOf(model, map.topologies[i], c, largest_bucket).factor);
      }
      std::vector<double> sorted = cell.step_s;
      std::sort(sorted.begin(), sorted.end());
      cell.winner =
          static_cast<int>(std::min_element(cell.step_s.begin(), cell.step_s.end()) - cell.step_s.begin());
      cell.margin = sorted.size() > 1 ? sorted[1] / sorted[0] - 1 : 0;
      cell.determined = ClearWinner(intervals) == cell.winner;
      map.cells.push_back(std::move(cell));
    }
  }
  return map;
}

CrossoverMap AsCrossoverMap(const StragglerCrossoverMap& map) {
  CrossoverMap m;
  m.x = {AxisQuantity::kStragglerFactor, map.factors};
  m.y = {AxisQuantity::kLinkRate, map.link_rates};
  m.topologies = map.topologies;
  m.cells = map.cells;
  m.base = map.base;
  return m;
}

std::string FormatStragglerMap(const StragglerCrossoverMap& map) {
  std::string s = absl::StrFormat(
      "# straggler crossover (a model, not measured): the fastest exchange per cell and its margin over the "
      "next, "
      "N = %d, latency %s, one rank's compute x factor, every rank's x max(1, exp(%g Z))%s\n",
      map.base.nodes, FormatLatency(map.base.latency_s), map.noise_sigma,
      map.backup_workers > 0
          ? absl::StrFormat("; PS exchanges with %d backup worker(s), compared by their quorum's step",
                            map.backup_workers)
          : "");
  int undetermined = 0, extrapolated = 0;
  for (const CrossoverCell& cell : map.cells) {
    undetermined += !cell.determined;
    extrapolated += cell.extrapolation > kExtrapolationMarkFactor;
  }
  absl::StrAppend(&s, absl::StrFormat("# %d of %zu cells undetermined, shown (in brackets): the exchanges' 90 %% "
                                      "intervals overlap, the model cannot name the fastest there; %d EXTRAPOLATED "
                                      "> %gx beyond the calibration (hatched in the SVG)\n",
                                      undetermined, map.cells.size(), extrapolated, kExtrapolationMarkFactor));
  absl::StrAppend(&s, absl::StrFormat("# %-12s", "link \\ factor"));
  for (double f : map.factors) absl::StrAppend(&s, absl::StrFormat(" %18s", absl::StrFormat("x%g", f)));
  absl::StrAppend(&s, "\n");
  for (size_t iy = 0; iy < map.link_rates.size(); ++iy) {
    absl::StrAppend(&s, absl::StrFormat("# %-12s", FormatLinkRate(map.link_rates[iy])));
    for (size_t ix = 0; ix < map.factors.size(); ++ix) {
      const CrossoverCell& cell = map.At(ix, iy);
      // Undetermined (the 90 % intervals overlap): the point prediction in brackets, no winner claimed.
      const std::string claim =
          absl::StrFormat("%s +%.0f%%", TopologyName(map.topologies[cell.winner]), 100 * cell.margin);
      absl::StrAppend(&s, absl::StrFormat(" %18s", cell.determined ? claim : absl::StrCat("(", claim, ")")));
    }
    absl::StrAppend(&s, "\n");
  }
  return s;
}

}  // namespace psring::bench::model
