#include "bench/cmd/scaling_flags.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/cmd/launcher_flags.h"
#include "bench/emulator/cluster_flags.h"
#include "bench/model/cpu_model.h"
#include "bench/model/model_file.h"
#include "common/runfiles.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, ring_worker, "",
          "Path of the ring worker binary (//ring:ring_worker). Default: the copy in this binary's Bazel "
          "runfiles.");
ABSL_FLAG(std::string, ps_server, "",
          "Path of the parameter-server binary (//ps:server). Default: the copy in this binary's runfiles.");
ABSL_FLAG(std::string, ps_worker, "",
          "Path of the parameter-server worker binary (//ps:worker). Default: the copy in this binary's "
          "runfiles.");
ABSL_FLAG(bool, verbose, psring::bench::ScalingOptions().verbose,
          "Echo every launched process's stderr, with seconds since its job started, while each run goes; rank "
          "0 of every run prints a line per step (the workers' --log_every=1).");
ABSL_FLAG(std::string, model, "",
          "The frozen cost model (JSON written by //bench:calibrate) every model figure comes from: each run's "
          "predicted time (model_ms, err%), the '# MODEL' extrapolation, the model curves, '# PROJECTION' and, in "
          "//bench:compare, parts 4 and 5. Nothing is fitted to the sweep it judges. Empty: the calibration of "
          "psring's development machine committed with the source "
          "(bench/results/committed_model.json; its host and date are printed: run //bench:calibrate "
          "for a model of your own machine). 'none': no model figures (and no parts 4 and 5).");
ABSL_FLAG(std::string, project_link, "",
          "Project the model onto a cluster with links of this rate per host and direction, e.g. 25gbit (tc "
          "units, like --link): replay mode prints '# PROJECTION' lines and writes projection-<workload>.svg for "
          "the workload's own gradient size and compute (its profile's device times), each exchange capped by its "
          "CPU ceiling measured on the calibration host, NOT measured. Empty: no projection (//bench:compare's "
          "part 5 then projects onto 25gbit).");
ABSL_FLAG(std::string, cpu_model, "",
          "A host's measured CPU ceilings (JSON from //bench:calibrate --cpu_only): the --project_link projection "
          "(and //bench:compare's part 5) caps each exchange by these instead of the model file's, which are the "
          "calibration host's. The sweep's own model figures keep the model file's.");
ABSL_FLAG(double, window_round_us, -1, psring::bench::model::kWindowRoundFlagHelp);
ABSL_FLAG(std::string, project_latency, "5us",
          "One-way host-to-host latency of the --project_link cluster (a duration: 5us, 0.1ms).");
ABSL_FLAG(
    double, project_port_buffer_kb, 0,
    "What one switch port of the --project_link cluster (and //bench:compare's part 5) can queue, kB (e.g. "
    "2000). The projection then marks a PS whose window burst into a server's port exceeds it INCAST and adds "
    "the incast term's cost where the round trip through the port is >= 10 ms (bench/PERFORMANCE.md 9.23, "
    "9.24). 0: not known, ports assumed lossless.");
ABSL_FLAG(std::string, out_dir, "",
          "Directory for scaling.csv, scaling.json and scaling.svg. Default: $BUILD_WORKSPACE_DIRECTORY/out/<name> "
          "under `bazel run`, else a fresh private $TMPDIR/psring-<name>-XXXXXX (printed).");

namespace psring::bench {
namespace {

struct BinaryFlag {
  const absl::Flag<std::string>* flag;
  const char* name;   // the flag's name
  const char* label;  // the Bazel target
};

BinaryFlag FlagFor(Binary binary) {
  switch (binary) {
    case Binary::kRingWorker: return {&FLAGS_ring_worker, "ring_worker", "//ring:ring_worker"};
    case Binary::kPsServer: return {&FLAGS_ps_server, "ps_server", "//ps:server"};
    case Binary::kPsWorker: return {&FLAGS_ps_worker, "ps_worker", "//ps:worker"};
  }
  return {&FLAGS_ring_worker, "ring_worker", "//ring:ring_worker"};
}

// The flag's path, else the target's runfiles path (psring/ring/ring_worker for //ring:ring_worker).
absl::StatusOr<std::string> Locate(const BinaryFlag& binary, const char* argv0) {
  const std::string label = binary.label;
  std::string rlocation = "psring/" + label.substr(2);
  rlocation[rlocation.find(':')] = '/';
  return FindRunfile(argv0, {absl::GetFlag(*binary.flag), rlocation, absl::StrCat("--", binary.name),
                             absl::StrCat("build it (./bazelw build ", label, ")"), /*executable=*/true});
}

// --project_link and --project_latency; `fallback` when --project_link is empty.
absl::StatusOr<ProjectionTarget> ProjectionFromFlags(const ProjectionTarget& fallback) {
  ASSIGN_OR_RETURN(const double port_buffer_bytes,
                   PortBufferBytes(absl::GetFlag(FLAGS_project_port_buffer_kb), "--project_port_buffer_kb"));
  const std::string link = absl::GetFlag(FLAGS_project_link);
  if (link.empty()) {
    ProjectionTarget target = fallback;
    target.port_buffer_bytes = port_buffer_bytes;
    return target;
  }
  ProjectionTarget target;
  target.port_buffer_bytes = port_buffer_bytes;
  absl::StatusOr<double> bits = ParseLinkRate(link);
  if (!bits.ok() || *bits <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("--project_link=", link, ": not a link rate (use e.g. 25gbit)"));
  }
  target.link_bytes_per_second = *bits / 8;
  absl::Duration latency;
  if (!absl::ParseDuration(absl::GetFlag(FLAGS_project_latency), &latency) || latency < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--project_latency=", absl::GetFlag(FLAGS_project_latency),
                                                   ": not a duration >= 0 (use e.g. 5us)"));
  }
  target.latency_s = absl::ToDoubleSeconds(latency);
  return target;
}

}  // namespace

absl::StatusOr<std::string> CommittedModelPath(const char* argv0, const std::string& flag) {
  return FindRunfile(argv0, {"", kCommittedModelRunfile, flag,
                             "the committed model (a file from //bench:calibrate) is there under `bazel run`"});
}

absl::StatusOr<std::string> ModelFromFlags(const char* argv0) {
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model == "none") return std::string();
  if (model.empty()) {
    absl::StatusOr<std::string> path = CommittedModelPath(argv0, "--model");
    if (!path.ok()) return absl::NotFoundError(absl::StrCat(path.status().message(), " (or --model=none)"));
    return path;
  }
  if (access(model.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("--model: cannot read the cost model '", model,
                                            "': pass a //bench:calibrate model file, or --model=none"));
  }
  return model;
}

absl::Status ApplyHarnessFlags(const char* argv0, ScalingOptions* options) {
  for (Exchange e : options->exchanges) {
    for (Binary b : PluginFor(e).binaries()) {
      ASSIGN_OR_RETURN(*options->binaries.Mutable(b), Locate(FlagFor(b), argv0));
    }
  }
  options->cluster = ClusterOptionsFromFlags(argv0);
  ASSIGN_OR_RETURN(options->make_cluster, ClusterFactoryFromFlags(argv0, options->binaries));
  ASSIGN_OR_RETURN(options->projection, ProjectionFromFlags(options->projection));
  ASSIGN_OR_RETURN(options->model_path, ModelFromFlags(argv0));
  options->cpu_model_path = absl::GetFlag(FLAGS_cpu_model);
  if (!options->cpu_model_path.empty()) {
    // Read now, so a bad file stops the command before its sweep rather than after.
    if (options->model_path.empty()) {
      return absl::InvalidArgumentError(
          "--cpu_model replaces the model's CPU ceilings: it needs a model (not --model=none)");
    }
    absl::StatusOr<proto::CpuModelFile> cpu = model::ReadCpuModelFile(options->cpu_model_path);
    if (!cpu.ok()) return absl::Status(cpu.status().code(), absl::StrCat("--cpu_model: ", cpu.status().message()));
  }
  options->window_round_us = absl::GetFlag(FLAGS_window_round_us);
  if (options->window_round_us >= 0) {
    if (options->model_path.empty()) {
      return absl::InvalidArgumentError(
          "--window_round_us replaces the model's PS window round: it needs a model (not --model=none)");
    }
    absl::StatusOr<proto::CostModelFile> file = model::ReadModelFile(options->model_path);
    if (file.ok()) file = model::WithWindowRoundFlag(*file, options->window_round_us);
    if (!file.ok()) {
      return absl::Status(file.status().code(), absl::StrCat("--window_round_us: ", file.status().message()));
    }
  }
  options->verbose = absl::GetFlag(FLAGS_verbose);
  return absl::OkStatus();
}

absl::StatusOr<std::string> OutDirFromFlags(const std::string& name) {
  std::string dir = absl::GetFlag(FLAGS_out_dir);
  if (!dir.empty()) return dir;
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (workspace != nullptr && *workspace != '\0') return absl::StrCat(workspace, "/out/", name);
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/psring-", name, "-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot make an output directory like ", pattern, ": ",
                                            std::strerror(errno), "; pass --out_dir=DIR"));
  }
  std::cerr << "[" << name << "] output directory " << pattern << " (--out_dir to choose one)\n";
  return pattern;
}

}  // namespace psring::bench
