// The worker flow both worker binaries share (trainer/worker_main.h): flag defaults come from the options
// structs, and a rank runs its exchange, its finish hook and prints one PSRING_RESULT line.
#include "trainer/worker_main.h"

#include <memory>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/results.pb.h"

ABSL_DECLARE_FLAG(int64_t, model_bytes);
ABSL_DECLARE_FLAG(int64_t, max_steps);
ABSL_DECLARE_FLAG(double, timeout);
ABSL_DECLARE_FLAG(int, warmup_steps);
ABSL_DECLARE_FLAG(double, bucket_mb);

namespace psring::trainer {
namespace {

TEST(WorkerMainTest, FlagDefaultsAreTheOptionsDefaults) {
  absl::FlagSaver saver;
  absl::StatusOr<WorkerOptions> o = WorkerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  const WorkerOptions d;
  EXPECT_EQ(o->timeout, d.timeout);
  EXPECT_EQ(o->gradient_only.bytes, d.gradient_only.bytes);
  EXPECT_EQ(o->gradient_only.warmup_steps, d.gradient_only.warmup_steps);
  EXPECT_EQ(o->gradient_only.steps, d.gradient_only.steps);
}

TEST(WorkerMainTest, FlagsOutOfRangeNameTheFlag) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_timeout, 0.0);
  EXPECT_TRUE(absl::StrContains(WorkerOptionsFromFlags().status().message(), "--timeout=0"));
  absl::SetFlag(&FLAGS_timeout, 5.0);
  absl::SetFlag(&FLAGS_model_bytes, -1);
  EXPECT_TRUE(absl::StrContains(WorkerOptionsFromFlags().status().message(), "--model_bytes=-1"));
}

TEST(WorkerMainTest, GradientOnlyRankRunsFinishAndPrintsItsResultLine) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_model_bytes, 4 * 101);
  absl::SetFlag(&FLAGS_max_steps, 4);
  absl::StatusOr<WorkerOptions> o = WorkerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  o->train.device = "cpu";
  bool finished = false;
  ::testing::internal::CaptureStdout();
  const absl::Status status = RunWorker(*o, [&](const WorkerOptions&) -> absl::StatusOr<WorkerExchange> {
    WorkerExchange made;
    made.exchange = std::make_unique<LocalExchange>();
    made.finish = [&] {
      finished = true;
      return absl::OkStatus();
    };
    return made;
  });
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(finished);
  constexpr char kPrefix[] = "PSRING_RESULT ";
  ASSERT_TRUE(absl::StartsWith(out, kPrefix) && absl::EndsWith(out, "}\n")) << out;
  proto::WorkerResult result;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out.substr(sizeof(kPrefix) - 1), &result).ok())
      << out;
  EXPECT_EQ(result.exchange(), "local");
  EXPECT_EQ(result.steps(), 4);
  EXPECT_EQ(result.bytes(), 4 * 101);
  EXPECT_EQ(result.wrong(), 0);
  EXPECT_EQ(result.bytes_sent(), 0);
}

// Train mode's timing contract: the result line covers the measured loop steps only (after the warm-up),
// with the new fields filled in.
TEST(WorkerMainTest, TrainingRankReportsTheMeasuredStepsOnly) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_max_steps, 5);
  absl::SetFlag(&FLAGS_warmup_steps, 2);
  absl::SetFlag(&FLAGS_bucket_mb, 0.005);
  absl::StatusOr<WorkerOptions> o = WorkerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->train.warmup_steps, 2);
  o->train.device = "cpu";
  o->train.dataset = "synthetic";
  o->train.synthetic_samples = 256;
  o->train.hidden = {64, 32};
  o->train.batch_size = 16;
  o->train.evaluate = false;
  o->train.log_every = 0;
  ::testing::internal::CaptureStdout();
  const absl::Status status = RunWorker(*o, [&](const WorkerOptions&) -> absl::StatusOr<WorkerExchange> {
    WorkerExchange made;
    made.exchange = std::make_unique<LocalExchange>();
    return made;
  });
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  constexpr char kPrefix[] = "PSRING_RESULT ";
  ASSERT_TRUE(absl::StartsWith(out, kPrefix)) << out;
  proto::WorkerResult result;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out.substr(sizeof(kPrefix) - 1), &result).ok())
      << out;
  EXPECT_EQ(result.steps(), 3);
  EXPECT_EQ(result.buckets(), 1);  // the local exchange has nothing to overlap: one flat step
  EXPECT_EQ(result.bucket_mb(), 0.005);
  EXPECT_GT(result.step_s(), 0);
  EXPECT_GT(result.forward_s(), 0);
  EXPECT_GT(result.backward_s(), 0);
  EXPECT_GT(result.optimizer_s(), 0);
  EXPECT_EQ(result.exposed_exchange_s(), result.exchange_s());
  EXPECT_LE(result.forward_s() + result.backward_s() + result.optimizer_s(), result.compute_s() * 1.0001);
  EXPECT_LE(result.compute_s() + result.exchange_s(), result.step_s() * result.steps() * 1.0001);
  EXPECT_GT(result.samples_per_s(), 0);
}

}  // namespace
}  // namespace psring::trainer
