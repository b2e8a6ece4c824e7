#include "common/worker_result.h"

#include "absl/strings/str_format.h"

namespace psring {

std::string FormatWorkerResult(const WorkerResult& r) {
  return absl::StrFormat(
      "PSRING_RESULT {\"role\":\"worker\",\"exchange\":\"%s\",\"rank\":%d,\"world_size\":%d,\"steps\":%d,"
      "\"bytes\":%d,\"compute_s\":%.6f,\"exchange_s\":%.6f,\"step_s\":%.6f,\"samples_per_s\":%.3f,"
      "\"bytes_sent\":%d,\"bytes_received\":%d,\"wrong\":%d,\"test_accuracy\":%.6f}",
      r.exchange, r.rank, r.world_size, r.steps, r.bytes, r.compute_s, r.exchange_s, r.step_s,
      r.samples_per_s, r.bytes_sent, r.bytes_received, r.wrong, r.test_accuracy);
}

}  // namespace psring
