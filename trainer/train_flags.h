// Command-line flags for TrainOptions, shared by every binary that trains (so all take the same flags).
#ifndef PSRING_TRAINER_TRAIN_FLAGS_H_
#define PSRING_TRAINER_TRAIN_FLAGS_H_

#include "absl/status/statusor.h"
#include "trainer/train.h"

namespace psring::trainer {

// Reads --hidden, --batch_size, --epochs, --max_steps, --lr, --momentum, --weight_decay, --seed, --device,
// --dataset, --data_dir, --synthetic_samples, --checkpoint_dir, --resume, --log_every, --evaluate,
// --bucket_mb, --first_bucket_mb, --allow_nonfinite_loss, --eval_every, --eval_samples, --target_accuracy.
// kInvalidArgument for values out of range.
absl::StatusOr<TrainOptions> TrainOptionsFromFlags();

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_TRAIN_FLAGS_H_
