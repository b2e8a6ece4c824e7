// GradientExchange: the one seam between the trainer and the way gradients cross the network.
//
// The trainer never knows which exchange it has: the ring (ring/), the parameter server (ps/) or the local
// no-op (world size 1). A factory in each binary picks one from --exchange.
//
//   std::unique_ptr<GradientExchange> ex = ...;           // ring, ps or LocalExchange
//   RETURN_IF_ERROR(ex->SyncInitialParameters(params));   // every rank starts from the same weights
//   const bool trainer_steps = ex->optimizer().owner == OptimizerOwner::kTrainer;
//   for (int64_t step = 0; ...; ++step) {
//     ... forward/backward into grads ...
//     RETURN_IF_ERROR(ex->Exchange(step, grads, params).status());
//     if (trainer_steps) optimizer.Step(params, grads);    // else the servers did, params are new
//   }
//
// Bucketed, overlapped steps (PyTorch DDP's Reducer semantics; --bucket_mb): the same step split in three
// calls, so that the exchange moves the gradient bucket by bucket while backward is still running.
//
//   ASSIGN_OR_RETURN(BucketPlan plan, BucketPlan::Create(layer_sizes_in_forward_order, bucket_mb));
//   RETURN_IF_ERROR(ex->SetBucketPlan(plan, "--bucket_mb=25"));   // once, before SyncInitialParameters
//   ...
//   RETURN_IF_ERROR(ex->BeginStep(step, grads, params, plan));
//   for (layer = last .. first) {                        // backward
//     ... write layer's gradient into grads ...
//     ex->GradientReady(layer.offset, layer.count);      // never blocks; a full bucket starts moving
//   }
//   ASSIGN_OR_RETURN(ExchangeOutcome outcome, ex->FinishStep());  // blocks until every bucket is back
//
// Exchange(step, grads, params) and BeginStep + GradientReady(0, all) + FinishStep() leave the same
// result (bit for bit for the PS, within float rounding for the ring, whose per-bucket block partition sums
// in a different order).
#ifndef PSRING_TRAINER_EXCHANGE_H_
#define PSRING_TRAINER_EXCHANGE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/optimizer.h"
#include "trainer/timeline.h"

namespace psring::trainer {

// Where a buffer lives.
enum class MemoryKind { kHost, kCuda };

// A flat float32 buffer the caller owns; the exchange reads/writes it only during a call.
struct FloatBuffer {
  float* data = nullptr;
  size_t count = 0;
  MemoryKind memory = MemoryKind::kHost;
  size_t bytes() const { return count * sizeof(float); }
};

// What Exchange() did with the buffers: always kGradientsAveraged when the trainer owns the optimizer and
// kParametersUpdated when a server does (see OptimizerOwner).
enum class ExchangeOutcome {
  // `grads` now holds the mean of all ranks' gradients; the trainer applies its optimizer.
  kGradientsAveraged,
  // `params` now holds new parameters computed remotely (the PS applies the optimizer server-side).
  kParametersUpdated,
};

// Who applies the optimizer step, and so who holds its state (the momentum buffer).
enum class OptimizerOwner {
  // Exchange() averages the gradients; every rank steps its own copy of the optimizer (ring, local). The
  // trainer's checkpoint holds the whole state.
  kTrainer,
  // Exchange() sends the gradient to servers that step the optimizer and return the new parameters (PS).
  // The momentum never reaches the trainer: only the servers can checkpoint and resume it.
  kServer,
};

// How servers that own the optimizer turn the ranks' pushes into optimizer steps.
enum class ServerUpdate {
  // One step per training step on the mean of the N pushes (summed in rank order, then divided by N).
  kMeanPerStep,
  // One step per push, in arrival order, on gradient / N with weight_decay / N (bounded-staleness async).
  kEachPush,
  // One step per training step on the mean of the first N - B pushes that arrive whole (backup workers,
  // summed in rank order, then divided by N - B); the step's other pushes are dropped (PS sync, ps/service.h).
  kMeanOfFirstPushes,
};

struct OptimizerInfo {
  OptimizerOwner owner = OptimizerOwner::kTrainer;
  // kServer only: the update rule and the hyperparameters the servers apply.
  ServerUpdate server_update = ServerUpdate::kMeanPerStep;
  SgdOptions server_hyperparameters;
};

// A contiguous range of the flat gradient buffer, in elements.
struct FloatRange {
  size_t offset = 0;
  size_t count = 0;
  size_t end() const { return offset + count; }
  bool operator==(const FloatRange& o) const { return offset == o.offset && count == o.count; }
};

// Mebibytes -> bytes, as --bucket_mb counts them (DDP's bucket_cap_mb is MiB too).
constexpr double kBytesPerMb = 1024.0 * 1024.0;
// DDP's first bucket: small, so the exchange starts as soon as the last layers' gradients are ready.
constexpr double kDefaultFirstBucketMb = 1.0;

// Which whole layers travel together, in the order they become ready (last layer first). Immutable,
// cheap to copy, thread-compatible. Every element of [0, total) is in exactly one bucket; a bucket is a
// contiguous range because layers are contiguous in forward order and a bucket holds consecutive layers.
//
// Assignment (pure, DDP's compute_bucket_assignment_by_size for one dtype and device, as its Reducer rebuilds
// the buckets in the order gradients become ready): layers are taken in reverse forward order; each layer joins
// the open bucket, and the bucket closes as soon as it holds >= its cap (so a bucket may end up to one layer
// above its cap, and the last bucket, which holds the first layers, is whatever is left). The first bucket's
// cap is min(first_bucket_mb, bucket_mb), every other bucket's is bucket_mb (caps in bytes, MiB truncated as
// DDP's int(cap_mb * 1024 * 1024)); a layer at least as large as the cap closes the bucket it joins.
// bucket_mb == 0: one bucket over everything, exchanged after backward (flat(), today's behaviour).
class BucketPlan {
 public:
  // One bucket covering [0, total) (what --bucket_mb=0 means).
  static BucketPlan Flat(size_t total);
  // `layers`: each layer's element count, in forward order, laid out back to back from offset 0.
  // kInvalidArgument when bucket_mb or first_bucket_mb is negative or not finite, or a layer is empty.
  static absl::StatusOr<BucketPlan> Create(absl::Span<const size_t> layers, double bucket_mb,
                                           double first_bucket_mb = kDefaultFirstBucketMb);

  // In ready (= launch) order: buckets()[0] holds the last layers (highest offsets).
  const std::vector<FloatRange>& buckets() const { return buckets_; }
  size_t total() const { return total_; }
  // True when the plan is one bucket exchanged after backward (nothing to overlap).
  bool flat() const { return flat_; }
  // Index into buckets() of the bucket holding element `offset` (< total()).
  int BucketOf(size_t offset) const;

 private:
  BucketPlan() = default;
  std::vector<FloatRange> buckets_;
  size_t total_ = 0;
  bool flat_ = true;
};

// Interface implemented by every exchange. All calls block until done, fail or time out (each
// implementation takes its timeout in its options). Not thread-safe: one training thread calls it.
class GradientExchange {
 public:
  virtual ~GradientExchange() = default;

  // Short name for logs and tables: "local", "ring-tcp", "ring-nccl", "ps-sync", "ps-async". Only for people
  // to read: what the caller must do differently follows from optimizer(), never from the name.
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // True when the buffers may live in CUDA memory (NCCL). When false the trainer stages through host memory.
  virtual bool AcceptsDeviceMemory() const { return false; }

  // Who owns the optimizer, and for servers how they apply pushes. The owner is fixed at construction; a
  // PS learns the update rule from the servers, so server_update is final only after SyncInitialParameters.
  virtual OptimizerInfo optimizer() const = 0;

  // Payload bytes this rank sent / received over the network since the exchange was created (0 when nothing
  // crosses a network). Callers take differences around the steps they measure.
  virtual uint64_t bytes_sent() const = 0;
  virtual uint64_t bytes_received() const = 0;

  // The bucket plan every BeginStep of this job will pass (BucketPlan::Flat when steps are flat), and the
  // settings that chose it, for messages ("--bucket_mb=25"). Call before SyncInitialParameters, with the same
  // plan on every rank: an exchange whose servers place the elements by bucket (the PS, ps/shard_layout.h)
  // fixes that placement when it registers, and its servers refuse a worker whose plan differs. Others ignore
  // it (the default). kInvalidArgument for a plan the exchange cannot take, kFailedPrecondition after
  // SyncInitialParameters.
  virtual absl::Status SetBucketPlan(const BucketPlan& plan, absl::string_view settings) {
    return absl::OkStatus();
  }

  // Makes `params` identical on every rank before training (ring: rank 0's values, as DDP broadcasts;
  // PS: the server's, which it takes from the first worker that registers or from its checkpoint).
  virtual absl::Status SyncInitialParameters(FloatBuffer params) = 0;

  // One synchronous (or bounded-stale) step. `grads` is this rank's gradient, the mean over its local batch.
  // `step` counts from 0 and is identical on every rank. See ExchangeOutcome for what it leaves behind.
  virtual absl::StatusOr<ExchangeOutcome> Exchange(int64_t step, FloatBuffer grads, FloatBuffer params) = 0;

  // The same step, bucketed and overlapped with backward (see the file comment). Calling protocol, on the
  // training thread: BeginStep, then GradientReady for every range of `grads` as backward writes it (any
  // order, each element once; each call covers whole layers of `plan`), then FinishStep. Until FinishStep
  // returns, the exchange may read and write the ranges declared ready, of `grads` and of `params`, from its
  // own communication thread(s): the caller must not touch them (it may still read `params` outside them,
  // as backward does for the layers before). After FinishStep the buffers are the caller's again.
  // Every rank passes the same plan (buckets are exchanged in plan order on every rank, whatever order
  // their gradients become ready in, so collectives cannot deadlock); the exchange copies it. BeginStep
  // while a step is open is kFailedPrecondition; a plan whose total differs from grads.count is
  // kInvalidArgument.
  //
  // The base implementation is the flat fallback: FinishStep() runs Exchange() on the whole buffer once
  // backward is done. Exchanges that overlap override all three (SupportsBuckets() true).
  virtual bool SupportsBuckets() const { return false; }
  // Blocks only for set-up (e.g. opening the step's streams); errors are the exchange's.
  virtual absl::Status BeginStep(int64_t step, FloatBuffer grads, FloatBuffer params, const BucketPlan& plan) {
    pending_ = PendingStep{step, grads, params, true};
    return absl::OkStatus();
  }
  // Never blocks: grads[offset, offset + count) is final for this step; a bucket whose last range arrives
  // is queued for the communication thread.
  virtual void GradientReady(size_t offset, size_t count) {}
  // Blocks until every bucket is exchanged (and, for a server-owned optimizer, the new parameters are in
  // `params`); returns the step's outcome as Exchange() does, or the first bucket's error. Called once per
  // BeginStep, also after an error (it then waits for the communication thread to stop using the buffers).
  virtual absl::StatusOr<ExchangeOutcome> FinishStep() {
    if (!pending_.open) return absl::FailedPreconditionError("FinishStep without BeginStep");
    pending_.open = false;
    return Exchange(pending_.step, pending_.grads, pending_.params);
  }

  // Where the exchange records its spans (each bucket's phases, waits); never null. Set before the first
  // step; the recorder must outlive the exchange. Default: Timeline::Disabled().
  void set_timeline(Timeline* timeline) { timeline_ = timeline != nullptr ? timeline : Timeline::Disabled(); }
  Timeline* timeline() const { return timeline_; }

  // Replaces each host value with its mean across ranks (loss, accuracy, sample counts).
  virtual absl::Status AverageMetrics(absl::Span<double> values) = 0;

  // Steps the job closed without this rank since the last call, which the trainer skips (its step count
  // then stays the job's, so every rank reaches its barriers at the same step). Only a PS with backup
  // workers closes steps without a rank; every other exchange returns 0.
  virtual int64_t TakeSkippedSteps() { return 0; }

  // Returns when every rank has called Barrier().
  virtual absl::Status Barrier() = 0;

  // Server-owned optimizer: overwrites `params` with the servers' current parameters without pushing (e.g.
  // after a Barrier, to read the result of every rank's pushes). kFailedPrecondition when the trainer owns
  // the optimizer: the parameters then live in the trainer, not behind the exchange.
  virtual absl::Status PullParameters(FloatBuffer params) {
    return absl::FailedPreconditionError(
        absl::StrCat("exchange ", name(), " keeps no parameters (the trainer owns the optimizer)"));
  }

 private:
  // The flat fallback's step between BeginStep and FinishStep.
  struct PendingStep {
    int64_t step = 0;
    FloatBuffer grads;
    FloatBuffer params;
    bool open = false;
  };
  PendingStep pending_;
  Timeline* timeline_ = Timeline::Disabled();
};

// World size 1: nothing crosses a network. Used by //trainer:train.
class LocalExchange final : public GradientExchange {
 public:
  std::string name() const override { return "local"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  bool AcceptsDeviceMemory() const override { return true; }
  OptimizerInfo optimizer() const override { return OptimizerInfo{OptimizerOwner::kTrainer}; }
  uint64_t bytes_sent() const override { return 0; }
  uint64_t bytes_received() const override { return 0; }
  absl::Status SyncInitialParameters(FloatBuffer) override { return absl::OkStatus(); }
  absl::StatusOr<ExchangeOutcome> Exchange(int64_t, FloatBuffer, FloatBuffer) override {
    return ExchangeOutcome::kGradientsAveraged;
  }
  absl::Status AverageMetrics(absl::Span<double>) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_EXCHANGE_H_
