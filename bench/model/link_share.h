// How busy the network alone lets a run's busiest link be: the calibrated model's wire time over its time
// with the window and latency bounds but without the CPU ceiling or the per-message software cost. The
// EMULATOR-BOUND rule (bench/emulator/probes.h) blames the box for an idle link only below this share, so a
// model miss at high latency (a window-bound PS leaves the link idle by itself) shows as a model error
// instead of hiding behind an exclusion (issue 33 item 2).
//
//   ScalingOptions o = ...;
//   o.network_link_share = NetworkLinkShareOf(model, o.ps_servers);
//
// Thread-safety: pure functions; the returned function holds a copy of the model.
#ifndef PSRING_BENCH_MODEL_LINK_SHARE_H_
#define PSRING_BENCH_MODEL_LINK_SHARE_H_

#include "bench/core/run_record.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"

namespace psring::bench::model {

// The share in (0, 1] for `topology` at `at` (1 where the model file lacks the exchange, or nothing moves).
double NetworkLinkShareAt(const proto::CostModelFile& model, Topology topology, const Conditions& at);

// A run's share (its exchange, N and S; K = `ps_servers`) at the cluster's link rate and latency.
NetworkLinkShare NetworkLinkShareOf(const proto::CostModelFile& model, int ps_servers);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_LINK_SHARE_H_
