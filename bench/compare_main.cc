// //bench:compare, the main job: with no arguments, a scaled-down sweep that finishes in minutes on a 2-core
// machine, then a verdict per node count: which exchange is faster and by how much.
//
//   1. gradient exchange of S = 4 MiB (the model's size class where bandwidth dominates), N = 1, 2, 4, 8,
//      ring / ps-1 / ps-colocated / ps-dedicated (K = 2), 5 measured steps after 1 warm-up;
//   2. training the default MLP on Fashion-MNIST (real gradients, ~1 MiB) for 20 steps, same N and exchanges;
//   3. replaying a real model profile (ResNet-50) with its per-layer gradients and compute, same N and
//      exchanges, without and with overlap (flat and DDP's 25 MB buckets), its bytes scaled down by one
//      factor (kReplayBytesScale) so the emulated 100 Mbit/s links stand for a faster real network
//      (bench/PERFORMANCE.md 7.6); the fitted model is projected onto --project_link (default 25 Gbit/s).
//
// Outputs go to <out_dir>/gradient, <out_dir>/train and <out_dir>/replay (CSV, JSON, SVG; replay also the
// merged timelines and the Gantt chart). Full sweeps: //bench:scaling.
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/scaling.h"
#include "bench/scaling_flags.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"

ABSL_FLAG(bool, train, true, "Also compare the exchanges while training the MLP (part 2).");
ABSL_FLAG(bool, replay, true,
          "Also compare them replaying the ResNet-50 profile without and with overlap (part 3).");

namespace psring::bench {
namespace {

// Part 1; part 2 is the same with mode train and 20 steps.
ScalingOptions GradientPart() {
  ScalingOptions gradient;
  gradient.nodes = {1, 2, 4, 8};
  gradient.model_bytes = {4u << 20};
  gradient.steps = 5;
  gradient.warmup_steps = 1;
  return gradient;
}

// Part 3: ResNet-50 replayed with every exchange, flat and with DDP's 25 MB buckets. Its gradient bytes are
// divided by kReplayBytesScale (the harness divides the bucket caps alike, so the buckets stay DDP's), its
// compute kept:
// on 100 Mbit/s links that is the real model on links kReplayBytesScale times faster (6.4 Gbit/s), and
// compute (200 ms) and the exchange are of the same order, where overlap matters (bench/PERFORMANCE.md 7.6).
constexpr double kReplayBytesScale = 64;

ScalingOptions ReplayPart(const ScalingOptions& base, const std::string& out_dir) {
  ScalingOptions replay = base;
  replay.workloads = {"resnet50"};
  replay.bytes_scale = kReplayBytesScale;
  replay.bucket_mbs = {0, 25};
  replay.steps = 3;
  replay.warmup_steps = 1;
  replay.timeline_dir = out_dir + "/timelines";
  if (replay.projection.link_bytes_per_second <= 0) replay.projection = {25e9 / 8, 5e-6};
  return replay;
}

absl::Status Main(const char* argv0) {
  const std::string out_dir = OutDirFromFlags("compare");
  ScalingOptions gradient = GradientPart();
  RETURN_IF_ERROR(ApplyHarnessFlags(argv0, &gradient));
  std::cout << "# PART 1: gradient exchange, S = 4 MiB\n";
  absl::Status status = RunAndReport(gradient, absl::StrCat(out_dir, "/gradient"));

  if (absl::GetFlag(FLAGS_train)) {
    ScalingOptions train = gradient;
    train.mode = "train";
    train.steps = 20;
    std::cout << "#\n# PART 2: training the MLP (Fashion-MNIST, batch 128 per worker)\n";
    absl::Status second = RunAndReport(train, absl::StrCat(out_dir, "/train"));
    if (status.ok()) status = second;
  }
  if (absl::GetFlag(FLAGS_replay)) {
    const std::string replay_dir = absl::StrCat(out_dir, "/replay");
    std::cout << "#\n# PART 3: replaying ResNet-50 (its layers' gradients and compute, scaled), flat and with "
                 "25 MB buckets overlapped with backward\n";
    absl::Status third = RunAndReport(ReplayPart(gradient, replay_dir), replay_dir);
    if (status.ok()) status = third;
  }
  return status;
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "The main comparison of psring: PS vs ring allreduce at N = 1, 2, 4, 8 on an emulated 100 Mbit/s cluster "
      "(gradient exchange of 4 MiB, training the MLP, then replaying ResNet-50 without and with overlap), each "
      "part ending with a verdict table. No arguments needed.",
      {"bench/"});
  psring::ParseFlags(argc, argv);
  absl::Status status = psring::bench::Main(argv[0]);
  if (!status.ok()) std::cerr << "compare: " << status.message() << "\n";
  return status.ok() ? 0 : 1;
}
