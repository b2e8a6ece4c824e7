// The alpha-beta cost model of a gradient exchange (derived in bench/PERFORMANCE.md 3), its least-squares fit
// and its predictions.
//
// One exchange step of S bytes over N workers (K parameter-server shards) costs
//
//   T(N, S) = alpha * messages(N, K) + beta * link_bytes(N, K, S)
//
// where each exchange's plug-in (bench/exchanges.h) gives the two terms: the messages the busiest host handles
// one after another in a step, and the bytes through the busiest link direction. alpha is a per-message
// latency in seconds and beta the seconds per byte on the busiest link; with ideal links beta = 1/B. For the
// PS the push and the pull of a step may or may not overlap; beta absorbs that factor (up to 2/B), and the
// fitted 1/beta is reported as the exchange's effective bandwidth. bench/PERFORMANCE.md 3 derives the terms.
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_COST_MODEL_H_
#define PSRING_BENCH_COST_MODEL_H_

#include <vector>

#include "absl/status/statusor.h"

namespace psring::bench {

// The model's two features of one step.
struct CostTerms {
  double messages = 0;    // latency terms
  double link_bytes = 0;  // bytes through the busiest link direction; 0: nothing crosses a link
};

struct Measurement {
  CostTerms terms;
  double seconds = 0;  // measured exchange time per step
};

struct ModelFit {
  double alpha = 0;  // seconds per latency term
  double beta = 0;   // seconds per byte on the busiest link
  int points = 0;    // measurements used (positive time, bytes over a link)
  double max_relative_error = 0;  // max |predicted - measured| / measured over those points
};

// Fits alpha >= 0 and beta >= 0 minimising the sum of squared *relative* errors ((T_model - T) / T)^2, so
// small and large steps count alike. Points that move no bytes over a link (ring or ps-colocated at N = 1:
// local copies only) are outside the model and ignored. With a single usable shape of point (all features
// proportional) alpha is set to 0 and beta alone is fitted. kInvalidArgument when no measurement is usable.
absl::StatusOr<ModelFit> FitAlphaBeta(const std::vector<Measurement>& points);

// T of the model for one step with these terms.
double PredictSeconds(const ModelFit& fit, const CostTerms& terms);

}  // namespace psring::bench

#endif  // PSRING_BENCH_COST_MODEL_H_
