#include "trainer/workload.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/read_file.h"
#include "google/protobuf/util/json_util.h"
#include "trainer/workload_presets.h"

namespace psring::trainer {
namespace {

// 64 GiB of float32 gradients: far beyond any model the emulated cluster can move, small enough that the
// replay's allocation is refused before it is tried.
constexpr int64_t kMaxWorkloadParameters = int64_t{1} << 34;

absl::Status Invalid(absl::string_view origin, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("workload profile ", origin, ": ", what, " (see proto/workload.proto for the format)"));
}

absl::Status CheckTime(absl::string_view origin, const std::string& layer, absl::string_view field,
                       bool present, double value) {
  if (!present) return Invalid(origin, absl::StrCat("layer '", layer, "' has no ", field));
  if (!std::isfinite(value) || value < 0) {
    return Invalid(origin, absl::StrCat("layer '", layer, "' has ", field, " = ", value,
                                        ": must be a finite number of milliseconds >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<proto::Workload> ParseWorkload(absl::string_view json, absl::string_view origin) {
  proto::Workload w;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed = google::protobuf::util::JsonStringToMessage(std::string(json), &w, options);
  if (!parsed.ok()) return Invalid(origin, absl::StrCat("not a profile: ", parsed.message().as_string()));
  if (w.layers_size() == 0) return Invalid(origin, "no layers");
  // The provenance fields are optional (a hand-written profile may lack them), but a value that is there
  // must make sense: the bench prints them beside its figures.
  if (w.has_batch_size() && w.batch_size() < 1) {
    return Invalid(origin, absl::StrCat("batch_size = ", w.batch_size(), ": must be >= 1"));
  }
  if (w.has_step_ms() && (!std::isfinite(w.step_ms()) || w.step_ms() < 0)) {
    return Invalid(origin,
                   absl::StrCat("step_ms = ", w.step_ms(), ": must be a finite number of milliseconds >= 0"));
  }
  int64_t total = 0;
  for (int i = 0; i < w.layers_size(); ++i) {
    const proto::WorkloadLayer& l = w.layers(i);
    if (!l.has_name() || l.name().empty()) return Invalid(origin, absl::StrCat("layer ", i, " has no name"));
    if (!l.has_params()) return Invalid(origin, absl::StrCat("layer '", l.name(), "' has no params"));
    if (l.params() < 1) {
      return Invalid(origin,
                     absl::StrCat("layer '", l.name(), "' has params = ", l.params(), ": must be >= 1"));
    }
    if (l.params() > kMaxWorkloadParameters - total) {
      return Invalid(origin, absl::StrCat("more than ", kMaxWorkloadParameters, " parameters in all"));
    }
    total += l.params();
    const absl::Status forward =
        CheckTime(origin, l.name(), "forward_ms", l.has_forward_ms(), l.forward_ms());
    if (!forward.ok()) return forward;
    const absl::Status backward =
        CheckTime(origin, l.name(), "backward_ms", l.has_backward_ms(), l.backward_ms());
    if (!backward.ok()) return backward;
  }
  if (!w.has_name() || w.name().empty()) w.set_name(std::string(origin));
  return w;
}

absl::StatusOr<proto::Workload> LoadWorkload(absl::string_view name_or_path) {
  for (int i = 0; i < kWorkloadPresetCount; ++i) {
    const WorkloadPreset& preset = kWorkloadPresets[i];
    if (name_or_path == preset.name) return ParseWorkload(preset.json, preset.name);
  }
  absl::StatusOr<std::string> text = ReadFileToString(
      std::string(name_or_path),
      absl::StrCat("--workload=", name_or_path, ": neither a preset (",
                   absl::StrJoin(PresetWorkloadNames(), ", "), ") nor a readable profile file"));
  if (!text.ok()) return text.status();
  return ParseWorkload(*text, name_or_path);
}

std::vector<std::string> PresetWorkloadNames() {
  std::vector<std::string> names;
  for (int i = 0; i < kWorkloadPresetCount; ++i) names.emplace_back(kWorkloadPresets[i].name);
  return names;
}

int64_t WorkloadParameters(const proto::Workload& workload) {
  int64_t total = 0;
  for (const proto::WorkloadLayer& l : workload.layers()) total += l.params();
  return total;
}

}  // namespace psring::trainer
