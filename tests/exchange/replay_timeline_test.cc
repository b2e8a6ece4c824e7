// The timeline of a 2-rank replay over the TCP ring parses as Chrome trace-event JSON and its spans agree
// with the result line: compute (forward + backward spans) and the exposed exchange (the wait spans) within
// 5 %.
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

struct SpanTotals {
  double compute_s = 0;
  double wait_s = 0;
  int spans = 0;
};

absl::StatusOr<SpanTotals> SumSpans(const std::string& json, int rank) {
  google::protobuf::Struct trace;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &trace);
  if (!parsed.ok()) return absl::InvalidArgumentError(parsed.message().as_string());
  const auto events = trace.fields().find("traceEvents");
  if (events == trace.fields().end()) return absl::InvalidArgumentError("no traceEvents");
  SpanTotals totals;
  for (const google::protobuf::Value& event : events->second.list_value().values()) {
    const auto& f = event.struct_value().fields();
    for (const char* key : {"name", "ph", "ts", "dur", "pid", "tid"}) {
      if (!f.count(key)) return absl::InvalidArgumentError(absl::StrCat("an event without ", key));
    }
    if (f.at("ph").string_value() != "X" || f.at("pid").number_value() != rank) {
      return absl::InvalidArgumentError("a complete event of another rank");
    }
    const std::string& name = f.at("name").string_value();
    const double seconds = f.at("dur").number_value() * 1e-6;
    if (absl::StartsWith(name, "forward/") || absl::StartsWith(name, "backward/")) totals.compute_s += seconds;
    if (name == "wait for exchange") totals.wait_s += seconds;
    ++totals.spans;
  }
  return totals;
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
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_EQ(results[r].wrong(), 0);
    absl::StatusOr<SpanTotals> totals = SumSpans(traces[r], r);
    ASSERT_TRUE(totals.ok()) << totals.status();
    // 4 steps x 6 layers x (forward + backward) + the waits, plus the ring's communication spans.
    EXPECT_GE(totals->spans, 4 * (2 * kLayers + 1));
    EXPECT_NEAR(totals->compute_s, results[r].compute_s(), 0.05 * results[r].compute_s());
    EXPECT_NEAR(totals->wait_s, results[r].exposed_exchange_s(),
                0.05 * results[r].exposed_exchange_s() + 2e-4);
    // The waits end at deadlines accumulated from the step's start, so the spans (and the sums made of them)
    // add up to the profile's time less what the calls between them took.
    EXPECT_GE(results[r].compute_s(), 0.5 * 4 * kLayers * 6e-3);
  }
}

}  // namespace
}  // namespace psring
