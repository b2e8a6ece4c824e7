#include "bench/model/alpha_beta.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace psring::bench {

absl::StatusOr<ModelFit> FitAlphaBeta(const std::vector<Measurement>& points) {
  // Rows scaled by 1/T: minimise sum (alpha*a_i/T_i + beta*b_i/T_i - 1)^2.
  double saa = 0, sab = 0, sbb = 0, sa = 0, sb = 0;
  std::vector<const Measurement*> used;
  for (const Measurement& m : points) {
    const double a = m.terms.messages;
    const double b = m.terms.link_bytes;
    // No bytes on any link (the ring or co-located shards on one node): nothing the network model describes.
    if (m.seconds <= 0 || b == 0) continue;
    const double x = a / m.seconds, y = b / m.seconds;
    saa += x * x;
    sab += x * y;
    sbb += y * y;
    sa += x;
    sb += y;
    used.push_back(&m);
  }
  if (used.empty()) {
    return absl::InvalidArgumentError(
        "no measurement to fit: need at least one point with a positive time that moves bytes over a link "
        "(e.g. N > 1)");
  }
  ModelFit fit;
  fit.points = static_cast<int>(used.size());
  const double det = saa * sbb - sab * sab;
  // Proportional features (one shape of point, e.g. ps-1 at a single size: 2N and N*S): alpha and beta are
  // not separable and either alone predicts the same; beta is the one reported as a bandwidth.
  const bool separable = det > 1e-9 * saa * sbb;
  bool solved = false;
  if (separable) {
    fit.alpha = (sa * sbb - sb * sab) / det;
    fit.beta = (saa * sb - sab * sa) / det;
    solved = fit.alpha >= 0 && fit.beta >= 0;
  }
  if (!solved && !separable && sbb > 0) {
    fit.alpha = 0;
    fit.beta = sb / sbb;
    solved = true;
  }
  if (!solved) {
    // Constrained optimum on an edge: the better of beta alone and alpha alone.
    ModelFit beta_only = fit, alpha_only = fit;
    beta_only.alpha = 0;
    beta_only.beta = sbb > 0 ? sb / sbb : 0;
    alpha_only.beta = 0;
    alpha_only.alpha = saa > 0 ? sa / saa : 0;
    auto cost = [&](const ModelFit& f) {
      return f.alpha * f.alpha * saa + 2 * f.alpha * f.beta * sab + f.beta * f.beta * sbb -
             2 * (f.alpha * sa + f.beta * sb);
    };
    fit = cost(beta_only) <= cost(alpha_only) ? beta_only : alpha_only;
  }
  for (const Measurement* m : used) {
    const double predicted = PredictSeconds(fit, m->terms);
    fit.max_relative_error = std::max(fit.max_relative_error, std::abs(predicted - m->seconds) / m->seconds);
  }
  return fit;
}

double PredictSeconds(const ModelFit& fit, const CostTerms& terms) {
  return fit.alpha * terms.messages + fit.beta * terms.link_bytes;
}

StepEstimate OverlapStep(const StepShape& shape, const std::function<double(double bytes)>& bucket_seconds) {
  StepEstimate estimate;
  double end = 0;  // when the exchange stream is free, seconds after backward starts
  for (const BucketSpec& bucket : shape.buckets) {
    const double seconds = bucket_seconds(bucket.bytes);
    end = std::max(end, bucket.ready_s) + seconds;
    estimate.exchange_s += seconds;
  }
  estimate.step_s = shape.forward_s + std::max(shape.backward_s, end);
  estimate.exposed_s = estimate.step_s - shape.forward_s - shape.backward_s;
  return estimate;
}

StepShape ShapeOf(const std::vector<LayerCost>& layers, const std::vector<ByteRange>& buckets) {
  StepShape shape;
  for (const LayerCost& layer : layers) {
    shape.forward_s += layer.forward_s;
    shape.backward_s += layer.backward_s;
  }
  for (const ByteRange& bucket : buckets) {
    // Backward time spent on the layers from the last one down to the bucket's first.
    double ready = 0, offset = 0;
    for (const LayerCost& layer : layers) {
      if (offset >= bucket.offset) ready += layer.backward_s;
      offset += layer.bytes;
    }
    shape.buckets.push_back({ready, bucket.bytes});
  }
  return shape;
}

StepShape FlatShape(double forward_s, double backward_s, double total_bytes) {
  return {forward_s, backward_s, {{backward_s, total_bytes}}};
}

absl::StatusOr<ModelFit> ProjectFit(const ModelFit& fit, double fitted_link_bytes_per_second,
                                    const ProjectionTarget& target) {
  if (fitted_link_bytes_per_second <= 0) {
    return absl::InvalidArgumentError(
        "the fit has no link rate to scale from (unlimited or loopback links): measure on an emulated cluster "
        "with --link to project onto another cluster");
  }
  if (target.link_bytes_per_second <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--project_link: the rate must be positive (e.g. 25gbit), got ", target.link_bytes_per_second,
                     " B/s"));
  }
  if (target.latency_s < 0) return absl::InvalidArgumentError("--project_latency must be >= 0 (e.g. 5us)");
  ModelFit projected = fit;
  projected.alpha = target.latency_s;
  projected.beta = fit.beta * fitted_link_bytes_per_second / target.link_bytes_per_second;
  return projected;
}

}  // namespace psring::bench
