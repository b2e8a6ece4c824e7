// PsExchange's steps (ps/client.h): the PushPull stream of each shard (the push, the pipelined reply and
// the push window), flat and bucketed steps, and re-pushing a step after a shard was lost.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "ps/client.h"
#include "ps/client_internal.h"
#include "ps/tensor_frame.h"

namespace psring::ps {

absl::Status PsExchange::PushPullOnce(Shard* shard, int64_t trainer_step, trainer::FloatBuffer grads,
                                      trainer::FloatBuffer params, const BucketFeed* feed) {
  const std::string where = absl::StrCat("PushPull step ", shard->next_step, " with shard ", shard->index,
                                         " (", shard->address, ")");
  // The gradient chunks are slices of `grads` (zero copy): the tracker must see them all released before
  // this function returns. It outlives `stream` (declared first).
  SliceTracker tracker;
  absl::Status received = absl::OkStatus();
  absl::Status feed_error;  // the bucketed step ended before this shard's part was complete
  bool ok = false;
  uint64_t version = 0;
  bool dropped = false;  // backup workers: the shard dropped this push (its step had closed)
  grpc::Status status;
  absl::Time deadline;
  RETURN_IF_ERROR(EnsureChannel(shard));
  {
    grpc::ClientContext context;
    proto::PushHeader header;
    *header.mutable_address() = Address(*shard);
    header.set_rank(options_.rank);
    SetSession(shard->session, &header);
    header.set_step(shard->next_step);
    header.set_num_elements(shard->range.size());
    header.set_trainer_step(trainer_step);
    deadline = PrepareContext(shard, &context, "PushPull", PushFields(header));
    std::unique_ptr<grpc::ClientReaderWriter<TensorFrame, TensorFrame>> stream(
        grpc::internal::ClientReaderWriterFactory<TensorFrame, TensorFrame>::Create(
            shard->channel.get(), *shard->push_pull, &context));
    // The server streams each updated range back while later chunks are still being pushed: read the reply
    // on a second thread while this one writes (a gRPC stream allows one reader and one writer at a time).
    bool got_reply = false;
    int64_t pull_start_us = 0;  // when the reply's header arrived
    // Push window: chunk [o, o+len) goes out once the reply reached o + len - window (or the reply ended).
    // Only sync servers stream replies during the push and announce their range; an async server or an
    // older one (0) gets no window: it answers after the whole push, or we could not size it safely.
    const uint64_t window =
        options_.push_window_bytes > 0 && shard->reply_chunk_elements > 0
            ? std::max<uint64_t>(options_.push_window_bytes / sizeof(float),
                                 chunk_elements_ + shard->reply_chunk_elements)
            : 0;
    absl::Mutex window_mu;
    absl::CondVar window_cv;
    uint64_t replied = 0;
    bool reply_over = false;
    std::function<void(uint64_t)> on_reply;
    std::function<void(uint64_t, uint64_t)> before_chunk;
    if (window > 0) {
      on_reply = [&](uint64_t filled) {
        absl::MutexLock lock(&window_mu);
        replied = filled;
        window_cv.SignalAll();
      };
      before_chunk = [&](uint64_t offset, uint64_t len) {
        absl::MutexLock lock(&window_mu);
        const uint64_t need = offset + len > window ? offset + len - window : 0;
        // The server's --step_timeout ends a stuck step, which ends the reply; the call deadline bounds it too.
        const absl::Time give_up = absl::Now() + options_.timeout;
        while (!reply_over && replied < need) {
          if (window_cv.WaitWithDeadline(&window_mu, give_up)) break;
        }
      };
    }
    std::thread reader([&] {
      // However the reader ends, the writer stops waiting for it.
      const auto end_reply = [&] {
        absl::MutexLock lock(&window_mu);
        reply_over = true;
        window_cv.SignalAll();
      };
      struct MarkOver {
        const std::function<void()> end;
        ~MarkOver() { end(); }
      } mark_over{end_reply};
      TensorFrame first;
      proto::PullReplyHeader reply;
      if (!stream->Read(&first) || !first.error().ok() || !first.is_header() ||
          !reply.ParseFromString(first.header_bytes())) {
        return;
      }
      got_reply = true;
      pull_start_us = trainer::Timeline::NowMicros();
      version = reply.version();
      dropped = reply.dropped();
      if (reply.num_elements() != shard->range.size()) {
        received = absl::InternalError(absl::StrCat("server sent ", reply.num_elements(),
                                                    " elements for a shard of ", shard->range.size()));
      } else {
        // A second header ends the reply early (the step was dropped while we push; ps.proto): stop waiting
        // for replies, so the push goes on and the call ends with the server's status.
        const auto ended = [](const std::string& bytes) {
          proto::PullReplyHeader end;
          if (!end.ParseFromString(bytes) || end.ended_code() == 0) {
            return absl::InvalidArgumentError("parameters: expected only chunks after the header");
          }
          const int code = end.ended_code();
          return absl::Status(code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown,
                              absl::StrCat("the server ended the reply: ", end.ended_message()));
        };
        received = ReadFrameChunks(stream.get(), params.data + shard->range.begin, shard->range.size(),
                                   &shard->bytes_received, "parameters", on_reply, ended);
      }
      if (!received.ok()) {
        end_reply();  // before draining: the server ends the call only once our push is complete
        // Drain what the server still sends (nothing is copied once a frame holds an error), so Finish()
        // reports how the call really ended.
        TensorFrame sink;
        sink.ExpectInto(nullptr, 0);
        while (stream->Read(&sink)) {
        }
      }
    });
    trainer::Timeline* const timeline = this->timeline();
    // Pushes wire elements [begin, end) of the shard (offsets within the shard's range), bucket `bucket` of
    // a bucketed step (-1: the whole flat gradient), recording a "push" span.
    auto push = [&](uint64_t begin, uint64_t end, int bucket) {
      const int64_t start = trainer::Timeline::NowMicros();
      const bool written = WriteFrameChunks(stream.get(), grads.data + shard->range.begin, end, chunk_elements_,
                                            &tracker, &shard->bytes_sent, before_chunk, begin);
      if (timeline->enabled()) {
        timeline->Record("push", trainer::CommTrack(shard->index), start, trainer::Timeline::NowMicros() - start,
                         {{"step", static_cast<double>(trainer_step)},
                          {"shard", static_cast<double>(shard->index)},
                          {"bucket", static_cast<double>(bucket)},
                          {"bytes", static_cast<double>((end - begin) * sizeof(float))}});
      }
      return written;
    };
    ok = stream->Write(TensorFrame::Header(header));
    if (ok && feed == nullptr) {
      ok = push(0, shard->range.size(), -1);
    } else if (ok) {
      // The shard holds its slice of every bucket in plan order: its part is pushed as a prefix that grows
      // by one slice per bucket (`pushed` elements so far).
      uint64_t pushed = 0;
      for (size_t i = 0; ok && i < layout_.buckets().size(); ++i) {
        const ShardRange slice = layout_.Slice(shard->index, i);
        if (slice.size() == 0) continue;  // a bucket smaller than the number of shards
        const absl::Status ready = feed->tracker->WaitFor(static_cast<int>(i));
        if (!ready.ok()) {
          // Backward failed: end the push unfinished (the server drops the step) rather than send garbage.
          feed_error = ready;
          context.TryCancel();
          ok = false;
          break;
        }
        std::copy(feed->grads.data + slice.begin, feed->grads.data + slice.end,
                  grads.data + shard->range.begin + pushed);
        ok = push(pushed, pushed + slice.size(), static_cast<int>(i));
        pushed += slice.size();
      }
    }
    if (ok) ok = stream->WritesDone();
    reader.join();
    if (timeline->enabled() && got_reply) {
      // From the reply's header (the first range applied) to its end.
      timeline->Record("pull", trainer::CommTrack(shard->index), pull_start_us,
                       trainer::Timeline::NowMicros() - pull_start_us,
                       {{"step", static_cast<double>(trainer_step)},
                        {"shard", static_cast<double>(shard->index)},
                        {"bytes", static_cast<double>(shard->range.size() * sizeof(float))}});
    }
    ok = ok && got_reply;
    status = stream->Finish();
  }
  if (!tracker.WaitReleased(options_.timeout)) {
    // gRPC must drop every slice once the call is over; continuing would let the caller reuse memory gRPC
    // may still read.
    std::fprintf(stderr, "ps rank %d: gRPC still holds gradient slices after the call ended\n",
                 options_.rank);
    std::abort();
  }
  if (!feed_error.ok()) {
    // Not a network failure: no retry (FailedPrecondition is neither re-registered nor pulled).
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": the bucketed step ended before its gradient was complete: ", feed_error.message()));
  }
  // A failed call (server gone, deadline, server-side error) explains a short or broken reply best.
  RETURN_IF_ERROR(CallResult(shard, status, deadline, where));
  if (!received.ok()) return absl::Status(received.code(), absl::StrCat(where, ": ", received.message()));
  if (!ok) return absl::UnavailableError(absl::StrCat(where, ": stream ended without parameters"));
  // With backup workers the steps go on without this rank: its next push is tagged with the version it now
  // holds (step + 1 when its push was averaged in).
  if (shard->backup_workers > 0) {
    // Steps the shard closed beyond the one pushed: the job went on without this rank (TakeSkippedSteps).
    const int64_t pushed = shard->next_step;
    shard->next_step = static_cast<int64_t>(version);
    shard->steps_ahead += std::max<int64_t>(0, shard->next_step - (pushed + 1));
  } else {
    ++shard->next_step;
  }
  shard->dropped_pushes += dropped;
  shard->version = version;
  return absl::OkStatus();
}

absl::StatusOr<trainer::ExchangeOutcome> PsExchange::Exchange(int64_t step, trainer::FloatBuffer grads,
                                                              trainer::FloatBuffer params) {
  if (!registered_) return absl::FailedPreconditionError("call SyncInitialParameters before Exchange");
  RETURN_IF_ERROR(CheckBuffer(grads, "grads"));
  RETURN_IF_ERROR(CheckBuffer(params, "params"));
  const trainer::FloatBuffer wire_params = ToWire(params, &wire_params_);
  RETURN_IF_ERROR(ExchangeWire(step, ToWire(grads, &wire_grads_), wire_params, /*feed=*/nullptr));
  FromWire(wire_params, params);
  return trainer::ExchangeOutcome::kParametersUpdated;
}

absl::Status PsExchange::BeginStep(int64_t step, trainer::FloatBuffer grads, trainer::FloatBuffer params,
                                   const trainer::BucketPlan& plan) {
  if (!registered_) return absl::FailedPreconditionError("call SyncInitialParameters before BeginStep");
  if (step_thread_.joinable()) {
    return absl::FailedPreconditionError("BeginStep while a bucketed step is open; call FinishStep first");
  }
  RETURN_IF_ERROR(CheckBuffer(grads, "grads"));
  RETURN_IF_ERROR(CheckBuffer(params, "params"));
  if (plan.total() != grads.count) {
    return absl::InvalidArgumentError(absl::StrCat("bucket plan covers ", plan.total(),
                                                   " elements but the gradient has ", grads.count));
  }
  const bool registered_plan =
      layout_plan_.empty() ? plan.buckets().size() == 1 : plan.buckets() == layout_plan_;
  if (!registered_plan) {
    return absl::FailedPreconditionError(absl::StrCat(
        "BeginStep with a plan of ", plan.buckets().size(), " bucket(s) but the servers hold the element layout ",
        layout_.Describe(), ": pass the plan to SetBucketPlan before SyncInitialParameters"));
  }
  plan_ = plan;
  tracker_.Begin(plan_);
  feed_ = BucketFeed{&tracker_, &plan_, grads};
  step_params_ = params;
  // The wire gradient is filled bucket by bucket by the shard streams; the wire parameters must hold this
  // rank's current values (a re-registration or an async reply may rewrite only part of them).
  wire_grads_.resize(grads.count);
  const trainer::FloatBuffer wire_params = ToWire(params, &wire_params_);
  step_wire_params_ = wire_params;
  const trainer::FloatBuffer wire_grads{wire_grads_.data(), wire_grads_.size(), trainer::MemoryKind::kHost};
  step_status_ = absl::OkStatus();
  step_thread_ = std::thread(
      [this, step, wire_grads, wire_params] { step_status_ = ExchangeWire(step, wire_grads, wire_params, &feed_); });
  return absl::OkStatus();
}

void PsExchange::GradientReady(size_t offset, size_t count) { tracker_.Ready(offset, count); }

absl::StatusOr<trainer::ExchangeOutcome> PsExchange::FinishStep() {
  if (!step_thread_.joinable()) return absl::FailedPreconditionError("FinishStep without BeginStep");
  const absl::Status closed = tracker_.Close();
  step_thread_.join();
  RETURN_IF_ERROR(closed);
  RETURN_IF_ERROR(step_status_);
  FromWire(step_wire_params_, step_params_);
  return trainer::ExchangeOutcome::kParametersUpdated;
}

absl::Status PsExchange::ExchangeWire(int64_t step, trainer::FloatBuffer grads, trainer::FloatBuffer params,
                                      const BucketFeed* feed) {
  return ForEachShard([&](Shard* shard) {
    const int64_t pushed_step = shard->next_step;
    absl::Status status = PushPullOnce(shard, step, grads, params, feed);
    const absl::Time give_up = absl::Now() + options_.reconnect_timeout;
    while (NeedsReregistration(status) && absl::Now() < give_up) {
      // The shard restarted (or is restarting): join it again and push this gradient once more. The steps
      // since the shard's last checkpoint are lost, as after any resume from a checkpoint.
      std::fprintf(stderr, "ps rank %d: %s; re-registering\n", options_.rank,
                   std::string(status.message()).c_str());
      RETURN_IF_ERROR(RegisterWithRetries(shard, params));
      if (shard->next_step > pushed_step) {
        // The shard is past the step we pushed: it applied our gradient before the call broke (an async
        // push counted in the rank's clock, or a synchronous step completed and saved before a restart).
        // Pushing it again would apply it twice; registration already gave us the shard's parameters.
        std::fprintf(stderr, "ps rank %d: shard %d already applied step %lld; not pushing it again\n",
                     options_.rank, shard->index, static_cast<long long>(pushed_step));
        status = absl::OkStatus();
        break;
      }
      status = PushPullOnce(shard, step, grads, params, feed);
    }
    if (absl::IsAborted(status)) {
      // Skipped: the other ranks are past this step (see ps/service.h); take the shard's parameters.
      if (shard->skipped++ % kSkipReportEvery == 0) {
        std::fprintf(stderr, "ps rank %d: %s (%lld step(s) skipped on shard %d so far while catching up)\n",
                     options_.rank, std::string(status.message()).c_str(),
                     static_cast<long long>(shard->skipped), shard->index);
      }
      status = PullOnce(shard, params);
    } else if (status.ok()) {
      shard->skipped = 0;
    }
    return status;
  });
}

}  // namespace psring::ps
