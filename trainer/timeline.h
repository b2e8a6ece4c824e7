// Timeline: a per-rank recorder of timed spans (forward, backward per layer, each bucket's exchange phases,
// the optimizer, waits) written as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and
// chrome://tracing open:
//
//   {"traceEvents":[{"name":"backward/layer 2","ph":"X","ts":12.5,"dur":80.0,"pid":0,"tid":0,
//                    "args":{"step":3}}, ...],"displayTimeUnit":"ms"}
//
// pid is the rank; tid is the track: kComputeTrack for the training thread, CommTrack(k) for communication
// stream k (a ring's communication thread, a PS shard's stream). ts and dur are microseconds; ts counts from
// the machine's monotonic clock (CLOCK_MONOTONIC via steady_clock), so ranks on one host share a time axis
// and files of one run can be merged by concatenating their traceEvents.
//
//   Timeline timeline(/*rank=*/0);
//   { Timeline::Span span(&timeline, "forward", kComputeTrack); ... }   // records on scope exit
//   timeline.Record("allreduce", CommTrack(0), start_us, dur_us, {{"bucket", 1}, {"bytes", 4096}});
//   RETURN_IF_ERROR(timeline.WriteJson("/tmp/rank0.json"));
//
// Disabled recorder: Timeline::Disabled() (what every exchange and the trainer hold by default) drops every
// call after one branch, and Span on it does not read the clock, so code records unconditionally.
// Thread-safety: Record/Span/spans/ToJson are thread-safe (one mutex; a span costs one lock on exit).
#ifndef PSRING_TRAINER_TIMELINE_H_
#define PSRING_TRAINER_TIMELINE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace psring::trainer {

// Track (trace-event tid) of the training thread.
constexpr int kComputeTrack = 0;
// Track of communication stream `stream` (0-based).
constexpr int CommTrack(int stream) { return 1 + stream; }

// A numeric argument shown in the span's details ("bucket", "bytes", "step", ...).
using SpanArg = std::pair<std::string, double>;

struct SpanRecord {
  std::string name;
  int track = kComputeTrack;
  int64_t start_us = 0;  // monotonic clock, microseconds
  int64_t duration_us = 0;
  std::vector<SpanArg> args;
};

class Timeline {
 public:
  // An enabled recorder for `rank` (the trace's pid).
  explicit Timeline(int rank);
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // The shared disabled recorder: records nothing, never null, lives forever.
  static Timeline* Disabled();

  bool enabled() const { return enabled_; }
  int rank() const { return rank_; }

  // Monotonic clock in microseconds (the spans' time base).
  static int64_t NowMicros();

  // Records one complete span. No-op when disabled.
  void Record(absl::string_view name, int track, int64_t start_us, int64_t duration_us,
              std::vector<SpanArg> args = {}) ABSL_LOCKS_EXCLUDED(mu_);
  // Names a track in the viewer ("compute", "ring", "shard 1"); optional.
  void NameTrack(int track, absl::string_view name) ABSL_LOCKS_EXCLUDED(mu_);

  // Records [construction, destruction) on `track`. Not copyable; `timeline` must outlive it.
  class Span {
   public:
    Span(Timeline* timeline, absl::string_view name, int track);
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;
    void AddArg(absl::string_view key, double value);

   private:
    Timeline* const timeline_;
    std::string name_;
    const int track_;
    const int64_t start_us_;
    std::vector<SpanArg> args_;
  };

  // What was recorded so far, in recording order.
  std::vector<SpanRecord> spans() const ABSL_LOCKS_EXCLUDED(mu_);
  // The trace-event JSON document of everything recorded (plus thread_name metadata for named tracks).
  std::string ToJson() const ABSL_LOCKS_EXCLUDED(mu_);
  // ToJson() written atomically to `path` (common/atomic_file.h); errors name the file.
  absl::Status WriteJson(const std::string& path) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Timeline(int rank, bool enabled);

  const int rank_;
  const bool enabled_;
  mutable absl::Mutex mu_;
  std::vector<SpanRecord> spans_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, std::string>> track_names_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_TIMELINE_H_
