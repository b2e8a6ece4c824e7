// Command-line flags for TrainOptions, shared by every binary that trains (so all take the same flags).
#ifndef PSRING_TRAINER_TRAIN_FLAGS_H_
#define PSRING_TRAINER_TRAIN_FLAGS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/train.h"

namespace psring::trainer {

// Reads --hidden, --batch_size, --epochs, --max_steps, --lr, --momentum, --weight_decay, --seed, --device,
// --dataset, --data_dir, --synthetic_samples, --checkpoint_dir, --resume, --log_every, --evaluate.
// kInvalidArgument for values out of range.
absl::StatusOr<TrainOptions> TrainOptionsFromFlags();

// Sets the program's usage message and makes --help list every flag defined in this project's sources
// (common/, trainer/, ring/, ps/, bench/), not only those of the file holding main(). Call once in main(),
// before absl::ParseCommandLine. Not thread-safe.
void InitFlagsUsage(absl::string_view usage);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_TRAIN_FLAGS_H_
