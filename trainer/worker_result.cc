#include "trainer/worker_result.h"

namespace psring::trainer {

WorkerResult WorkerResultFromTraining(const TrainResult& r) {
  WorkerResult result;
  result.steps = r.steps;
  result.bytes = r.params.size() * sizeof(float);
  result.compute_s = r.compute_seconds;
  result.exchange_s = r.exchange_seconds;
  result.step_s = r.steps > 0 ? r.wall_seconds / r.steps : 0.0;
  result.samples_per_s = r.samples_per_second;
  result.test_accuracy = r.test_accuracy;
  return result;
}

}  // namespace psring::trainer
