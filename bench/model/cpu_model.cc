#include "bench/model/cpu_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/model/model_file.h"
#include "bench/model/validate.h"
#include "common/atomic_file.h"
#include "common/proto_json.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"

namespace psring::bench::model {
namespace {

constexpr char kRemeasure[] = "measure again (//bench:calibrate --cpu_only) or fix the file";

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("cpu model file: ", where, ": ", what, "; ", kRemeasure));
}

bool PositiveFinite(double v) { return std::isfinite(v) && v > 0; }

// The smallest N at which `topology` moves bytes: a ring of one exchanges nothing.
int SmallestNodes(Topology topology) { return topology == Topology::kRing ? 2 : 1; }

}  // namespace

absl::StatusOr<double> CpuCeilingOf(Topology topology, const ExchangeParams& params,
                                    const Conditions& conditions, double seconds) {
  if (!PositiveFinite(seconds)) {
    return absl::InvalidArgumentError(absl::StrCat("measured time ", seconds, " s is not > 0"));
  }
  // The CPU term is inversely proportional to the ceiling: the model's time at a ceiling of 1 byte/s gives
  // the run's cpu_bytes / (cpu_speedup * share) as cpu_s, and its other terms as they are.
  ExchangeParams unit = params;
  unit.cpu_bytes_per_second = 1;
  absl::StatusOr<CollectiveTime> at_unit = PredictCollective(topology, unit, conditions);
  if (!at_unit.ok()) return at_unit.status();
  if (!(at_unit->cpu_s > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(TopologyName(topology), " at N = ", conditions.nodes,
                                                   " moves no CPU bytes: nothing to measure"));
  }
  const double cpu_s = seconds - at_unit->latency_s - at_unit->software_s;
  if (!(cpu_s > 0) || cpu_s < std::max(at_unit->link_s, at_unit->window_s)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s at N = %d, S = %.0f: measured %.4f s, but the model's latency and software terms take %.4f s and "
        "its link and window terms %.4f s: not CPU-bound",
        TopologyName(topology), conditions.nodes, conditions.bytes, seconds,
        at_unit->latency_s + at_unit->software_s, std::max(at_unit->link_s, at_unit->window_s)));
  }
  return at_unit->cpu_s / cpu_s;
}

CpuPlan PlanCpuRuns(const std::vector<Topology>& topologies, int cores, int max_nodes, int ps_servers) {
  CpuPlan plan;
  cores = std::max(cores, 1);
  for (Topology topology : topologies) {
    std::vector<std::string> notes;
    const int smallest = SmallestNodes(topology);
    if (smallest > 1) notes.push_back("N=1 skipped: a ring of one moves nothing");
    const int largest = std::max(smallest, std::min(cores, max_nodes));
    for (int n = smallest; n <= largest; ++n) {
      const int servers = topology == Topology::kPsDedicated
                              ? std::max(1, std::min(std::max(ps_servers, 1), cores - n))
                              : ServersOf(topology, n, 0);
      const int processes = ProcessesOf(topology, n, servers);
      if (processes > cores && n > smallest) {
        notes.push_back(absl::StrFormat("N=%d skipped: %d processes > %d cores", n, processes, cores));
        continue;
      }
      if (processes > cores) {
        notes.push_back(absl::StrFormat(
            "N=%d runs %d processes on %d cores (the smallest N that moves bytes)", n, processes, cores));
      }
      plan.runs.push_back({topology, n, servers, processes});
    }
    plan.notes.push_back(notes);
    plan.topologies.push_back(topology);
  }
  return plan;
}

absl::StatusOr<proto::CpuModelFile> SummarizeCpuRuns(const std::vector<MeasuredRun>& runs,
                                                     const proto::CostModelFile* model, const CpuPlan& plan,
                                                     const CpuHostInfo& info) {
  proto::CpuModelFile file;
  file.set_version(kCpuModelFileVersion);
  file.set_host(info.host);
  file.set_date(info.date);
  file.set_cores(info.cores);
  if (!info.note.empty()) file.set_note(info.note);
  for (size_t t = 0; t < plan.topologies.size(); ++t) {
    const Topology topology = plan.topologies[t];
    ExchangeParams others;  // no software or latency term unless the model gives one
    if (model != nullptr) {
      absl::StatusOr<ExchangeParams> params = ParamsOf(*model, topology);
      if (!params.ok()) return params.status();
      others = *params;
    }
    proto::CpuExchange* e = file.add_exchanges();
    e->set_exchange(TopologyName(topology));
    for (const std::string& note : plan.notes[t]) e->add_skipped(note);
    std::vector<double> ceilings;
    std::vector<std::string> rejected;
    for (const MeasuredRun& run : runs) {
      if (run.topology != topology) continue;
      absl::StatusOr<double> ceiling = CpuCeilingOf(topology, others, run.conditions, run.seconds);
      if (!ceiling.ok()) {
        rejected.push_back(std::string(ceiling.status().message()));
        continue;
      }
      proto::CpuRun* r = e->add_runs();
      r->set_nodes(run.conditions.nodes);
      r->set_servers(ServersOf(topology, run.conditions.nodes, run.conditions.servers));
      r->set_processes(ProcessesOf(topology, run.conditions.nodes, run.conditions.servers));
      r->set_bytes(run.conditions.bytes);
      r->set_seconds(run.seconds);
      r->set_share(CpuShareOf(topology, run.conditions));
      r->set_cpu_bytes_per_second(*ceiling);
      ceilings.push_back(*ceiling);
    }
    if (ceilings.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          TopologyName(topology), ": no loopback run gives a CPU ceiling",
          rejected.empty() ? " (none succeeded)" : absl::StrCat(": ", absl::StrJoin(rejected, "; "))));
    }
    absl::StatusOr<double> median = Quantile(ceilings, 0.5);
    if (!median.ok()) return median.status();
    e->set_cpu_bytes_per_second(*median);
    e->set_min_bytes_per_second(*std::min_element(ceilings.begin(), ceilings.end()));
    e->set_max_bytes_per_second(*std::max_element(ceilings.begin(), ceilings.end()));
  }
  if (absl::Status s = ValidateCpuModelFile(file); !s.ok()) return s;
  return file;
}

absl::Status ValidateCpuModelFile(const proto::CpuModelFile& file) {
  if (!file.has_version()) return Invalid("version", "missing");
  if (file.version() != kCpuModelFileVersion) {
    return Invalid("version", absl::StrCat(file.version(), " is not the version this build reads (",
                                           kCpuModelFileVersion, ")"));
  }
  if (file.host().empty()) return Invalid("host", "missing (the ceilings hold for one host)");
  if (file.date().empty()) return Invalid("date", "missing");
  if (file.cores() < 1) return Invalid("cores", absl::StrCat("= ", file.cores(), ": must be >= 1"));
  std::set<Topology> seen;
  for (const proto::CpuExchange& e : file.exchanges()) {
    absl::StatusOr<Topology> topology = ParseTopology(e.exchange());
    if (!topology.ok()) return Invalid("exchanges", topology.status().message());
    if (!seen.insert(*topology).second) return Invalid(e.exchange(), "appears twice");
    if (!e.has_cpu_bytes_per_second() || !PositiveFinite(e.cpu_bytes_per_second())) {
      return Invalid(absl::StrCat(e.exchange(), ".cpu_bytes_per_second"),
                     e.has_cpu_bytes_per_second()
                         ? absl::StrCat("= ", e.cpu_bytes_per_second(), ": must be finite and > 0")
                         : "missing");
    }
    for (int i = 0; i < e.runs_size(); ++i) {
      if (!PositiveFinite(e.runs(i).cpu_bytes_per_second())) {
        return Invalid(absl::StrCat(e.exchange(), ".runs[", i, "].cpu_bytes_per_second"),
                       absl::StrCat("= ", e.runs(i).cpu_bytes_per_second(), ": must be finite and > 0"));
      }
    }
  }
  for (Topology t : AllTopologies()) {
    if (!seen.count(t)) return Invalid(TopologyName(t), "missing (every exchange of the race is required)");
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::CpuModelFile> ParseCpuModelFile(absl::string_view json, absl::string_view origin) {
  proto::CpuModelFile file;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed = google::protobuf::util::JsonStringToMessage(std::string(json), &file, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": not a CPU model file (CpuModelFile in bench/model/cpu_model.proto): ", parsed.ToString()));
  }
  if (absl::Status s = ValidateCpuModelFile(file); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", s.message()));
  }
  return file;
}

absl::StatusOr<proto::CpuModelFile> ReadCpuModelFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadFileToString(path, absl::StrCat(path,
                                                       ": cannot open the CPU model file; measure one "
                                                       "with //bench:calibrate --cpu_only")));
  return ParseCpuModelFile(text, path);
}

absl::Status WriteCpuModelFile(const std::string& path, const proto::CpuModelFile& file) {
  if (absl::Status s = ValidateCpuModelFile(file); !s.ok()) return s;
  ASSIGN_OR_RETURN(const std::string json, PrettyJson(file, "the CPU model"));
  return WriteFileAtomically(path, json);
}

absl::StatusOr<proto::CostModelFile> WithCpuCeilings(const proto::CostModelFile& model,
                                                     const proto::CpuModelFile& cpu) {
  proto::CostModelFile out = model;
  for (proto::ExchangeModel& e : *out.mutable_exchanges()) {
    const auto measured =
        std::find_if(cpu.exchanges().begin(), cpu.exchanges().end(),
                     [&](const proto::CpuExchange& c) { return c.exchange() == e.exchange(); });
    if (measured == cpu.exchanges().end()) {
      return absl::NotFoundError(absl::StrCat("the CPU model of ", cpu.host(), " has no ", e.exchange()));
    }
    proto::ModelParameter* ceiling = e.mutable_cpu_bytes_per_second();
    ceiling->Clear();
    ceiling->set_value(measured->cpu_bytes_per_second());
    ceiling->set_at_bound(false);
  }
  return out;
}

absl::StatusOr<proto::CostModelFile> ModelForTarget(const proto::CostModelFile& model,
                                                    const std::string& cpu_model_path, double window_round_us,
                                                    std::string* cpu_source) {
  proto::CostModelFile out = model;
  cpu_source->clear();
  if (!cpu_model_path.empty()) {
    ASSIGN_OR_RETURN(const proto::CpuModelFile cpu, ReadCpuModelFile(cpu_model_path));
    ASSIGN_OR_RETURN(out, WithCpuCeilings(model, cpu));
    *cpu_source = CpuModelSource(cpu_model_path, cpu);
  }
  return WithWindowRoundFlag(out, window_round_us);
}

std::string CpuModelSource(const std::string& path, const proto::CpuModelFile& cpu) {
  return absl::StrCat(path, " (", cpu.host(), ", ", cpu.date(), ")");
}

std::string FormatCpuModel(const proto::CpuModelFile& file) {
  std::string out = absl::StrFormat(
      "# CPU CEILINGS of this host's CPU: %s, %d cores, %s (loopback runs, unlimited links; the model's CPU "
      "term inverted per run)\n"
      "# %-13s %12s %10s %10s %7s  %s\n",
      file.host(), file.cores(), file.date(), "exchange", "ceil_GB/s", "min_GB/s", "max_GB/s", "spread",
      "per run: N, S -> GB/s (processes)");
  for (const proto::CpuExchange& e : file.exchanges()) {
    std::vector<std::string> runs;
    for (const proto::CpuRun& r : e.runs()) {
      runs.push_back(absl::StrFormat("N=%d %gMiB %.2f (%d)", r.nodes(), r.bytes() / (1 << 20),
                                     r.cpu_bytes_per_second() / 1e9, r.processes()));
    }
    absl::StrAppendFormat(
        &out, "# %-13s %12.2f %10.2f %10.2f %6.0f%%  %s\n", e.exchange(), e.cpu_bytes_per_second() / 1e9,
        e.min_bytes_per_second() / 1e9, e.max_bytes_per_second() / 1e9,
        100 * (e.max_bytes_per_second() - e.min_bytes_per_second()) / e.cpu_bytes_per_second(),
        absl::StrJoin(runs, "; "));
  }
  for (const proto::CpuExchange& e : file.exchanges()) {
    for (const std::string& note : e.skipped()) absl::StrAppend(&out, "# ", e.exchange(), " ", note, "\n");
  }
  return out;
}

}  // namespace psring::bench::model
