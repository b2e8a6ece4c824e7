// One host's CPU ceilings measured directly (bench/model/cpu_model.proto, //bench:calibrate --cpu_only), and
// how projections use them in place of the calibration host's.
//
// The model charges each collective a CPU term, cpu_bytes / (C * cpu_speedup * share) with share =
// min(1, cores / processes) (bench/model/collective.h). A loopback run (unlimited links, no latency) is bound
// by that term alone, so each run gives C directly: the C for which the model's own time of the run equals
// the measured one (CpuCeilingOf). A host's ceiling per exchange is the median over runs at N = 1 ..
// min(cores, 4) with at most one process per core (PlanCpuRuns), so the share rule hardly enters:
//
//   CpuPlan plan = PlanCpuRuns(AllTopologies(), /*cores=*/2, /*max_nodes=*/4, /*ps_servers=*/2);
//   ... run plan.runs on loopback (bench/cmd/calibration.h RunCpuCalibration) -> std::vector<MeasuredRun>
//   ASSIGN_OR_RETURN(proto::CpuModelFile cpu, SummarizeCpuRuns(runs, &model, plan, {"box", "2026-12-01",
//   2})); RETURN_IF_ERROR(WriteCpuModelFile("cpu.json", cpu));
//
//   ASSIGN_OR_RETURN(proto::CpuModelFile cpu, ReadCpuModelFile("cpu.json"));     // validated
//   ASSIGN_OR_RETURN(proto::CostModelFile target, WithCpuCeilings(model, cpu)); // project with these
//
// Thread-safety: pure functions (Read/Write touch only their file).
#ifndef PSRING_BENCH_MODEL_CPU_MODEL_H_
#define PSRING_BENCH_MODEL_CPU_MODEL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/model/cpu_model.pb.h"
#include "bench/model/fit.h"

namespace psring::bench::model {

// The file format this code writes and reads. A change of meaning of any field bumps it.
inline constexpr int kCpuModelFileVersion = 1;

// The ceiling C for which PredictCollective(topology, params with cpu_bytes_per_second = C, conditions) takes
// `seconds`: the model's own CPU term (its cpu_bytes, cpu_speedup and share) inverted, with the run's other
// terms (latency, messages * software_s) taken off first. `params`' own CPU ceiling is ignored.
// kInvalidArgument from ValidateParams/ValidateConditions, for seconds not > 0, and for a run that moves no
// CPU bytes (the ring at N = 1); kFailedPrecondition when the other terms alone take `seconds` or longer, or
// the link or window term is longer than what is left (the run was not CPU-bound: nothing to invert).
absl::StatusOr<double> CpuCeilingOf(Topology topology, const ExchangeParams& params,
                                    const Conditions& conditions, double seconds);

// One loopback run of the CPU measurement: `topology` at N = nodes with K = servers (ps-dedicated).
struct CpuRunPlan {
  Topology topology = Topology::kRing;
  int nodes = 1;
  int servers = 0;
  int processes = 1;  // ProcessesOf
};

struct CpuPlan {
  std::vector<CpuRunPlan> runs;
  // Per topology (AllTopologies() order, only those planned): the combinations left out or run with more
  // processes than cores, e.g. "N=2 skipped: 3 processes > 2 cores".
  std::vector<std::vector<std::string>> notes;
  std::vector<Topology> topologies;  // the order of `notes`
};

// N = 1 .. min(cores, max_nodes) per topology, without the combinations whose processes outnumber the cores;
// the smallest N that moves bytes (the ring's 2, the others' 1) always runs, oversubscribed if it must (the
// note says so). ps-dedicated takes K = ps_servers where the cores allow, else fewer (>= 1).
CpuPlan PlanCpuRuns(const std::vector<Topology>& topologies, int cores, int max_nodes, int ps_servers);

struct CpuHostInfo {
  std::string host;
  std::string date;  // ISO 8601
  int cores = 0;
  std::string note;
};

// The loopback runs (box_cores set: every process shared this host) -> the file: per topology of `plan` each
// run's CpuCeilingOf, their median, minimum and maximum. `model` supplies the other terms (software_s;
// nullptr: none, the whole time is CPU). kInvalidArgument naming the topology when none of its runs gives a
// ceiling (with each run's reason), and ValidateCpuModelFile's errors.
absl::StatusOr<proto::CpuModelFile> SummarizeCpuRuns(const std::vector<MeasuredRun>& runs,
                                                     const proto::CostModelFile* model, const CpuPlan& plan,
                                                     const CpuHostInfo& info);

// kInvalidArgument naming the field ("cpu model file: ring.cpu_bytes_per_second = 0: must be finite and > 0")
// for: another version, no host or date, cores < 1, an unknown, duplicate or missing exchange (all four are
// required), a ceiling (or a run's) not finite and > 0.
absl::Status ValidateCpuModelFile(const proto::CpuModelFile& file);

// JSON -> validated file; `origin` (a path) opens every error. Unknown fields are errors.
absl::StatusOr<proto::CpuModelFile> ParseCpuModelFile(absl::string_view json, absl::string_view origin);
// kNotFound when the file cannot be opened (naming it and //bench:calibrate --cpu_only), else
// ParseCpuModelFile's.
absl::StatusOr<proto::CpuModelFile> ReadCpuModelFile(const std::string& path);
// Validates, then writes the JSON atomically (common/atomic_file.h).
absl::Status WriteCpuModelFile(const std::string& path, const proto::CpuModelFile& file);

// `model` with every exchange's cpu_bytes_per_second replaced by `cpu`'s (no standard error: measured, not
// fitted). kNotFound naming the exchange `cpu` lacks (a validated file has all).
absl::StatusOr<proto::CostModelFile> WithCpuCeilings(const proto::CostModelFile& model,
                                                     const proto::CpuModelFile& cpu);

// The model a projection uses: `model` with the CPU ceilings of the file at `cpu_model_path` ("": the model
// file's own, the calibration host's) and the PS window round of `window_round_us` (model_file.h
// WithWindowRoundFlag; < 0: the model file's). `*cpu_source` becomes CpuModelSource of that file, or "".
// ReadCpuModelFile's, WithCpuCeilings' and WithWindowRound's errors.
absl::StatusOr<proto::CostModelFile> ModelForTarget(const proto::CostModelFile& model,
                                                    const std::string& cpu_model_path, double window_round_us,
                                                    std::string* cpu_source);

// "<path> (<host>, <date>)": where a projection's ceilings came from (project.h FormatProjection's
// cpu_source).
std::string CpuModelSource(const std::string& path, const proto::CpuModelFile& cpu);

// The table //bench:calibrate --cpu_only prints: per exchange the ceiling, its spread and every run's value,
// under a heading naming the host (this host's CPU), then what was skipped. Lines start with "# ".
std::string FormatCpuModel(const proto::CpuModelFile& file);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_CPU_MODEL_H_
