// Crossover maps (data only): the projected winner between the exchanges and its margin on a grid of
// conditions, from the frozen model and one workload step. Two maps users ask for:
//
//   link rate (1-400 Gbit/s, log) x one-way latency (1 us - 10 ms, log), at fixed N
//   nodes N x link rate, at fixed latency
//   the slow rank's compute factor x link rate, at fixed N and latency (the straggler axis, below)
//
//   ASSIGN_OR_RETURN(CrossoverMap map, LinkLatencyMap(model, shape, base, LogSpaced(125e6, 50e9, 24),
//                                                     LogSpaced(1e-6, 1e-2, 20)));
//   std::string svg = RenderCrossoverSvg(map, measured_points, title);   // bench/model/crossover_svg.h
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_CROSSOVER_H_
#define PSRING_BENCH_MODEL_CROSSOVER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/model/schedule.h"

namespace psring::bench::model {

// kStragglerFactor: the slow rank's compute factor (>= 1) of a straggler map.
enum class AxisQuantity { kLinkRate, kLatency, kNodes, kStragglerFactor };

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
  // The winner's 90 % interval clears every other's (Projection::determined); false: "undetermined", the
  // model cannot tell the fastest apart (the maps draw it grey).
  bool determined = true;
  // The fastest (the point prediction, determined or not) is a PS whose window burst exceeds the base's port
  // buffer (Projection's Incast marked): its lead includes the incast term's cost only where that holds (a
  // round trip >= kIncastMinRoundTripS and a model file with the term). Never without a port buffer.
  bool incast = false;
  // With every PS window round at 0 (Projection::fastest_without_round) another exchange is fastest: the
  // model file's window round, the calibration host's unless WithWindowRound set the target's, decides it.
  bool round_decides = false;
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

// The straggler axis (issue 35): winner per cell of the slow rank's compute factor (x, >= 1, increasing) by
// link rate (y) at base.nodes and base.latency_s, one rank stretched by x and every rank by the log-normal
// noise `noise_sigma` (trainer/straggler.h's injection), each exchange's step from bench/model/
// straggler_model.h: sync steps wait for the slowest draw (the PS taking in early pushes); with
// backup_workers B > 0 the PS topologies are compared by their quorum's step (time between closes). A model,
// not a measurement.
//
//   ASSIGN_OR_RETURN(StragglerCrossoverMap m, StragglerLinkMap(model, shape, base, {1, 2, 4, 8},
//                                                              LogSpaced(125e6, 50e9, 8), 0.3, 0));
//   std::cout << FormatStragglerMap(m);
struct StragglerCrossoverMap {
  std::vector<double> factors;       // x
  std::vector<double> link_rates;    // y, bytes/s
  std::vector<Topology> topologies;  // AllTopologies()
  std::vector<CrossoverCell>
      cells;  // row-major: cells[iy * factors.size() + ix]; bound unset
  Conditions base;
  double noise_sigma = 0;
  int backup_workers = 0;
  const CrossoverCell& At(size_t ix, size_t iy) const { return cells[iy * factors.size() + ix]; }
};

// kInvalidArgument for an empty or non-increasing axis, a factor < 1, a negative sigma, B outside [0, N);
// the errors of ParamsOf and PredictStragglerStep.
absl::StatusOr<StragglerCrossoverMap> StragglerLinkMap(const proto::CostModelFile& model,
                                                       const StepShape& shape, const Conditions& base,
                                                       const std::vector<double>& factors,
                                                       const std::vector<double>& link_rates,
                                                       double noise_sigma, int backup_workers);

// The map with the factor as its x axis (AxisQuantity::kStragglerFactor), for RenderCrossoverSvg.
CrossoverMap AsCrossoverMap(const StragglerCrossoverMap& map);

// The map as text: a header naming the conditions, then one row per link rate, one column per factor, each
// cell the winner's name and its margin ("ring +12%"). Lines start with "# ".
std::string FormatStragglerMap(const StragglerCrossoverMap& map);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_CROSSOVER_H_
