// A training step with its gradient buckets exchanged as backward releases them (DDP's overlap), each bucket
// one collective of bench/model/collective.h:
//
//   ring:  e_i = max(r_i, e_{i-1}) + x_i             r_i: when backward releases bucket i (from its start)
//   PS:    e_i = max(r_i, e_{i-1}) + thr_i,  end = e_last + fixed
//   step = forward + max(backward, end)              x_i: bucket i's collective time
//
// The ring runs one collective per bucket, one after another on one communication thread, in release order:
// every term (latency, software) is charged per bucket. The PS opens one PushPull stream per shard and step
// and streams every bucket's slice into it as it is released (ps/client.h): the buckets only gate when bytes
// can enter the stream, so each bucket adds its throughput time thr_i = max(link, window, cpu) and the
// stream's round trip and per-message software (fixed = hops * L + messages * software_s) are paid once,
// after its last byte, as is its loss at an overflowing server port (the largest bucket's incast_s, once)
// and its drain (collective.h drain_windows: only the last bucket's link time keeps its drain_s).
// One bucket released when backward ends (r = backward) is the flat exchange for both: step = forward +
// backward + x.
//
//   StepShape shape{0.03, 0.06, {{0.01, 4e6}, {0.06, 90e6}}};  // forward, backward, (release, bytes)
//   ASSIGN_OR_RETURN(StepTime t, PredictStep(Topology::kRing, params, conditions, shape));
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_SCHEDULE_H_
#define PSRING_BENCH_MODEL_SCHEDULE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "bench/model/collective.h"

namespace psring::bench::model {

struct BucketRelease {
  double ready_s = 0;  // r_i, seconds after backward starts (0 <= r_i <= backward_s)
  double bytes = 0;    // the bucket's gradient bytes
};

struct StepShape {
  double forward_s = 0;
  double backward_s = 0;
  std::vector<BucketRelease> buckets;  // in release order (non-decreasing ready_s)
};

// The largest bucket's bytes (0 without buckets): the size coverage checks and extrapolation factors read.
double LargestBucketBytes(const StepShape& shape);

// One bucket released when backward ends: the flat exchange of `bytes`.
StepShape FlatStep(double forward_s, double backward_s, double bytes);

struct BucketTime {
  double start_s = 0;  // max(r_i, e_{i-1}), from backward's start
  double end_s = 0;    // e_i (PS: when its bytes have entered the stream; the stream's fixed part follows)
  CollectiveTime collective;
};

struct StepTime {
  double step_s = 0;      // forward + max(backward, e_last)
  double exchange_s = 0;  // ring: sum of x_i; PS: sum of thr_i + fixed: every collective, hidden or not
  double exposed_s = 0;   // step_s - forward - backward: what the step waits for
  double incast_s = 0;    // the loss at an overflowing port the exchange includes (collective.h IncastCostOf)
  // compute when the exchange ends within backward (exposed 0); otherwise the bound with the most time in
  // the collectives after the stream last waited for backward (the chain that sets e_last).
  Bound bound = Bound::kCompute;
  std::vector<BucketTime> buckets;
};

// The schedule with x_i = PredictCollective(topology, params, conditions with bytes = bucket bytes).
// kInvalidArgument for negative or non-finite compute times, ready times outside [0, backward_s] or
// decreasing, and the errors of PredictCollective.
absl::StatusOr<StepTime> PredictStep(Topology topology, const ExchangeParams& params,
                                     const Conditions& conditions, const StepShape& shape);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_SCHEDULE_H_
