// Engine: the MLP's parameters, gradients, optimizer state and scratch on one device (CPU or CUDA), and the
// computations of one training step. The training loop drives an Engine and never touches device memory.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Engine> e, CreateEngine("cpu", layout, /*max_batch=*/128));
//   RETURN_IF_ERROR(e->SetParams(initial));
//   ASSIGN_OR_RETURN(BatchStats s, e->ForwardBackward(images, labels, 128));  // grads() = mean gradient
//   RETURN_IF_ERROR(e->SgdStep({0.03f, 0.9f, 1e-4f}));
//
// Buffers returned by params()/grads() are owned by the engine and stay valid for its lifetime; their
// MemoryKind says where they live. Not thread-safe: one thread drives an engine.
#ifndef PSRING_TRAINER_ENGINE_H_
#define PSRING_TRAINER_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trainer/exchange.h"
#include "trainer/mlp.h"
#include "trainer/optimizer.h"
#include "trainer/timeline.h"

namespace psring::trainer {

// Loss and accuracy of one batch (sums, so they can be added up and averaged across ranks).
struct BatchStats {
  double loss_sum = 0;  // sum over the batch of the per-sample cross-entropy
  int64_t correct = 0;  // samples whose arg-max logit equals the label
  int64_t count = 0;    // samples in the batch
  // Wall time of the forward pass within ForwardBackward* (0 when the engine does not time it apart).
  double forward_seconds = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // "cpu" or "cuda".
  virtual std::string device() const = 0;
  virtual const MlpLayout& layout() const = 0;

  // The flat parameter and gradient buffers (layout().num_params() floats each), on the engine's device.
  virtual FloatBuffer params() = 0;
  virtual FloatBuffer grads() = 0;

  // Host <-> engine copies of the flat buffers; each span holds layout().num_params() floats.
  // Blocking: data is in place when they return.
  virtual absl::Status SetParams(absl::Span<const float> host) = 0;
  virtual absl::Status GetParams(absl::Span<float> host) = 0;
  virtual absl::Status SetGrads(absl::Span<const float> host) = 0;
  virtual absl::Status GetGrads(absl::Span<float> host) = 0;
  virtual absl::Status SetMomentum(absl::Span<const float> host) = 0;
  virtual absl::Status GetMomentum(absl::Span<float> host) = 0;

  // Forward and backward of `batch` host images ([batch, input_dim] floats) with host labels in
  // [0, num_classes). Leaves the gradient of the batch-mean loss in grads(). batch in [1, max_batch].
  virtual absl::StatusOr<BatchStats> ForwardBackward(const float* images, const int32_t* labels,
                                                     int batch) = 0;

  // ForwardBackward for a bucketed exchange (GradientExchange::GradientReady): calls on_ready(offset, count)
  // for each layer's range of grads() (MlpLayout::layer_sizes(), last layer first) as soon as that range is
  // final on the device, while backward goes on with the layers before it. The callback runs on the calling
  // thread and must not block. Records "forward" and "backward/layer <l>" spans on kComputeTrack of
  // `timeline` (never null; Timeline::Disabled() records nothing). The base version reports every layer after
  // the whole backward (and a Synchronize), as one "forward+backward" span: engines that can do better
  // override it — the CPU engine, and the CUDA engine, which records an event per layer on its stream and
  // calls on_ready once that event is done (its spans: "forward" and "backward", host-side enqueue and
  // hand-over time).
  using GradientReadyFn = absl::FunctionRef<void(size_t offset, size_t count)>;
  virtual absl::StatusOr<BatchStats> ForwardBackwardOverlapped(const float* images, const int32_t* labels,
                                                              int batch, GradientReadyFn on_ready,
                                                              Timeline* timeline) {
    BatchStats stats;
    {
      Timeline::Span span(timeline, "forward+backward", kComputeTrack);
      absl::StatusOr<BatchStats> passes = ForwardBackward(images, labels, batch);
      if (!passes.ok()) return passes.status();
      stats = *passes;
      absl::Status synced = Synchronize();
      if (!synced.ok()) return synced;
    }
    const std::vector<LinearSlice>& layers = layout().layers();
    for (size_t l = layers.size(); l-- > 0;) {
      on_ready(layers[l].weight_offset, layers[l].bias_offset + layers[l].out - layers[l].weight_offset);
    }
    return stats;
  }

  // Forward only: copies the logits ([batch, num_classes]) to host. batch in [1, max_batch].
  virtual absl::Status Forward(const float* images, int batch, absl::Span<float> logits) = 0;

  // Forward only, with loss and accuracy (for evaluation). batch in [1, max_batch].
  virtual absl::StatusOr<BatchStats> Evaluate(const float* images, const int32_t* labels, int batch) = 0;

  // params -= SGD-momentum step computed from grads() (see SgdMomentumStep in trainer/optimizer.h for the
  // exact rule).
  virtual absl::Status SgdStep(const SgdOptions& options) = 0;

  // Waits for queued device work (a no-op on CPU); for honest timing.
  virtual absl::Status Synchronize() = 0;

  virtual int max_batch() const = 0;
};

// Makes an engine with zeroed parameters, gradients and momentum on `device` ("cpu" or "cuda").
// kUnavailable when "cuda" is asked for and no usable GPU exists or CUDA is not compiled in.
absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(const std::string& device, const MlpLayout& layout,
                                                     int max_batch);

// Resolves --device: "cpu" -> "cpu"; "cuda" -> "cuda" or an error saying why no GPU is usable;
// "auto" -> "cuda" when a GPU is usable, else "cpu" with `*note` (when not null) saying why it fell back: one
// short line on a host without a GPU, the runtime's reason when a GPU exists but cannot be used.
absl::StatusOr<std::string> ResolveDevice(const std::string& requested, std::string* note);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_ENGINE_H_
