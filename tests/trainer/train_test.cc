// The training loop end to end: accuracy on the real data, exact resume, device selection.
#include "trainer/train.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"
#include "trainer/checkpoint.h"
#include "trainer/cuda_engine.h"
#include "trainer/engine.h"
#include "trainer/exchange.h"

namespace psring::trainer {
namespace {

using ::testing::HasSubstr;

using psring::testing::FreshTempPath;

TrainOptions SmallSynthetic() {
  TrainOptions o;
  o.hidden = {32, 16};
  o.batch_size = 32;
  o.epochs = 3;
  o.device = "cpu";
  o.dataset = "synthetic";
  o.synthetic_samples = 640;  // 20 steps per epoch
  o.log_every = 0;
  o.evaluate = false;
  o.seed = 11;
  return o;
}

TEST(TrainTest, DefaultMlpReaches84PercentAfterTwoEpochs) {
  if (!std::ifstream("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz").good()) {
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  }
  TrainOptions o;  // default MLP 256,256, batch 128, lr 0.05, momentum 0.9
  o.epochs = 2;
  o.device = "cpu";
  o.log_every = 0;
  LocalExchange local;
  absl::StatusOr<TrainResult> r = Train(o, &local);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 2 * (60000 / 128));
  EXPECT_GE(r->test_accuracy, 0.84);
  EXPECT_EQ(r->device, "cpu");
}

TEST(TrainTest, SyntheticTrainingLearns) {
  TrainOptions o = SmallSynthetic();
  o.evaluate = true;
  o.synthetic_samples = 4096;  // 128 steps per epoch
  o.log_every = 128;           // the last window is the last epoch
  LocalExchange local;
  absl::StatusOr<TrainResult> r = Train(o, &local);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 384);
  // Chance is 10%; the synthetic classes are separable, so a small MLP generalises well within 3 epochs.
  EXPECT_GT(r->test_accuracy, 0.8);
  EXPECT_GT(r->train_accuracy, 0.9);
  EXPECT_LT(r->final_loss, 0.3);
}

TEST(TrainTest, SameSeedSameParameters) {
  LocalExchange local;
  TrainOptions o = SmallSynthetic();
  o.epochs = 1;
  absl::StatusOr<TrainResult> a = Train(o, &local);
  absl::StatusOr<TrainResult> b = Train(o, &local);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->params, b->params);
  o.seed = 12;
  absl::StatusOr<TrainResult> c = Train(o, &local);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->params, c->params);
}

// Resuming from a checkpoint gives bit-identical parameters to an uninterrupted run, whether the
// interruption falls mid-epoch (max_steps) or on an epoch boundary.
TEST(TrainTest, ResumeEqualsUninterruptedRun) {
  LocalExchange local;
  absl::StatusOr<TrainResult> whole = Train(SmallSynthetic(), &local);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (int64_t stop : {25, 40}) {
    TrainOptions first = SmallSynthetic();
    first.checkpoint_dir = FreshTempPath("resume_" + std::to_string(stop));
    first.max_steps = stop;
    absl::StatusOr<TrainResult> part = Train(first, &local);
    ASSERT_TRUE(part.ok()) << part.status();
    EXPECT_EQ(part->steps, stop);
    absl::StatusOr<CheckpointState> saved = LoadCheckpoint(LatestCheckpointPath(first.checkpoint_dir));
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_EQ(saved->step, stop);
    EXPECT_EQ(saved->epoch, stop / 20);
    EXPECT_EQ(saved->params, part->params);

    TrainOptions second = SmallSynthetic();
    second.checkpoint_dir = first.checkpoint_dir;
    second.resume = true;
    absl::StatusOr<TrainResult> rest = Train(second, &local);
    ASSERT_TRUE(rest.ok()) << rest.status();
    EXPECT_EQ(rest->steps, 60 - stop);
    EXPECT_EQ(rest->params, whole->params) << "resumed at step " << stop;
  }
}

TEST(TrainTest, CheckpointsEveryEpoch) {
  LocalExchange local;
  TrainOptions o = SmallSynthetic();
  o.epochs = 2;
  o.checkpoint_dir = FreshTempPath("every_epoch");
  o.max_steps = 20;  // stops exactly at the end of epoch 1
  ::testing::internal::CaptureStderr();
  const bool trained = Train(o, &local).ok();
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(trained);
  absl::StatusOr<CheckpointState> s = LoadCheckpoint(LatestCheckpointPath(o.checkpoint_dir));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->step, 20);
  EXPECT_EQ(s->epoch, 1);
  // Issue 24: the trainer never said when it wrote a checkpoint.
  EXPECT_THAT(printed, HasSubstr(absl::StrCat("psring: wrote checkpoint ", LatestCheckpointPath(o.checkpoint_dir),
                                              " (step 20, epoch 1")));
}

TEST(TrainTest, ResumeRejectsDifferentModelOrMissingCheckpoint) {
  LocalExchange local;
  TrainOptions o = SmallSynthetic();
  o.epochs = 1;
  o.checkpoint_dir = FreshTempPath("resume_mismatch");
  ASSERT_TRUE(Train(o, &local).ok());
  o.resume = true;
  o.hidden = {32, 17};
  absl::StatusOr<TrainResult> r = Train(o, &local);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("hidden=32,16"));
  o.checkpoint_dir = FreshTempPath("resume_nothing");
  r = Train(o, &local);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

TEST(TrainTest, ADivergingRunStopsAtTheStepItsLossBecameNonFiniteUnlessAllowed) {
  LocalExchange local;
  TrainOptions o = SmallSynthetic();
  o.hidden = {256, 256};
  o.batch_size = 128;
  o.synthetic_samples = 4096;  // 32 steps per epoch
  o.epochs = 2;
  o.lr = 10.0f;  // the largest allowed: with this momentum the run blows up within ten steps
  o.momentum = 0.99f;
  o.weight_decay = 0;
  absl::StatusOr<TrainResult> r = Train(o, &local);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("the training loss became"));
  EXPECT_THAT(r.status().message(), HasSubstr("at step "));
  EXPECT_THAT(r.status().message(), HasSubstr("--allow_nonfinite_loss"));
  o.allow_nonfinite_loss = true;
  r = Train(o, &local);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 64);  // every step ran
}

TEST(TrainTest, BadOptionsAndDataFailClearly) {
  LocalExchange local;
  TrainOptions o = SmallSynthetic();
  o.batch_size = 1000;  // more than the 640 samples
  EXPECT_THAT(Train(o, &local).status().message(), HasSubstr("fewer than one batch"));
  o = SmallSynthetic();
  o.dataset = "fashion-mnist";
  o.data_dir = FreshTempPath("empty_data_dir");
  absl::StatusOr<TrainResult> r = Train(o, &local);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("loading the training set"));
  o = SmallSynthetic();
  o.lr = 0;
  EXPECT_EQ(Train(o, &local).status().code(), absl::StatusCode::kInvalidArgument);
  // A --checkpoint_dir that cannot be created fails up front, not at the first save after an epoch.
  const std::string file = FreshTempPath("not_a_folder");
  std::ofstream(file) << "x";
  o = SmallSynthetic();
  o.checkpoint_dir = file + "/sub";
  r = Train(o, &local);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("cannot create checkpoint folder"));
}

TEST(TrainTest, DeviceSelection) {
  LocalExchange local;
  TrainOptions o = SmallSynthetic();
  o.epochs = 1;
  o.device = "auto";
  absl::StatusOr<TrainResult> r = Train(o, &local);
  ASSERT_TRUE(r.ok()) << r.status();
  o.device = "cuda";
  absl::StatusOr<TrainResult> cuda = Train(o, &local);
  if (ProbeCuda().ok()) {
    EXPECT_EQ(r->device, "cuda");
    ASSERT_TRUE(cuda.ok()) << cuda.status();
  } else {
    EXPECT_EQ(r->device, "cpu");
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(cuda.status().message(), HasSubstr("--device=cuda but no usable GPU"));
  }
}

// Issue 24: on a host without a GPU, --device=auto printed the CUDA runtime's "driver version is
// insufficient" error. The fallback is normal there: one short line, without CUDA's error text.
TEST(TrainTest, AutoOnAHostWithoutAGpuFallsBackWithAShortNote) {
  const absl::Status probe = ProbeCuda();
  if (probe.ok()) GTEST_SKIP() << "this host has a usable GPU";
  std::string note;
  absl::StatusOr<std::string> device = ResolveDevice("auto", &note);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(*device, "cpu");
  if (absl::IsNotFound(probe)) {
    EXPECT_EQ(note, "no GPU on this host; training on CPU");
  } else {  // a GPU that cannot be used, or no CUDA in this build: the reason matters
    EXPECT_THAT(note, HasSubstr(std::string(probe.message())));
  }
  std::string unused;
  EXPECT_EQ(ResolveDevice("cpu", &unused).value_or(""), "cpu");
  EXPECT_TRUE(unused.empty());
}

}  // namespace
}  // namespace psring::trainer
