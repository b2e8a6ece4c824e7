// The one model at a sweep's conditions: every prediction the scaling reports print comes from the frozen
// calibrated model (bench/model/collective.h, schedule.h; a //bench:calibrate file, by default the one
// committed with psring), evaluated with the inputs the measurement had (ASTRA-sim's rule: the thing that
// measures and the thing that predicts answer the same question with the same inputs):
//
//   a run's exchange time     PredictCollective at the run's N, K, S and the sweep's link, latency, link burst
//                             and shared cores (ModelSeconds)
//   a replayed step           PredictStep of the profile's buckets, scaled as the workers replayed it, with
//                             the workers' measured compute (ReplayModelSeconds)
//   extrapolation             the same links at N never measured, every host with cores of its own
//   projection                the workload at its real size on a target cluster (ProjectedSeconds)
//
// Nothing is fitted to the sweep it judges: a model line of a report is a prediction, and where the model
// file's calibration did not cover the sweep's conditions it is a held-out one. Nothing here prints,
// launches or touches a cluster.
//
//   ASSIGN_OR_RETURN(SweepResult sweep, RunScaling(options, &std::cerr));        // bench/harness/sweep.h
//   ASSIGN_OR_RETURN(ScalingResult result, AnalyzeSweep(std::move(sweep)));     // the model and profiles read
//   double t = ModelSeconds(result, Exchange::kRing, 4, 16 << 20);              // -1 without a model
//
// Thread-safety: pure functions of their arguments (AnalyzeSweep reads files).
#ifndef PSRING_BENCH_MODEL_SWEEP_MODEL_H_
#define PSRING_BENCH_MODEL_SWEEP_MODEL_H_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/core/exchange.h"
#include "bench/core/run_record.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"
#include "proto/workload.pb.h"

namespace psring::bench {

// A sweep with what the model needs to predict it.
struct ScalingResult : SweepResult {
  // The frozen calibrated model of options.model_path; absent: no model figures (--model=none).
  std::optional<proto::CostModelFile> model;
  // Set by AnalyzeSweep with a model: what the projection uses (ProjectionModel), `model` with
  // options.cpu_model_path's CPU ceilings and options.window_round_us's window round where given
  // (bench/model/cpu_model.h ModelForTarget).
  std::optional<proto::CostModelFile> projection_model;
  // Where projection_model's CPU ceilings come from (cpu_model.h CpuModelSource); "": the calibration host's.
  std::string cpu_source;
  // Replay mode: each workload's profile at its real size (trainer/workload.h: a preset or a file).
  std::map<std::string, proto::Workload> workloads;
};

// Reads options.model_path (when set), options.cpu_model_path (when set, with a model) and, in replay mode,
// every workload's profile. kNotFound / kInvalidArgument from the files' readers, naming the file.
absl::StatusOr<ScalingResult> AnalyzeSweep(SweepResult sweep);

// "the frozen model of <host>, <date> (<path>)", or "" without a model.
std::string ModelSource(const ScalingResult& result);

// The model's hosts' TCP against this sweep's: "fitted with the hosts' TCP cubic, slow start after idle off
// (as these hosts)"; a line starting "WARNING" where the two differ (its emulated-link predictions were
// fitted under another TCP); "" without a model, or where either is unknown (real hosts, loopback, older
// files).
std::string HostsTcpNote(const ScalingResult& result);

// The sizes of the successful runs, ascending, and the options' exchanges, each once, in their order.
std::vector<size_t> Sizes(const ScalingResult& result);
std::vector<Exchange> ExchangesRun(const ScalingResult& result);

// The model's conditions of this sweep at N = nodes: the sweep's link rate, latency and link burst, K =
// options.ps_servers, and the cores the processes shared (`on_this_box`) or none (hosts of their own).
model::Conditions SweepConditions(const ScalingResult& result, int nodes, bool on_this_box);

// "EXTRAPOLATED xK (what)" when `at` with any of `sizes` (a collective's bytes) lies more than
// model::kExtrapolationMarkFactor outside the model file's calibration for any of the sweep's exchanges (the
// largest factor), else "" (also without a model or a recorded coverage).
std::string ExtrapolationMarkAt(const ScalingResult& result, const model::Conditions& at,
                                const std::vector<double>& sizes);

// The model's exchange time (s) of `exchange` at N nodes for S bytes on this sweep's cluster (its box), or -1
// without a model.
double ModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, double bytes);
// The same on the sweep's links with every host on cores of its own (N beyond what the box can hold).
double ExtrapolatedSeconds(const ScalingResult& result, Exchange exchange, int nodes, double bytes);

// Whether any byte of a record's run crosses a link (one node with the ring or co-located shards only copies
// memory: nothing for a network model to describe).
bool CrossesLink(const RunRecord& r);
// (model - measured) / measured exchange time for a successful run the model describes, else 0.
double ModelRelativeError(const ScalingResult& result, const RunRecord& r);
// The model's exchange time for a record's run; -1 for a failed run or without a model.
double RecordModelSeconds(const ScalingResult& result, const RunRecord& r);

// The model at the extrapolation's N (not measured), for every size and exchange (none in replay mode,
// whose predictions are of whole steps, and none without a model).
struct ModelPoint {
  Exchange exchange;
  int nodes;
  int servers;
  size_t bytes;
  double seconds;
};
std::vector<ModelPoint> Extrapolation(const ScalingResult& result);
// The same points as records with source "model": exchange_s = step_s = the predicted time, algbw and busbw
// from it; nothing else is predicted.
std::vector<RunRecord> PredictedRecords(const ScalingResult& result);

// One worker's compute per step as the workers measured it (the same for every N and exchange: timed waits).
struct Compute {
  double forward_s = 0;
  double backward_s = 0;
  double optimizer_s = 0;
  double bytes = 0;  // S as the workers reported it
  bool ok() const { return forward_s + backward_s > 0 && bytes > 0; }
};
Compute MeasuredCompute(const ScalingResult& result, const std::string& workload);

// Replay mode: the model's step time (s) of `workload` with `exchange` at N, flat (bucket_mb 0) or bucketed,
// on this sweep's cluster: the profile's buckets at the size the workers replayed (its bytes over what they
// reported), its forward and backward stretched to the workers' measured compute, plus their optimizer time.
// `on_this_box` false: hosts of their own (the extrapolation). -1 without a model, a profile or measured
// compute.
double ReplayModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, const std::string& workload,
                          double bucket_mb, bool on_this_box = true);

// The model the projection uses: projection_model, else (a result not made by AnalyzeSweep) model.
const std::optional<proto::CostModelFile>& ProjectionModel(const ScalingResult& result);

// The projection's cluster (options.projection's link and latency, options.ps_servers) at N = nodes: real
// ports (no burst), hosts with cores of their own.
model::Conditions TargetAt(const ScalingResult& result, int nodes);

// Projected step time (s) of `workload` at its real size and compute (the profile's device times), real
// bucket caps and DDP's first bucket, on options.projection's cluster at N, with ProjectionModel's CPU
// ceilings; -1 where the model cannot say
// (no model, no profile, no projection target).
double ProjectedSeconds(const ScalingResult& result, Exchange exchange, int nodes, const std::string& workload,
                        double bucket_mb);

}  // namespace psring::bench

#endif  // PSRING_BENCH_MODEL_SWEEP_MODEL_H_
