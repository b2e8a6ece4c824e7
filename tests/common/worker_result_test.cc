#include "common/worker_result.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace psring {
namespace {

constexpr char kPrefix[] = "PSRING_RESULT ";

// Parses the JSON after the prefix back into a message of the same type as `want` and compares.
void ExpectRoundTrip(const google::protobuf::Message& want, const std::string& line) {
  ASSERT_TRUE(absl::StartsWith(line, kPrefix)) << line;
  std::unique_ptr<google::protobuf::Message> parsed(want.New());
  const auto status =
      google::protobuf::util::JsonStringToMessage(line.substr(sizeof(kPrefix) - 1), parsed.get());
  ASSERT_TRUE(status.ok()) << status.ToString() << "\n" << line;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equivalent(*parsed, want))
      << parsed->DebugString() << "\nvs\n"
      << want.DebugString();
}

TEST(WorkerResultTest, WorkerLineParsesBackToTheSameMessage) {
  proto::WorkerResult r;
  r.set_exchange("ring-tcp");
  r.set_rank(3);
  r.set_world_size(4);
  r.set_steps(10);
  r.set_bytes(16777216);
  r.set_exchange_s(12.5);
  r.set_step_s(1.25);
  r.set_bytes_sent(123456789012);
  r.set_bytes_received(456);
  r.set_wrong(7);
  absl::StatusOr<std::string> line = FormatResultLine(r);
  ASSERT_TRUE(line.ok()) << line.status();
  // The keys and order users' scripts read; byte counters are plain JSON numbers, not strings.
  EXPECT_TRUE(
      absl::StartsWith(*line, "PSRING_RESULT {\"role\":\"worker\",\"exchange\":\"ring-tcp\",\"rank\":3,"))
      << *line;
  EXPECT_TRUE(absl::StrContains(*line, "\"bytes_sent\":123456789012,")) << *line;
  // The keys added for train mode's timing contract follow the original ones.
  EXPECT_TRUE(absl::StrContains(*line, "\"test_accuracy\":-1,\"forward_s\":0,")) << *line;
  EXPECT_TRUE(absl::StrContains(*line, "\"bucket_mb\":0,\"measured_start_unix_s\":0,\"measured_end_unix_s\":0,\"step_spread\":0,"))
      << *line;
  // Then the host's CPU (-1: unknown) and the injected straggler delay.
  EXPECT_TRUE(absl::StrContains(*line, "\"host_cpu_busy\":-1,\"host_cpu_stall\":-1,\"injected_delay_s\":0")) << *line;
  EXPECT_FALSE(absl::StrContains(*line, "\n"));
  ExpectRoundTrip(r, *line);
}

TEST(WorkerResultTest, UnsetFieldsPrintWithTheirDefaults) {
  absl::StatusOr<std::string> line = FormatResultLine(proto::WorkerResult());
  ASSERT_TRUE(line.ok()) << line.status();
  for (const char* key :
       {"role", "exchange", "rank", "world_size", "steps", "bytes", "compute_s", "exchange_s", "step_s",
        "samples_per_s", "bytes_sent", "bytes_received", "wrong", "test_accuracy"}) {
    EXPECT_TRUE(absl::StrContains(*line, absl::StrCat("\"", key, "\":"))) << key << " missing: " << *line;
  }
  EXPECT_TRUE(absl::StrContains(*line, "\"world_size\":1,")) << *line;
}

TEST(WorkerResultTest, ServerLineParsesBackToTheSameMessage) {
  proto::ServerResult r;
  r.set_shard(1);
  r.set_num_shards(2);
  r.set_mode("async");
  r.set_version(42);
  r.set_bytes_sent(1e12);
  r.set_bytes_received(3);
  absl::StatusOr<std::string> line = FormatResultLine(r);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(
      *line,
      "PSRING_RESULT {\"role\":\"server\",\"shard\":1,\"num_shards\":2,\"mode\":\"async\",\"version\":42,"
      "\"bytes_sent\":1000000000000,\"bytes_received\":3,\"backup_workers\":0,\"dropped_pushes\":0}");
  ExpectRoundTrip(r, *line);
}

}  // namespace
}  // namespace psring
