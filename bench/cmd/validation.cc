// The held-out validation's plan files and runs (validation.h): per sweep, predictions first, then
// RunScaling, then the rows.
#include "bench/cmd/validation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/cmd/time_limit.h"
#include "bench/core/cluster.h"
#include "bench/core/links.h"
#include "bench/emulator/probes.h"
#include "bench/model/calibration_plan.h"
#include "bench/model/link_share.h"
#include "bench/model/model_file.h"
#include "bench/report/table.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "trainer/workload.h"

namespace psring::bench {

static_assert(ValidationRow::kBoxWaitShare == kMaxCpuStall,
              "validation splits runs at rule (d)'s wait share (bench/emulator/probes.h)");
namespace {

using PlanFile = proto::ValidationPlanFile;

// "FILE: sweeps[2].link: what" (sweep < 0: a top-level field).
absl::Status PlanError(absl::string_view origin, int sweep, absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(origin, ": ", sweep < 0 ? "" : absl::StrCat("sweeps[", sweep, "]."), field, ": ", what));
}

std::string Quoted(absl::string_view text) { return absl::StrCat("\"", text, "\""); }

// The exchanges `names` lists, in its order; an unknown or repeated one is an error.
absl::StatusOr<std::vector<Exchange>> ExchangesOf(
    const google::protobuf::RepeatedPtrField<std::string>& names, absl::string_view origin, int sweep) {
  std::vector<Exchange> out;
  for (const std::string& name : names) {
    absl::StatusOr<Exchange> e = ParseExchange(name);
    if (!e.ok()) return PlanError(origin, sweep, "exchanges", e.status().message());
    if (std::find(out.begin(), out.end(), *e) != out.end()) {
      return PlanError(origin, sweep, "exchanges",
                       absl::StrCat(Quoted(name), " is listed twice: list it once"));
    }
    out.push_back(*e);
  }
  return out;
}

bool SameExchanges(std::vector<Exchange> a, std::vector<Exchange> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

// Gradient mode's fields: the sizes; those of replay mode are errors.
absl::Status GradientFields(const PlanFile::Sweep& s, absl::string_view origin, int i, HeldOutSweep* sweep) {
  constexpr absl::string_view kReplayOnly = "is for replay sweeps: drop it, or write \"mode\": \"replay\"";
  if (!s.workloads().empty()) return PlanError(origin, i, "workloads", kReplayOnly);
  if (!s.bucket_mb().empty()) return PlanError(origin, i, "bucket_mb", kReplayOnly);
  if (s.has_bytes_scale()) return PlanError(origin, i, "bytes_scale", kReplayOnly);
  if (s.model_bytes().empty()) {
    return PlanError(origin, i, "model_bytes",
                     "missing: write the gradient sizes, e.g. \"model_bytes\": [\"4M\"]");
  }
  for (const std::string& text : s.model_bytes()) {
    const size_t bytes = ParseSize(text);
    if (bytes == 0) {
      return PlanError(origin, i, "model_bytes",
                       absl::StrCat(Quoted(text), " is not a size > 0: write bytes or K/M/G, e.g. \"4M\""));
    }
    sweep->sizes.push_back(bytes);
  }
  return absl::OkStatus();
}

// Replay mode's fields: the workloads (loaded), the bucket caps, bytes_scale; the sizes are an error.
absl::Status ReplayFields(const PlanFile::Sweep& s, absl::string_view origin, int i, HeldOutSweep* sweep) {
  if (!s.model_bytes().empty()) {
    return PlanError(
        origin, i, "model_bytes",
        "is for gradient sweeps: drop it, or put the sizes in a sweep of their own with \"mode\": "
        "\"gradient\"");
  }
  const std::string presets = absl::StrJoin(trainer::PresetWorkloadNames(), ", ");
  if (s.workloads().empty()) {
    return PlanError(
        origin, i, "workloads",
        absl::StrCat("missing: write the profiles to replay, e.g. \"workloads\": [\"resnet50\"] (presets: ",
                     presets, "; or a profile file's path)"));
  }
  for (const std::string& w : s.workloads()) {
    absl::StatusOr<proto::Workload> loaded = trainer::LoadWorkload(w);
    if (absl::IsNotFound(loaded.status())) {
      return PlanError(origin, i, "workloads",
                       absl::StrCat(Quoted(w), " is neither a preset nor a readable profile: write one of ",
                                    presets, ", or a profile file's path (bench/workloads/)"));
    }
    if (!loaded.ok()) return PlanError(origin, i, "workloads", loaded.status().message());
    sweep->workloads.push_back(w);
  }
  if (s.bucket_mb().empty()) {
    return PlanError(
        origin, i, "bucket_mb",
        "missing: write the real model's bucket caps in MiB, e.g. \"bucket_mb\": [0, 25] (0: one flat "
        "exchange after backward)");
  }
  for (double mb : s.bucket_mb()) {
    if (!std::isfinite(mb) || mb < 0) {
      return PlanError(
          origin, i, "bucket_mb",
          absl::StrCat(mb, " is not a cap: write MiB >= 0 of the real model (0: flat), e.g. 25"));
    }
    sweep->bucket_mbs.push_back(mb);
  }
  if (s.has_bytes_scale() && !(std::isfinite(s.bytes_scale()) && s.bytes_scale() >= 1)) {
    return PlanError(
        origin, i, "bytes_scale",
        absl::StrCat(s.bytes_scale(),
                     " is not a divisor >= 1: write e.g. 64 (the profile's bytes / 64 on the emulated "
                     "link stand for the real bytes on a 64x faster one)"));
  }
  sweep->bytes_scale = s.has_bytes_scale() ? s.bytes_scale() : 1;
  return absl::OkStatus();
}

absl::StatusOr<HeldOutSweep> SweepOf(const PlanFile::Sweep& s, absl::string_view origin, int i) {
  HeldOutSweep sweep;
  absl::StatusOr<double> bits = ParseLinkRate(s.link());
  if (!s.has_link() || !bits.ok() || *bits <= 0) {
    return PlanError(
        origin, i, "link",
        absl::StrCat(s.has_link() ? absl::StrCat(Quoted(s.link()), " is not a rate > 0") : "missing",
                     ": write the emulated link's tc rate, e.g. \"150mbit\" or \"1gbit\""));
  }
  if (!s.has_latency() || !ParseLatency(s.latency()).ok()) {
    return PlanError(
        origin, i, "latency",
        absl::StrCat(s.has_latency() ? absl::StrCat(Quoted(s.latency()), " is not a duration") : "missing",
                     ": write the one-way latency, e.g. \"2ms\" or \"250us\" (\"0\": none)"));
  }
  sweep.link = s.link();
  sweep.latency = s.latency();
  if (s.has_queue()) {
    if (!ParseQueue(s.queue()).ok()) {
      return PlanError(origin, i, "queue",
                       absl::StrCat(Quoted(s.queue()),
                                    " is not a duration > 0: write the links' queue as the "
                                    "time its bytes take at the link rate, e.g. \"5ms\""));
    }
    sweep.queue = s.queue();
  }
  if (s.nodes().empty()) {
    return PlanError(origin, i, "nodes", "missing: write the node counts N to run, e.g. \"nodes\": [8, 16]");
  }
  for (int n : s.nodes()) {
    if (n < 1) return PlanError(origin, i, "nodes", absl::StrCat(n, " is not a node count: write N >= 1"));
    sweep.nodes.push_back(n);
  }
  if (s.mode() == "gradient") {
    RETURN_IF_ERROR(GradientFields(s, origin, i, &sweep));
  } else if (s.mode() == "replay") {
    RETURN_IF_ERROR(ReplayFields(s, origin, i, &sweep));
  } else {
    return PlanError(
        origin, i, "mode",
        absl::StrCat(s.has_mode() ? absl::StrCat(Quoted(s.mode()), " is not a mode") : "missing",
                     ": write \"gradient\" (a synthetic buffer of each model_bytes) or \"replay\" "
                     "(each workload at each bucket_mb)"));
  }
  return sweep;
}

}  // namespace

absl::StatusOr<ValidationPlan> ParseValidationPlanFile(absl::string_view json, absl::string_view origin) {
  PlanFile file;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed = google::protobuf::util::JsonStringToMessage(std::string(json), &file, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin,
        ": not a validation plan (ValidationPlanFile in bench/model/cost_model_file.proto; the README's "
        "//bench:validate paragraph shows one): ",
        parsed.message().as_string()));
  }
  if (file.sweeps().empty()) {
    return PlanError(
        origin, -1, "sweeps",
        "missing: write at least one sweep, e.g. \"sweeps\": [{\"link\": \"150mbit\", \"latency\": "
        "\"20ms\", \"mode\": \"gradient\", \"nodes\": [8], \"model_bytes\": [\"4M\"]}]");
  }
  ValidationPlan plan;
  // The exchanges: the top-level list, else the one the first sweep naming any names; every sweep that names
  // some must name the same.
  std::optional<std::vector<Exchange>> exchanges;
  std::string exchanges_from = "the top-level exchanges";
  if (!file.exchanges().empty()) {
    ASSIGN_OR_RETURN(exchanges, ExchangesOf(file.exchanges(), origin, -1));
  }
  for (int i = 0; i < file.sweeps_size(); ++i) {
    ASSIGN_OR_RETURN(HeldOutSweep sweep, SweepOf(file.sweeps(i), origin, i));
    plan.sweeps.push_back(std::move(sweep));
    if (file.sweeps(i).exchanges().empty()) continue;
    ASSIGN_OR_RETURN(std::vector<Exchange> named, ExchangesOf(file.sweeps(i).exchanges(), origin, i));
    if (!exchanges.has_value()) {
      exchanges = named;
      exchanges_from = absl::StrCat("sweeps[", i, "]'s");
    } else if (!SameExchanges(named, *exchanges)) {
      return PlanError(
          origin, i, "exchanges",
          absl::StrCat("differ from ", exchanges_from,
                       ": a plan runs the same exchanges in every sweep; write them once as the "
                       "top-level \"exchanges\", and put sweeps that need others in a plan file of "
                       "their own"));
    }
  }
  if (exchanges.has_value()) plan.exchanges = *exchanges;
  if (file.has_noise_sweep()) {
    if (file.noise_sweep() < 0 || file.noise_sweep() >= file.sweeps_size()) {
      return PlanError(
          origin, -1, "noise_sweep",
          absl::StrCat(file.noise_sweep(), " is not a sweep of this file: write an index from 0 to ",
                       file.sweeps_size() - 1, " (the sweep run noise_runs times for the tie band)"));
    }
    plan.noise_sweep = file.noise_sweep();
  }
  if (file.has_noise_runs()) {
    if (file.noise_runs() < 1) {
      return PlanError(
          origin, -1, "noise_runs",
          absl::StrCat(file.noise_runs(),
                       " is not a run count: write 2 or more to measure the run-to-run noise for "
                       "the tie band, or 1 (the band is then 5 %)"));
    }
    plan.noise_runs = file.noise_runs();
  }
  return plan;
}

absl::StatusOr<ValidationPlan> ReadValidationPlanFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadFileToString(path, absl::StrCat(path,
                                                       ": cannot read the validation plan (a JSON file "
                                                       "as bench/results/plans/example_plan.json)")));
  return ParseValidationPlanFile(text, path);
}

namespace {

// One sweep's conditions on this machine's emulated links (their tbf burst, the cores every process shares)
// and the model's rows for each, predicted before anything runs.
struct PredictedSweep {
  std::vector<HeldOutCondition> conditions;
  std::vector<std::vector<ValidationRow>> rows;  // per condition
};

absl::StatusOr<PredictedSweep> PredictSweep(const HeldOutSweep& sweep, const ValidationPlan& plan,
                                            const proto::CostModelFile& model, double burst_s, double queue_s,
                                            double box_cores) {
  PredictedSweep out;
  ASSIGN_OR_RETURN(out.conditions, ExpandSweep(sweep));
  for (HeldOutCondition& c : out.conditions) {
    c.link_burst_bytes = static_cast<double>(TbfBurstBytes(c.link_bytes_per_second, burst_s));
    if (c.queue_s <= 0) c.queue_s = queue_s;  // the cluster's
    c.box_cores = box_cores;
    ASSIGN_OR_RETURN(const model::StepShape shape, ShapeOf(c));
    ASSIGN_OR_RETURN(out.rows.emplace_back(),
                     PredictCondition(model, c, shape, plan.exchanges, plan.ps_servers));
  }
  return out;
}

}  // namespace

absl::Status PrintPredictions(const ValidationPlan& plan, const proto::CostModelFile& model,
                              const std::string& burst, const std::string& queue, std::ostream* out) {
  RETURN_IF_ERROR(model::ValidateModelFile(model));
  ASSIGN_OR_RETURN(const double burst_s, ParseLinkBurst(burst));
  ASSIGN_OR_RETURN(const double queue_s, ParseQueue(queue));
  for (const HeldOutSweep& sweep : plan.sweeps) {
    ASSIGN_OR_RETURN(const PredictedSweep predicted,
                     PredictSweep(sweep, plan, model, burst_s, queue_s, BoxCores()));
    for (const std::vector<ValidationRow>& rows : predicted.rows) *out << FormatPrediction(rows);
  }
  return absl::OkStatus();
}

absl::StatusOr<Validation> RunValidation(const ValidationPlan& plan, const proto::CostModelFile& model,
                                         const ScalingOptions& base, std::ostream* out,
                                         std::ostream* progress, absl::Duration time_limit) {
  RETURN_IF_ERROR(model::ValidateModelFile(model));
  Validation v;
  v.model_host = model.host();
  v.model_date = model.date();
  v.model_hosts_tcp = model.hosts_tcp();
  const absl::Time start = absl::Now();
  // (condition, exchange) -> step times of every run of the noise sweep.
  std::map<std::pair<std::string, Exchange>, std::vector<double>> repeated;
  // Every sweep runs on this machine's emulated links (predicted before the cluster exists): their burst and
  // the cores all processes share.
  ASSIGN_OR_RETURN(const double burst_s, ParseLinkBurst(base.cluster.burst));
  ASSIGN_OR_RETURN(const double queue_s, ParseQueue(base.cluster.queue));
  const double box_cores = BoxCores();
  SweepClock clock(time_limit, start);
  for (size_t i = 0; i < plan.sweeps.size(); ++i) {
    const HeldOutSweep& sweep = plan.sweeps[i];
    ASSIGN_OR_RETURN(const PredictedSweep predicted_sweep,
                     PredictSweep(sweep, plan, model, burst_s, queue_s, box_cores));
    const std::vector<HeldOutCondition>& conditions = predicted_sweep.conditions;
    const std::vector<std::vector<ValidationRow>>& predicted = predicted_sweep.rows;
    for (const std::vector<ValidationRow>& rows : predicted) *out << FormatPrediction(rows);
    out->flush();
    ScalingOptions o = base;
    o.exchanges = plan.exchanges;
    o.steps = plan.steps;
    o.warmup_steps = plan.warmup_steps;
    o.ps_servers = plan.ps_servers;
    o.network_link_share = model::NetworkLinkShareOf(model, plan.ps_servers);
    o.nodes = sweep.nodes;
    o.projection = {};
    o.timeline_dir.clear();
    o.cluster.force_loopback = false;
    o.cluster.link = sweep.link;
    o.cluster.latency = sweep.latency;
    o.cluster.queue = sweep.queue.empty() ? base.cluster.queue : sweep.queue;
    if (sweep.workloads.empty()) {
      o.mode = "gradient";
      o.workloads.clear();
      o.model_bytes = sweep.sizes;
      o.bucket_mbs.clear();
      o.bytes_scale = 1;
    } else {
      o.workloads = sweep.workloads;
      o.bytes_scale = sweep.bytes_scale;
      o.bucket_mbs =
          sweep.bucket_mbs;  // real sizes: the harness divides them (and the first cap) by bytes_scale
    }
    const int runs = static_cast<int>(i) == plan.noise_sweep ? std::max(1, plan.noise_runs) : 1;
    ASSIGN_OR_RETURN(const double sweep_estimate_s, EstimateSweepSeconds(plan, static_cast<int>(i), model));
    for (int run = 0; run < runs; ++run) {
      const std::string which = absl::StrFormat(
          "# validation sweep %d/%d%s: %s", i + 1, plan.sweeps.size(),
          runs > 1 ? absl::StrFormat(" (run %d of %d, for the noise)", run + 1, runs) : "", sweep.Name());
      if (const std::string why = clock.WhyNot(sweep_estimate_s); !why.empty()) {
        *progress << which << ", not run: " << why << "\n";
        if (run == 0) {
          for (const std::vector<ValidationRow>& rows : predicted) {
            for (ValidationRow row : rows) {
              row.out_of_time = true;
              row.note = "not run (time limit)";
              v.rows.push_back(row);
            }
          }
        }
        break;  // a skipped run's repeats are skipped too; a later, shorter sweep may still fit
      }
      clock.Start();
      *progress << which << absl::StrFormat(", %.0f s elapsed\n", absl::ToDoubleSeconds(absl::Now() - start));
      absl::StatusOr<SweepResult> result = RunScaling(o, progress);
      if (!result.ok()) {
        return absl::Status(result.status().code(),
                            absl::StrCat("validation sweep ", sweep.Name(), ": ", result.status().message()));
      }
      if (!result->emulated) {
        return absl::FailedPreconditionError(
            absl::StrCat("validation sweep ", sweep.Name(), " ran on loopback (", result->fallback_reason,
                         "): run as root (CAP_NET_ADMIN) for the emulated links"));
      }
      if (v.hosts_tcp.empty()) v.hosts_tcp = result->hosts_tcp;
      for (size_t c = 0; c < conditions.size(); ++c) {
        for (ValidationRow row : predicted[c]) {
          auto record = std::find_if(result->records.begin(), result->records.end(), [&](const RunRecord& r) {
            return r.exchange == row.exchange && conditions[c].Matches(r);
          });
          if (record == result->records.end()) {
            row.note = "not run";
          } else if (!record->ok() || record->wrong > 0) {
            row.note = record->ok() ? absl::StrCat(record->wrong, " wrong")
                                    : absl::StrCat("failed: ", record->error);
          } else {
            row.measured_step_s = record->step_s;
            row.measured_exposed_s = conditions[c].replay() ? record->exposed_s : record->exchange_s;
            row.emulator_bound = record->emulator_bound;
            if (record->emulator_bound) row.note = record->bound_reason;
            row.drop_share = record->LinkDropShare();
            row.host_stall = record->host_stall;
            // A remark, not a note: a note excludes the row. Hosts that waited for a core too little to
            // explain the link's shortfall, links that dropped packets (network loss the model lacks), or
            // hosts that waited while the link carried what the network allows (rule (d) keeps the run).
            if (row.lossy()) {
              row.remark =
                  absl::StrFormat("links dropped %.2f%% of packets (loss, %s)%s", 100 * row.drop_share,
                                  row.incast_s > 0 ? "the incast term's" : "not in the model",
                                  record->kept_reason.empty() ? "" : ": judged");
            } else if (!record->kept_reason.empty()) {
              row.remark = "box waits cannot explain the shortfall: judged";
            }
            if (row.usable() && row.box_waited() && record->kept_reason.empty()) {
              absl::StrAppend(
                  &row.remark, row.remark.empty() ? "" : "; ",
                  absl::StrFormat("a host waited for a core %.0f%% of the exchange time, its link "
                                  "busy as the network allows: judged",
                                  100 * row.host_stall));
            }
            if (runs > 1 && row.usable())
              repeated[{row.condition, row.exchange}].push_back(row.measured_step_s);
          }
          if (run == 0) v.rows.push_back(row);
        }
      }
      clock.Ran(sweep_estimate_s);
    }
  }
  for (auto& [key, times] : repeated) {
    if (times.size() > 1) v.repeats.push_back(times);
  }
  v.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  ASSIGN_OR_RETURN(v.summary, Summarize(v.rows, v.repeats));
  return v;
}

}  // namespace psring::bench
