// The NCCL transport's error handling, run here without a GPU: ring/nccl_process_group.cc is linked against a
// fake CUDA runtime and NCCL (tests/testing/fake_cuda.h) that answers the way the real ones do on the paths
// that matter — "not ready" recorded as the thread's last error, a collective that never finishes, an NCCL
// call or the communicator failing.
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/auth.h"
#include "common/integrity.h"
#include "common/store.h"
#include "gtest/gtest.h"
#include "ring/nccl_process_group.h"
#include "ring/ring_exchange.h"
#include "tests/testing/fake_cuda.h"
#include "trainer/cuda_engine.h"
#include "trainer/mlp.h"
#include "trainer/timeline.h"

namespace psring::ring {
namespace {

namespace fake = ::psring::testing::fake_cuda;
using Log = std::vector<std::string>;

std::unique_ptr<ProcessGroup> Group(InMemoryStore* store, absl::Duration timeout = absl::Seconds(5)) {
  ProcessGroupOptions o;
  o.transport = Transport::kNccl;
  o.tcp.timeout = timeout;
  o.ring.timeout = timeout;
  absl::StatusOr<std::unique_ptr<ProcessGroup>> g = CreateNcclProcessGroup(store, 0, 1, o);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(*g) : nullptr;
}

// Defect 1: polling the stream must not leave cudaErrorNotReady for the next launch check to find.
TEST(NcclFakeTest, PollingTheStreamLeavesNoErrorBehind) {
  fake::Config c;
  c.stream_polls_until_done = 3;
  c.comm_polls_until_ready = 2;
  fake::Reset(c);
  InMemoryStore store;
  std::unique_ptr<ProcessGroup> g = Group(&store);
  ASSERT_NE(g, nullptr);
  std::vector<float> v = {1, 2, 3};
  ASSERT_TRUE(g->AllReduce(v.data(), v.size(), ReduceOp::kAverage, /*on_device=*/false).ok());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), 16), cudaSuccess);
  ASSERT_TRUE(g->AllReduce(device, 4, ReduceOp::kSum, /*on_device=*/true).ok());
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  ASSERT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
}

// Defect 3: host collectives go through pinned memory; no copy may block on a stream that is still busy.
TEST(NcclFakeTest, HostCollectivesNeverWaitOnTheStreamInACopy) {
  fake::Config c;
  c.stream_polls_until_done = 4;
  fake::Reset(c);
  InMemoryStore store;
  std::unique_ptr<ProcessGroup> g = Group(&store);
  ASSERT_NE(g, nullptr);
  std::vector<float> v(1000, 0.5f);
  std::vector<double> metrics = {1.0, 2.0};
  ASSERT_TRUE(g->AllReduce(v.data(), v.size(), ReduceOp::kAverage, false).ok());
  ASSERT_TRUE(g->AllReduceHost(metrics.data(), metrics.size(), ReduceOp::kAverage).ok());
  ASSERT_TRUE(g->Broadcast(v.data(), v.size(), 0, false).ok());
  ASSERT_TRUE(g->Barrier().ok());
  EXPECT_EQ(fake::BlockingPageableCopies(), 0);
  EXPECT_EQ(metrics, (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(v, std::vector<float>(1000, 0.5f));
}

// Defect 3: a dead peer (the collective never finishes) fails at the timeout, and the group is then failed,
// so the communicator is aborted, never finalised.
TEST(NcclFakeTest, DeadPeerFailsAtTheTimeoutAndAborts) {
  fake::Config c;
  c.collectives_hang = true;
  fake::Reset(c);
  InMemoryStore store;
  std::unique_ptr<ProcessGroup> g = Group(&store, absl::Milliseconds(200));
  ASSERT_NE(g, nullptr);
  for (int call = 0; call < 3; ++call) {
    std::vector<double> metrics = {1.0};
    const absl::Time start = absl::Now();
    absl::Status s;
    if (call == 0) s = g->Barrier();
    if (call == 1) s = g->AllReduceHost(metrics.data(), 1, ReduceOp::kAverage);
    if (call == 2) s = g->Broadcast(reinterpret_cast<float*>(metrics.data()), 2, 0, false);
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
    EXPECT_EQ(s.code(),
              call == 0 ? absl::StatusCode::kDeadlineExceeded : absl::StatusCode::kFailedPrecondition)
        << s;
  }
  EXPECT_EQ(fake::BlockingPageableCopies(), 0);
  g.reset();
  EXPECT_EQ(fake::CommLog(), (Log{"init", "abort"}));
}

// Issue 25: the training run, and with it the CUDA engine, is torn down before the exchange
// (trainer/train.cc, trainer/worker_main.cc), and the engine's cudaFree and cublasDestroy synchronise the
// whole device. A timed-out NCCL kernel keeps spinning until the communicator is aborted, so the abort must
// come before the failed collective returns; aborting in the group's destructor, after the engine's
// teardown, hung every surviving rank of a job whose peer had died.
TEST(NcclFakeTest, ATimedOutCollectiveIsAbortedBeforeTheEngineSynchronisesTheDevice) {
  fake::Config c;
  c.collectives_hang = true;
  fake::Reset(c);
  InMemoryStore store;
  std::unique_ptr<ProcessGroup> g = Group(&store, absl::Milliseconds(100));
  ASSERT_NE(g, nullptr);
  absl::StatusOr<trainer::MlpLayout> layout = trainer::MlpLayout::Create(784, {16}, 10);
  ASSERT_TRUE(layout.ok()) << layout.status();
  absl::StatusOr<std::unique_ptr<trainer::Engine>> engine = trainer::CreateCudaEngine(*layout, 4);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const trainer::FloatBuffer grads = (*engine)->grads();
  const absl::Status s = g->AllReduce(grads.data, grads.count, ReduceOp::kAverage, /*on_device=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(fake::CommLog(), (Log{"init", "abort"})) << "the failed collective returned unaborted";
  engine->reset();
  EXPECT_EQ(fake::DeviceSyncsWhileACollectiveSpins(), 0) << "the engine's teardown would have hung";
  g.reset();
  EXPECT_EQ(fake::DeviceSyncsWhileACollectiveSpins(), 0);
  EXPECT_EQ(fake::CommLog(), (Log{"init", "abort"}));
}

// The same on the bucketed GPU path: the CUDA engine hands each layer over from its per-layer events while
// the exchange's communication thread allreduces the device buckets; the collective hangs, the thread's
// failing call aborts, FinishStep reports the timeout, and the teardown that follows finds nothing spinning.
TEST(NcclFakeTest, AHungBucketIsAbortedOnTheCommunicationThreadBeforeTeardown) {
  fake::Config c;
  c.collectives_hang = true;
  c.event_polls_until_done = 1;
  fake::Reset(c);
  InMemoryStore store;
  std::unique_ptr<ProcessGroup> g = Group(&store, absl::Milliseconds(100));
  ASSERT_NE(g, nullptr);
  absl::StatusOr<trainer::MlpLayout> layout = trainer::MlpLayout::Create(784, {32, 16}, 10);
  ASSERT_TRUE(layout.ok()) << layout.status();
  absl::StatusOr<std::unique_ptr<trainer::Engine>> engine = trainer::CreateCudaEngine(*layout, 4);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto exchange = std::make_unique<RingExchange>(std::move(g));
  ASSERT_TRUE(exchange->AcceptsDeviceMemory());
  absl::StatusOr<trainer::BucketPlan> plan = trainer::BucketPlan::Create(layout->layer_sizes(), 1e-3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GT(plan->buckets().size(), 1u);
  ASSERT_TRUE(exchange->BeginStep(0, (*engine)->grads(), (*engine)->params(), *plan).ok());
  const std::vector<float> images(4 * 784, 0.25f);
  const std::vector<int32_t> labels(4, 3);
  absl::StatusOr<trainer::BatchStats> stats = (*engine)->ForwardBackwardOverlapped(
      images.data(), labels.data(), 4,
      [&](size_t offset, size_t count) { exchange->GradientReady(offset, count); },
      trainer::Timeline::Disabled());
  EXPECT_TRUE(stats.ok()) << stats.status();
  const absl::StatusOr<trainer::ExchangeOutcome> outcome = exchange->FinishStep();
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kDeadlineExceeded) << outcome.status();
  EXPECT_EQ(fake::CommLog(), (Log{"init", "abort"})) << "the failed bucket returned unaborted";
  engine->reset();
  exchange.reset();
  EXPECT_EQ(fake::DeviceSyncsWhileACollectiveSpins(), 0) << "the teardown would have hung";
}

// Runs a host allreduce that fails under `config`; expects the group to refuse further calls, no error left
// in the thread's CUDA slot, and the communicator aborted (not finalised, not destroyed) before the call
// returned. Returns the failure.
absl::Status FailingAllReduce(const fake::Config& config) {
  fake::Reset(config);
  InMemoryStore store;
  std::unique_ptr<ProcessGroup> g = Group(&store);
  if (g == nullptr) return absl::InternalError("no group");
  float x = 1;
  const absl::Status status = g->AllReduce(&x, 1, ReduceOp::kSum, false);
  EXPECT_EQ(fake::CommLog(), (Log{"init", "abort"})) << "aborted only at destruction";
  EXPECT_EQ(g->Barrier().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  g.reset();
  EXPECT_EQ(fake::CommLog(), (Log{"init", "abort"}));
  return status;
}

// Defect 5: an error returned directly by an NCCL call marks the communicator failed.
TEST(NcclFakeTest, ErrorReturnedByAnNcclCallAborts) {
  fake::Config c;
  c.collective_result = ncclSystemError;
  const absl::Status s = FailingAllReduce(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("nccl_process_group.cc:"), std::string::npos) << s;
  EXPECT_NE(s.message().find("fake NCCL error (fake NCCL detail)"), std::string::npos) << s;
}

TEST(NcclFakeTest, AsynchronousErrorAborts) {
  fake::Config c;
  c.async_result_after_collective = ncclRemoteError;
  EXPECT_EQ(FailingAllReduce(c).code(), absl::StatusCode::kUnavailable);
}

// A CUDA failure inside a collective leaves the ranks out of step just as well.
TEST(NcclFakeTest, CudaFailureInACollectiveAborts) {
  fake::Config c;
  c.malloc_result = cudaErrorMemoryAllocation;
  EXPECT_EQ(FailingAllReduce(c).code(), absl::StatusCode::kResourceExhausted);
}

TEST(NcclFakeTest, FailedSetUpAborts) {
  fake::Config c;
  c.comm_polls_until_ready = 2;
  c.init_async_result = ncclInternalError;
  fake::Reset(c);
  InMemoryStore store;
  ProcessGroupOptions o;
  absl::StatusOr<std::unique_ptr<ProcessGroup>> g = CreateNcclProcessGroup(&store, 0, 1, o);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInternal) << g.status();
  EXPECT_EQ(fake::CommLog(), (Log{"init", "abort"}));
}

// Defect 5, clean path: finalise (waiting for it), then destroy.
TEST(NcclFakeTest, CleanShutdownFinalizesThenDestroys) {
  fake::Config c;
  c.comm_polls_until_ready = 3;
  c.stream_polls_until_done = 1;
  fake::Reset(c);
  InMemoryStore store;
  std::unique_ptr<ProcessGroup> g = Group(&store);
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(g->Barrier().ok());
  g.reset();
  EXPECT_EQ(fake::CommLog(), (Log{"init", "finalize", "destroy"}));
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
}

// Issue 34: with a token, NCCL's unique id (a capability for the job's NCCL bootstrap) crosses the store
// sealed under a key derived from the token and bound to the job: the store holds neither the id nor anything
// a rank with another token, or a changed value, would accept.
TEST(NcclFakeTest, TheUniqueIdCrossesTheStoreSealedWithAToken) {
  fake::Reset(fake::Config{});
  InMemoryStore store;
  ProcessGroupOptions o;
  o.transport = Transport::kNccl;
  o.tcp.timeout = absl::Seconds(2);
  o.ring.timeout = absl::Seconds(2);
  o.tcp.auth = AuthConfig{"nccl-fake-test-token-0123", "job-n"};
  absl::StatusOr<std::unique_ptr<ProcessGroup>> rank0 = CreateNcclProcessGroup(&store, 0, 1, o);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  const std::string key = o.tcp.store_prefix + "/nccl_id";
  absl::StatusOr<std::string> stored = store.Get(key, absl::Seconds(1));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->size(), 128 + kSealOverheadBytes);
  EXPECT_EQ(stored->find(std::string(16, '\0')), std::string::npos) << "the fake's all-zero id shows through";

  // A rank with the token and job id reads it...
  absl::StatusOr<std::unique_ptr<ProcessGroup>> rank1 = CreateNcclProcessGroup(&store, 1, 2, o);
  EXPECT_TRUE(rank1.ok()) << rank1.status();
  // ...one with another token, or a changed value, does not.
  ProcessGroupOptions other = o;
  other.tcp.auth.token = "another-token-of-16-bytes";
  absl::StatusOr<std::unique_ptr<ProcessGroup>> stranger = CreateNcclProcessGroup(&store, 1, 2, other);
  EXPECT_EQ(stranger.status().code(), absl::StatusCode::kDataLoss) << stranger.status();
  EXPECT_TRUE(absl::StrContains(stranger.status().message(), "NCCL unique id")) << stranger.status();
  std::string changed = *stored;
  changed[20] ^= 1;
  ASSERT_TRUE(store.Set(key, changed).ok());
  absl::StatusOr<std::unique_ptr<ProcessGroup>> fooled = CreateNcclProcessGroup(&store, 1, 2, o);
  EXPECT_EQ(fooled.status().code(), absl::StatusCode::kDataLoss) << fooled.status();
}

}  // namespace
}  // namespace psring::ring
