// A Gantt chart of timeline spans (bench/trace_merge.h) as a standalone SVG document: one row per track
// (rank and thread: compute, each communication stream), one rectangle per span, coloured by its kind
// (forward, backward, reduce-scatter, push, ...), a time axis in ms and a legend. Several sections (one per
// exchange) stack in one figure on time axes of their own.
//
//   ASSIGN_OR_RETURN(std::vector<TraceSpan> spans, ReadSpans(merged_trace));
//   std::string svg = RenderGantt("one step, N = 4", {{"ring", OneStep(spans, 3)}});
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_GANTT_H_
#define PSRING_BENCH_GANTT_H_

#include <string>
#include <vector>

#include "bench/core/trace_merge.h"

namespace psring::bench {

struct GanttSection {
  std::string label;             // e.g. "ring, N = 4, bucket 25 MB"
  std::vector<TraceSpan> spans;  // drawn on a time axis from the earliest start to the latest end
};

// Every span becomes exactly one <rect class="span"> with a <title> (name and duration) for hovering.
std::string RenderGantt(const std::string& title, const std::vector<GanttSection>& sections);

// What a span's colour stands for: its category, else its name up to the first space, ':', '[' or '/'
// ("backward/layer 3" -> "backward").
std::string SpanKind(const TraceSpan& span);

// The spans of the `index`-th step of the trace (0-based; clamped to the last one), clipped to it. A step's
// window is where rank 0's (the lowest pid's) spans with that args.step lie, from the forward pass before
// them (whose spans may carry no step argument); a trace without step arguments is cut at rank 0's spans
// named "step", else at its "forward" spans (a step starts with its forward pass). A trace with none of these
// comes back whole.
std::vector<TraceSpan> OneStep(const std::vector<TraceSpan>& spans, int index);

}  // namespace psring::bench

#endif  // PSRING_BENCH_GANTT_H_
