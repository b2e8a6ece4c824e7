#include "bench/core/run_record.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace psring::bench {

double WorkerBucketMb(const ScalingOptions& options, double real_mb) {
  return options.mode == "replay" && options.bytes_scale > 0 ? real_mb / options.bytes_scale : real_mb;
}

proto::Workload ScaledWorkload(proto::Workload workload, double bytes_scale) {
  if (bytes_scale == 1) return workload;
  for (proto::WorkloadLayer& l : *workload.mutable_layers()) {
    l.set_params(std::max<int64_t>(1, std::llround(static_cast<double>(l.params()) / bytes_scale)));
  }
  workload.set_source(absl::StrCat(workload.source(), "; parameters divided by ", bytes_scale, " (--bytes_scale)"));
  return workload;
}

}  // namespace psring::bench
