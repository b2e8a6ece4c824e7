// The values of gradient-only mode (trainer/gradient_only.h) average exactly in float32 for every world size
// up to kGradientOnlyMaxRanks, whichever way an exchange forms the mean, and differ between ranks.
#include "trainer/gradient_only.h"

#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "trainer/exchange.h"

namespace psring::trainer {
namespace {

// One index per (j, s) pair, so every mean and every spread the values take is covered.
constexpr size_t kPeriod = 251 * 127;

TEST(GradientOnlyValuesTest, EveryPartialSumAndBothAveragesAreExact) {
  for (int n = 1; n <= kGradientOnlyMaxRanks; ++n) {
    const float inverse = 1.0f / static_cast<float>(n);
    for (size_t i = 0; i < kPeriod; i += (n <= 8 ? 1 : 97)) {
      float up = 0, down = 0;
      double exact = 0;
      for (int r = 0; r < n; ++r) {
        up += GradientOnlyValue(r, n, i);
        down += GradientOnlyValue(n - 1 - r, n, i);
        exact += GradientOnlyValue(r, n, i);
        ASSERT_EQ(static_cast<double>(up), exact) << "N=" << n << " i=" << i << " r=" << r;
      }
      ASSERT_EQ(up, down) << "N=" << n << " i=" << i;
      const float mean = GradientOnlyMean(i);
      ASSERT_EQ(static_cast<double>(mean) * n, exact) << "N=" << n << " i=" << i;
      ASSERT_EQ(up / static_cast<float>(n), mean) << "sum / N, N=" << n << " i=" << i;  // the servers
      ASSERT_EQ(up * inverse, mean) << "sum * (1/N), N=" << n << " i=" << i;            // the TCP ring
    }
  }
}

TEST(GradientOnlyValuesTest, RanksAndNearbyIndicesDiffer) {
  for (int n : {2, 7, kGradientOnlyMaxRanks}) {
    for (size_t i = 0; i < 1000; ++i) {
      std::set<float> per_rank;
      for (int r = 0; r < n; ++r) per_rank.insert(GradientOnlyValue(r, n, i));
      ASSERT_EQ(per_rank.size(), static_cast<size_t>(n)) << "N=" << n << " i=" << i;
    }
  }
  std::set<float> along_index;
  for (size_t i = 0; i < 251; ++i) along_index.insert(GradientOnlyMean(i));
  EXPECT_EQ(along_index.size(), 251u);
}

TEST(GradientOnlyTest, RejectsBadOptionsAndTooManyRanks) {
  LocalExchange local;
  GradientOnlyOptions o;
  o.bytes = 3;  // less than one float
  EXPECT_EQ(RunGradientOnly(o, &local).status().code(), absl::StatusCode::kInvalidArgument);
  o.bytes = 400;
  o.steps = 0;
  EXPECT_EQ(RunGradientOnly(o, &local).status().code(), absl::StatusCode::kInvalidArgument);
  o.steps = 1;
  o.warmup_steps = -1;
  EXPECT_EQ(RunGradientOnly(o, &local).status().code(), absl::StatusCode::kInvalidArgument);
}

// --log_every: rank 0's progress lines, warm-up steps included (what //bench:scaling --verbose shows).
TEST(GradientOnlyTest, PrintsAProgressLineEveryLogEverySteps) {
  LocalExchange local;
  GradientOnlyOptions o;
  o.bytes = 400;
  o.warmup_steps = 1;
  o.steps = 4;
  o.log_every = 2;
  std::ostringstream log;
  o.log = &log;
  ASSERT_TRUE(RunGradientOnly(o, &local).ok());
  const std::vector<std::string> lines = absl::StrSplit(log.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << log.str();
  EXPECT_TRUE(absl::StartsWith(lines[0], "step [2/5] measured | ")) << lines[0];
  EXPECT_TRUE(absl::StartsWith(lines[1], "step [4/5] measured | ")) << lines[1];
  o.log_every = 1;
  log.str("");
  ASSERT_TRUE(RunGradientOnly(o, &local).ok());
  EXPECT_TRUE(absl::StartsWith(log.str(), "step [1/5] warm-up | ")) << log.str();
  o.log_every = 0;
  log.str("");
  ASSERT_TRUE(RunGradientOnly(o, &local).ok());
  EXPECT_EQ(log.str(), "");
}

// --device=cuda: the exchange gets the device copies, the values go up before every step and the check reads
// them back after every measured one. "Device" memory is host memory here; a download that adds 1 to
// every element proves the check reads what came back.
TEST(GradientOnlyTest, DeviceBuffersGoUpBeforeEachStepAndAreCheckedAfter) {
  for (const float skew : {0.0f, 1.0f}) {
    LocalExchange local;
    GradientOnlyOptions o;
    o.bytes = 400;
    o.warmup_steps = 1;
    o.steps = 3;
    int uploads = 0, downloads = 0;
    o.device.allocate = [](size_t count) -> absl::StatusOr<std::shared_ptr<float>> {
      return std::shared_ptr<float>(new float[count], std::default_delete<float[]>());
    };
    o.device.upload = [&](float* device, const float* host, size_t count) {
      ++uploads;
      std::memcpy(device, host, count * sizeof(float));
      return absl::OkStatus();
    };
    o.device.download = [&](float* host, const float* device, size_t count) {
      ++downloads;
      for (size_t i = 0; i < count; ++i) host[i] = device[i] + skew;
      return absl::OkStatus();
    };
    absl::StatusOr<proto::WorkerResult> r = RunGradientOnly(o, &local);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(uploads, 1 + 4) << "the parameters, then the gradient before each step";
    EXPECT_EQ(downloads, 3) << "after each measured step";
    EXPECT_EQ(r->wrong(), skew == 0 ? 0 : 3 * 100);
  }
}

}  // namespace
}  // namespace psring::trainer
