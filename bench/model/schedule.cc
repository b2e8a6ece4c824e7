#include "bench/model/schedule.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace psring::bench::model {

double LargestBucketBytes(const StepShape& shape) {
  double largest = 0;
  for (const BucketRelease& b : shape.buckets) largest = std::max(largest, b.bytes);
  return largest;
}

StepShape FlatStep(double forward_s, double backward_s, double bytes) {
  return {forward_s, backward_s, {{backward_s, bytes}}};
}

absl::StatusOr<StepTime> PredictStep(Topology topology, const ExchangeParams& params,
                                     const Conditions& conditions, const StepShape& shape) {
  if (auto s = ValidateParams(params); !s.ok()) return s;
  if (auto s = ValidateConditions(topology, conditions); !s.ok()) return s;
  for (double v : {shape.forward_s, shape.backward_s}) {
    if (!(std::isfinite(v) && v >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("forward and backward times must be finite and >= 0, got ",
                                                     v, ": check the workload profile"));
    }
  }
  StepTime step;
  double end = 0, previous_ready = 0;
  size_t chain_start = 0;  // first bucket after the stream last waited for backward
  // The PS streams its buckets through one round trip per step (see schedule.h); the ring pays each.
  const bool streamed = topology != Topology::kRing;
  double fixed = 0, incast = 0;
  for (size_t i = 0; i < shape.buckets.size(); ++i) {
    const BucketRelease& bucket = shape.buckets[i];
    if (!(bucket.ready_s >= previous_ready && bucket.ready_s <= shape.backward_s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket ", i, " is released at ", bucket.ready_s, " s: release times must be in [0, ",
                       shape.backward_s, "] (the backward time) and non-decreasing"));
    }
    if (!(std::isfinite(bucket.bytes) && bucket.bytes >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("bucket ", i, " has ", bucket.bytes, " bytes"));
    }
    previous_ready = bucket.ready_s;
    Conditions c = conditions;
    c.bytes = bucket.bytes;
    BucketTime b;
    b.collective = PredictCollectiveUnchecked(topology, params, c);
    if (bucket.ready_s >= end) chain_start = i;
    b.start_s = std::max(bucket.ready_s, end);
    const CollectiveTime& t = b.collective;
    // The stream drains once, after its last byte (collective.h drain_windows): the buckets before the last
    // keep the port busy while their streams' last windows cross, so they pay their link time without it.
    const bool last = i + 1 == shape.buckets.size();
    const double charged =
        streamed ? std::max({last ? t.link_s : t.link_s - t.drain_s, t.window_s, t.cpu_s}) : t.seconds;
    b.end_s = end = b.start_s + charged;
    step.exchange_s += charged;
    if (streamed && last) fixed = t.latency_s + t.software_s;
    if (streamed) incast = std::max(incast, t.incast_s);  // the ring has none (IncastCostOf)
    step.buckets.push_back(b);
  }
  // The stream's loss at an overflowing port (collective.h IncastCostOf), once per step: its largest
  // bucket's.
  fixed += incast;
  step.incast_s = incast;
  end += fixed;
  step.exchange_s += fixed;
  step.step_s = shape.forward_s + std::max(shape.backward_s, end);
  step.exposed_s = step.step_s - shape.forward_s - shape.backward_s;
  if (end <= shape.backward_s) return step;  // bound stays compute

  // Time per bound along the chain that ends last; the throughput part counts under its own limit.
  std::array<double, 5> per_bound{};
  per_bound[static_cast<int>(Bound::kLatency)] += fixed - incast;  // the loss is no bound's
  for (size_t i = chain_start; i < step.buckets.size(); ++i) {
    const CollectiveTime& t = step.buckets[i].collective;
    if (!streamed) per_bound[static_cast<int>(Bound::kLatency)] += t.latency_s + t.software_s;
    const double throughput = std::max({t.link_s, t.window_s, t.cpu_s});
    if (throughput > 0) {
      const Bound limit = throughput == t.link_s     ? Bound::kLink
                          : throughput == t.window_s ? Bound::kWindow
                                                     : Bound::kCpu;
      per_bound[static_cast<int>(limit)] += throughput;
    }
  }
  step.bound = static_cast<Bound>(std::max_element(per_bound.begin(), per_bound.end()) - per_bound.begin());
  return step;
}

}  // namespace psring::bench::model
