// The held-out evaluation during training (trainer/eval_held_out.h): its accuracy is the real model's on the
// real test images (recomputed here from the final parameters by a separate path), it runs at the promised
// steps with a wall clock that starts at 0, the run stops at the first evaluation that reaches the target, the
// PSRING_EVAL line's format, the flags' checks, and three ring ranks (threads over the TCP ring) that all
// stop after the same step.
#include "trainer/eval_held_out.h"

#include <fstream>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "ring/ring_exchange.h"
#include "ring/thread_ranks.h"
#include "trainer/dataset.h"
#include "trainer/engine.h"
#include "trainer/mlp.h"
#include "trainer/train.h"

namespace psring::trainer {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

bool HaveFashionMnist() {
  return std::ifstream(std::string(kFashionMnist) + "/t10k-images-idx3-ubyte.gz").good();
}

TrainOptions EvalOptions(int64_t every, int64_t samples, double target) {
  TrainOptions o;
  o.device = "cpu";
  o.log_every = 0;
  o.evaluate = false;
  o.epochs = 1;
  o.held_out = {every, samples, target};
  return o;
}

// Accuracy of `params` on the first `samples` test images, image by image (not through CountCorrect).
double AccuracyOf(const std::vector<float>& params, int64_t samples) {
  absl::StatusOr<Dataset> test = LoadFashionMnist(kFashionMnist, Split::kTest);
  EXPECT_TRUE(test.ok()) << test.status();
  absl::StatusOr<MlpLayout> layout = MlpLayout::Create(test->dim, TrainOptions{}.hidden, test->num_classes);
  EXPECT_TRUE(layout.ok()) << layout.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine = CreateEngine("cpu", *layout, 1);
  EXPECT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE((*engine)->SetParams(params).ok());
  int64_t correct = 0;
  for (int64_t i = 0; i < samples; ++i) {
    absl::StatusOr<BatchStats> s = (*engine)->Evaluate(test->image(i), &test->labels[i], 1);
    EXPECT_TRUE(s.ok()) << s.status();
    correct += s->correct;
  }
  return static_cast<double>(correct) / samples;
}

TEST(EvalHeldOutTest, AccuracyIsTheRealModelsOnTheFirstTestImagesAndTheRunStopsAtTheTarget) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  constexpr int64_t kEvery = 20, kSamples = 1000;
  constexpr double kTarget = 0.75;  // reached within ~100 steps of batch 128; an epoch is 468 steps
  LocalExchange local;
  absl::StatusOr<TrainResult> r = Train(EvalOptions(kEvery, kSamples, kTarget), &local);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<EvalPoint>& evals = r->evaluations;
  ASSERT_GE(evals.size(), 2u);
  EXPECT_EQ(evals[0].step, 0);
  EXPECT_EQ(evals[0].wall_s, 0);
  EXPECT_LT(evals[0].accuracy, 0.4) << "an untrained model should be near chance (10 classes)";
  for (size_t i = 0; i < evals.size(); ++i) {
    EXPECT_EQ(evals[i].step, static_cast<int64_t>(i) * kEvery);
    EXPECT_EQ(evals[i].samples, kSamples);
    if (i > 0) {
      EXPECT_GT(evals[i].wall_s, evals[i - 1].wall_s);
    }
    if (i + 1 < evals.size()) {
      EXPECT_LT(evals[i].accuracy, kTarget) << "the run should have stopped at step " << evals[i].step;
    }
  }
  EXPECT_GE(evals.back().accuracy, kTarget);
  EXPECT_EQ(r->steps, evals.back().step) << "the run stops right after the evaluation that reached the target";
  EXPECT_LT(r->steps, 468);
  EXPECT_GT(r->eval_pause_seconds, 0);
  // The last evaluation saw the final parameters: recomputed one image at a time, the same accuracy.
  EXPECT_DOUBLE_EQ(AccuracyOf(r->params, kSamples), evals.back().accuracy);
}

TEST(EvalHeldOutTest, WithoutTargetEvaluatesEveryKStepsAndAfterTheLast) {
  TrainOptions o = EvalOptions(4, 100, 0);
  o.dataset = "synthetic";
  o.synthetic_samples = 1280;  // 10 steps per epoch
  LocalExchange local;
  absl::StatusOr<TrainResult> r = Train(o, &local);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<int64_t> steps;
  for (const EvalPoint& e : r->evaluations) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 4, 8, 10}));
  EXPECT_EQ(r->steps, 10);
}

TEST(EvalHeldOutTest, LineFormat) {
  EXPECT_EQ(FormatEvalLine({100, 3.25, 0.8455, 2000, 0.031}),
            R"(PSRING_EVAL {"step":100,"wall_s":3.250000,"accuracy":0.845500,"samples":2000,"eval_s":0.031000})");
}

TEST(EvalHeldOutTest, OptionsAreChecked) {
  EXPECT_TRUE(ValidateHeldOutOptions({}).ok());
  EXPECT_TRUE(ValidateHeldOutOptions({25, 5000, 0.85}).ok());
  const std::vector<std::pair<HeldOutOptions, std::string>> bad = {
      {{-1, 100, 0}, "--eval_every=-1"},
      {{10, 0, 0}, "--eval_samples=0"},
      {{10, 100, 85}, "--target_accuracy=85"},
      {{0, 100, 0.85}, "needs --eval_every"},
  };
  for (const auto& [options, message] : bad) {
    const absl::Status s = ValidateHeldOutOptions(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
  }
  TrainOptions o = EvalOptions(0, 100, 0.5);
  LocalExchange local;
  EXPECT_EQ(Train(o, &local).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EvalHeldOutTest, RingRanksAllStopAfterTheSameStep) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  constexpr int kRanks = 3;
  std::vector<TrainResult> results(kRanks);
  const std::vector<absl::Status> status = ring::RunRanksOwning(
      kRanks, ring::LoopbackOptions(), [&](int rank, std::unique_ptr<ring::ProcessGroup> group) {
        ring::RingExchange exchange(std::move(group));
        absl::StatusOr<TrainResult> r = Train(EvalOptions(10, 500, 0.7), &exchange);
        if (!r.ok()) return r.status();
        results[rank] = std::move(*r);
        return absl::OkStatus();
      });
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  ASSERT_FALSE(results[0].evaluations.empty());
  const EvalPoint& last = results[0].evaluations.back();
  EXPECT_GE(last.accuracy, 0.7);
  EXPECT_LT(results[0].steps, 60000 / (kRanks * 128)) << "stopped before the end of the epoch";
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(results[r].steps, last.step) << "rank " << r;
    EXPECT_EQ(results[r].params, results[0].params) << "rank " << r;
    if (r > 0) {
      EXPECT_TRUE(results[r].evaluations.empty()) << "only rank 0 evaluates";
    }
  }
  EXPECT_DOUBLE_EQ(AccuracyOf(results[0].params, 500), last.accuracy);
}

}  // namespace
}  // namespace psring::trainer
