// //bench:compare, the main job: with no arguments, a scaled-down sweep that finishes in minutes on a 2-core
// machine, then a verdict per node count: which exchange is faster and by how much.
//
//   1. gradient exchange of S = 4 MiB (the model's size class where bandwidth dominates), N = 1, 2, 4, 8,
//      ring / ps-1 / ps-colocated / ps-dedicated (K = 2), 5 measured steps after 1 warm-up;
//   2. training the default MLP on Fashion-MNIST (real gradients, ~1 MiB) for 20 steps, same N and exchanges.
//
// Outputs go to <out_dir>/gradient and <out_dir>/train (CSV, JSON, SVG). Full sweeps: //bench:scaling.
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/scaling.h"
#include "bench/scaling_flags.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"

ABSL_FLAG(bool, train, true, "Also compare the exchanges while training the MLP (part 2); false: gradient part only.");

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

absl::Status Main(const char* argv0) {
  const std::string out_dir = OutDirFromFlags("compare");
  ScalingOptions gradient = GradientPart();
  RETURN_IF_ERROR(ApplyHarnessFlags(argv0, &gradient));
  std::cout << "# PART 1: gradient exchange, S = 4 MiB\n";
  absl::Status first = RunAndReport(gradient, absl::StrCat(out_dir, "/gradient"));
  if (!absl::GetFlag(FLAGS_train)) return first;

  ScalingOptions train = gradient;
  train.mode = "train";
  train.steps = 20;
  std::cout << "#\n# PART 2: training the MLP (Fashion-MNIST, batch 128 per worker)\n";
  absl::Status second = RunAndReport(train, absl::StrCat(out_dir, "/train"));
  return first.ok() ? second : first;
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "The main comparison of psring: PS vs ring allreduce at N = 1, 2, 4, 8 on an emulated 100 Mbit/s cluster "
      "(gradient exchange of 4 MiB, then training the MLP), ending with a verdict table. No arguments needed.",
      {"bench/"});
  absl::ParseCommandLine(argc, argv);
  absl::Status status = psring::bench::Main(argv[0]);
  if (!status.ok()) std::cerr << "compare: " << status.message() << "\n";
  return status.ok() ? 0 : 1;
}
