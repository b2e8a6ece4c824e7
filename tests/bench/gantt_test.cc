#include "bench/report/gantt.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/bench/svg_checks.h"

namespace psring::bench {
namespace {

TraceSpan Span(int pid, int tid, const std::string& track, const std::string& name,
               const std::string& category, double start_ms, double duration_ms) {
  return {pid, tid, track, name, category, start_ms * 1e3, duration_ms * 1e3};
}

// Two steps of two ranks: compute on thread 1, the exchange on thread 2.
std::vector<TraceSpan> TwoSteps() {
  std::vector<TraceSpan> spans;
  for (int rank = 0; rank < 2; ++rank) {
    for (int step = 0; step < 2; ++step) {
      const double t = 100.0 * step + rank * 0.5;
      spans.push_back(Span(rank, 1, "compute", "step", "step", t, 90));
      spans.push_back(Span(rank, 1, "compute", "forward", "compute", t, 30));
      spans.push_back(Span(rank, 1, "compute", "backward fc2", "compute", t + 30, 30));
      spans.push_back(Span(rank, 1, "compute", "backward fc1", "compute", t + 60, 30));
      spans.push_back(
          Span(rank, 2, "comm <0> & co", "bucket 0 reduce-scatter", "reduce-scatter", t + 60, 20));
      spans.push_back(Span(rank, 2, "comm <0> & co", "bucket 1 allgather", "allgather", t + 80, 15));
    }
  }
  return spans;
}

TEST(GanttTest, OneRectPerSpanAndWellFormed) {
  const std::vector<TraceSpan> spans = TwoSteps();
  const std::vector<TraceSpan> step = OneStep(spans, 1);
  const std::string svg = RenderGantt("one step <N = 2>", {{"ring & buckets", step}, {"ps", spans}});
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
  EXPECT_EQ(Count(svg, "<rect class=\"span\""), static_cast<int>(step.size() + spans.size()));
  // Tracks: rank x thread, per section; kinds in the legend once each.
  EXPECT_EQ(Count(svg, "rank 1 · comm &lt;0&gt; &amp; co"), 2);
  EXPECT_EQ(Count(svg, "<rect class=\"legend\""), 4);  // step, compute, reduce-scatter, allgather
  EXPECT_NE(svg.find("one step &lt;N = 2&gt;"), std::string::npos);
}

TEST(GanttTest, OneStepTakesTheStepWindowAndClips) {
  const std::vector<TraceSpan> step = OneStep(TwoSteps(), 1);
  // Rank 0's second step is [100, 190) ms: rank 0's 6 spans, rank 1's 6 (starting 0.5 ms later, its step span
  // and last allgather clipped at 190 ms).
  ASSERT_EQ(step.size(), 12u);
  for (const TraceSpan& span : step) {
    EXPECT_GE(span.start_us, 100e3);
    EXPECT_LE(span.end_us(), 190e3 + 1e-6);
  }
  EXPECT_NEAR(step[6].duration_us, 89.5e3, 1e-6);
  // Out of range clamps to the last step; no step spans: cut at forward passes.
  EXPECT_EQ(OneStep(TwoSteps(), 7).size(), 12u);
  std::vector<TraceSpan> no_steps;
  for (const TraceSpan& span : TwoSteps()) {
    if (span.name != "step") no_steps.push_back(span);
  }
  EXPECT_EQ(OneStep(no_steps, 0).size(), 10u);  // rank 0's first step up to its second forward
  EXPECT_TRUE(OneStep({}, 0).empty());
}

TEST(GanttTest, OneStepPrefersTheStepArgument) {
  // Steps 0 and 1 by argument; step 1's exchange on the comm track ends after the next forward starts.
  std::vector<TraceSpan> spans = {
      Span(0, 0, "compute", "forward", "", 0, 10),   Span(0, 0, "compute", "backward", "", 10, 20),
      Span(0, 1, "comm", "allreduce", "", 20, 15),   Span(0, 0, "compute", "forward", "", 40, 10),
      Span(0, 0, "compute", "backward", "", 50, 20), Span(0, 1, "comm", "allreduce", "", 60, 25)};
  for (size_t i = 0; i < spans.size(); ++i) spans[i].step = i < 3 ? 0 : 1;
  const std::vector<TraceSpan> first = OneStep(spans, 0);
  ASSERT_EQ(first.size(), 3u);  // [0, 35) ms: the first step's three spans, nothing of the second
  EXPECT_NEAR(first[2].end_us(), 35e3, 1e-6);
  const std::vector<TraceSpan> second = OneStep(spans, 1);
  ASSERT_EQ(second.size(), 3u);
  EXPECT_NEAR(second.back().end_us(), 85e3, 1e-6);
}

TEST(GanttTest, KindIsTheCategoryElseTheNamesFirstWord) {
  EXPECT_EQ(SpanKind(Span(0, 0, "", "bucket 3 push", "push", 0, 1)), "push");
  EXPECT_EQ(SpanKind(Span(0, 0, "", "backward conv1", "", 0, 1)), "backward");
  EXPECT_EQ(SpanKind(Span(0, 0, "", "wait:exchange", "", 0, 1)), "wait");
  EXPECT_EQ(SpanKind(Span(0, 0, "", "backward/layer 3", "", 0, 1)), "backward");
}

}  // namespace
}  // namespace psring::bench
