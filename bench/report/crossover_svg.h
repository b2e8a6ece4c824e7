// A crossover map (bench/model/crossover.h) as a standalone SVG heatmap in bench/plot.h's style: one cell per
// grid point coloured by the predicted winner, paler where its margin is small, grey where the exchanges are
// within 2 % of each other; measured points (validation runs) drawn as circles in their measured winner's
// colour where they fall inside the map; a legend beside the map; titled as a model.
//
//   std::string svg = RenderCrossoverSvg(map, "resnet50, N = 8, 25 MiB buckets", "model of box, 2026-12-01",
//                                        {{12.5e6 * 8, 5e-3, Topology::kRing}});
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_CROSSOVER_SVG_H_
#define PSRING_BENCH_MODEL_CROSSOVER_SVG_H_

#include <string>
#include <vector>

#include "bench/model/collective.h"
#include "bench/model/crossover.h"

namespace psring::bench::model {

// Margins below this are drawn as ties.
inline constexpr double kMapTieMargin = 0.02;

struct MeasuredPoint {
  double x = 0;  // in the map's x units (bytes/s, seconds or nodes)
  double y = 0;
  Topology winner = Topology::kRing;  // the measured fastest exchange
};

// `title` follows "MODEL, not measured: ". Points outside the map's ranges are left out.
std::string RenderCrossoverSvg(const CrossoverMap& map, const std::string& title, const std::string& subtitle,
                               const std::vector<MeasuredPoint>& measured);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_CROSSOVER_SVG_H_
