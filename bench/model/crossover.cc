#include "bench/model/crossover.h"

#include <algorithm>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "bench/model/project.h"

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

}  // namespace psring::bench::model
