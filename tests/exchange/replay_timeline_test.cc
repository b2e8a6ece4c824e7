// The timeline of a 2-rank bucketed replay over the TCP ring parses as Chrome trace-event JSON and agrees
// with what it does not itself make: each step's length with the worker's step clock, each wait with what
// the exchange's own communication spans had left after backward (exposed = max(0, last collective's end -
// backward's end)), and the reported exchange time with the communication spans it must cover.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/results.pb.h"
#include "tests/testing/exchange_ranks.h"
#include "trainer/gradient_only.h"
#include "trainer/timeline.h"

namespace psring {
namespace {

struct Span {
  std::string name;
  double start_s = 0;
  double end_s = 0;
  bool compute = false;  // the training thread's track; else a communication track
};

// One measured step as the trace shows it.
struct TraceStep {
  double start_s = 0;          // the first forward span's start
  double backward_end_s = 0;   // the last backward span's end
  double end_s = 0;            // the wait span's end
  double wait_s = 0;           // the wait span's length
  double first_comm_s = -1;    // the first communication span's start
  double last_comm_end_s = -1;  // the last communication span's end
};

absl::StatusOr<std::vector<Span>> ReadSpans(const std::string& json, int rank) {
  google::protobuf::Struct trace;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &trace);
  if (!parsed.ok()) return absl::InvalidArgumentError(parsed.message().as_string());
  const auto events = trace.fields().find("traceEvents");
  if (events == trace.fields().end()) return absl::InvalidArgumentError("no traceEvents");
  std::vector<Span> spans;
  for (const google::protobuf::Value& event : events->second.list_value().values()) {
    const auto& f = event.struct_value().fields();
    for (const char* key : {"name", "ph", "ts", "dur", "pid", "tid"}) {
      if (!f.count(key)) return absl::InvalidArgumentError(absl::StrCat("an event without ", key));
    }
    if (f.at("ph").string_value() != "X" || f.at("pid").number_value() != rank) {
      return absl::InvalidArgumentError("a complete event of another rank");
    }
    const double start = f.at("ts").number_value() * 1e-6;
    spans.push_back({f.at("name").string_value(), start, start + f.at("dur").number_value() * 1e-6,
                     f.at("tid").number_value() == trainer::kComputeTrack});
  }
  // Stable: spans of one track are recorded in order, and a zero-length wait may share its start with the
  // next step's first forward span.
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start_s < b.start_s; });
  return spans;
}

// Cuts the compute track into steps at each wait span and gives every communication span to the step it
// starts in.
absl::StatusOr<std::vector<TraceStep>> Steps(const std::vector<Span>& spans) {
  std::vector<TraceStep> steps;
  TraceStep open;
  bool in_step = false;
  for (const Span& s : spans) {
    if (!s.compute) continue;
    if (!in_step) {
      if (!absl::StartsWith(s.name, "forward/")) return absl::InvalidArgumentError("a step not led by forward");
      open = TraceStep();
      open.start_s = s.start_s;
      in_step = true;
    }
    if (absl::StartsWith(s.name, "backward/")) open.backward_end_s = s.end_s;
    if (s.name == "wait for exchange") {
      open.end_s = s.end_s;
      open.wait_s = s.end_s - s.start_s;
      steps.push_back(open);
      in_step = false;
    }
  }
  for (const Span& s : spans) {
    if (s.compute) continue;
    for (TraceStep& step : steps) {
      if (s.start_s < step.start_s || s.start_s > step.end_s) continue;
      if (step.first_comm_s < 0 || s.start_s < step.first_comm_s) step.first_comm_s = s.start_s;
      step.last_comm_end_s = std::max(step.last_comm_end_s, s.end_s);
    }
  }
  return steps;
}

TEST(ReplayTimelineTest, SpansAgreeWithTheResultLine) {
  constexpr int kRanks = 2;
  constexpr int kLayers = 6;
  std::vector<proto::WorkerResult> results(kRanks);
  std::vector<std::string> traces(kRanks);
  const std::vector<absl::Status> statuses = testing::RingRanks::Run(
      kRanks, 0, [&](int rank, trainer::GradientExchange* exchange) -> absl::Status {
        trainer::Timeline timeline(rank);
        exchange->set_timeline(&timeline);
        trainer::GradientOnlyOptions options;
        for (int l = 0; l < kLayers; ++l) {
          options.layers.push_back({absl::StrCat("layer", l), size_t{20000} + 1000 * l, absl::Milliseconds(2),
                                    absl::Milliseconds(4)});
        }
        options.bucket_mb = 0.1;
        options.warmup_steps = 0;  // the timeline then holds exactly the measured steps
        options.steps = 4;
        absl::StatusOr<proto::WorkerResult> result = trainer::RunGradientOnly(options, exchange);
        exchange->set_timeline(nullptr);
        if (!result.ok()) return result.status();
        results[rank] = *result;
        traces[rank] = timeline.ToJson();
        return absl::OkStatus();
      });
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  // Every figure below is checked against something the spans do not make: the step's own clock in
  // RunGradientOnly (step_s), and the exchange's communication spans, recorded on its own thread.
  constexpr double kSlack = 2e-3;  // per step: the calls between spans, the copy after the last collective
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_EQ(results[r].wrong(), 0);
    absl::StatusOr<std::vector<Span>> spans = ReadSpans(traces[r], r);
    ASSERT_TRUE(spans.ok()) << spans.status();
    absl::StatusOr<std::vector<TraceStep>> steps = Steps(*spans);
    ASSERT_TRUE(steps.ok()) << steps.status();
    ASSERT_EQ(steps->size(), 4u);
    double wall = 0, exposed = 0, under_way = 0, left_total = 0;
    for (const TraceStep& step : *steps) {
      // The exchange crossed the ring in every step, after backward began releasing buckets.
      ASSERT_GE(step.first_comm_s, step.start_s);
      ASSERT_GT(step.last_comm_end_s, step.first_comm_s);
      // Exposed: what the last collective had left to do when backward ended. The wait cannot end before
      // the last collective did (FinishStep joins the thread that stamps the collective's end; the clock
      // writes whole microseconds). Its length is not compared per step: the training thread starts it a
      // moment after backward's last span, which a loaded 2-core machine stretches to milliseconds (the
      // clang pass of a CI rehearsal: 7 ms); beyond the collective it holds the copy-out and the thread's
      // wake-up, so that side is bounded over all steps below.
      constexpr double kClockTick = 2e-6;
      EXPECT_GE(step.end_s, step.last_comm_end_s - kClockTick);
      const double left = std::max(0.0, step.last_comm_end_s - step.backward_end_s);
      left_total += left;
      wall += step.end_s - step.start_s;
      exposed += step.wait_s;
      under_way += step.end_s - step.first_comm_s;
    }
    // The step clock (outside the spans) agrees with the trace's steps.
    EXPECT_NEAR(wall, results[r].step_s() * 4, 4 * kSlack);
    EXPECT_NEAR(exposed, results[r].exposed_exchange_s(), 4 * kSlack);
    EXPECT_LE(exposed, 1.5 * left_total + 4 * 10e-3);  // not the whole exchange, nor another wait
    // The exchange time covers every communication span (it starts when bucket 0 is complete, at or before
    // the first collective) and never exceeds backward plus the exposed wait.
    EXPECT_GE(results[r].exchange_s(), under_way - 4 * kSlack);
    EXPECT_LE(results[r].exchange_s(), results[r].backward_s() + results[r].exposed_exchange_s() + 4 * kSlack);
    EXPECT_GE(results[r].exchange_s(), results[r].exposed_exchange_s());
    // The waits end at deadlines accumulated from the step's start, so the spans add up to the profile's time
    // less what the calls between them took.
    EXPECT_GE(results[r].compute_s(), 0.5 * 4 * kLayers * 6e-3);
  }
}

}  // namespace
}  // namespace psring
