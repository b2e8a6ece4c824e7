#include "trainer/cuda_engine.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/cluster_env.h"
#include "common/status_macros.h"
#include "trainer/cuda_kernels.h"
#include "trainer/cuda_plan.h"
#include "trainer/cuda_status.h"

namespace psring::trainer {
namespace {

// Owns one cudaMalloc'ed array. Move-only.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  // Destructors cannot report errors; freeing memory the runtime handed out does not fail in practice.
  ~DeviceArray() {
    if (data_ != nullptr) (void)cudaFree(data_);
  }

  // Zeroes the array on `stream`: the engine's stream is non-blocking, so a cudaMemset on the legacy default
  // stream would be unordered with the engine's own uploads and could zero data written after it.
  absl::Status Allocate(size_t count, cudaStream_t stream) {
    CUDA_RETURN_IF_ERROR(
        cudaMalloc(reinterpret_cast<void**>(&data_), std::max<size_t>(count, 1) * sizeof(T)));
    count_ = count;
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(data_, 0, count * sizeof(T), stream));
    return absl::OkStatus();
  }

  T* get() const { return data_; }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

class CudaEngine final : public Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const MlpLayout& layout, int max_batch) {
    std::unique_ptr<CudaEngine> engine(new CudaEngine(layout, max_batch));
    RETURN_IF_ERROR(engine->Init());
    return std::unique_ptr<Engine>(std::move(engine));
  }

  ~CudaEngine() override {
    // Best effort at teardown: the engine is going away either way.
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    if (host_totals_ != nullptr) (void)cudaFreeHost(host_totals_);
    for (cudaEvent_t event : layer_done_) (void)cudaEventDestroy(event);
  }

  std::string device() const override { return "cuda"; }
  const MlpLayout& layout() const override { return layout_; }
  int max_batch() const override { return max_batch_; }

  FloatBuffer params() override { return {params_.get(), params_.count(), MemoryKind::kCuda}; }
  FloatBuffer grads() override { return {grads_.get(), grads_.count(), MemoryKind::kCuda}; }

  absl::Status SetParams(absl::Span<const float> host) override { return Upload("params", host, params_); }
  absl::Status GetParams(absl::Span<float> host) override { return Download("params", params_, host); }
  absl::Status SetGrads(absl::Span<const float> host) override { return Upload("grads", host, grads_); }
  absl::Status GetGrads(absl::Span<float> host) override { return Download("grads", grads_, host); }
  absl::Status SetMomentum(absl::Span<const float> host) override {
    return Upload("momentum", host, momentum_);
  }
  absl::Status GetMomentum(absl::Span<float> host) override { return Download("momentum", momentum_, host); }

  absl::StatusOr<BatchStats> ForwardBackward(const float* images, const int32_t* labels, int batch) override {
    RETURN_IF_ERROR(CheckBatch(batch));
    RETURN_IF_ERROR(RunForward(images, batch));
    RETURN_IF_ERROR(EnqueueLoss(labels, batch, Resolve({LogitsGradBuffer(layout_)})));
    RETURN_IF_ERROR(Execute(BackwardPlan(layout_, batch)));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Totals(batch);
  }

  // Each layer's gradient is handed over as soon as the GPU has computed it, so a bucketed exchange moves it
  // while the stream still runs the layers before (overlap on GPU as on CPU). Backward is enqueued layer by
  // layer with an event recorded on the engine's stream after each layer's steps — its weight and bias
  // gradients and the input gradient, the last step that reads its weights — and between enqueues, then
  // at the end, the events are polled in order: on_ready(layer l) runs on this thread once l's event is
  // done, never earlier, never in a CUDA call. The exchange's collectives on their own stream thus read
  // final data without any cross-stream wait.
  absl::StatusOr<BatchStats> ForwardBackwardOverlapped(const float* images, const int32_t* labels, int batch,
                                                      GradientReadyFn on_ready, Timeline* timeline) override {
    RETURN_IF_ERROR(CheckBatch(batch));
    {
      Timeline::Span span(timeline, "forward", kComputeTrack);
      RETURN_IF_ERROR(RunForward(images, batch));
      RETURN_IF_ERROR(EnqueueLoss(labels, batch, Resolve({LogitsGradBuffer(layout_)})));
    }
    Timeline::Span span(timeline, "backward", kComputeTrack);
    const std::vector<LinearSlice>& layers = layout_.layers();
    const std::vector<PlanStep> plan = BackwardPlan(layout_, batch);
    size_t handed = 0;  // layers handed over, last layer first
    size_t first = 0;
    for (size_t recorded = 0; recorded < layers.size(); ++recorded) {
      const int l = static_cast<int>(layers.size() - 1 - recorded);
      size_t end = first;
      while (end < plan.size() && plan[end].layer == l) ++end;
      RETURN_IF_ERROR(Execute(absl::MakeConstSpan(plan).subspan(first, end - first)));
      first = end;
      CUDA_RETURN_IF_ERROR(cudaEventRecord(layer_done_[l], stream_));
      RETURN_IF_ERROR(HandOverDone(recorded + 1, /*wait=*/false, on_ready, &handed));
    }
    RETURN_IF_ERROR(HandOverDone(layers.size(), /*wait=*/true, on_ready, &handed));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // the loss totals' download
    return Totals(batch);
  }

  absl::Status Forward(const float* images, int batch, absl::Span<float> logits) override {
    RETURN_IF_ERROR(CheckBatch(batch));
    const size_t want = static_cast<size_t>(batch) * layout_.num_classes();
    if (logits.size() != want) {
      return absl::InvalidArgumentError(absl::StrCat("logits has ", logits.size(), " floats; need ", want));
    }
    RETURN_IF_ERROR(RunForward(images, batch));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logits.data(), activations_.back().get(), want * sizeof(float),
                                         cudaMemcpyDeviceToHost, stream_));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  absl::StatusOr<BatchStats> Evaluate(const float* images, const int32_t* labels, int batch) override {
    RETURN_IF_ERROR(CheckBatch(batch));
    RETURN_IF_ERROR(RunForward(images, batch));
    RETURN_IF_ERROR(EnqueueLoss(labels, batch, /*dlogits=*/nullptr));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Totals(batch);
  }

  absl::Status SgdStep(const SgdOptions& o) override {
    CUDA_RETURN_IF_ERROR(cuda::SgdMomentumUpdate(params_.get(), grads_.get(), momentum_.get(),
                                                 params_.count(), o.lr, o.momentum, o.weight_decay, stream_));
    return absl::OkStatus();
  }

  absl::Status Synchronize() override {
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

 private:
  CudaEngine(const MlpLayout& layout, int max_batch) : layout_(layout), max_batch_(max_batch) {}

  // Calls on_ready for the layers (last first) from *handed up to `recorded` whose events are done; with
  // `wait`, waits for each in turn.
  absl::Status HandOverDone(size_t recorded, bool wait, GradientReadyFn on_ready, size_t* handed) {
    const std::vector<LinearSlice>& layers = layout_.layers();
    while (*handed < recorded) {
      const LinearSlice& s = layers[layers.size() - 1 - *handed];
      cudaEvent_t event = layer_done_[layers.size() - 1 - *handed];
      if (wait) {
        CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event));
      } else {
        const cudaError_t state = PollEvent(event);
        if (state == cudaErrorNotReady) return absl::OkStatus();
        if (state != cudaSuccess) return CudaStatus(state, "cudaEventQuery", __FILE__, __LINE__);
      }
      on_ready(s.weight_offset, s.bias_offset + s.out - s.weight_offset);
      ++*handed;
    }
    return absl::OkStatus();
  }

  absl::Status Init() {
    CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
    CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_));
    // Full FP32 GEMMs (no TF32), like PyTorch's default, so CPU and GPU agree to float rounding.
    CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    const size_t n = layout_.num_params();
    const size_t rows = static_cast<size_t>(max_batch_);
    RETURN_IF_ERROR(params_.Allocate(n, stream_));
    RETURN_IF_ERROR(grads_.Allocate(n, stream_));
    RETURN_IF_ERROR(momentum_.Allocate(n, stream_));
    for (const LinearSlice& s : layout_.layers()) {
      activations_.emplace_back();
      RETURN_IF_ERROR(activations_.back().Allocate(rows * s.out, stream_));
    }
    for (DeviceArray<float>& delta : deltas_) {
      RETURN_IF_ERROR(delta.Allocate(rows * layout_.max_width(), stream_));
    }
    RETURN_IF_ERROR(input_.Allocate(rows * layout_.input_dim(), stream_));
    RETURN_IF_ERROR(labels_.Allocate(rows, stream_));
    RETURN_IF_ERROR(ones_.Allocate(rows, stream_));
    RETURN_IF_ERROR(Upload("ones", std::vector<float>(rows, 1.0f), ones_));
    RETURN_IF_ERROR(row_loss_.Allocate(rows, stream_));
    RETURN_IF_ERROR(row_hit_.Allocate(rows, stream_));
    RETURN_IF_ERROR(totals_.Allocate(2, stream_));
    CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&host_totals_), 2 * sizeof(double)));
    for (size_t l = 0; l < layout_.layers().size(); ++l) {
      cudaEvent_t event = nullptr;
      CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      layer_done_.push_back(event);
    }
    // Everything above is ordered on stream_; finish it so the engine starts from a known state whichever
    // stream a caller's first copy uses.
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  absl::Status CheckBatch(int batch) const {
    if (batch >= 1 && batch <= max_batch_) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", batch, " samples is outside [1, ", max_batch_, "] for this engine"));
  }

  absl::Status RunForward(const float* images, int batch) {
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(input_.get(), images,
                                         static_cast<size_t>(batch) * layout_.input_dim() * sizeof(float),
                                         cudaMemcpyHostToDevice, stream_));
    return Execute(ForwardPlan(layout_, batch));
  }

  float* Resolve(const PlanOperand& operand) const {
    return Base(operand.buffer, operand.layer) + operand.offset;
  }

  float* Base(PlanBuffer buffer, int layer) const {
    switch (buffer) {
      case PlanBuffer::kParams:
        return params_.get();
      case PlanBuffer::kGrads:
        return grads_.get();
      case PlanBuffer::kInput:
        return input_.get();
      case PlanBuffer::kActivation:
        return activations_[layer].get();
      case PlanBuffer::kDelta0:
        return deltas_[0].get();
      case PlanBuffer::kDelta1:
        return deltas_[1].get();
      case PlanBuffer::kOnes:
        return ones_.get();
    }
    return nullptr;
  }

  // Enqueues the steps on stream_ (cuBLAS is bound to it).
  absl::Status Execute(absl::Span<const PlanStep> plan) {
    const float one = 1.0f, zero = 0.0f;
    for (const PlanStep& p : plan) {
      switch (p.kind) {
        case PlanStep::Kind::kGemm:
          CUBLAS_RETURN_IF_ERROR(cublasSgemm(
              cublas_, p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
              p.m, p.n, p.k, &one, Resolve(p.a), p.lda, Resolve(p.b), p.ldb, &zero, Resolve(p.c), p.ldc));
          break;
        case PlanStep::Kind::kGemv:
          CUBLAS_RETURN_IF_ERROR(cublasSgemv(cublas_, CUBLAS_OP_N, p.m, p.n, &one, Resolve(p.a), p.lda,
                                             Resolve(p.b), 1, &zero, Resolve(p.c), 1));
          break;
        case PlanStep::Kind::kBiasAddRelu:
          CUDA_RETURN_IF_ERROR(cuda::BiasAddRelu(Resolve(p.c), Resolve(p.a), p.n, p.m, p.relu, stream_));
          break;
        case PlanStep::Kind::kReluBackward:
          CUDA_RETURN_IF_ERROR(
              cuda::ReluBackward(Resolve(p.a), Resolve(p.c), static_cast<size_t>(p.m) * p.n, stream_));
          break;
      }
    }
    return absl::OkStatus();
  }

  BatchStats Totals(int batch) const {
    BatchStats stats;
    stats.loss_sum = host_totals_[0];
    stats.correct = static_cast<int64_t>(host_totals_[1] + 0.5);
    stats.count = batch;
    return stats;
  }

  absl::Status Upload(const char* what, absl::Span<const float> host, const DeviceArray<float>& dst) {
    return Transfer(what, host.size(), dst, dst.get(), host.data(), cudaMemcpyHostToDevice);
  }

  absl::Status Download(const char* what, const DeviceArray<float>& src, absl::Span<float> host) {
    return Transfer(what, host.size(), src, host.data(), src.get(), cudaMemcpyDeviceToHost);
  }

  // Copies a whole flat buffer between host and `device` (one of dst/src) and waits for it.
  absl::Status Transfer(const char* what, size_t host_count, const DeviceArray<float>& device, void* dst,
                        const void* src, cudaMemcpyKind kind) {
    if (host_count != device.count()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has ", host_count, " floats; the model needs ", device.count()));
    }
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, device.bytes(), kind, stream_));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  // Enqueues the labels' upload, the fused softmax cross-entropy (with its gradient into `dlogits` when not
  // null) and the loss/hit totals' download into host_totals_.
  absl::Status EnqueueLoss(const int32_t* labels, int batch, float* dlogits) {
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(labels_.get(), labels, batch * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
    CUDA_RETURN_IF_ERROR(cuda::SoftmaxCrossEntropy(activations_.back().get(), labels_.get(), batch,
                                                   layout_.num_classes(), dlogits, row_loss_.get(),
                                                   row_hit_.get(), stream_));
    CUDA_RETURN_IF_ERROR(cuda::SumRows(row_loss_.get(), row_hit_.get(), batch, totals_.get(), stream_));
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host_totals_, totals_.get(), 2 * sizeof(double), cudaMemcpyDeviceToHost, stream_));
    return absl::OkStatus();
  }

  MlpLayout layout_;
  int max_batch_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceArray<float> params_;
  DeviceArray<float> grads_;
  DeviceArray<float> momentum_;
  std::vector<DeviceArray<float>> activations_;  // per layer output (post-ReLU for hidden layers)
  DeviceArray<float> deltas_[2];                 // PlanBuffer::kDelta0 and kDelta1
  DeviceArray<float> input_;
  DeviceArray<int32_t> labels_;
  DeviceArray<float> ones_;  // max_batch ones, for the bias gradient
  DeviceArray<float> row_loss_;
  DeviceArray<float> row_hit_;
  DeviceArray<double> totals_;
  double* host_totals_ = nullptr;  // pinned
  std::vector<cudaEvent_t> layer_done_;  // per layer: its backward is done (ForwardBackwardOverlapped)
};

}  // namespace

bool CudaCompiledIn() { return true; }

absl::Status ProbeCuda() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // reported here, so no later launch check picks it up
    const std::string reason = absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorString(err), " (",
                                            cudaGetErrorName(err), ", error ", static_cast<int>(err), ")");
    // No driver or no device: a host without a GPU, not a broken one.
    const bool no_gpu = err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice;
    return no_gpu ? absl::NotFoundError(reason) : absl::UnavailableError(reason);
  }
  if (count == 0) return absl::NotFoundError("cudaGetDeviceCount found no CUDA device");
  // Creating the context catches devices that exist but cannot be used (exclusive mode, broken driver).
  const cudaError_t init = cudaFree(nullptr);
  if (init != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("initialising CUDA: ", cudaGetErrorString(init), " (",
                                               cudaGetErrorName(init), ", error ", static_cast<int>(init),
                                               ")"));
  }
  return absl::OkStatus();
}

absl::Status SelectCudaDevice(int local_rank, const std::string& local_rank_source) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // clear it; ProbeCuda() reports the reason where a GPU is needed
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const int device, DeviceForLocalRank(local_rank, local_rank_source, count,
                                                        std::getenv("CUDA_VISIBLE_DEVICES")));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  return absl::OkStatus();
}

std::string CudaDeviceIdentity() {
  int device = 0;
  char bus_id[32] = {};
  if (!ProbeCuda().ok() || cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device) != cudaSuccess) {
    (void)cudaGetLastError();  // no identity is the answer; nothing to report
    return "";
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "";
  return absl::StrCat(host, ":", bus_id);
}

absl::StatusOr<std::shared_ptr<float>> AllocateCudaFloats(size_t count) {
  RETURN_IF_ERROR(ProbeCuda());
  float* data = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&data), std::max<size_t>(count, 1) * sizeof(float)));
  return std::shared_ptr<float>(data, [](float* p) { (void)cudaFree(p); });
}

namespace {

// A copy on a stream of its own (never the legacy default stream), waited for.
absl::Status CopyAndWait(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  cudaStream_t stream = nullptr;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, kind, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  (void)cudaStreamDestroy(stream);
  CUDA_RETURN_IF_ERROR(err);
  return absl::OkStatus();
}

}  // namespace

absl::Status CopyFloatsToCuda(float* device, const float* host, size_t count) {
  return CopyAndWait(device, host, count * sizeof(float), cudaMemcpyHostToDevice);
}

absl::Status CopyFloatsFromCuda(float* host, const float* device, size_t count) {
  return CopyAndWait(host, device, count * sizeof(float), cudaMemcpyDeviceToHost);
}

absl::StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(const MlpLayout& layout, int max_batch) {
  RETURN_IF_ERROR(ProbeCuda());
  if (max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_batch must be at least 1, got ", max_batch));
  }
  return CudaEngine::Create(layout, max_batch);
}

}  // namespace psring::trainer
