#include "bench/harness/result_line.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace psring::bench {
namespace {

// Printed by `ring_worker --model_bytes=16777216 --max_steps=1` (the hand-written format of
// common/worker_result.cc: integers without quotes, "%.6f" fractions).
constexpr char kRingWorkerLine[] =
    R"(PSRING_RESULT {"role":"worker","exchange":"ring-tcp","rank":0,"world_size":1,"steps":1,)"
    R"("bytes":16777216,"compute_s":0.000000,"exchange_s":0.000000,"step_s":0.000000,"samples_per_s":0.000,)"
    R"("bytes_sent":0,"bytes_received":0,"wrong":0,"test_accuracy":-1.000000})";
// Printed by `ps/server --port=P --workers=1` when a worker with --shutdown_servers ends the job.
constexpr char kServerLine[] =
    R"(PSRING_RESULT {"role":"server","shard":0,"num_shards":1,"mode":"sync","version":4,"bytes_sent":24576,)"
    R"("bytes_received":20480})";

TEST(ResultLineTest, ReadsRealWorkerAndServerLines) {
  auto lines = ExtractResults(absl::StrCat("step 1 loss 2.3\n", kRingWorkerLine, "\nnoise\n", kServerLine, "\n"));
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->workers.size(), 1u);
  ASSERT_EQ(lines->servers.size(), 1u);
  const proto::WorkerResult& w = lines->workers[0];
  EXPECT_EQ(w.exchange(), "ring-tcp");
  EXPECT_EQ(w.rank(), 0);
  EXPECT_EQ(w.world_size(), 1);
  EXPECT_EQ(w.steps(), 1);
  EXPECT_EQ(w.bytes(), 16777216);
  EXPECT_EQ(w.wrong(), 0);
  EXPECT_EQ(w.test_accuracy(), -1);
  const proto::ServerResult& s = lines->servers[0];
  EXPECT_EQ(s.mode(), "sync");
  EXPECT_EQ(s.version(), 4);
  EXPECT_EQ(s.bytes_sent(), 24576);
}

// What protobuf's own printer writes (the producers' next format) reads the same; absent keys take the
// message's defaults.
TEST(ResultLineTest, ReadsTheJsonMappingAndItsDefaults) {
  auto lines = ExtractResults(
      R"(PSRING_RESULT {"role":"worker","exchange":"ps-sync","rank":3,"bytes":1.6777216e7,"step_s":1.25,)"
      R"("bytes_sent":123456789012})");
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->workers.size(), 1u);
  const proto::WorkerResult& w = lines->workers[0];
  EXPECT_EQ(w.rank(), 3);
  EXPECT_EQ(w.bytes(), 16777216);
  EXPECT_EQ(w.bytes_sent(), 123456789012.0);
  EXPECT_EQ(w.world_size(), 1);
  EXPECT_EQ(w.test_accuracy(), -1);
}

TEST(ResultLineTest, ARenamedKeyIsAnErrorThatSaysWhatToDo) {
  auto lines = ExtractResults(R"(PSRING_RESULT {"role":"worker","rank":0,"step_seconds":1.0})");
  ASSERT_FALSE(lines.ok());
  EXPECT_EQ(lines.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(lines.status().message(), "step_seconds")) << lines.status();
  EXPECT_TRUE(absl::StrContains(lines.status().message(), "proto/results.proto")) << lines.status();
}

TEST(ResultLineTest, RejectsMalformedLinesAndUnknownRoles) {
  EXPECT_FALSE(ExtractResults("PSRING_RESULT {broken\n").ok());
  EXPECT_FALSE(ExtractResults(R"(PSRING_RESULT {"rank":1})").ok());                  // no role
  EXPECT_FALSE(ExtractResults(R"(PSRING_RESULT {"role":"client","rank":1})").ok());  // unknown role
  EXPECT_FALSE(ExtractResults(R"(PSRING_RESULT {"role":"worker","rank":"x"})").ok());
  auto none = ExtractResults("no result here\n");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->workers.empty() && none->servers.empty());
}

}  // namespace
}  // namespace psring::bench
