// The alpha-beta cost model of a gradient exchange (derived in bench/PERFORMANCE.md 3), its least-squares fit
// and its predictions.
//
// One exchange step of S bytes over N workers (K parameter-server shards) costs
//
//   T(N, S) = alpha * messages(N, K) + beta * link_bytes(N, K, S)
//
// where each exchange's description (bench/core/exchange.h) gives the two terms: the messages the busiest host handles
// one after another in a step, and the bytes through the busiest link direction. alpha is a per-message
// latency in seconds and beta the seconds per byte on the busiest link; with ideal links beta = 1/B. For the
// PS the push and the pull of a step may or may not overlap; beta absorbs that factor (up to 2/B), and the
// fitted 1/beta is reported as the exchange's effective bandwidth. bench/PERFORMANCE.md 3 derives the terms.
//
// With compute and overlap (bench/PERFORMANCE.md 3.2): a training step is forward, then backward, which hands
// its gradients over in buckets (last layer first); the buckets are exchanged one after another on one stream,
// bucket i starting when it is ready and the previous one is done. The step ends when backward and the last
// bucket are both done:
//
//   step = forward + max(backward, end of the last bucket)
//        ~ forward + max(backward, exchange) + the part that cannot hide (the bucket ready last, exchanged
//          after backward ends)
//
// and each bucket costs the alpha-beta model's time for its own bytes (one collective per bucket). One bucket
// ready at the end of backward is today's flat exchange: forward + backward + exchange.
//
// Projection: the fit carried to another cluster (a user's 25 Gbit/s network with 5 us of latency): alpha
// becomes the given latency, beta is scaled by emulated link / target link, so the exchange keeps the
// efficiency against its link it had on the emulated one.
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_ALPHA_BETA_H_
#define PSRING_BENCH_MODEL_ALPHA_BETA_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/core/exchange.h"
#include "bench/core/run_record.h"

namespace psring::bench {

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

// One bucket of a bucketed exchange.
struct BucketSpec {
  double ready_s = 0;  // when backward has produced all of its gradients, seconds after backward starts
  double bytes = 0;
};

// The compute of one step and the buckets backward hands over, in launch order (non-decreasing ready_s).
struct StepShape {
  double forward_s = 0;
  double backward_s = 0;
  std::vector<BucketSpec> buckets;
};

struct StepEstimate {
  double step_s = 0;      // forward + max(backward, end of the last bucket)
  double exchange_s = 0;  // sum of the buckets' exchange times (the exchange alone, nothing hidden)
  double exposed_s = 0;   // step_s - forward - backward: the exchange time the step waits for
};

// The step the schedule above gives, `bucket_seconds(bytes)` being one bucket's exchange time. No buckets:
// forward + backward.
StepEstimate OverlapStep(const StepShape& shape, const std::function<double(double bytes)>& bucket_seconds);

// One layer of a model as the cost model sees it (forward order).
struct LayerCost {
  double bytes = 0;       // its gradient
  double forward_s = 0;
  double backward_s = 0;
};

// A bucket as a byte range of the flat gradient (layers back to back in forward order).
struct ByteRange {
  double offset = 0;
  double bytes = 0;
};

// The step of `layers` whose gradients travel in `buckets` (launch order, each a run of whole layers):
// backward runs from the last layer to the first, so a bucket is ready when the layer at its offset is done.
StepShape ShapeOf(const std::vector<LayerCost>& layers, const std::vector<ByteRange>& buckets);

// A flat exchange of `total_bytes` after backward (--bucket_mb=0): one bucket ready when backward ends.
StepShape FlatShape(double forward_s, double backward_s, double total_bytes);

// `fit` (measured on links of `fitted_link_bytes_per_second`) carried to `target`: alpha = target latency,
// beta * fitted link / target link. kInvalidArgument when a rate is not positive or the latency negative.
absl::StatusOr<ModelFit> ProjectFit(const ModelFit& fit, double fitted_link_bytes_per_second,
                                    const ProjectionTarget& target);

}  // namespace psring::bench

#endif  // PSRING_BENCH_MODEL_ALPHA_BETA_H_
