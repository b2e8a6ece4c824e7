// ring/job_fingerprint.h: ranks with different hyperparameters fail together, every rank with the message
// naming the flag and both values; through CreateProcessGroup as ring_worker uses it.
#include "ring/job_fingerprint.h"

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "common/store.h"
#include "gtest/gtest.h"
#include "ring/process_group.h"
#include "ring/thread_ranks.h"

namespace psring::ring {
namespace {

TEST(FingerprintValueTest, ShortestTextThatRoundTrips) {
  EXPECT_EQ(FingerprintValue(0.9f), "0.9");
  EXPECT_EQ(FingerprintValue(0.0f), "0");
  EXPECT_EQ(FingerprintValue(0.03f), "0.03");
  EXPECT_NE(FingerprintValue(0.03f), FingerprintValue(std::nextafter(0.03f, 1.0f)));
}

JobFingerprint Flags(float lr, float momentum) {
  return {{"lr", FingerprintValue(lr)}, {"momentum", FingerprintValue(momentum)}, {"batch_size", "128"}};
}

std::vector<absl::Status> Agree(const std::vector<JobFingerprint>& prints) {
  InMemoryStore store;
  std::vector<absl::Status> status(prints.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < prints.size(); ++r) {
    threads.emplace_back([&, r] {
      status[r] = AgreeOnFingerprint(&store, static_cast<int>(r), static_cast<int>(prints.size()), prints[r],
                                     "ring", absl::Seconds(10));
    });
  }
  for (auto& t : threads) t.join();
  return status;
}

TEST(JobFingerprintTest, SameFlagsAgree) {
  for (const absl::Status& s : Agree({Flags(0.03f, 0.9f), Flags(0.03f, 0.9f), Flags(0.03f, 0.9f)})) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(JobFingerprintTest, AMismatchFailsEveryRankNamingTheFlagAndBothValues) {
  std::vector<absl::Status> status = Agree({Flags(0.03f, 0.9f), Flags(0.03f, 0.9f), Flags(0.03f, 0.0f)});
  for (size_t r = 0; r < status.size(); ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kInvalidArgument) << "rank " << r << ": " << status[r];
    EXPECT_TRUE(
        absl::StrContains(status[r].message(), "ranks disagree on --momentum: rank 0 has 0.9, rank 2 has 0"))
        << status[r];
  }
  status = Agree({Flags(0.03f, 0.9f), Flags(0.5f, 0.9f)});
  for (const absl::Status& s : status) {
    EXPECT_TRUE(absl::StrContains(s.message(), "--lr: rank 0 has 0.03, rank 1 has 0.5")) << s;
  }
  // A rank of another build that does not report a flag.
  status = Agree({Flags(0.03f, 0.9f), {{"lr", "0.03"}}});
  for (const absl::Status& s : status) EXPECT_TRUE(absl::StrContains(s.message(), "--momentum")) << s;
}

TEST(JobFingerprintTest, CreateProcessGroupRefusesMismatchedRanks) {
  InMemoryStore store;
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ProcessGroupOptions o = LoopbackOptions(512 << 10, absl::Seconds(10));
      o.fingerprint = Flags(r == 0 ? 0.03f : 0.5f, 0.9f);
      status[r] = CreateProcessGroup(&store, r, 2, o).status();
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "--lr")) << s;
  }
}

}  // namespace
}  // namespace psring::ring
