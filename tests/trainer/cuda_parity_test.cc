// CPU vs CUDA engines: forward, backward, optimizer step and a short training run agree to float rounding.
// Skips without a usable GPU (or when CUDA is not compiled in); fails instead with PSRING_REQUIRE_GPU=1.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/gpu.h"
#include "trainer/cpu_engine.h"
#include "trainer/cuda_engine.h"
#include "trainer/exchange.h"
#include "trainer/mlp.h"
#include "trainer/random.h"
#include "trainer/train.h"

namespace psring::trainer {
namespace {

void ExpectAllNear(const std::vector<float>& cpu, const std::vector<float>& gpu, double rel,
                   const char* what) {
  ASSERT_EQ(cpu.size(), gpu.size());
  double scale = 0;
  for (float v : cpu) scale = std::max(scale, static_cast<double>(std::abs(v)));
  int reported = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (std::abs(cpu[i] - gpu[i]) > rel * std::max(scale, 1e-6) && reported++ < 10) {
      ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << " vs cuda " << gpu[i] << " (scale " << scale
                    << ")";
    }
  }
}

class CudaParityTest : public ::testing::TestWithParam<std::vector<int>> {
 protected:
  void SetUp() override {
    const absl::Status probe = ProbeCuda();
    if (!probe.ok()) PSRING_SKIP_WITHOUT_GPU() << "no usable GPU: " << probe;
    absl::StatusOr<MlpLayout> layout = MlpLayout::Create(784, GetParam(), 10);
    ASSERT_TRUE(layout.ok()) << layout.status();
    layout_ = std::make_unique<MlpLayout>(*layout);
    absl::StatusOr<std::unique_ptr<Engine>> cpu = CreateCpuEngine(*layout_, kBatch);
    absl::StatusOr<std::unique_ptr<Engine>> gpu = CreateCudaEngine(*layout_, kBatch);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    cpu_ = std::move(cpu).value();
    gpu_ = std::move(gpu).value();
    EXPECT_EQ(gpu_->params().memory, MemoryKind::kCuda);
    params_.resize(layout_->num_params());
    InitParameters(*layout_, 5, absl::MakeSpan(params_));
    ASSERT_TRUE(cpu_->SetParams(params_).ok());
    ASSERT_TRUE(gpu_->SetParams(params_).ok());
    Rng rng(9);
    images_.resize(kBatch * 784);
    for (float& v : images_) v = rng.Normal();
    for (int i = 0; i < kBatch; ++i) labels_.push_back(static_cast<int32_t>(rng.Below(10)));
  }

  std::vector<float> Get(Engine* e, absl::Status (Engine::*get)(absl::Span<float>)) {
    std::vector<float> v(layout_->num_params());
    EXPECT_TRUE((e->*get)(absl::MakeSpan(v)).ok());
    return v;
  }

  static constexpr int kBatch = 100;  // not a multiple of the kernels' block size
  std::unique_ptr<MlpLayout> layout_;
  std::unique_ptr<Engine> cpu_;
  std::unique_ptr<Engine> gpu_;
  std::vector<float> params_;
  std::vector<float> images_;
  std::vector<int32_t> labels_;
};

TEST_P(CudaParityTest, ParametersRoundTrip) { EXPECT_EQ(Get(gpu_.get(), &Engine::GetParams), params_); }

TEST_P(CudaParityTest, Forward) {
  std::vector<float> a(kBatch * 10), b(kBatch * 10);
  ASSERT_TRUE(cpu_->Forward(images_.data(), kBatch, absl::MakeSpan(a)).ok());
  ASSERT_TRUE(gpu_->Forward(images_.data(), kBatch, absl::MakeSpan(b)).ok());
  ExpectAllNear(a, b, 1e-4, "logits");
  absl::StatusOr<BatchStats> ea = cpu_->Evaluate(images_.data(), labels_.data(), kBatch);
  absl::StatusOr<BatchStats> eb = gpu_->Evaluate(images_.data(), labels_.data(), kBatch);
  ASSERT_TRUE(ea.ok() && eb.ok()) << eb.status();
  EXPECT_NEAR(ea->loss_sum, eb->loss_sum, 1e-4 * ea->loss_sum);
  EXPECT_EQ(ea->correct, eb->correct);
  EXPECT_EQ(eb->count, kBatch);
}

TEST_P(CudaParityTest, BackwardAndOneOptimizerStep) {
  absl::StatusOr<BatchStats> sa = cpu_->ForwardBackward(images_.data(), labels_.data(), kBatch);
  absl::StatusOr<BatchStats> sb = gpu_->ForwardBackward(images_.data(), labels_.data(), kBatch);
  ASSERT_TRUE(sa.ok() && sb.ok()) << sb.status();
  EXPECT_NEAR(sa->loss_sum, sb->loss_sum, 1e-4 * sa->loss_sum);
  EXPECT_EQ(sa->correct, sb->correct);
  ExpectAllNear(Get(cpu_.get(), &Engine::GetGrads), Get(gpu_.get(), &Engine::GetGrads), 1e-4, "grads");
  // The optimizer from identical gradients and momentum.
  const std::vector<float> grads = Get(cpu_.get(), &Engine::GetGrads);
  ASSERT_TRUE(gpu_->SetGrads(grads).ok());
  std::vector<float> velocity(grads.size());
  for (size_t i = 0; i < velocity.size(); ++i) velocity[i] = 0.01f * std::sin(static_cast<float>(i));
  ASSERT_TRUE(cpu_->SetMomentum(velocity).ok());
  ASSERT_TRUE(gpu_->SetMomentum(velocity).ok());
  const SgdOptions sgd{0.05f, 0.9f, 5e-4f};
  ASSERT_TRUE(cpu_->SgdStep(sgd).ok());
  ASSERT_TRUE(gpu_->SgdStep(sgd).ok());
  // The update itself is exact: same operations, same order, no fused multiply-add on either side.
  EXPECT_EQ(Get(cpu_.get(), &Engine::GetParams), Get(gpu_.get(), &Engine::GetParams));
  EXPECT_EQ(Get(cpu_.get(), &Engine::GetMomentum), Get(gpu_.get(), &Engine::GetMomentum));
}

TEST_P(CudaParityTest, SoftmaxIsStableForHugeLogits) {
  // Large weights give logits in the thousands: exp would overflow without the max shift.
  std::vector<float> big = params_;
  for (float& v : big) v *= 300.0f;
  ASSERT_TRUE(gpu_->SetParams(big).ok());
  absl::StatusOr<BatchStats> s = gpu_->ForwardBackward(images_.data(), labels_.data(), kBatch);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(std::isfinite(s->loss_sum));
  for (float g : Get(gpu_.get(), &Engine::GetGrads)) ASSERT_TRUE(std::isfinite(g));
}

TEST_P(CudaParityTest, RejectsBadBatch) {
  EXPECT_EQ(gpu_->ForwardBackward(images_.data(), labels_.data(), kBatch + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Widths, CudaParityTest,
                         ::testing::Values(std::vector<int>{256, 256}, std::vector<int>{300},
                                           std::vector<int>{}));

TEST(CudaTrainParityTest, ShortTrainingRunsAgree) {
  const absl::Status probe = ProbeCuda();
  if (!probe.ok()) PSRING_SKIP_WITHOUT_GPU() << "no usable GPU: " << probe;
  TrainOptions o;
  o.hidden = {64, 32};
  o.batch_size = 64;
  o.epochs = 1;
  o.dataset = "synthetic";
  o.synthetic_samples = 1280;  // 20 steps
  o.log_every = 0;
  LocalExchange local;
  o.device = "cpu";
  absl::StatusOr<TrainResult> cpu = Train(o, &local);
  o.device = "cuda";
  absl::StatusOr<TrainResult> gpu = Train(o, &local);
  ASSERT_TRUE(cpu.ok() && gpu.ok()) << gpu.status();
  EXPECT_EQ(gpu->device, "cuda");
  ExpectAllNear(cpu->params, gpu->params, 1e-3, "trained params");
  EXPECT_NEAR(cpu->test_accuracy, gpu->test_accuracy, 0.01);
}

// World size 1 like LocalExchange, but host memory only, so Train() must stage the CUDA buffers through host.
class HostOnlyExchange final : public GradientExchange {
 public:
  std::string name() const override { return "host-only"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  bool AcceptsDeviceMemory() const override { return false; }
  OptimizerInfo optimizer() const override { return OptimizerInfo{OptimizerOwner::kTrainer}; }
  uint64_t bytes_sent() const override { return 0; }
  uint64_t bytes_received() const override { return 0; }
  absl::Status SyncInitialParameters(FloatBuffer params) override { return CheckHost(params); }
  absl::StatusOr<ExchangeOutcome> Exchange(int64_t, FloatBuffer grads, FloatBuffer params) override {
    absl::Status s = CheckHost(grads);
    if (s.ok()) s = CheckHost(params);
    if (!s.ok()) return s;
    ++exchanges;
    return ExchangeOutcome::kGradientsAveraged;
  }
  absl::Status AverageMetrics(absl::Span<double>) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }

  int exchanges = 0;

 private:
  static absl::Status CheckHost(FloatBuffer b) {
    if (b.memory != MemoryKind::kHost)
      return absl::InternalError("device buffer passed to a host-only exchange");
    return absl::OkStatus();
  }
};

TEST(CudaTrainParityTest, StagingThroughHostGivesTheSameRun) {
  const absl::Status probe = ProbeCuda();
  if (!probe.ok()) PSRING_SKIP_WITHOUT_GPU() << "no usable GPU: " << probe;
  TrainOptions o;
  o.hidden = {64};
  o.batch_size = 32;
  o.epochs = 1;
  o.device = "cuda";
  o.dataset = "synthetic";
  o.synthetic_samples = 320;
  o.log_every = 0;
  o.evaluate = false;
  LocalExchange local;
  HostOnlyExchange host_only;
  absl::StatusOr<TrainResult> direct = Train(o, &local);
  absl::StatusOr<TrainResult> staged = Train(o, &host_only);
  ASSERT_TRUE(direct.ok()) << direct.status();
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(host_only.exchanges, 10);
  EXPECT_EQ(staged->params, direct->params);
}

}  // namespace
}  // namespace psring::trainer
