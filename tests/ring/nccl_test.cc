// The NCCL transport (built only with CUDA). NCCL refuses two ranks on one GPU, so these run world size 1:
// the staging and device data paths, the store handshake and error reporting. Skipped without a GPU (a
// failure with PSRING_REQUIRE_GPU=1).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/store.h"
#include "gtest/gtest.h"
#include "ring/process_group.h"
#include "ring/ring_exchange.h"
#include "tests/testing/gpu.h"
#include "trainer/cuda_engine.h"
#include "trainer/exchange.h"
#include "trainer/train.h"

namespace psring::ring {
namespace {

std::unique_ptr<ProcessGroup> NcclGroup(Store* store) {
  ProcessGroupOptions o;
  o.transport = Transport::kNccl;
  o.tcp.timeout = absl::Seconds(30);
  o.ring.timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<ProcessGroup>> g = CreateProcessGroup(store, 0, 1, o);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : nullptr;
}

TEST(NcclTest, WithoutAGpuCreationFailsWithAClearStatus) {
  if (GpuUsable()) GTEST_SKIP() << "a GPU is present";
  InMemoryStore store;
  ProcessGroupOptions o;
  o.transport = Transport::kNccl;
  absl::StatusOr<std::unique_ptr<ProcessGroup>> g = CreateProcessGroup(&store, 0, 1, o);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition) << g.status();
  EXPECT_NE(g.status().message().find("--ring_transport=tcp"), std::string::npos) << g.status();
}

TEST(NcclTest, HostAndDeviceBuffersAtWorldSizeOne) {
  if (!GpuUsable()) PSRING_SKIP_WITHOUT_GPU() << "no usable GPU";
  InMemoryStore store;
  std::unique_ptr<ProcessGroup> g = NcclGroup(&store);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->backend(), "nccl");
  EXPECT_TRUE(g->AcceptsDeviceMemory());
  std::vector<float> host(1009);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) - 500.0f;
  const std::vector<float> original = host;
  ASSERT_TRUE(g->AllReduce(host.data(), host.size(), ReduceOp::kAverage, false).ok());
  EXPECT_EQ(host, original);

  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, host.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_TRUE(g->AllReduce(device, host.size(), ReduceOp::kSum, true).ok());
  ASSERT_TRUE(g->Broadcast(device, host.size(), 0, true).ok());
  std::vector<float> back(host.size());
  ASSERT_EQ(cudaMemcpy(back.data(), device, back.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(device);
  EXPECT_EQ(back, original);

  std::vector<double> metrics = {0.5, 2.0};
  ASSERT_TRUE(g->AllReduceHost(metrics.data(), metrics.size(), ReduceOp::kAverage).ok());
  EXPECT_EQ(metrics, (std::vector<double>{0.5, 2.0}));
  EXPECT_TRUE(g->Barrier().ok());
  EXPECT_EQ(g->Broadcast(host.data(), host.size(), 3, false).code(), absl::StatusCode::kInvalidArgument);
}

// The job-wide agreement picks NCCL for ranks that each have a GPU of their own (here: the only rank).
TEST(NcclTest, AutoPicksNcclForARankWithItsOwnGpu) {
  if (!GpuUsable()) PSRING_SKIP_WITHOUT_GPU() << "no usable GPU";
  InMemoryStore store;
  ProcessGroupOptions o;
  o.transport = Transport::kAuto;
  o.gpu = trainer::CudaDeviceIdentity();
  ASSERT_FALSE(o.gpu.empty());
  absl::StatusOr<std::unique_ptr<ProcessGroup>> g = CreateProcessGroup(&store, 0, 1, o);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->backend(), "nccl");
}

TEST(NcclTest, TrainingOnTheGpuThroughNcclMatchesTheCpu) {
  if (!GpuUsable()) PSRING_SKIP_WITHOUT_GPU() << "no usable GPU";
  trainer::TrainOptions o;
  o.hidden = {64, 32};
  o.batch_size = 32;
  o.max_steps = 20;
  o.dataset = "synthetic";
  o.synthetic_samples = 2048;
  o.log_every = 0;
  o.device = "cpu";
  trainer::LocalExchange local;
  absl::StatusOr<trainer::TrainResult> cpu = trainer::Train(o, &local);
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  InMemoryStore store;
  std::unique_ptr<ProcessGroup> g = NcclGroup(&store);
  ASSERT_NE(g, nullptr);
  RingExchange exchange(std::move(g));
  o.device = "cuda";
  absl::StatusOr<trainer::TrainResult> gpu = trainer::Train(o, &exchange);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(gpu->device, "cuda");
  ASSERT_EQ(gpu->params.size(), cpu->params.size());
  float scale = 0, worst = 0;
  for (size_t i = 0; i < cpu->params.size(); ++i) {
    scale = std::max(scale, std::fabs(cpu->params[i]));
    worst = std::max(worst, std::fabs(gpu->params[i] - cpu->params[i]));
  }
  // cuBLAS and OpenBLAS sum in different orders; 20 steps stay within 1e-4 of the parameter scale.
  EXPECT_LE(worst, 1e-4f * scale) << "max |cuda - cpu| " << worst << ", scale " << scale;
  EXPECT_NEAR(gpu->test_accuracy, cpu->test_accuracy, 2e-3);
}

}  // namespace
}  // namespace psring::ring
