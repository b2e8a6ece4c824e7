#include "bench/model/data_path.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace psring::bench::model {
namespace {

// At most this many file names in Describe()'s line; the rest are counted.
constexpr size_t kNamesShown = 6;

std::string Names(const std::vector<std::string>& files) {
  std::vector<std::string> shown(files.begin(), files.begin() + std::min(files.size(), kNamesShown));
  std::string out = absl::StrJoin(shown, ", ");
  if (files.size() > kNamesShown) absl::StrAppend(&out, " (+", files.size() - kNamesShown, " more)");
  return out;
}

// The workers' and servers' flags that set the exchange's transport (ps/worker_main.cc, ps/server_main.cc).
constexpr const char* kDataPathFlags[] = {"chunk_bytes", "push_window_bytes", "receive_window_bytes",
                                          "max_lead_bytes"};

// "name" of "--name=value", "--name" or "-name"; "" for an argument that is not a flag.
absl::string_view FlagName(absl::string_view arg) {
  if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) return "";
  return arg.substr(0, arg.find('='));
}

}  // namespace

std::vector<std::string> DataPathFlagsIn(const std::vector<std::string>& args) {
  std::vector<std::string> found;
  for (const std::string& arg : args) {
    const absl::string_view name = FlagName(arg);
    for (const char* flag : kDataPathFlags) {
      if (name == flag) found.push_back(arg);
    }
  }
  return found;
}

std::string DescribeDataPathFlags(const std::vector<std::string>& worker_args,
                                  const std::vector<std::string>& server_args, const std::string& ps_chunks) {
  const bool rule = !ps_chunks.empty() && ps_chunks != "harness";
  std::vector<std::string> passed;
  if (rule) passed.push_back("--ps_chunks=" + ps_chunks);
  for (const std::string& arg : DataPathFlagsIn(worker_args)) passed.push_back("--worker_args=" + arg);
  for (const std::string& arg : DataPathFlagsIn(server_args)) passed.push_back("--server_args=" + arg);
  if (passed.empty()) return "";
  // Where each kind is measured: the flags' windows in 9.36, the bdp rule in 9.37, the capped one in 9.40.
  const bool flags = passed.size() > (rule ? 1u : 0u);
  const std::string rule_section = ps_chunks == "capped" ? "9.40" : "9.37";
  const std::string sections = rule && flags ? absl::StrCat("sections 9.36 and ", rule_section)
                               : rule        ? absl::StrCat("section ", rule_section)
                                             : "section 9.36";
  return absl::StrCat(
      "MODEL NOT COMPARABLE: these runs pass ", absl::StrJoin(passed, " "),
      ", which sets the exchange's transport; the model was calibrated with the harness's and the "
      "binaries' own values (bench/harness/launch.cc), so its model_ms and err% are of those, not "
      "of these runs (bench/PERFORMANCE.md ",
      sections, ")");
}

void RecordDataPath(proto::CostModelFile& file) {
  file.set_data_path_fingerprint(kDataPathFingerprint);
  file.clear_data_path_sources();
  for (int i = 0; i < kDataPathSourceCount; ++i) {
    proto::SourceDigest* d = file.add_data_path_sources();
    d->set_path(kDataPathSources[i].path);
    d->set_sha256(kDataPathSources[i].sha256);
  }
}

DataPathState CompareDataPath(const proto::CostModelFile& file) {
  DataPathState state;
  state.recorded = file.has_data_path_fingerprint() && !file.data_path_fingerprint().empty();
  if (!state.recorded) return state;
  state.recorded_fingerprint = file.data_path_fingerprint();
  std::map<std::string, std::string> recorded;
  for (const proto::SourceDigest& d : file.data_path_sources()) recorded[d.path()] = d.sha256();
  for (int i = 0; i < kDataPathSourceCount; ++i) {
    auto it = recorded.find(kDataPathSources[i].path);
    if (it == recorded.end()) {
      state.added.push_back(kDataPathSources[i].path);
      continue;
    }
    if (it->second != kDataPathSources[i].sha256) state.changed.push_back(it->first);
    recorded.erase(it);
  }
  for (const auto& [path, digest] : recorded) state.removed.push_back(path);
  // The fingerprint decides (it covers the whole set); the lists say why it differs.
  state.current = state.recorded_fingerprint == kDataPathFingerprint;
  return state;
}

std::string DataPathState::Describe() const {
  constexpr char kRecalibrate[] =
      "recalibrate (./bazelw run //bench:calibrate -- --quick) before trusting its figures for this tree";
  if (!recorded) {
    return absl::StrCat("data path: NOT RECORDED: the model file predates data-path fingerprints, so it may "
                        "have been fitted on other PS/ring code than this build's (fingerprint ",
                        kDataPathFingerprint, "); ", kRecalibrate);
  }
  if (current) return absl::StrCat("data path: current (fingerprint ", kDataPathFingerprint, ")");
  std::vector<std::string> parts;
  if (!changed.empty()) parts.push_back(absl::StrCat(changed.size(), " changed: ", Names(changed)));
  if (!added.empty()) parts.push_back(absl::StrCat(added.size(), " new: ", Names(added)));
  if (!removed.empty()) parts.push_back(absl::StrCat(removed.size(), " removed: ", Names(removed)));
  if (parts.empty()) parts.push_back("the same files, another fingerprint (the file's record was edited)");
  return absl::StrCat("data path: STALE: the model was calibrated on data-path sources (fingerprint ",
                      recorded_fingerprint, ") that differ from this build's (", kDataPathFingerprint,
                      "): ", absl::StrJoin(parts, "; "), "; ", kRecalibrate);
}

}  // namespace psring::bench::model
