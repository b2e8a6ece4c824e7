// Turns a finished training run into the fields of the PSRING_RESULT line (common/worker_result.h), so every
// worker binary reports training the same way. Pure function; thread-safe.
#ifndef PSRING_TRAINER_WORKER_RESULT_H_
#define PSRING_TRAINER_WORKER_RESULT_H_

#include "common/worker_result.h"
#include "trainer/train.h"

namespace psring::trainer {

// Sets steps, bytes (size of the flat parameters), compute_s, exchange_s, step_s (mean wall time per step),
// samples_per_s and test_accuracy from `r`. The caller fills exchange, rank, world_size and the network byte
// counters (bytes_sent, bytes_received), which only it knows; they are left at their defaults.
WorkerResult WorkerResultFromTraining(const TrainResult& r);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_WORKER_RESULT_H_
