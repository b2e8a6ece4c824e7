// A workload profile (trainer/workload.h) as the schedule sees it: forward and backward time, and the buckets
// trainer::BucketPlan makes of its real layer sizes at a real bucket cap (DDP's caps: 25 MiB, the first
// 1 MiB), each released when backward has produced its first layer (backward runs last layer first).
//
//   ASSIGN_OR_RETURN(proto::Workload w, trainer::LoadWorkload("resnet50"));
//   ASSIGN_OR_RETURN(StepShape shape, WorkloadStep(w, 25));   // 0: flat, one bucket after backward
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_WORKLOAD_STEP_H_
#define PSRING_BENCH_MODEL_WORKLOAD_STEP_H_

#include "absl/status/statusor.h"
#include "bench/model/schedule.h"
#include "proto/workload.pb.h"
#include "trainer/exchange.h"

namespace psring::bench::model {

// Gradients travel as float32.
inline constexpr double kBytesPerParameter = 4;

// kInvalidArgument (BucketPlan's) for a negative or non-finite cap, or a profile without layers.
absl::StatusOr<StepShape> WorkloadStep(const proto::Workload& workload, double bucket_mb,
                                       double first_bucket_mb = trainer::kDefaultFirstBucketMb);

// The gradient bytes of one step of `workload`: every layer's parameters as float32.
double WorkloadBytes(const proto::Workload& workload);

// The step workers replaying `workload` under --bytes_scale run: its parameters divided by `bytes_scale`
// (bench/core/run_record.h ScaledWorkload) and both caps, given for the real model, divided alike (as the
// harness divides the workers' flags, WorkerBucketMb). WorkloadStep's errors.
absl::StatusOr<StepShape> ReplayedWorkloadStep(const proto::Workload& workload, double bytes_scale,
                                               double bucket_mb, double first_bucket_mb);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_WORKLOAD_STEP_H_
