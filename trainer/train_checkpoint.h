// Train()'s checkpoints: the state a run saves to --checkpoint_dir and restores with --resume, and the rule
// that only trainer-owned optimizers checkpoint on the workers. Private to //trainer:trainer (train.cc).
#ifndef PSRING_TRAINER_TRAIN_CHECKPOINT_H_
#define PSRING_TRAINER_TRAIN_CHECKPOINT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/checkpoint.h"
#include "trainer/engine.h"
#include "trainer/exchange.h"
#include "trainer/train.h"

namespace psring::trainer {

CheckpointState MakeCheckpointState(const TrainOptions& o, int world_size, int64_t step, int64_t epoch);

// Writes checkpoint_dir/latest.npz from the engine's parameters and momentum.
absl::Status SaveState(const TrainOptions& o, Engine* engine, int world_size, int64_t step, int64_t steps_per_epoch);

// Loads checkpoint_dir/latest.npz into the engine; returns the global step to continue from.
absl::StatusOr<int64_t> RestoreState(const TrainOptions& o, Engine* engine, int world_size);

// Trainer checkpoints hold parameters and momentum; with the optimizer on the servers the momentum never
// reaches the trainer, so a checkpoint here would save zeros and --resume would not continue the run.
absl::Status CheckCheckpointOwnership(const TrainOptions& o, const GradientExchange& exchange);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_TRAIN_CHECKPOINT_H_
