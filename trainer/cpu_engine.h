// The CPU Engine: host buffers, OpenBLAS GEMMs and the loops in cpu_kernels.h.
#ifndef PSRING_TRAINER_CPU_ENGINE_H_
#define PSRING_TRAINER_CPU_ENGINE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "trainer/engine.h"
#include "trainer/mlp.h"

namespace psring::trainer {

// kInvalidArgument when max_batch < 1.
absl::StatusOr<std::unique_ptr<Engine>> CreateCpuEngine(const MlpLayout& layout, int max_batch);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_CPU_ENGINE_H_
