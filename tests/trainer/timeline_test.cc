// Timeline: spans recorded from several threads come out as trace-event JSON that parses.
#include "trainer/timeline.h"

#include <string>
#include <thread>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace psring::trainer {
namespace {

google::protobuf::Struct Parse(const std::string& json) {
  google::protobuf::Struct doc;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &doc);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return doc;
}

TEST(TimelineTest, WritesParsableTraceEvents) {
  Timeline timeline(/*rank=*/3);
  timeline.NameTrack(kComputeTrack, "compute");
  timeline.Record("backward/layer \"2\"", kComputeTrack, 1000, 250, {{"step", 4}});
  timeline.Record("allreduce", CommTrack(0), 1100, 500, {{"bucket", 0}, {"bytes", 4096}});
  const google::protobuf::Struct doc = Parse(timeline.ToJson());
  EXPECT_EQ(doc.fields().at("displayTimeUnit").string_value(), "ms");
  const auto& events = doc.fields().at("traceEvents").list_value().values();
  ASSERT_EQ(events.size(), 3);
  const auto& meta = events[0].struct_value().fields();
  EXPECT_EQ(meta.at("ph").string_value(), "M");
  EXPECT_EQ(meta.at("args").struct_value().fields().at("name").string_value(), "compute");
  const auto& backward = events[1].struct_value().fields();
  EXPECT_EQ(backward.at("name").string_value(), "backward/layer \"2\"");
  EXPECT_EQ(backward.at("ph").string_value(), "X");
  EXPECT_EQ(backward.at("ts").number_value(), 1000);
  EXPECT_EQ(backward.at("dur").number_value(), 250);
  EXPECT_EQ(backward.at("pid").number_value(), 3);
  EXPECT_EQ(backward.at("tid").number_value(), kComputeTrack);
  EXPECT_EQ(backward.at("args").struct_value().fields().at("step").number_value(), 4);
  const auto& allreduce = events[2].struct_value().fields();
  EXPECT_EQ(allreduce.at("tid").number_value(), CommTrack(0));
  EXPECT_EQ(allreduce.at("args").struct_value().fields().at("bytes").number_value(), 4096);
}

TEST(TimelineTest, SpansFromManyThreadsAreAllKept) {
  Timeline timeline(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&timeline, t] {
      for (int i = 0; i < 100; ++i) {
        Timeline::Span span(&timeline, "work", CommTrack(t));
        span.AddArg("i", i);
      }
    });
  }
  for (auto& th : threads) th.join();
  const std::vector<SpanRecord> spans = timeline.spans();
  ASSERT_EQ(spans.size(), 400u);
  for (const SpanRecord& s : spans) EXPECT_GE(s.duration_us, 0);
  const google::protobuf::Struct doc = Parse(timeline.ToJson());
  EXPECT_EQ(doc.fields().at("traceEvents").list_value().values_size(), 400);
}

TEST(TimelineTest, SpanMeasuresItsScope) {
  Timeline timeline(0);
  const int64_t before = Timeline::NowMicros();
  { Timeline::Span span(&timeline, "sleep", kComputeTrack); std::this_thread::sleep_for(std::chrono::milliseconds(2)); }
  const int64_t after = Timeline::NowMicros();
  const std::vector<SpanRecord> spans = timeline.spans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_GE(spans[0].start_us, before);
  EXPECT_LE(spans[0].start_us + spans[0].duration_us, after);
  EXPECT_GE(spans[0].duration_us, 2000);
}

TEST(TimelineTest, DisabledRecorderRecordsNothing) {
  Timeline* off = Timeline::Disabled();
  EXPECT_FALSE(off->enabled());
  off->Record("x", 0, 1, 2);
  { Timeline::Span span(off, "y", 0); span.AddArg("a", 1); }
  EXPECT_TRUE(off->spans().empty());
  const google::protobuf::Struct doc = Parse(off->ToJson());
  EXPECT_EQ(doc.fields().at("traceEvents").list_value().values_size(), 0);
}

}  // namespace
}  // namespace psring::trainer
