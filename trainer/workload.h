// Workload profiles (proto/workload.proto): a model as the exchange sees it, its layers in forward order with
// their parameter counts and compute times. Replay mode (trainer/gradient_only.h ReplayOptions) and the
// bench's overlap model read them. Presets ship in bench/workloads/ and are compiled into this library, so a
// preset name works wherever the binary runs (also inside the harness's network namespaces); any other
// argument is read as a file path.
//
//   ASSIGN_OR_RETURN(proto::Workload w, LoadWorkload("resnet50"));   // or "/path/to/my_model.json"
//   for (const proto::WorkloadLayer& l : w.layers()) ... l.params(), l.forward_ms(), l.backward_ms() ...
//
// Pure functions (LoadWorkload reads a file); thread-safe.
#ifndef PSRING_TRAINER_WORKLOAD_H_
#define PSRING_TRAINER_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/workload.pb.h"

namespace psring::trainer {

// Parses a profile's JSON and validates it. `origin` names it in errors (a preset name or a path).
// kInvalidArgument naming the field (and layer) for: JSON that does not parse or has unknown fields, no
// layers, batch_size < 1 or step_ms negative or not finite (where given), a layer without a name, params
// missing or < 1, compute times missing, negative or not finite, a total above 2^34 parameters.
absl::StatusOr<proto::Workload> ParseWorkload(absl::string_view json, absl::string_view origin);

// A preset by name (PresetWorkloadNames()) or else a profile file. kNotFound when neither exists (the
// message lists the presets).
absl::StatusOr<proto::Workload> LoadWorkload(absl::string_view name_or_path);

// The compiled-in presets: "bert_base", "mlp", "resnet50", "vgg16".
std::vector<std::string> PresetWorkloadNames();

// Sum of the layers' parameters.
int64_t WorkloadParameters(const proto::Workload& workload);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_WORKLOAD_H_
