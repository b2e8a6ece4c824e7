#include "bench/model/sweep_model.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/model/cpu_model.h"
#include "bench/model/exchange_topology.h"
#include "bench/model/model_file.h"
#include "bench/model/schedule.h"
#include "bench/model/workload_step.h"
#include "common/status_macros.h"
#include "trainer/exchange.h"
#include "trainer/workload.h"

namespace psring::bench {
namespace {

// The parameters of `exchange` in `file` (the sweep's model or the projection's), or nothing without one (or
// an exchange it lacks).
std::optional<model::ExchangeParams> ParamsFor(const std::optional<proto::CostModelFile>& file,
                                               Exchange exchange) {
  if (!file.has_value()) return std::nullopt;
  absl::StatusOr<model::ExchangeParams> params = model::ParamsOf(*file, TopologyOf(exchange));
  if (!params.ok()) return std::nullopt;
  return *params;
}

double CollectiveSeconds(const ScalingResult& result, Exchange exchange, int nodes, double bytes,
                         bool on_this_box) {
  const std::optional<model::ExchangeParams> params = ParamsFor(result.model, exchange);
  if (!params.has_value()) return -1;
  model::Conditions at = SweepConditions(result, nodes, on_this_box);
  at.bytes = bytes;
  absl::StatusOr<model::CollectiveTime> t = model::PredictCollective(TopologyOf(exchange), *params, at);
  return t.ok() ? t->seconds : -1;
}

double StepSeconds(const std::optional<proto::CostModelFile>& file, Exchange exchange,
                   const model::Conditions& at, const model::StepShape& shape) {
  const std::optional<model::ExchangeParams> params = ParamsFor(file, exchange);
  if (!params.has_value()) return -1;
  absl::StatusOr<model::StepTime> step = model::PredictStep(TopologyOf(exchange), *params, at, shape);
  return step.ok() ? step->step_s : -1;
}

// `shape`'s forward and backward set to the measured ones, every bucket's release stretched with backward.
model::StepShape WithCompute(model::StepShape shape, const Compute& compute) {
  const double stretch = shape.backward_s > 0 ? compute.backward_s / shape.backward_s : 0;
  for (model::BucketRelease& b : shape.buckets) b.ready_s = std::min(b.ready_s * stretch, compute.backward_s);
  shape.forward_s = compute.forward_s;
  shape.backward_s = compute.backward_s;
  return shape;
}

}  // namespace

absl::StatusOr<ScalingResult> AnalyzeSweep(SweepResult sweep) {
  ScalingResult result;
  static_cast<SweepResult&>(result) = std::move(sweep);
  if (!result.options.model_path.empty()) {
    ASSIGN_OR_RETURN(result.model, model::ReadModelFile(result.options.model_path));
    ASSIGN_OR_RETURN(result.projection_model,
                     model::ModelForTarget(*result.model, result.options.cpu_model_path,
                                           result.options.window_round_us, &result.cpu_source));
  }
  for (const std::string& name : result.options.workloads) {
    ASSIGN_OR_RETURN(result.workloads[name], trainer::LoadWorkload(name));
  }
  return result;
}

std::string ModelSource(const ScalingResult& result) {
  if (!result.model.has_value()) return "";
  return absl::StrCat("the frozen model of ", result.model->host(), ", ", result.model->date(), " (",
                      result.options.model_path, ")");
}

std::string HostsTcpNote(const ScalingResult& result) {
  if (!result.model.has_value() || result.model->hosts_tcp().empty() || result.hosts_tcp.empty()) return "";
  if (result.model->hosts_tcp() == result.hosts_tcp) {
    return absl::StrCat("the model was fitted with the hosts' TCP ", result.hosts_tcp, " (as these hosts)");
  }
  return absl::StrCat("WARNING: the model was fitted with the hosts' TCP ", result.model->hosts_tcp(),
                      "; these hosts run ", result.hosts_tcp,
                      ": its predictions for the emulated links do not hold here (--tcp_congestion and "
                      "--tcp_slow_start_after_idle set the hosts' TCP; or calibrate with this one)");
}

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

model::Conditions SweepConditions(const ScalingResult& result, int nodes, bool on_this_box) {
  model::Conditions at;
  at.nodes = nodes;
  at.servers = result.options.ps_servers;
  at.link_bytes_per_second = result.link_bytes_per_second;
  at.latency_s = result.latency_s;
  // The emulated links' token bucket (bench/emulator/cluster.h): what an idle link passes at once.
  absl::StatusOr<double> burst_s = ParseLinkBurst(result.options.cluster.burst);
  if (result.emulated && burst_s.ok()) {
    at.link_burst_bytes = static_cast<double>(TbfBurstBytes(result.link_bytes_per_second, *burst_s));
  }
  at.box_cores = on_this_box ? result.box_cores : 0;
  return at;
}

std::string ExtrapolationMarkAt(const ScalingResult& result, const model::Conditions& at,
                                const std::vector<double>& sizes) {
  if (!result.model.has_value()) return "";
  model::Extrapolation worst;
  for (Exchange e : ExchangesRun(result)) {
    for (double bytes : sizes) {
      const model::Extrapolation x = model::ExtrapolationOf(*result.model, TopologyOf(e), at, bytes);
      if (x.factor > worst.factor) worst = x;
    }
  }
  return model::ExtrapolationMark(worst);
}

double ModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, double bytes) {
  return CollectiveSeconds(result, exchange, nodes, bytes, /*on_this_box=*/true);
}

double ExtrapolatedSeconds(const ScalingResult& result, Exchange exchange, int nodes, double bytes) {
  return CollectiveSeconds(result, exchange, nodes, bytes, /*on_this_box=*/false);
}

bool CrossesLink(const RunRecord& r) {
  return model::CountsOf(TopologyOf(r.exchange), r.nodes, r.servers, static_cast<double>(r.bytes)).link_bytes > 0;
}

double ModelRelativeError(const ScalingResult& result, const RunRecord& r) {
  if (!r.ok() || !CrossesLink(r) || r.exchange_s <= 0) return 0;
  const double model = ModelSeconds(result, r.exchange, r.nodes, r.bytes);
  return model > 0 ? (model - r.exchange_s) / r.exchange_s : 0;  // no model: no error to show
}

double RecordModelSeconds(const ScalingResult& result, const RunRecord& r) {
  return r.ok() ? ModelSeconds(result, r.exchange, r.nodes, r.bytes) : -1;
}

std::vector<ModelPoint> Extrapolation(const ScalingResult& result) {
  std::vector<ModelPoint> points;
  if (result.options.mode == "replay") return points;  // the replay report prints its own (whole steps)
  for (size_t bytes : Sizes(result)) {
    for (Exchange e : ExchangesRun(result)) {
      for (int n : result.options.extrapolate_nodes) {
        const double t = ExtrapolatedSeconds(result, e, n, bytes);
        if (t >= 0) points.push_back({e, n, PluginFor(e).Servers(n, result.options.ps_servers), bytes, t});
      }
    }
  }
  return points;
}

std::vector<RunRecord> PredictedRecords(const ScalingResult& result) {
  std::vector<RunRecord> records;
  for (const ModelPoint& m : Extrapolation(result)) {
    RunRecord r;
    r.source = "model";
    r.exchange = m.exchange;
    r.nodes = m.nodes;
    r.servers = m.servers;
    r.bytes = m.bytes;
    r.exchange_s = r.step_s = m.seconds;
    r.algbw = m.seconds > 0 ? m.bytes / m.seconds : 0;
    r.busbw = r.algbw * PluginFor(m.exchange).BusFactor(m.nodes);
    records.push_back(r);
  }
  return records;
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

double ReplayModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, const std::string& workload,
                          double bucket_mb, bool on_this_box) {
  auto profile = result.workloads.find(workload);
  const Compute compute = MeasuredCompute(result, workload);
  if (profile == result.workloads.end() || !compute.ok() || !result.model.has_value()) return -1;
  // The workers replayed the profile with its bytes divided by --bytes_scale: the ratio of its bytes to what
  // they reported (also right for a --from_csv report, which has no --bytes_scale of its own). The caps are
  // divided alike, as the harness divided the workers' flags.
  const double scale = std::max(1.0, model::WorkloadBytes(profile->second) / compute.bytes);
  absl::StatusOr<model::StepShape> shape = model::ReplayedWorkloadStep(
      profile->second, scale, std::max(0.0, bucket_mb), result.options.first_bucket_mb);
  if (!shape.ok()) return -1;
  const double step =
      StepSeconds(result.model, exchange, SweepConditions(result, nodes, on_this_box), WithCompute(*shape, compute));
  return step >= 0 ? step + compute.optimizer_s : -1;
}

const std::optional<proto::CostModelFile>& ProjectionModel(const ScalingResult& result) {
  return result.projection_model.has_value() ? result.projection_model : result.model;
}

model::Conditions TargetAt(const ScalingResult& result, int nodes) {
  model::Conditions at;
  at.nodes = nodes;
  at.servers = result.options.ps_servers;
  at.link_bytes_per_second = result.options.projection.link_bytes_per_second;
  at.latency_s = result.options.projection.latency_s;
  at.port_buffer_bytes = result.options.projection.port_buffer_bytes;
  return at;
}

double ProjectedSeconds(const ScalingResult& result, Exchange exchange, int nodes, const std::string& workload,
                        double bucket_mb) {
  auto profile = result.workloads.find(workload);
  if (profile == result.workloads.end() || result.options.projection.link_bytes_per_second <= 0) return -1;
  absl::StatusOr<model::StepShape> shape =
      model::WorkloadStep(profile->second, std::max(0.0, bucket_mb), trainer::kDefaultFirstBucketMb);
  if (!shape.ok()) return -1;
  return StepSeconds(ProjectionModel(result), exchange, TargetAt(result, nodes), *shape);
}

}  // namespace psring::bench
