#include "bench/core/run_record.h"

namespace psring::bench {

double WorkerBucketMb(const ScalingOptions& options, double real_mb) {
  return options.mode == "replay" && options.bytes_scale > 0 ? real_mb / options.bytes_scale : real_mb;
}

}  // namespace psring::bench
