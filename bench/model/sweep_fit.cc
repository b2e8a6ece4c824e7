#include "bench/model/sweep_fit.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "bench/model/exchange_topology.h"
#include "bench/model/model_file.h"
#include "bench/model/project.h"
#include "bench/model/workload_step.h"
#include "common/status_macros.h"
#include "trainer/exchange.h"
#include "trainer/workload.h"

namespace psring::bench {
namespace {

// The profile's layers rescaled to `compute` (the measured forward and backward split as the profile splits
// them; the gradient bytes the workers moved split as the parameters are).
std::vector<LayerCost> Rescaled(const std::vector<LayerCost>& profile, const Compute& compute) {
  double forward = 0, backward = 0, bytes = 0;
  for (const LayerCost& l : profile) {
    forward += l.forward_s;
    backward += l.backward_s;
    bytes += l.bytes;
  }
  std::vector<LayerCost> layers;
  for (const LayerCost& l : profile) {
    layers.push_back({bytes > 0 ? l.bytes / bytes * compute.bytes : 0,
                      forward > 0 ? l.forward_s / forward * compute.forward_s : 0,
                      backward > 0 ? l.backward_s / backward * compute.backward_s : 0});
  }
  return layers;
}

// The buckets the workers form for these layers (trainer::BucketPlan, DDP's assignment), as byte ranges.
// `bucket_mb` and `first_bucket_mb` are caps of the real model; `layers` hold the real bytes divided by `scale`
// (the bytes the workers moved), so the caps are divided alike, as the harness divided the workers' flags.
std::vector<ByteRange> BucketsOf(const std::vector<LayerCost>& layers, double bucket_mb, double first_bucket_mb,
                                 double scale) {
  double total = 0;
  std::vector<size_t> elements;
  for (const LayerCost& l : layers) {
    elements.push_back(std::max<size_t>(1, static_cast<size_t>(std::llround(l.bytes / sizeof(float)))));
    total += l.bytes;
  }
  if (bucket_mb <= 0) return {{0, total}};
  absl::StatusOr<trainer::BucketPlan> plan =
      trainer::BucketPlan::Create(elements, bucket_mb / scale, first_bucket_mb / scale);
  if (!plan.ok()) return {{0, total}};
  std::vector<ByteRange> buckets;
  for (const trainer::FloatRange& range : plan->buckets()) {
    buckets.push_back({range.offset * sizeof(float) * 1.0, range.count * sizeof(float) * 1.0});
  }
  return buckets;
}

// The model's step for `layers` on `fit` at N. Each bucket costs beta * its busiest-link bytes; the
// latency terms alpha * messages are charged once per step, with the first bucket: fitted on flat steps
// over links without added delay, alpha measures what a step costs per message as N grows (opening the
// step's streams, the servers' per-step work, N processes sharing the cores), not a wire latency each
// bucket pays again (bench/PERFORMANCE.md 3.2).
StepEstimate ModelStep(const ScalingResult& result, const ModelFit& fit, Exchange e, int nodes,
                       const std::vector<LayerCost>& layers, double scale, double bucket_mb) {
  const ExchangePlugin& plugin = PluginFor(e);
  const int servers = plugin.Servers(nodes, result.options.ps_servers);
  bool first = true;
  const std::vector<ByteRange> buckets = BucketsOf(layers, bucket_mb, result.options.first_bucket_mb, scale);
  return OverlapStep(ShapeOf(layers, buckets), [&](double bytes) {
    const CostTerms terms = plugin.Terms(nodes, servers, bytes);
    const double seconds = fit.beta * terms.link_bytes + (first ? fit.alpha * terms.messages : 0);
    first = false;
    return seconds;
  });
}

// The calibrated model's step of the workload at its real size and real bucket caps (DDP's first bucket too)
// on the target cluster with N = nodes, or -1 where it cannot say (PrintProjection prints why).
double CalibratedProjection(const CalibratedInputs& in, const ScalingResult& result, Exchange e, int nodes,
                            double bucket_mb) {
  if (!in.file.ok() || !in.profile.ok()) return -1;
  absl::StatusOr<model::StepShape> shape =
      model::WorkloadStep(*in.profile, bucket_mb, trainer::kDefaultFirstBucketMb);
  absl::StatusOr<model::ExchangeParams> params = model::ParamsOf(*in.file, TopologyOf(e));
  if (!shape.ok() || !params.ok()) return -1;
  absl::StatusOr<model::StepTime> step = model::PredictStep(TopologyOf(e), *params, TargetAt(result, nodes), *shape);
  return step.ok() ? step->step_s : -1;
}

}  // namespace

std::vector<size_t> Sizes(const ScalingResult& result) {
  std::set<size_t> sizes;
  for (const auto& r : result.records) {
    if (r.ok()) sizes.insert(r.bytes);
  }
  return {sizes.begin(), sizes.end()};
}

std::vector<Exchange> ExchangesRun(const ScalingResult& result) {
  std::vector<Exchange> out;
  for (Exchange e : result.options.exchanges) {
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  }
  return out;
}

model::Conditions TargetAt(const ScalingResult& result, int nodes) {
  model::Conditions at;
  at.nodes = nodes;
  at.servers = result.options.ps_servers;
  at.link_bytes_per_second = result.options.projection.link_bytes_per_second;
  at.latency_s = result.options.projection.latency_s;
  return at;
}

absl::StatusOr<ScalingResult> AnalyzeSweep(SweepResult sweep) {
  ScalingResult result;
  static_cast<SweepResult&>(result) = std::move(sweep);
  RETURN_IF_ERROR(LoadWorkloadLayers(&result));
  FitModels(&result);
  return result;
}

absl::Status LoadWorkloadLayers(ScalingResult* result) {
  for (const std::string& name : result->options.workloads) {
    ASSIGN_OR_RETURN(const proto::Workload workload, trainer::LoadWorkload(name));
    std::vector<LayerCost>& layers = result->workload_layers[name];
    layers.clear();
    for (const proto::WorkloadLayer& l : workload.layers()) {
      layers.push_back({4.0 * static_cast<double>(l.params()), l.forward_ms() / 1e3, l.backward_ms() / 1e3});
    }
  }
  return absl::OkStatus();
}

CostTerms RecordTerms(const RunRecord& r) {
  return PluginFor(r.exchange).Terms(r.nodes, r.servers, static_cast<double>(r.bytes));
}

bool CrossesLink(const RunRecord& r) { return RecordTerms(r).link_bytes > 0; }

double ModelRelativeError(const ScalingResult& result, const RunRecord& r) {
  if (!r.ok() || !CrossesLink(r) || r.exchange_s <= 0) return 0;
  const double model = ModelSeconds(result, r.exchange, r.nodes, r.bytes);
  return model > 0 ? (model - r.exchange_s) / r.exchange_s : 0;  // no fit: no error to show
}

double RecordModelSeconds(const ScalingResult& result, const RunRecord& r) {
  return r.ok() ? ModelSeconds(result, r.exchange, r.nodes, r.bytes) : -1;
}

std::vector<ModelPoint> Extrapolation(const ScalingResult& result) {
  std::vector<ModelPoint> points;
  if (result.options.mode == "replay") return points;  // replay_report.cc prints its own (whole steps)
  for (size_t bytes : Sizes(result)) {
    for (Exchange e : ExchangesRun(result)) {
      for (int n : result.options.extrapolate_nodes) {
        const double t = ModelSeconds(result, e, n, bytes);
        if (t >= 0) points.push_back({e, n, PluginFor(e).Servers(n, result.options.ps_servers), bytes, t});
      }
    }
  }
  return points;
}

void FitModels(ScalingResult* result) {
  result->fits.clear();
  for (Exchange e : ExchangesRun(*result)) {
    std::vector<Measurement> points;
    for (const auto& r : result->records) {
      // A bucketed run's exchange is several collectives, each with its own latency terms: the fit is of one
      // flat exchange per step, and the bucketed steps are its predictions (replay_report.cc).
      if (r.usable() && r.exchange == e && r.bucket_mb <= 0) points.push_back({RecordTerms(r), r.exchange_s});
    }
    absl::StatusOr<ModelFit> fit = FitAlphaBeta(points);
    if (fit.ok()) result->fits[e] = *fit;
  }
}

double ModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, double bytes) {
  auto it = result.fits.find(exchange);
  if (it == result.fits.end()) return -1;
  const ExchangePlugin& plugin = PluginFor(exchange);
  return PredictSeconds(it->second, plugin.Terms(nodes, plugin.Servers(nodes, result.options.ps_servers), bytes));
}

Compute MeasuredCompute(const ScalingResult& result, const std::string& workload) {
  Compute c;
  int runs = 0;
  for (const RunRecord& r : result.records) {
    if (!r.ok() || r.workload != workload) continue;
    c.forward_s += r.forward_s;
    c.backward_s += r.backward_s;
    c.optimizer_s += r.optimizer_s;
    c.bytes = static_cast<double>(r.bytes);
    ++runs;
  }
  if (runs > 0) {
    c.forward_s /= runs;
    c.backward_s /= runs;
    c.optimizer_s /= runs;
  }
  return c;
}


double ReplayModelSeconds(const ScalingResult& result, Exchange e, int nodes, const std::string& workload,
                          double bucket_mb) {
  auto fit = result.fits.find(e);
  auto profile = result.workload_layers.find(workload);
  const Compute compute = MeasuredCompute(result, workload);
  if (fit == result.fits.end() || profile == result.workload_layers.end() || !compute.ok()) return -1;
  // The workers replayed the profile with its bytes divided by --bytes_scale: the ratio of its bytes to what
  // they reported (also right for a --from_csv report, which has no --bytes_scale of its own).
  double profile_bytes = 0;
  for (const LayerCost& l : profile->second) profile_bytes += l.bytes;
  const double scale = std::max(1.0, profile_bytes / compute.bytes);
  return ModelStep(result, fit->second, e, nodes, Rescaled(profile->second, compute), scale, bucket_mb).step_s +
         compute.optimizer_s;
}

CalibratedInputs ReadCalibratedInputs(const ScalingResult& result, const std::string& workload) {
  CalibratedInputs in;
  if (result.options.projection.model_path.empty()) return in;
  in.file = model::ReadModelFile(result.options.projection.model_path);
  in.profile = trainer::LoadWorkload(workload);
  return in;
}

double ProjectedSeconds(const ScalingResult& result, const CalibratedInputs& calibrated, Exchange e, int nodes,
                        const std::string& workload, double bucket_mb) {
  if (!result.options.projection.model_path.empty()) {
    return CalibratedProjection(calibrated, result, e, nodes, bucket_mb);
  }
  auto fit = result.fits.find(e);
  auto profile = result.workload_layers.find(workload);
  if (fit == result.fits.end() || profile == result.workload_layers.end()) return -1;
  absl::StatusOr<ModelFit> projected =
      ProjectFit(fit->second, result.link_bytes_per_second, result.options.projection);
  if (!projected.ok()) return -1;
  return ModelStep(result, *projected, e, nodes, profile->second, /*scale=*/1, bucket_mb).step_s;
}

}  // namespace psring::bench
