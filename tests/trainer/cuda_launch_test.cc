// Launch checks and CUDA status conversion against a fake CUDA runtime (tests/testing/fake_cuda.h), so the
// part of defect 1 that lives in the trainer runs without a GPU: a launch reports its own error only, and a
// reported error does not stay behind in the thread's last-error slot.
#include "trainer/cuda_launch.h"

#include <cuda_runtime.h>

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_cuda.h"
#include "trainer/cuda_status.h"

namespace psring::trainer {
namespace {

namespace fake = ::psring::testing::fake_cuda;

// Stands in for a __global__ function: the fake runtime records the launch and never calls it.
void Kernel(float*, int) {}

TEST(CudaLaunchTest, ALaunchDoesNotReportAnEarlierCallsError) {
  fake::Reset(fake::Config{});
  fake::MakeStreamBusy(1);
  // A raw poll of a busy stream leaves cudaErrorNotReady in the slot (the real runtime does the same); a
  // launcher that returned cudaGetLastError() would now fail with "device not ready".
  ASSERT_EQ(cudaStreamQuery(nullptr), cudaErrorNotReady);
  float x = 0;
  EXPECT_EQ(cuda::LaunchKernel(Kernel, 1, 32, nullptr, &x, 1), cudaSuccess);
  EXPECT_EQ(fake::Launches(), 1);
}

TEST(CudaLaunchTest, AFailedLaunchReportsItsErrorOnce) {
  fake::Config c;
  c.launch_result = cudaErrorInvalidConfiguration;
  fake::Reset(c);
  float x = 0;
  EXPECT_EQ(cuda::LaunchKernel(Kernel, 0, 32, nullptr, &x, 1), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

absl::Status Allocate() {
  void* p = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMalloc(&p, 64));
  return absl::OkStatus();
}

TEST(CudaStatusTest, AReportedErrorIsTakenOffTheSlot) {
  fake::Config c;
  c.malloc_result = cudaErrorMemoryAllocation;
  fake::Reset(c);
  const absl::Status s = Allocate();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("cuda_launch_test.cc:"), std::string::npos) << s;
  EXPECT_NE(s.message().find("cudaMalloc(&p, 64): fake CUDA error"), std::string::npos) << s;
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

TEST(CudaStatusTest, PollStreamLeavesNoNotReadyBehind) {
  fake::Reset(fake::Config{});
  fake::MakeStreamBusy(2);
  EXPECT_EQ(PollStream(nullptr), cudaErrorNotReady);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  EXPECT_EQ(PollStream(nullptr), cudaErrorNotReady);
  EXPECT_EQ(PollStream(nullptr), cudaSuccess);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

}  // namespace
}  // namespace psring::trainer
