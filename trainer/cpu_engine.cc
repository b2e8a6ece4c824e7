#include "trainer/cpu_engine.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "trainer/cpu_kernels.h"
#include "trainer/optimizer.h"

namespace psring::trainer {
namespace {

absl::Status CheckSize(const char* what, size_t got, size_t want) {
  if (got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " has ", got, " floats; the model needs ", want));
}

class CpuEngine final : public Engine {
 public:
  CpuEngine(const MlpLayout& layout, int max_batch)
      : layout_(layout),
        max_batch_(max_batch),
        params_(layout.num_params()),
        grads_(layout.num_params()),
        momentum_(layout.num_params()),
        delta_(static_cast<size_t>(max_batch) * layout.max_width()),
        delta_prev_(static_cast<size_t>(max_batch) * layout.max_width()) {
    for (const LinearSlice& s : layout_.layers())
      activations_.emplace_back(static_cast<size_t>(max_batch) * s.out);
  }

  std::string device() const override { return "cpu"; }
  const MlpLayout& layout() const override { return layout_; }
  int max_batch() const override { return max_batch_; }

  FloatBuffer params() override { return {params_.data(), params_.size(), MemoryKind::kHost}; }
  FloatBuffer grads() override { return {grads_.data(), grads_.size(), MemoryKind::kHost}; }

  absl::Status SetParams(absl::Span<const float> host) override { return CopyIn("params", host, &params_); }
  absl::Status GetParams(absl::Span<float> host) override { return CopyOut("params", params_, host); }
  absl::Status SetGrads(absl::Span<const float> host) override { return CopyIn("grads", host, &grads_); }
  absl::Status GetGrads(absl::Span<float> host) override { return CopyOut("grads", grads_, host); }
  absl::Status SetMomentum(absl::Span<const float> host) override {
    return CopyIn("momentum", host, &momentum_);
  }
  absl::Status GetMomentum(absl::Span<float> host) override { return CopyOut("momentum", momentum_, host); }

  absl::StatusOr<BatchStats> ForwardBackward(const float* images, const int32_t* labels, int batch) override {
    return ForwardBackwardOverlapped(images, labels, batch, [](size_t, size_t) {}, Timeline::Disabled());
  }

  // Each layer's gradient is complete once LinearBackward returns for it: it is handed over right then,
  // while the layers before it are still to go. LinearBackward only reads the layer's own weights, and
  // the ReLU backward only activations, so an exchange may take over the layer's ranges of grads and params.
  absl::StatusOr<BatchStats> ForwardBackwardOverlapped(const float* images, const int32_t* labels, int batch,
                                                      GradientReadyFn on_ready, Timeline* timeline) override {
    if (batch < 1 || batch > max_batch_) return BatchError(batch);
    const auto forward_start = std::chrono::steady_clock::now();
    {
      Timeline::Span span(timeline, "forward", kComputeTrack);
      RunForward(images, batch);
    }
    BatchStats stats;
    stats.count = batch;
    const std::vector<LinearSlice>& layers = layout_.layers();
    const int classes = layout_.num_classes();
    stats.loss_sum = cpu::SoftmaxCrossEntropy(activations_.back().data(), labels, batch, classes,
                                              delta_.data(), &stats.correct);
    stats.forward_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count();
    for (size_t l = layers.size(); l-- > 0;) {
      const LinearSlice& s = layers[l];
      {
        Timeline::Span span(timeline, timeline->enabled() ? absl::StrCat("backward/layer ", l) : "",
                            kComputeTrack);
        const float* input = l == 0 ? images : activations_[l - 1].data();
        float* dx = l == 0 ? nullptr : delta_prev_.data();
        cpu::LinearBackward(input, params_.data() + s.weight_offset, delta_.data(), batch, s.in, s.out, dx,
                            grads_.data() + s.weight_offset, grads_.data() + s.bias_offset);
        if (l > 0) {
          cpu::ReluBackward(activations_[l - 1].data(), delta_prev_.data(),
                            static_cast<size_t>(batch) * s.in);
          std::swap(delta_, delta_prev_);
        }
      }
      on_ready(s.weight_offset, s.bias_offset + s.out - s.weight_offset);
    }
    return stats;
  }

  absl::Status Forward(const float* images, int batch, absl::Span<float> logits) override {
    if (batch < 1 || batch > max_batch_) return BatchError(batch);
    const size_t want = static_cast<size_t>(batch) * layout_.num_classes();
    if (logits.size() != want) return CheckSize("logits", logits.size(), want);
    RunForward(images, batch);
    std::copy(activations_.back().begin(), activations_.back().begin() + want, logits.begin());
    return absl::OkStatus();
  }

  absl::StatusOr<BatchStats> Evaluate(const float* images, const int32_t* labels, int batch) override {
    if (batch < 1 || batch > max_batch_) return BatchError(batch);
    RunForward(images, batch);
    BatchStats stats;
    stats.count = batch;
    stats.loss_sum = cpu::SoftmaxCrossEntropy(activations_.back().data(), labels, batch,
                                              layout_.num_classes(), nullptr, &stats.correct);
    return stats;
  }

  absl::Status SgdStep(const SgdOptions& o) override {
    SgdMomentumStep(o, grads_.data(), params_.data(), momentum_.data(), params_.size());
    return absl::OkStatus();
  }

  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
  absl::Status BatchError(int batch) const {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", batch, " samples is outside [1, ", max_batch_, "] for this engine"));
  }

  void RunForward(const float* images, int batch) {
    const std::vector<LinearSlice>& layers = layout_.layers();
    for (size_t l = 0; l < layers.size(); ++l) {
      const LinearSlice& s = layers[l];
      const float* input = l == 0 ? images : activations_[l - 1].data();
      float* out = activations_[l].data();
      cpu::LinearForward(input, params_.data() + s.weight_offset, params_.data() + s.bias_offset, batch, s.in,
                         s.out, out);
      if (l + 1 < layers.size()) cpu::ReluForward(out, static_cast<size_t>(batch) * s.out);
    }
  }

  static absl::Status CopyIn(const char* what, absl::Span<const float> host, std::vector<float>* dst) {
    if (host.size() != dst->size()) return CheckSize(what, host.size(), dst->size());
    std::copy(host.begin(), host.end(), dst->begin());
    return absl::OkStatus();
  }

  static absl::Status CopyOut(const char* what, const std::vector<float>& src, absl::Span<float> host) {
    if (host.size() != src.size()) return CheckSize(what, host.size(), src.size());
    std::copy(src.begin(), src.end(), host.begin());
    return absl::OkStatus();
  }

  MlpLayout layout_;
  int max_batch_;
  std::vector<float> params_;
  std::vector<float> grads_;
  std::vector<float> momentum_;
  std::vector<std::vector<float>> activations_;  // per layer output (post-ReLU for hidden layers)
  std::vector<float> delta_;                     // dL/d(current layer output)
  std::vector<float> delta_prev_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreateCpuEngine(const MlpLayout& layout, int max_batch) {
  if (max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_batch must be at least 1, got ", max_batch));
  }
  return std::unique_ptr<Engine>(new CpuEngine(layout, max_batch));
}

}  // namespace psring::trainer
