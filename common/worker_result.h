// The one line every worker rank prints at the end (the contract with the scaling harness, which parses it
// with bench/result_line.h):
//
//   PSRING_RESULT {"role":"worker","exchange":"ring-tcp","rank":0,"world_size":4,"steps":10,...}
//
// Pure functions; thread-safe.
#ifndef PSRING_COMMON_WORKER_RESULT_H_
#define PSRING_COMMON_WORKER_RESULT_H_

#include <cstdint>
#include <string>

namespace psring {

struct WorkerResult {
  std::string exchange;  // GradientExchange::name(): "ring-tcp", "ring-nccl", "ps-sync", ...
  int rank = 0;
  int world_size = 1;
  int64_t steps = 0;         // measured steps
  uint64_t bytes = 0;        // gradient (model) bytes per step
  double compute_s = 0;      // sum over measured steps
  double exchange_s = 0;     // sum over measured steps
  double step_s = 0;         // mean wall time per measured step
  double samples_per_s = 0;  // 0 in gradient-only mode
  uint64_t bytes_sent = 0;   // payload this process sent over the network during measured steps
  uint64_t bytes_received = 0;
  int64_t wrong = 0;          // gradient-only mode: elements that differ from the closed form
  double test_accuracy = -1;  // -1: not evaluated
};

// "PSRING_RESULT {...}" without a trailing newline.
std::string FormatWorkerResult(const WorkerResult& r);

}  // namespace psring

#endif  // PSRING_COMMON_WORKER_RESULT_H_
