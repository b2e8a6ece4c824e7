// //trainer:train: single-process training (world size 1, LocalExchange). See --help.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "common/binary_main.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"
#include "trainer/exchange.h"
#include "trainer/timeline.h"
#include "trainer/train.h"
#include "trainer/train_flags.h"

ABSL_FLAG(std::string, timeline, "",
          "Write the run's timeline (Chrome trace-event JSON: forward+backward, the exchange, waits, the "
          "optimizer per step; open it in https://ui.perfetto.dev or chrome://tracing) to this path. Empty: "
          "none.");

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Trains the MLP on Fashion-MNIST in one process (no exchange), prints progress and test accuracy.\n"
      "  bazel run //trainer:train -- --epochs=1\n"
      "  bazel run //trainer:train -- --hidden=4096,4096 --dataset=synthetic --max_steps=20",
      {"common/", "trainer/"});
  return psring::RunMain(argc, argv, "train", [](const std::vector<std::string>&) -> absl::Status {
    ASSIGN_OR_RETURN(const psring::trainer::TrainOptions options, psring::trainer::TrainOptionsFromFlags());
    psring::trainer::LocalExchange local;
    const std::string timeline_path = absl::GetFlag(FLAGS_timeline);
    std::unique_ptr<psring::trainer::Timeline> timeline;
    if (!timeline_path.empty()) {
      timeline = std::make_unique<psring::trainer::Timeline>(/*rank=*/0);
      local.set_timeline(timeline.get());
    }
    ASSIGN_OR_RETURN(const psring::trainer::TrainResult result, psring::trainer::Train(options, &local));
    if (timeline != nullptr) {
      local.set_timeline(nullptr);
      RETURN_IF_ERROR(timeline->WriteJson(timeline_path));
    }
    std::printf("trained %ld steps in %.1f s on %s (%.0f samples/s)\n", static_cast<long>(result.steps),
                result.wall_seconds, result.device.c_str(), result.samples_per_second);
    return absl::OkStatus();
  });
}
