// Crossover maps (data only): the projected winner between the exchanges and its margin on a grid of
// conditions, from the frozen model and one workload step. Two maps users ask for:
//
//   link rate (1-400 Gbit/s, log) x one-way latency (1 us - 10 ms, log), at fixed N
//   nodes N x link rate, at fixed latency
//
//   ASSIGN_OR_RETURN(CrossoverMap map, LinkLatencyMap(model, shape, base, LogSpaced(125e6, 50e9, 24),
//                                                     LogSpaced(1e-6, 1e-2, 20)));
//   std::string svg = RenderCrossoverSvg(map, measured_points, title);   // bench/model/crossover_svg.h
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_CROSSOVER_H_
#define PSRING_BENCH_MODEL_CROSSOVER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/model/schedule.h"

namespace psring::bench::model {

enum class AxisQuantity { kLinkRate, kLatency, kNodes };

struct MapAxis {
  AxisQuantity quantity = AxisQuantity::kLinkRate;
  std::vector<double> values;  // increasing: bytes/s, seconds or nodes
};

struct CrossoverCell {
  int winner = 0;                // index into CrossoverMap::topologies
  double margin = 0;             // second fastest step / fastest step - 1
  Bound winner_bound = Bound::kLink;
  std::vector<double> step_s;    // per topology
  // How far the cell lies outside the model file's calibrated coverage: the largest factor over the
  // topologies (model_file.h ExtrapolationOf; 0 where the file records none).
  double extrapolation = 0;
};

struct CrossoverMap {
  MapAxis x, y;
  std::vector<Topology> topologies;   // AllTopologies()
  std::vector<CrossoverCell> cells;   // row-major: cells[iy * x.values.size() + ix]
  Conditions base;                    // the fixed conditions (the axes override theirs)
  const CrossoverCell& At(size_t ix, size_t iy) const { return cells[iy * x.values.size() + ix]; }
};

// `count` values from lo to hi, evenly spaced in log (count >= 2, 0 < lo < hi); kInvalidArgument otherwise.
absl::StatusOr<std::vector<double>> LogSpaced(double lo, double hi, int count);

// Winner per cell of x (link rate) by y (latency) at base.nodes. Errors of Project, and kInvalidArgument
// for an empty or non-increasing axis.
absl::StatusOr<CrossoverMap> LinkLatencyMap(const proto::CostModelFile& model, const StepShape& shape,
                                            const Conditions& base, const std::vector<double>& link_rates,
                                            const std::vector<double>& latencies);

// Winner per cell of x (nodes) by y (link rate) at base.latency_s.
absl::StatusOr<CrossoverMap> NodesLinkMap(const proto::CostModelFile& model, const StepShape& shape,
                                          const Conditions& base, const std::vector<double>& nodes,
                                          const std::vector<double>& link_rates);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_CROSSOVER_H_
