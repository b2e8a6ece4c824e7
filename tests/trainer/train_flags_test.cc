// TrainOptionsFromFlags: defaults, parsing, validation, and a help text for every flag.
#include "trainer/train_flags.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(std::vector<std::string>, hidden);
ABSL_DECLARE_FLAG(int, batch_size);
ABSL_DECLARE_FLAG(float, momentum);
ABSL_DECLARE_FLAG(std::string, device);
ABSL_DECLARE_FLAG(bool, resume);
ABSL_DECLARE_FLAG(double, bucket_mb);
ABSL_DECLARE_FLAG(double, first_bucket_mb);

namespace psring::trainer {
namespace {

using ::testing::HasSubstr;

TEST(TrainFlagsTest, DefaultsMatchTrainOptions) {
  absl::FlagSaver saver;
  absl::StatusOr<TrainOptions> o = TrainOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  const TrainOptions d;
  EXPECT_EQ(o->hidden, d.hidden);
  EXPECT_EQ(o->batch_size, d.batch_size);
  EXPECT_EQ(o->epochs, d.epochs);
  EXPECT_EQ(o->max_steps, d.max_steps);
  EXPECT_EQ(o->lr, d.lr);
  EXPECT_EQ(o->momentum, d.momentum);
  EXPECT_EQ(o->weight_decay, d.weight_decay);
  EXPECT_EQ(o->seed, d.seed);
  EXPECT_EQ(o->device, d.device);
  EXPECT_EQ(o->dataset, d.dataset);
  EXPECT_EQ(o->data_dir, d.data_dir);
  EXPECT_EQ(o->synthetic_samples, d.synthetic_samples);
  EXPECT_EQ(o->checkpoint_dir, d.checkpoint_dir);
  EXPECT_EQ(o->resume, d.resume);
  EXPECT_EQ(o->log_every, d.log_every);
  EXPECT_EQ(o->evaluate, d.evaluate);
  EXPECT_EQ(o->bucket_mb, 0);  // one flat exchange after backward, as before --bucket_mb existed
  EXPECT_EQ(o->bucket_mb, d.bucket_mb);
  EXPECT_EQ(o->first_bucket_mb, 1.0);  // PyTorch DDP's first bucket
  EXPECT_EQ(o->first_bucket_mb, d.first_bucket_mb);
}

TEST(TrainFlagsTest, ParsesTheFirstBucketCap) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_bucket_mb, 25.0);
  absl::SetFlag(&FLAGS_first_bucket_mb, 0.015625);
  absl::StatusOr<TrainOptions> o = TrainOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->bucket_mb, 25.0);
  EXPECT_EQ(o->first_bucket_mb, 0.015625);
}

TEST(TrainFlagsTest, ParsesHiddenWidths) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_hidden, std::vector<std::string>{"4096", "4096"});
  absl::StatusOr<TrainOptions> o = TrainOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->hidden, (std::vector<int>{4096, 4096}));
  absl::SetFlag(&FLAGS_hidden, std::vector<std::string>{});
  o = TrainOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();  // no hidden layer: logistic regression
  EXPECT_TRUE(o->hidden.empty());
}

TEST(TrainFlagsTest, RejectsOutOfRangeValues) {
  struct Case {
    std::function<void()> set;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[] {
         absl::SetFlag(&FLAGS_hidden, std::vector<std::string>{"256", "x"});
       },
       "'x' is not a positive"},
      {[] { absl::SetFlag(&FLAGS_hidden, std::vector<std::string>{"0"}); }, "'0' is not a positive"},
      {[] { absl::SetFlag(&FLAGS_batch_size, 0); }, "--batch_size=0: must be >= 1"},
      {[] { absl::SetFlag(&FLAGS_momentum, 1.0f); }, "--momentum=1: must be in [0, 1)"},
      {[] { absl::SetFlag(&FLAGS_device, std::string("tpu")); }, "--device=tpu: must be auto, cpu or cuda"},
      {[] { absl::SetFlag(&FLAGS_resume, true); }, "needs --checkpoint_dir"},
      {[] { absl::SetFlag(&FLAGS_bucket_mb, -1.0); }, "--bucket_mb=-1: must be in [0, 1e6]"},
      {[] { absl::SetFlag(&FLAGS_first_bucket_mb, -0.5); }, "--first_bucket_mb=-0.5: must be in [0, 1e6]"},
  };
  for (const Case& c : cases) {
    absl::FlagSaver saver;
    c.set();
    absl::StatusOr<TrainOptions> o = TrainOptionsFromFlags();
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(o.status().message(), HasSubstr(c.message));
  }
}

TEST(TrainFlagsTest, EveryFlagHasAFullHelpText) {
  for (const char* name :
       {"hidden", "batch_size", "epochs", "max_steps", "lr", "momentum", "weight_decay", "seed", "device",
        "dataset", "data_dir", "synthetic_samples", "checkpoint_dir", "resume", "log_every", "evaluate",
        "bucket_mb", "first_bucket_mb"}) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    ASSERT_NE(flag, nullptr) << name;
    EXPECT_GE(flag->Help().size(), 30u) << "--" << name << " needs a real help text";
  }
}

}  // namespace
}  // namespace psring::trainer
