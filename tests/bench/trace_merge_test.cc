#include "bench/core/trace_merge.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace psring::bench {
namespace {

// Two ranks' timelines as a worker writes them: its own pid, a thread name, complete events.
std::string RankTrace(int own_pid, double offset_us) {
  const std::string pid = std::to_string(own_pid);
  const std::string t = std::to_string(offset_us);
  const std::string t2 = std::to_string(offset_us + 50);
  return "{\"traceEvents\":["
         "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" +
         pid +
         ",\"tid\":1,\"args\":{\"name\":\"worker\"}},"
         "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" +
         pid +
         ",\"tid\":1,\"args\":{\"name\":\"compute\"}},"
         "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" +
         pid +
         ",\"tid\":2,\"args\":{\"name\":\"comm 0\"}},"
         "{\"ph\":\"X\",\"name\":\"forward\",\"cat\":\"compute\",\"pid\":" +
         pid + ",\"tid\":1,\"ts\":" + t +
         ",\"dur\":100},"
         "{\"ph\":\"X\",\"name\":\"bucket 0 reduce-scatter\",\"cat\":\"ring\",\"pid\":" +
         pid + ",\"tid\":2,\"ts\":" + t2 +
         ",\"dur\":30.5,\"args\":{\"bytes\":4096,\"step\":3}}"
         "]}";
}

TEST(TraceMergeTest, OnePidPerRankAndEverySpanKept) {
  const std::string rank0 = RankTrace(4242, 1000);
  const std::string rank1 = RankTrace(4343, 1010);
  auto merged = MergeRankTraces({rank0, rank1}, "ring N=2");
  ASSERT_TRUE(merged.ok()) << merged.status();
  // The merged file is JSON that parses back as a trace.
  auto spans = ReadSpans(*merged);
  ASSERT_TRUE(spans.ok()) << spans.status();
  ASSERT_EQ(spans->size(), 4u);
  std::set<int> pids;
  for (const TraceSpan& span : *spans) pids.insert(span.pid);
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  // Spans keep their names, categories, times and threads' names.
  EXPECT_EQ((*spans)[0].name, "forward");
  EXPECT_EQ((*spans)[0].category, "compute");
  EXPECT_EQ((*spans)[0].track, "compute");
  EXPECT_DOUBLE_EQ((*spans)[0].start_us, 1000);
  EXPECT_DOUBLE_EQ((*spans)[0].duration_us, 100);
  EXPECT_EQ((*spans)[1].track, "comm 0");
  EXPECT_EQ((*spans)[0].step, -1);
  EXPECT_EQ((*spans)[1].step, 3);
  EXPECT_DOUBLE_EQ((*spans)[1].start_us, 1050);
  EXPECT_DOUBLE_EQ((*spans)[1].duration_us, 30.5);
  EXPECT_EQ((*spans)[3].pid, 1);
  EXPECT_DOUBLE_EQ((*spans)[3].start_us, 1060);
  // Each rank is named once, as its rank; the workers' own process names are gone; args survive.
  EXPECT_NE(merged->find("rank 0 (ring N=2)"), std::string::npos);
  EXPECT_NE(merged->find("rank 1 (ring N=2)"), std::string::npos);
  EXPECT_EQ(merged->find("\"worker\""), std::string::npos);
  EXPECT_NE(merged->find("4096"), std::string::npos);
}

TEST(TraceMergeTest, MarksLandOnTheirRanksLanes) {
  TraceMark mark;
  mark.rank = 1;
  mark.ts_us = 1234.5;
  mark.name = "held measured step 3 back (+40.0 ms)";
  mark.step = 3;
  mark.lag_ms = 40;
  auto merged = MergeRankTraces({RankTrace(1, 1000), RankTrace(2, 1000)}, "", {mark});
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_NE(merged->find("\"name\":\"held measured step 3 back (+40.0 ms)\""), std::string::npos) << *merged;
  EXPECT_NE(merged->find("\"ph\":\"i\""), std::string::npos) << *merged;
  // The spans are read as before: a mark is no span.
  auto spans = ReadSpans(*merged);
  ASSERT_TRUE(spans.ok()) << spans.status();
  EXPECT_EQ(spans->size(), 4u);
  // A mark for a rank the run does not have is refused, not dropped.
  mark.rank = 2;
  auto bad = MergeRankTraces({RankTrace(1, 1000), RankTrace(2, 1000)}, "", {mark});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rank 2 of 2"), std::string::npos) << bad.status();
}

TEST(TraceMergeTest, AcceptsABareArrayOfEvents) {
  auto merged =
      MergeRankTraces({"[{\"ph\":\"X\",\"name\":\"a\",\"pid\":9,\"tid\":3,\"ts\":5,\"dur\":2}]"}, "");
  ASSERT_TRUE(merged.ok()) << merged.status();
  auto spans = ReadSpans(*merged);
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(spans->size(), 1u);
  EXPECT_EQ((*spans)[0].pid, 0);
  EXPECT_EQ((*spans)[0].track, "thread 3");
}

TEST(TraceMergeTest, NamesTheRankWhoseFileIsNotATrace) {
  auto not_json = MergeRankTraces({"[]", "{\"traceEvents\": [ "}, "");
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.status().message().find("rank 1"), std::string::npos) << not_json.status();
  auto not_trace = MergeRankTraces({"{\"events\": []}"}, "");
  ASSERT_FALSE(not_trace.ok());
  EXPECT_NE(not_trace.status().message().find("traceEvents"), std::string::npos) << not_trace.status();
  EXPECT_FALSE(ReadSpans("42").ok());
}

TEST(TraceMergeTest, MissingFileSaysWhichAndWhy) {
  auto status = MergeRankTraceFiles({"/nonexistent/rank0.json"}, "", "/tmp/never-written.json");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("/nonexistent/rank0.json"), std::string::npos);
}

}  // namespace
}  // namespace psring::bench
