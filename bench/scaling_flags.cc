#include "bench/scaling_flags.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tools/cpp/runfiles/runfiles.h"

ABSL_FLAG(std::string, ring_worker, "",
          "Path of the ring worker binary (//ring:ring_worker). Default: the copy in this binary's Bazel "
          "runfiles.");
ABSL_FLAG(std::string, ps_server, "",
          "Path of the parameter-server binary (//ps:server). Default: the copy in this binary's runfiles.");
ABSL_FLAG(std::string, ps_worker, "",
          "Path of the parameter-server worker binary (//ps:worker). Default: the copy in this binary's "
          "runfiles.");
ABSL_FLAG(std::string, link, "100mbit",
          "Bandwidth of every emulated host link, each direction, as a tc rate (e.g. 100mbit, 1gbit). Empty: "
          "unlimited.");
ABSL_FLAG(std::string, delay, "",
          "One-way latency added at each end of every host link with netem (e.g. 1ms). Empty: none. Needs the "
          "kernel's sch_netem.");
ABSL_FLAG(std::string, queue, "50ms",
          "Queue of every emulated link end (tc tbf latency): how long the bytes waiting for the link may take "
          "to drain, e.g. 5ms for a shallow-buffered switch port, 50ms for a deep one.");
ABSL_FLAG(bool, loopback, false,
          "Run every host on 127.0.0.1 without namespaces or link limits, even as root (the automatic "
          "fallback without CAP_NET_ADMIN).");
ABSL_FLAG(bool, verbose, false,
          "Echo every launched process's stderr, with seconds since its job started, while each run goes.");
ABSL_FLAG(std::string, out_dir, "",
          "Directory for scaling.csv, scaling.json and scaling.svg. Default: $BUILD_WORKSPACE_DIRECTORY/out/<name> "
          "under `bazel run`, else /tmp/psring-<name>.");

namespace psring::bench {
namespace {

using ::bazel::tools::cpp::runfiles::Runfiles;

// `label` is the Bazel target, e.g. "//ring:ring_worker"; its runfiles path is psring/ring/ring_worker.
absl::StatusOr<std::string> Locate(const std::string& flag_value, const std::string& flag, const std::string& label,
                                   Runfiles* runfiles) {
  std::string rlocation = "psring/" + label.substr(2);
  rlocation[rlocation.find(':')] = '/';
  std::string path = flag_value;
  if (path.empty() && runfiles != nullptr) path = runfiles->Rlocation(rlocation);
  if (path.empty() || access(path.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot find an executable ", rlocation, " (tried '", path,
                                            "'): build it (./bazelw build //", rlocation.substr(7),
                                            ") and pass --", flag, "=PATH"));
  }
  return path;
}

}  // namespace

void IncludeBenchFlagsInHelp() {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) { return absl::StrContains(file, "bench/"); };
  absl::SetFlagsUsageConfig(config);
}

absl::Status ApplySharedFlags(const char* argv0, ScalingOptions* options) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::Create(argv0, &error));
  bool ring = false, ps = false;
  for (Exchange e : options->exchanges) (e == Exchange::kRing ? ring : ps) = true;
  if (ring) {
    ASSIGN_OR_RETURN(options->ring_worker, Locate(absl::GetFlag(FLAGS_ring_worker), "ring_worker",
                                                  "//ring:ring_worker", runfiles.get()));
  }
  if (ps) {
    ASSIGN_OR_RETURN(options->ps_server,
                     Locate(absl::GetFlag(FLAGS_ps_server), "ps_server", "//ps:server", runfiles.get()));
    ASSIGN_OR_RETURN(options->ps_worker,
                     Locate(absl::GetFlag(FLAGS_ps_worker), "ps_worker", "//ps:worker", runfiles.get()));
  }
  options->link = absl::GetFlag(FLAGS_link);
  options->delay = absl::GetFlag(FLAGS_delay);
  options->queue = absl::GetFlag(FLAGS_queue);
  options->loopback = absl::GetFlag(FLAGS_loopback);
  options->verbose = absl::GetFlag(FLAGS_verbose);
  return absl::OkStatus();
}

std::string OutDirFromFlags(const std::string& name) {
  std::string dir = absl::GetFlag(FLAGS_out_dir);
  if (!dir.empty()) return dir;
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (workspace != nullptr && *workspace != '\0') return absl::StrCat(workspace, "/out/", name);
  return absl::StrCat("/tmp/psring-", name);
}

absl::StatusOr<std::vector<int>> ParseIntList(const std::vector<std::string>& items, const std::string& flag) {
  std::vector<int> values;
  for (const auto& item : items) {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", item, "' is not an integer"));
    }
    values.push_back(v);
  }
  return values;
}

namespace {

absl::Status Report(const ScalingResult& result, const std::string& out_dir, bool verdict) {
  PrintReport(result, std::cout);
  if (verdict) PrintVerdict(result, std::cout);
  std::vector<std::string> written;
  RETURN_IF_ERROR(WriteOutputs(result, out_dir, &written));
  for (const auto& file : written) std::cout << "# wrote " << file << "\n";
  std::cout << std::flush;
  int failed = 0;
  int64_t wrong = 0;
  for (const auto& r : result.records) {
    failed += r.ok() ? 0 : 1;
    wrong += r.wrong;
  }
  if (failed > 0 || wrong > 0) {
    return absl::InternalError(absl::StrCat(failed, " of ", result.records.size(), " runs failed and ", wrong,
                                            " wrong elements; see the report above"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunAndReport(const ScalingOptions& options, const std::string& out_dir, bool verdict) {
  ASSIGN_OR_RETURN(ScalingResult result, RunScaling(options, &std::cerr));
  return Report(result, out_dir, verdict);
}

absl::Status ReportFromCsv(const ScalingOptions& options, const std::string& csv_path, const std::string& out_dir) {
  std::ifstream in(csv_path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", csv_path, ": pass a scaling.csv written by a run"));
  std::stringstream text;
  text << in.rdbuf();
  ScalingResult result;
  result.options = options;
  ASSIGN_OR_RETURN(result.records, RecordsFromCsv(text.str()));
  // What was run is what the CSV holds.
  std::set<Exchange> exchanges;
  std::set<int> nodes;
  std::set<size_t> sizes;
  for (const RunRecord& r : result.records) {
    exchanges.insert(r.exchange);
    nodes.insert(r.nodes);
    sizes.insert(r.bytes);
  }
  result.options.exchanges.clear();
  for (Exchange e : AllExchanges()) {
    if (exchanges.count(e)) result.options.exchanges.push_back(e);
  }
  result.options.nodes.assign(nodes.begin(), nodes.end());
  result.options.model_bytes.assign(sizes.begin(), sizes.end());
  result.emulated = !options.loopback;
  if (options.loopback) result.fallback_reason = "re-rendered with --loopback";
  if (result.emulated && !options.link.empty()) {
    ASSIGN_OR_RETURN(const double bits, ParseLinkRate(options.link));
    result.link_bytes_per_second = bits / 8;
  }
  FitModels(&result);
  return Report(result, out_dir, /*verdict=*/true);
}

}  // namespace psring::bench
