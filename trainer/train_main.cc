// //trainer:train: single-process training (world size 1, LocalExchange). See --help.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/binary_main.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"
#include "trainer/exchange.h"
#include "trainer/train.h"
#include "trainer/train_flags.h"

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Trains the MLP on Fashion-MNIST in one process (no exchange), prints progress and test accuracy.\n"
      "  bazel run //trainer:train -- --epochs=1\n"
      "  bazel run //trainer:train -- --hidden=4096,4096 --dataset=synthetic --max_steps=20",
      {"common/", "trainer/"});
  return psring::RunMain(argc, argv, "train", [](const std::vector<std::string>&) -> absl::Status {
    ASSIGN_OR_RETURN(const psring::trainer::TrainOptions options, psring::trainer::TrainOptionsFromFlags());
    psring::trainer::LocalExchange local;
    ASSIGN_OR_RETURN(const psring::trainer::TrainResult result, psring::trainer::Train(options, &local));
    std::printf("trained %ld steps in %.1f s on %s (%.0f samples/s)\n", static_cast<long>(result.steps),
                result.wall_seconds, result.device.c_str(), result.samples_per_second);
    return absl::OkStatus();
  });
}
