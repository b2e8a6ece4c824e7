// The alpha-beta fit of one sweep and every prediction the reports print from a sweep: the per-exchange fit of
// the measured flat exchanges (bench/model/alpha_beta.h), its exchange time at any N and S, the replayed
// workloads' overlapped step (bucket schedule of bench/model/alpha_beta.h's OverlapStep) and the projection
// to a target cluster (the run's own fit carried over, or the frozen calibrated model of bench/model/project.h).
// Reports (bench/report/) read these; nothing here prints, launches or touches a cluster.
//
//   ASSIGN_OR_RETURN(SweepResult sweep, RunScaling(options, &std::cerr));        // bench/harness/sweep.h
//   ASSIGN_OR_RETURN(ScalingResult result, AnalyzeSweep(std::move(sweep)));     // profiles read, fits made
//   double t = ModelSeconds(result, Exchange::kRing, 64, 16 << 20);             // -1 without a fit
//
// Thread-safety: pure functions of their arguments (LoadWorkloadLayers and the calibrated projection read files).
#ifndef PSRING_BENCH_MODEL_SWEEP_FIT_H_
#define PSRING_BENCH_MODEL_SWEEP_FIT_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/core/exchange.h"
#include "bench/core/run_record.h"
#include "bench/model/alpha_beta.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"
#include "proto/workload.pb.h"

namespace psring::bench {

// A sweep with what the model made of it.
struct ScalingResult : SweepResult {
  std::map<Exchange, ModelFit> fits;  // exchanges with at least one usable point (flat exchanges only)
  // Replay mode: each workload's profile (forward order; its own gradient bytes and device compute times),
  // for the model of overlapped steps and the projection.
  std::map<std::string, std::vector<LayerCost>> workload_layers;
};

// The sweep's workload profiles read (LoadWorkloadLayers) and its exchanges fitted (FitModels).
absl::StatusOr<ScalingResult> AnalyzeSweep(SweepResult sweep);

// Replay mode: each of result->options.workloads' profiles (trainer/workload.h: a preset or a file) into
// result->workload_layers, at its own size and device compute. kNotFound / kInvalidArgument from the loader.
absl::Status LoadWorkloadLayers(ScalingResult* result);

// The sizes of the successful runs, ascending, and the options' exchanges, each once, in their order.
std::vector<size_t> Sizes(const ScalingResult& result);
std::vector<Exchange> ExchangesRun(const ScalingResult& result);

// Fits alpha and beta per exchange from the successful records (fills result->fits).
void FitModels(ScalingResult* result);

// Model time per step (seconds) of `exchange` at N nodes for S bytes, or -1 without a fit.
double ModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, double bytes);

// The model's features of a record's run (with the K it ran with), and whether any byte crosses a link (one
// node with the ring or co-located shards only copies memory: nothing for a network model to describe).
CostTerms RecordTerms(const RunRecord& r);
bool CrossesLink(const RunRecord& r);
// (model - measured) / measured exchange time for a successful run the model describes, else 0.
double ModelRelativeError(const ScalingResult& result, const RunRecord& r);
// The model's exchange time for a record's run; -1 for a failed run or without a fit.
double RecordModelSeconds(const ScalingResult& result, const RunRecord& r);

// The fitted model at the extrapolation's N (not measured), for every size and exchange with a fit (none in
// replay mode, whose predictions are of whole steps).
struct ModelPoint {
  Exchange exchange;
  int nodes;
  int servers;
  size_t bytes;
  double seconds;
};
std::vector<ModelPoint> Extrapolation(const ScalingResult& result);

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
// from the exchange's fit, the workers' measured compute and the profile's layers (OverlapStep); -1 without a
// fit, a profile or measured compute.
double ReplayModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, const std::string& workload,
                          double bucket_mb);

// What a calibrated projection of one workload reads: the frozen model file and the workload's real profile,
// read once per table or figure (errors when the run projects with its own alpha-beta fit).
struct CalibratedInputs {
  absl::StatusOr<proto::CostModelFile> file = absl::NotFoundError("no --project_model");
  absl::StatusOr<proto::Workload> profile = absl::NotFoundError("no workload");
};
CalibratedInputs ReadCalibratedInputs(const ScalingResult& result, const std::string& workload);

// The projection's cluster (options.projection's link and latency, options.ps_servers) at N = nodes.
model::Conditions TargetAt(const ScalingResult& result, int nodes);

// Projected step time (s) of `workload` at its real size and compute on options.projection's cluster at N,
// or -1 where the model cannot say: with the calibrated model when the run has one (`calibrated`, read for
// this workload), else with the run's own alpha-beta fit.
double ProjectedSeconds(const ScalingResult& result, const CalibratedInputs& calibrated, Exchange e, int nodes,
                        const std::string& workload, double bucket_mb);

}  // namespace psring::bench

#endif  // PSRING_BENCH_MODEL_SWEEP_FIT_H_
