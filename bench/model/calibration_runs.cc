#include "bench/model/calibration_runs.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/model/collective.h"
#include "bench/model/data_path.h"
#include "common/atomic_file.h"
#include "common/proto_json.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"

namespace psring::bench::model {
namespace {

constexpr int kRunsFileVersion = 1;

}  // namespace

absl::Status WriteSavedRuns(const std::string& path, const SavedRuns& saved) {
  proto::CalibrationRunsFile file = saved.file;
  file.set_version(kRunsFileVersion);
  file.clear_runs();
  for (const MeasuredRun& run : saved.runs) {
    proto::CalibrationRun* r = file.add_runs();
    r->set_exchange(TopologyName(run.topology));
    r->set_nodes(run.conditions.nodes);
    r->set_servers(run.conditions.servers);
    r->set_bytes(run.conditions.bytes);
    r->set_link_bytes_per_second(run.conditions.link_bytes_per_second);
    r->set_latency_s(run.conditions.latency_s);
    r->set_link_burst_bytes(run.conditions.link_burst_bytes);
    r->set_box_cores(run.conditions.box_cores);
    r->set_seconds(run.seconds);
  }
  ASSIGN_OR_RETURN(const std::string json, PrettyJson(file, "the runs"));
  return WriteFileAtomically(path, json);
}

absl::Status WriteCalibrationRuns(const std::string& path, const std::vector<MeasuredRun>& runs,
                                  const FileInfo& info) {
  SavedRuns saved;
  saved.file.set_host(info.host);
  saved.file.set_date(info.date);
  saved.file.set_note(info.note);
  if (!info.hosts_tcp.empty()) saved.file.set_hosts_tcp(info.hosts_tcp);
  proto::CostModelFile data_path;
  RecordDataPath(data_path);
  saved.file.set_data_path_fingerprint(data_path.data_path_fingerprint());
  *saved.file.mutable_data_path_sources() = data_path.data_path_sources();
  saved.runs = runs;
  return WriteSavedRuns(path, saved);
}

absl::StatusOr<SavedRuns> ReadCalibrationRuns(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadFileToString(path, absl::StrCat(path,
                                                       ": cannot open the calibration runs; "
                                                       "//bench:calibrate --runs_out=FILE writes them")));
  SavedRuns saved;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed = google::protobuf::util::JsonStringToMessage(text, &saved.file, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a calibration runs file (bench/model/cost_model_file.proto CalibrationRunsFile): ",
        parsed.ToString()));
  }
  if (saved.file.version() != kRunsFileVersion) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": version ", saved.file.version(),
                                                   ", this build reads ", kRunsFileVersion,
                                                   "; calibrate again with --runs_out"));
  }
  for (int i = 0; i < saved.file.runs_size(); ++i) {
    const proto::CalibrationRun& r = saved.file.runs(i);
    const std::string which = absl::StrCat(path, ": run ", i, " (", r.exchange(), ")");
    absl::StatusOr<Topology> topology = ParseTopology(r.exchange());
    if (!topology.ok())
      return absl::InvalidArgumentError(absl::StrCat(which, ": ", topology.status().message()));
    MeasuredRun run;
    run.topology = *topology;
    run.conditions.nodes = r.nodes();
    run.conditions.servers = r.servers();
    run.conditions.bytes = r.bytes();
    run.conditions.link_bytes_per_second = r.link_bytes_per_second();
    run.conditions.latency_s = r.latency_s();
    run.conditions.link_burst_bytes = r.link_burst_bytes();
    run.conditions.box_cores = r.box_cores();
    run.seconds = r.seconds();
    if (absl::Status s = ValidateConditions(run.topology, run.conditions); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(which, ": ", s.message()));
    }
    if (!(std::isfinite(run.seconds) && run.seconds > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, ": measured time ", run.seconds, " s is not > 0"));
    }
    saved.runs.push_back(run);
  }
  saved.file.clear_runs();
  return saved;
}

absl::StatusOr<SavedRuns> MergeSavedRuns(const std::vector<SavedRuns>& parts,
                                         const std::vector<std::string>& origins) {
  if (parts.empty() || parts.size() != origins.size()) {
    return absl::InvalidArgumentError("no runs files to merge (give one or more, comma-separated)");
  }
  if (parts.size() == 1) return parts[0];  // nothing merged: its note as it was
  SavedRuns merged = parts[0];
  std::vector<std::string> notes = {absl::StrCat(origins[0], ": ", parts[0].file.note())};
  for (size_t i = 1; i < parts.size(); ++i) {
    const proto::CalibrationRunsFile& f = parts[i].file;
    if (f.host() != merged.file.host()) {
      return absl::InvalidArgumentError(absl::StrCat(
          origins[i], " was measured on host '", f.host(), "', ", origins[0], " on '", merged.file.host(),
          "': a model's CPU ceilings hold for one host; refit each host's runs on their own"));
    }
    if (f.data_path_fingerprint() != merged.file.data_path_fingerprint()) {
      return absl::InvalidArgumentError(
          absl::StrCat(origins[i], " was measured on data path ", f.data_path_fingerprint(), ", ", origins[0],
                       " on ", merged.file.data_path_fingerprint(),
                       ": the runs time different code; recalibrate instead of merging them"));
    }
    if (f.hosts_tcp() != merged.file.hosts_tcp()) {
      return absl::InvalidArgumentError(absl::StrCat(
          origins[i], " was measured with the hosts' TCP '", f.hosts_tcp(), "', ", origins[0], " with '",
          merged.file.hosts_tcp(), "': the emulated links time them differently; refit each on its own"));
    }
    if (f.date() > merged.file.date()) merged.file.set_date(f.date());
    merged.runs.insert(merged.runs.end(), parts[i].runs.begin(), parts[i].runs.end());
    notes.push_back(absl::StrCat(origins[i], ": ", f.note()));
  }
  merged.file.set_note(absl::StrJoin(notes, "; "));
  return merged;
}

absl::StatusOr<proto::CostModelFile> RefitModel(const SavedRuns& saved, const std::string& origin) {
  const FileInfo info{saved.file.host(), saved.file.date(),
                      absl::StrCat("refit of the runs in ", origin, " (", saved.file.note(), ")"),
                      saved.file.hosts_tcp()};
  absl::StatusOr<proto::CostModelFile> file = FitModel(saved.runs, info);
  if (!file.ok()) return file.status();
  file->set_data_path_fingerprint(saved.file.data_path_fingerprint());
  *file->mutable_data_path_sources() = saved.file.data_path_sources();
  return file;
}

}  // namespace psring::bench::model
