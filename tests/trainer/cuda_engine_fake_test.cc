// The CUDA engine's ordering and error handling, run here without a GPU: trainer/cuda_engine.cc and the nvcc
// object of the kernels are linked against a fake CUDA runtime and cuBLAS (tests/testing/fake_cuda.h) that
// log which stream each operation was put on and let a launch fail. Kernels and GEMMs are not computed; the
// arithmetic is proved by //tests/trainer:cuda_plan_test and, on a GPU, by cuda_parity_test.
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/fake_cuda.h"
#include "trainer/cuda_engine.h"
#include "trainer/mlp.h"
#include "trainer/timeline.h"

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

// Issue 25: the engine handed every layer over only after the whole backward and a synchronisation, so a
// bucketed exchange had nothing to overlap with on GPU. Each layer must now be handed over, last layer first,
// once an event recorded on the engine's stream after that layer's backward is done, and no earlier.
struct HandOver {
  size_t offset;
  size_t count;
  size_t log_size;  // fake::StreamLog().size() when on_ready ran
};

std::vector<HandOver> RunOverlapped(int event_polls) {
  fake::Config c;
  c.event_polls_until_done = event_polls;
  fake::Reset(c);
  absl::StatusOr<MlpLayout> layout = MlpLayout::Create(784, {32, 16}, 10);
  EXPECT_TRUE(layout.ok()) << layout.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine = CreateCudaEngine(*layout, kBatch);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  const std::vector<float> images(kBatch * 784, 0.25f);
  const std::vector<int32_t> labels(kBatch, 3);
  std::vector<HandOver> handed;
  absl::StatusOr<BatchStats> stats = (*engine)->ForwardBackwardOverlapped(
      images.data(), labels.data(), kBatch,
      [&](size_t offset, size_t count) { handed.push_back({offset, count, fake::StreamLog().size()}); },
      Timeline::Disabled());
  EXPECT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "a not-ready poll was left behind";
  return handed;
}

int Count(const std::string& op, size_t until) {
  int n = 0;
  for (size_t i = 0; i < until; ++i) n += fake::StreamLog()[i].op == op;
  return n;
}

TEST(CudaEngineFakeTest, EachLayerIsHandedOverAsItsEventCompletesLastLayerFirst) {
  for (int polls : {0, 3}) {
    SCOPED_TRACE(polls);
    const std::vector<HandOver> handed = RunOverlapped(polls);
    const std::vector<LinearSlice> layers = MlpLayout::Create(784, {32, 16}, 10)->layers();
    ASSERT_EQ(handed.size(), layers.size());
    const cudaStream_t stream = fake::CreatedStreams()[0];
    for (size_t k = 0; k < handed.size(); ++k) {
      const LinearSlice& s = layers[layers.size() - 1 - k];
      EXPECT_EQ(handed[k].offset, s.weight_offset) << "hand-over " << k;
      EXPECT_EQ(handed[k].count, s.bias_offset + s.out - s.weight_offset) << "hand-over " << k;
      // Its own event, and exactly the events of the layers handed over before, are done.
      EXPECT_EQ(Count("event done", handed[k].log_size), static_cast<int>(k + 1)) << "hand-over " << k;
      EXPECT_GE(Count("event", handed[k].log_size), static_cast<int>(k + 1)) << "hand-over " << k;
    }
    int events = 0;
    for (const fake::StreamOp& op : fake::StreamLog()) {
      if (op.op == "event" || op.op == "event done" || op.op == "event query") {
        EXPECT_EQ(op.stream, stream) << op.op << " on another stream";
      }
      events += op.op == "event";
    }
    EXPECT_EQ(events, static_cast<int>(layers.size())) << "one event per layer";
    if (polls == 0) {
      // Events done at once: the last layer goes to the exchange while the earlier layers' GEMMs are still to
      // be enqueued, i.e. communication overlaps the rest of backward.
      const int gemms = Count("gemm", fake::StreamLog().size());
      EXPECT_LT(Count("gemm", handed[0].log_size), gemms);
    }
  }
}

}  // namespace
}  // namespace psring::trainer
