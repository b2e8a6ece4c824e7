// Training checkpoints as NumPy .npz archives (format described in README.md, "Checkpoint format").
//
//   CheckpointState s = ...;
//   RETURN_IF_ERROR(SaveCheckpoint(LatestCheckpointPath(dir), s));  // atomic: temp file + rename
//   ASSIGN_OR_RETURN(CheckpointState back, LoadCheckpoint(LatestCheckpointPath(dir)));
//
// Readable from Python: numpy.load("latest.npz")["params"]. Both calls block on file I/O and are
// thread-compatible (concurrent saves to one path race on the rename; the last complete file wins).
#ifndef PSRING_TRAINER_CHECKPOINT_H_
#define PSRING_TRAINER_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace psring::trainer {

struct CheckpointState {
  std::vector<float> params;           // flat parameters (trainer/mlp.h layout)
  std::vector<float> momentum_buffer;  // SGD velocity, same layout
  int64_t step = 0;                    // global optimizer steps taken so far
  int64_t epoch = 0;                   // step / steps_per_epoch (epochs completed, counting from 0)
  // The options the state depends on; a resumed run must match the first five to continue exactly.
  std::vector<int> hidden;
  int64_t batch_size = 0;
  int64_t world_size = 0;
  uint64_t seed = 0;
  std::string dataset;
  float lr = 0;
  float momentum = 0;
  float weight_decay = 0;
};

// `dir`/latest.npz.
std::string LatestCheckpointPath(const std::string& dir);

// Creates `dir` when missing and checks that this process may write there, so a bad --checkpoint_dir
// fails before training instead of at the first save. kPermissionDenied naming the folder otherwise.
absl::Status PrepareCheckpointDir(const std::string& dir);

// Writes `state` atomically (never a half-written file at `path`). kFailedPrecondition, writing nothing,
// when a parameter or momentum value is not finite.
absl::Status SaveCheckpoint(const std::string& path, const CheckpointState& state);

// kNotFound when missing; kDataLoss naming the file and array when corrupt or inconsistent.
absl::StatusOr<CheckpointState> LoadCheckpoint(const std::string& path);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_CHECKPOINT_H_
