// The per-rank timelines of one run (the workers' --timeline files, Chrome trace-event JSON) merged into one
// trace, and read back as spans for the Gantt chart (bench/gantt.h).
//
//   ASSIGN_OR_RETURN(std::string merged, MergeRankTraces({rank0_json, rank1_json}, "ring N=2"));
//   // merged opens in Perfetto (ui.perfetto.dev) or chrome://tracing: one process per rank.
//   ASSIGN_OR_RETURN(std::vector<TraceSpan> spans, ReadSpans(merged));
//
// Merging keeps every event of rank r as it is except its "pid", which becomes r, so the ranks are processes
// side by side on one time axis (the workers stamp events with a clock every process on the machine shares),
// and names each process "rank r" (a process_name metadata event). Both trace forms are accepted: an object
// with a "traceEvents" array, or a bare array of events.
//
// Thread-safety: pure functions; MergeRankTraceFiles reads and writes only the files it is given.
#ifndef PSRING_BENCH_TRACE_MERGE_H_
#define PSRING_BENCH_TRACE_MERGE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace psring::bench {

// A mark on one rank's lane at one moment (an instant event, "ph": "i", scope "p"), e.g. the moment the rank
// that held a synchronous step back was ready: "held step 12 back (+40.1 ms)".
struct TraceMark {
  int rank = 0;
  double ts_us = 0;  // on the traces' clock
  std::string name;
  int step = -1;     // args.step (-1: none)
  double lag_ms = 0;  // args.lag_ms
};

// kInvalidArgument naming the rank whose text is not a trace. `marks` go on their ranks' lanes; a mark whose
// rank has no trace is kInvalidArgument.
absl::StatusOr<std::string> MergeRankTraces(const std::vector<std::string>& rank_traces,
                                            const std::string& label, const std::vector<TraceMark>& marks = {});

// Reads `rank_paths` (rank r's file at index r), merges them with `marks` and writes `out_path` atomically.
absl::Status MergeRankTraceFiles(const std::vector<std::string>& rank_paths, const std::string& label,
                                 const std::string& out_path, const std::vector<TraceMark>& marks = {});

// A complete event ("ph": "X") of a trace.
struct TraceSpan {
  int pid = 0;  // the rank, in a merged trace
  int tid = 0;
  std::string track;  // the thread's name from its thread_name metadata event, else "thread <tid>"
  std::string name;
  std::string category;    // "cat" ("" when absent)
  double start_us = 0;     // "ts"
  double duration_us = 0;  // "dur"
  int step = -1;           // args.step, the training step the span belongs to (-1: none)
  double end_us() const { return start_us + duration_us; }
};

// The complete events of a trace in file order. kInvalidArgument when it is not trace-event JSON.
absl::StatusOr<std::vector<TraceSpan>> ReadSpans(const std::string& trace_json);

}  // namespace psring::bench

#endif  // PSRING_BENCH_TRACE_MERGE_H_
