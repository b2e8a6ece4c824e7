// Limits on sizes and values that come from flags, files and requests, checked before anything is
// allocated or run, so bad input gets a clear error instead of std::bad_alloc, an OOM kill, a hang or a
// silently useless run (issue 13). Pure functions: thread-safe, non-blocking.
#ifndef PSRING_TRAINER_LIMITS_H_
#define PSRING_TRAINER_LIMITS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "trainer/optimizer.h"

namespace psring::trainer {

// Above this a step diverges at once; a typo (1e30, inf) is refused rather than trained to NaN.
inline constexpr float kMaxLearningRate = 10.0f;
// Longest timeout a flag may give (about 11.6 days): larger values are typos, and inf/nan never expire.
inline constexpr double kMaxTimeoutSeconds = 1e6;
// Samples per step on one rank (activations are batch x widest layer floats).
inline constexpr int kMaxBatchSize = 1 << 20;
// Generated samples of --dataset=synthetic (each is 784 floats: 2^21 of them are 6.6 GB).
inline constexpr int64_t kMaxSyntheticSamples = int64_t{1} << 21;
// Parameters of a model (the MLP's, or --model_bytes / 4): 2^30 floats = 4 GiB per buffer.
inline constexpr uint64_t kMaxModelParams = uint64_t{1} << 30;

// The index of the first NaN or infinity in values[0, n), or n when all are finite.
size_t FirstNonFinite(const float* values, size_t n);

// OK when the hyperparameters are usable: finite, 0 < lr <= kMaxLearningRate, momentum in [0, 1),
// weight_decay in [0, 1]; otherwise INVALID_ARGUMENT naming the flag.
absl::Status ValidateSgdOptions(const SgdOptions& hyperparameters);

// `seconds` of flag `flag` as a duration: INVALID_ARGUMENT unless finite and in (0, kMaxTimeoutSeconds].
absl::StatusOr<absl::Duration> TimeoutFromSeconds(absl::string_view flag, double seconds);

// OK when a model of `params` floats (`what` names its flag in the error) is at most kMaxModelParams and
// its `buffers` copies fit in this machine's physical memory.
absl::Status CheckModelSize(absl::string_view what, uint64_t params, int buffers);

// The MLP input-hidden...-classes: INVALID_ARGUMENT when its parameter count exceeds the limits above.
absl::Status CheckMlpSize(int input_dim, const std::vector<int>& hidden, int num_classes);

// Host memory the trainer needs for the MLP input-hidden...-classes with batches of `batch_size`: parameters,
// gradients and momentum, and per sample the input, every layer's activations and two backward deltas.
double TrainingMemoryBytes(int input_dim, const std::vector<int>& hidden, int num_classes, int batch_size);

// RESOURCE_EXHAUSTED naming both flags when TrainingMemoryBytes exceeds this machine's physical memory. Call
// before building the engine (a huge batch of a wide model would otherwise end in std::bad_alloc).
absl::Status CheckTrainingMemory(int input_dim, const std::vector<int>& hidden, int num_classes, int batch_size);

// OK when every rank gets at least one batch of `batch_size` of `samples` split over `world_size` ranks
// (the DistributedSampler pads to equal shares). Call before allocating batch buffers.
absl::Status CheckBatchFits(int64_t samples, int world_size, int batch_size);

// FAILED_PRECONDITION naming `step` when the batch's summed loss is NaN or infinite: the run diverged (too
// large --lr?) and every later step would only spread NaN.
absl::Status CheckLoss(double loss_sum, int64_t step);

// INVALID_ARGUMENT when a checkpoint's `step` lies beyond the run's planned `last_step` (a damaged or
// foreign checkpoint, or --max_steps/--epochs lowered): resuming would silently train nothing.
absl::Status CheckResumeStep(int64_t step, int64_t last_step);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_LIMITS_H_
