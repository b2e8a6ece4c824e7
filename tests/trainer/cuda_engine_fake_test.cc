// The CUDA engine's ordering and error handling, run here without a GPU: trainer/cuda_engine.cc and the nvcc
// object of the kernels are linked against a fake CUDA runtime and cuBLAS (tests/testing/fake_cuda.h) that
// log which stream each operation was put on and let a launch fail. Kernels and GEMMs are not computed; the
// arithmetic is proved by //tests/trainer:cuda_plan_test and, on a GPU, by cuda_parity_test.
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/fake_cuda.h"
#include "trainer/cuda_engine.h"
#include "trainer/mlp.h"

namespace psring::trainer {
namespace {

namespace fake = ::psring::testing::fake_cuda;

constexpr int kBatch = 4;

std::unique_ptr<Engine> NewEngine() {
  absl::StatusOr<MlpLayout> layout = MlpLayout::Create(784, {16}, 10);
  EXPECT_TRUE(layout.ok()) << layout.status();
  if (!layout.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Engine>> engine = CreateCudaEngine(*layout, kBatch);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Defect 2: zeroing the buffers on the legacy default stream raced with uploads on the engine's
// non-blocking stream. Every initialisation step must be on the engine's one stream, and Init must end
// waiting for it.
TEST(CudaEngineFakeTest, InitialisationIsOrderedOnTheEngineStream) {
  fake::Reset(fake::Config{});
  std::unique_ptr<Engine> engine = NewEngine();
  ASSERT_NE(engine, nullptr);
  ASSERT_EQ(fake::CreatedStreams().size(), 1u);
  const cudaStream_t stream = fake::CreatedStreams()[0];
  const std::vector<fake::StreamOp>& log = fake::StreamLog();
  ASSERT_FALSE(log.empty());
  int memsets = 0;
  for (const fake::StreamOp& op : log) {
    EXPECT_EQ(op.stream, stream) << op.op << " on another stream";
    memsets += op.op == "memset";
  }
  EXPECT_GE(memsets, 10);
  EXPECT_EQ(log.back().op, "sync");
  const std::vector<float> params(engine->layout().num_params(), 0.5f);
  ASSERT_TRUE(engine->SetParams(params).ok());
  EXPECT_EQ(log.back().stream, stream);
}

// Defect 1: a raw poll left cudaErrorNotReady behind; the next kernel launch must not report it.
TEST(CudaEngineFakeTest, AStaleNotReadyDoesNotFailTheNextStep) {
  fake::Reset(fake::Config{});
  std::unique_ptr<Engine> engine = NewEngine();
  ASSERT_NE(engine, nullptr);
  fake::MakeStreamBusy(1);
  ASSERT_EQ(cudaStreamQuery(nullptr), cudaErrorNotReady);
  const std::vector<float> images(kBatch * 784, 0.25f);
  const std::vector<int32_t> labels(kBatch, 3);
  absl::StatusOr<BatchStats> stats = engine->ForwardBackward(images.data(), labels.data(), kBatch);
  EXPECT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT(fake::Launches(), 0);
  EXPECT_TRUE(engine->SgdStep(SgdOptions{}).ok());
}

TEST(CudaEngineFakeTest, AFailedLaunchIsReportedWithItsCallSiteAndNotLeftBehind) {
  fake::Reset(fake::Config{});
  std::unique_ptr<Engine> engine = NewEngine();
  ASSERT_NE(engine, nullptr);
  fake::MutableConfig().launch_result = cudaErrorInvalidConfiguration;
  const std::vector<float> images(kBatch * 784, 0.25f);
  std::vector<float> logits(kBatch * 10);
  const absl::Status s = engine->Forward(images.data(), kBatch, absl::MakeSpan(logits));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("cuda_engine.cc:"), std::string::npos) << s;
  EXPECT_NE(s.message().find("cuda::BiasAddRelu"), std::string::npos) << s;
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  fake::MutableConfig().launch_result = cudaSuccess;
  EXPECT_TRUE(engine->Forward(images.data(), kBatch, absl::MakeSpan(logits)).ok());
}

}  // namespace
}  // namespace psring::trainer
