#include "bench/model/workload_step.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/core/run_record.h"

namespace psring::bench::model {

absl::StatusOr<StepShape> WorkloadStep(const proto::Workload& workload, double bucket_mb, double first_bucket_mb) {
  if (workload.layers_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("workload '", workload.name(), "' has no layers"));
  }
  std::vector<size_t> sizes;
  StepShape shape;
  for (const proto::WorkloadLayer& layer : workload.layers()) {
    sizes.push_back(static_cast<size_t>(layer.params()));
    shape.forward_s += layer.forward_ms() / 1e3;
  }
  absl::StatusOr<trainer::BucketPlan> plan = trainer::BucketPlan::Create(sizes, bucket_mb, first_bucket_mb);
  if (!plan.ok()) return plan.status();
  // done_s[i]: backward time of layers i..last, summed from the last layer (so it never decreases with i
  // going down, as release times must not).
  std::vector<double> done_s(sizes.size());
  double backward_ms = 0;
  for (size_t i = sizes.size(); i-- > 0;) done_s[i] = (backward_ms += workload.layers(i).backward_ms()) / 1e3;
  shape.backward_s = backward_ms / 1e3;
  for (const trainer::FloatRange& bucket : plan->buckets()) {
    // Released once backward has produced its first layer (the one at its offset).
    size_t layer = 0, offset = 0;
    while (offset < bucket.offset) offset += sizes[layer++];
    shape.buckets.push_back({done_s[layer], bucket.count * kBytesPerParameter});
  }
  return shape;
}

double WorkloadBytes(const proto::Workload& workload) {
  double bytes = 0;
  for (const proto::WorkloadLayer& layer : workload.layers()) {
    bytes += kBytesPerParameter * static_cast<double>(layer.params());
  }
  return bytes;
}

absl::StatusOr<StepShape> ReplayedWorkloadStep(const proto::Workload& workload, double bytes_scale,
                                               double bucket_mb, double first_bucket_mb) {
  return WorkloadStep(ScaledWorkload(workload, bytes_scale), bucket_mb / bytes_scale,
                      first_bucket_mb / bytes_scale);
}

}  // namespace psring::bench::model
