#include "common/worker_result.h"

#include "absl/strings/match.h"
#include "bench/result_line.h"
#include "gtest/gtest.h"

namespace psring {
namespace {

TEST(WorkerResultTest, TheHarnessParsesWhatWorkersPrint) {
  WorkerResult r;
  r.exchange = "ring-tcp";
  r.rank = 3;
  r.world_size = 4;
  r.steps = 10;
  r.bytes = 16777216;
  r.exchange_s = 12.5;
  r.step_s = 1.25;
  r.bytes_sent = 123456789012;
  r.bytes_received = 456;
  r.wrong = 7;
  const std::string line = FormatWorkerResult(r);
  EXPECT_TRUE(absl::StartsWith(line, "PSRING_RESULT {\"role\":\"worker\""));
  absl::StatusOr<bench::ResultLines> parsed = bench::ExtractResults("noise\n" + line + "\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->workers.size(), 1u);
  const proto::WorkerResult& p = parsed->workers.front();
  EXPECT_EQ(p.role(), "worker");
  EXPECT_EQ(p.exchange(), "ring-tcp");
  EXPECT_EQ(p.rank(), 3);
  EXPECT_EQ(p.world_size(), 4);
  EXPECT_EQ(p.steps(), 10);
  EXPECT_EQ(p.bytes(), 16777216);
  EXPECT_EQ(p.exchange_s(), 12.5);
  EXPECT_EQ(p.step_s(), 1.25);
  EXPECT_EQ(p.bytes_sent(), 123456789012.0);
  EXPECT_EQ(p.wrong(), 7);
  EXPECT_EQ(p.test_accuracy(), -1);
}

}  // namespace
}  // namespace psring
