// The presets of bench/workloads/*.json, compiled in by //trainer:workload_presets_gen (trainer/BUILD.bazel).
#ifndef PSRING_TRAINER_WORKLOAD_PRESETS_H_
#define PSRING_TRAINER_WORKLOAD_PRESETS_H_

namespace psring::trainer {

struct WorkloadPreset {
  const char* name;  // the file name without .json
  const char* json;
};

extern const WorkloadPreset kWorkloadPresets[];
extern const int kWorkloadPresetCount;

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_WORKLOAD_PRESETS_H_
