// //trainer:train: single-process training (world size 1, LocalExchange). See --help.
#include <cstdio>

#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "common/flags_usage.h"
#include "trainer/exchange.h"
#include "trainer/train.h"
#include "trainer/train_flags.h"

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Trains the MLP on Fashion-MNIST in one process (no exchange), prints progress and test accuracy.\n"
      "  bazel run //trainer:train -- --epochs=1\n"
      "  bazel run //trainer:train -- --hidden=4096,4096 --dataset=synthetic --max_steps=20",
      {"common/", "trainer/"});
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<psring::trainer::TrainOptions> options = psring::trainer::TrainOptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "train: %s\n", options.status().ToString().c_str());
    return 2;
  }
  psring::trainer::LocalExchange local;
  absl::StatusOr<psring::trainer::TrainResult> result = psring::trainer::Train(*options, &local);
  if (!result.ok()) {
    std::fprintf(stderr, "train: %s\n", result.status().ToString().c_str());
    return 1;
  }
  std::printf("trained %ld steps in %.1f s on %s (%.0f samples/s)\n", static_cast<long>(result->steps),
              result->wall_seconds, result->device.c_str(), result->samples_per_second);
  return 0;
}
