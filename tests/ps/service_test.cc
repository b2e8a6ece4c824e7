// Every malformed or ill-timed push, sent straight at the ParameterServer service with a raw stub, gets its
// precise status, and the shard's parameters and version stay untouched. Also: the lead limit, lockstep after
// a restart, the client's push window and small HTTP/2 receive windows.
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ps/server.h"
#include "ps/wire.h"
#include "tests/ps/ps_cluster.h"
#include "tests/ps/service_fixture.h"

namespace psring::ps {
namespace {

TEST(ServiceMethodTest, PushPullNameAndIndexComeFromTheDescriptor) {
  EXPECT_EQ(PushPullMethodName(), absl::StrCat("/", proto::ParameterServer::service_full_name(), "/PushPull"));
  EXPECT_EQ(PushPullMethodIndex(), 1);  // after Register, as declared in proto/ps.proto
}

TEST_F(ServiceTest, WrongTensorLength) {
  proto::PushHeader h = Push(0, 0);
  h.set_num_elements(6);
  ExpectRejected(h, Gradient(), grpc::StatusCode::INVALID_ARGUMENT, "holds 5");
  // Header right, but the chunks carry 6 elements, or 4, or a partial float, or leave a gap.
  ExpectRejected(Push(0, 0), {MakeChunk(0, {1, 1, 1}), MakeChunk(3, {1, 1, 1})},
                 grpc::StatusCode::INVALID_ARGUMENT, "overflows");
  ExpectRejected(Push(0, 0), {MakeChunk(0, {1, 1, 1, 1})}, grpc::StatusCode::INVALID_ARGUMENT,
                 "after 4 of 5");
  proto::Chunk partial = MakeChunk(0, {1, 1, 1, 1, 1});
  partial.mutable_data()->pop_back();
  ExpectRejected(Push(0, 0), {partial}, grpc::StatusCode::INVALID_ARGUMENT, "whole number");
  ExpectRejected(Push(0, 0), {MakeChunk(0, {1, 1}), MakeChunk(3, {1, 1})}, grpc::StatusCode::INVALID_ARGUMENT,
                 "in order");
}

TEST_F(ServiceTest, UnknownShardOrWorker) {
  proto::PushHeader h = Push(0, 0);
  h.mutable_address()->set_shard(0);
  ExpectRejected(h, Gradient(), grpc::StatusCode::INVALID_ARGUMENT, "reached shard 1 of 2");
  h = Push(0, 0);
  h.mutable_address()->set_num_shards(3);
  ExpectRejected(h, Gradient(), grpc::StatusCode::INVALID_ARGUMENT, "reached shard 1 of 2");
  h = Push(0, 0);
  h.set_rank(7);
  ExpectRejected(h, Gradient(), grpc::StatusCode::INVALID_ARGUMENT, "unknown worker rank 7");
  h.set_rank(-1);
  ExpectRejected(h, Gradient(), grpc::StatusCode::INVALID_ARGUMENT, "unknown worker rank -1");
}

TEST_F(ServiceTest, PastAndFutureSteps) {
  ExpectRejected(Push(0, 1), Gradient(), grpc::StatusCode::OUT_OF_RANGE, "future");
  ExpectRejected(Push(0, -1), Gradient(), grpc::StatusCode::FAILED_PRECONDITION, "past");
}

TEST_F(ServiceTest, DuplicatePushWhileStepPending) {
  // Rank 0's push of step 0 waits for rank 1; a second push of step 0 by rank 0 is a duplicate.
  grpc::Status first;
  std::thread pusher([&] { first = client_->PushPull(Push(0, 0), Gradient()); });
  WaitUntilFirstPushStreamedIn();
  grpc::Status dup = client_->PushPull(Push(0, 0), Gradient());
  EXPECT_EQ(dup.error_code(), grpc::StatusCode::ALREADY_EXISTS) << dup.error_message();
  EXPECT_NE(dup.error_message().find("already pushed step 0"), std::string::npos);
  EXPECT_EQ(service()->CopyParameters(), before_);
  EXPECT_EQ(service()->version(), 0u);
  // Rank 1 completes the step: mean gradient 1, lr 0.5, momentum 0 on the first step -> p - 0.5.
  ASSERT_TRUE(client_->PushPull(Push(1, 0), Gradient()).ok());
  pusher.join();
  ASSERT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(service()->version(), 1u);
  EXPECT_EQ(service()->CopyParameters(), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f, 4.5f}));
  // Step 0 is now in the past.
  grpc::Status late = client_->PushPull(Push(0, 0), Gradient());
  EXPECT_EQ(late.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << late.error_message();
}

TEST_F(ServiceTest, PushBrokenAfterPartOfTheStepWasAppliedRollsTheStepBack) {
  // Rank 0's whole push is in; rank 1's first chunk lets the server apply elements [0, 3) of the step (and
  // stream them to rank 0), then rank 1's second chunk leaves a gap. Rank 1 is refused, rank 0 is told to
  // push again, and parameters and momentum are exactly as before the step.
  grpc::Status first;
  std::thread pusher([&] { first = client_->PushPull(Push(0, 0), Gradient()); });
  WaitUntilFirstPushStreamedIn();
  grpc::Status broken = client_->PushPull(Push(1, 0), {MakeChunk(0, {1, 1, 1}), MakeChunk(4, {1})});
  pusher.join();
  EXPECT_EQ(broken.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << broken.error_message();
  EXPECT_EQ(first.error_code(), grpc::StatusCode::UNAVAILABLE) << first.error_message();
  EXPECT_NE(first.error_message().find("rolled back"), std::string::npos) << first.error_message();
  EXPECT_EQ(service()->CopyParameters(), before_);
  EXPECT_EQ(service()->version(), 0u);
  // The step again, whole: p - lr * g with momentum 0.9 on a fresh (restored) momentum buffer.
  std::thread again([&] { first = client_->PushPull(Push(0, 0), Gradient()); });
  ASSERT_TRUE(client_->PushPull(Push(1, 0), Gradient()).ok());
  again.join();
  ASSERT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(service()->version(), 1u);
  EXPECT_EQ(service()->CopyParameters(), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f, 4.5f}));
}

TEST_F(ServiceTest, RanksAtDifferentTrainerStepsStayInLockstep) {
  // As after a server restart: rank 0 redoes trainer step 5, rank 1 is already at 6. Rank 0's pending push is
  // dropped as "skipped", a later push of a lower step is refused, and the step forms at trainer step 6.
  proto::PushHeader behind = Push(0, 0), ahead = Push(1, 0);
  behind.set_trainer_step(5);
  ahead.set_trainer_step(6);
  grpc::Status first;
  std::thread pusher([&] { first = client_->PushPull(behind, Gradient()); });
  WaitUntilFirstPushStreamedIn();
  grpc::Status second;
  std::thread pusher_ahead([&] { second = client_->PushPull(ahead, Gradient()); });
  pusher.join();
  EXPECT_EQ(first.error_code(), grpc::StatusCode::ABORTED) << first.error_message();
  EXPECT_NE(first.error_message().find("skipped"), std::string::npos) << first.error_message();
  EXPECT_EQ(service()->CopyParameters(), before_);
  grpc::Status lower = client_->PushPull(behind, Gradient());
  EXPECT_EQ(lower.error_code(), grpc::StatusCode::ABORTED) << lower.error_message();
  behind.set_trainer_step(6);
  ASSERT_TRUE(client_->PushPull(behind, Gradient()).ok());
  pusher_ahead.join();
  EXPECT_TRUE(second.ok()) << second.error_message();
  EXPECT_EQ(service()->version(), 1u);
}

// A push may run at most max_lead_bytes ahead of the slowest push of the step (fair share of the shard's
// link); the held push goes on as soon as the others catch up, and the step's result is unchanged.
class LeadLimitTest : public ServiceTest {
 protected:
  void Configure(ServiceOptions* options) override { options->max_lead_bytes = sizeof(float); }
};

TEST_F(LeadLimitTest, PushAheadIsHeldUntilTheOthersCatchUp) {
  const std::vector<proto::Chunk> one_by_one = {MakeChunk(0, {1}), MakeChunk(1, {1}), MakeChunk(2, {1}),
                                                MakeChunk(3, {1}), MakeChunk(4, {1})};
  grpc::Status first;
  std::thread pusher([&] { first = client_->PushPull(Push(0, 0), one_by_one); });
  // 20 bytes of initial parameters, then rank 0's elements 0 and 1: 2 elements ahead of rank 1 (at 0) is
  // more than the 1-element lead, so the shard stops reading rank 0's push there.
  WaitForBytesReceived(28);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(service()->GetStats().bytes_received(), 28u);
  ASSERT_TRUE(client_->PushPull(Push(1, 0), one_by_one).ok());
  pusher.join();
  ASSERT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(service()->GetStats().bytes_received(), 60u);
  EXPECT_EQ(service()->version(), 1u);
  EXPECT_EQ(service()->CopyParameters(), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f, 4.5f}));
}

TEST_F(LeadLimitTest, HeldPushEndsWithTheStepTimeoutWhenTheOthersNeverCome) {
  // Rank 1 never pushes: rank 0, held by the lead limit, gets DEADLINE_EXCEEDED after --step_timeout (5 s)
  // instead of hanging, and nothing is applied.
  grpc::Status first = client_->PushPull(Push(0, 0), {MakeChunk(0, {1}), MakeChunk(1, {1}), MakeChunk(2, {1}),
                                                      MakeChunk(3, {1}), MakeChunk(4, {1})});
  EXPECT_EQ(first.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << first.error_message();
  EXPECT_EQ(service()->CopyParameters(), before_);
  EXPECT_EQ(service()->version(), 0u);
}

TEST(ServiceLockstepTest, ClientSkipsAStepItsPeersAreAlreadyPast) {
  // As after a server crash in which rank 1 received the reply of trainer step 10 and rank 0 did not: rank 0
  // redoes step 10 while rank 1 pushes step 11. Rank 0's exchange completes by pulling (skipped), then both
  // ranks run step 11 and 12 together.
  ServiceOptions options;
  options.workers = 2;
  options.step_timeout = absl::Seconds(20);
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(2, options);
  ASSERT_TRUE(cluster.ok());
  constexpr size_t kCount = 9;
  std::vector<std::vector<float>> params(2, std::vector<float>(kCount, 1.0f));
  std::vector<float> grads(kCount, 0.5f);
  std::vector<absl::Status> statuses = testing::RunRanks(2, [&](int rank) -> absl::Status {
    PsClientOptions client = testing::ClientOptionsFor(*cluster, rank, 2);
    absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(client);
    if (!exchange.ok()) return exchange.status();
    const trainer::FloatBuffer p{params[rank].data(), kCount}, g{grads.data(), kCount};
    if (absl::Status s = (*exchange)->SyncInitialParameters(p); !s.ok()) return s;
    for (int64_t step : rank == 0 ? std::vector<int64_t>{10, 11, 12} : std::vector<int64_t>{11, 12}) {
      absl::StatusOr<trainer::ExchangeOutcome> out = (*exchange)->Exchange(step, g, p);
      if (!out.ok()) return out.status();
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(params[0], params[1]);
  for (auto& server : cluster->servers) EXPECT_EQ(server->service()->version(), 2u);
}

// The client's push window: with the server's own lead limit off, a worker whose peer has not started yet
// pushes only `window` elements (no reply can come before the peer pushes), and the rest once it does; with
// no window it pushes everything at once. Both end with the same, correct parameters.
// Waits (up to 20 s, for a loaded machine) until rank 0 pushed `expect` bytes, then 300 ms more to catch any
// excess, and returns what it pushed before its peer started.
uint64_t PushedAheadOfAbsentPeer(size_t window_bytes, uint64_t expect) {
  ServiceOptions options;
  options.workers = 2;
  options.step_timeout = absl::Seconds(20);
  options.max_lead_bytes = 0;
  options.chunk_bytes = sizeof(float);  // one element per reply range
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(1, options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return 0;
  constexpr size_t kCount = 64;
  std::vector<std::vector<float>> params(2, std::vector<float>(kCount, 1.0f));
  std::vector<std::vector<float>> grads = {std::vector<float>(kCount, 0.5f), std::vector<float>(kCount, 1.5f)};
  std::vector<std::unique_ptr<PsExchange>> ranks;
  for (int r = 0; r < 2; ++r) {
    PsClientOptions client = testing::ClientOptionsFor(*cluster, r, 2);
    client.chunk_bytes = sizeof(float);
    client.push_window_bytes = window_bytes;
    absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(client);
    EXPECT_TRUE(exchange.ok()) << exchange.status();
    if (!exchange.ok()) return 0;
    ranks.push_back(std::move(*exchange));
    EXPECT_TRUE(ranks[r]->SyncInitialParameters({params[r].data(), kCount}).ok());
  }
  ParameterServerService* service = cluster->servers[0]->service();
  const uint64_t base = service->GetStats().bytes_received();
  absl::Status first;
  std::thread rank0([&] {
    first = ranks[0]->Exchange(0, {grads[0].data(), kCount}, {params[0].data(), kCount}).status();
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (service->GetStats().bytes_received() - base < expect && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  absl::SleepFor(absl::Milliseconds(300));
  const uint64_t ahead = service->GetStats().bytes_received() - base;
  absl::Status second = ranks[1]->Exchange(0, {grads[1].data(), kCount}, {params[1].data(), kCount}).status();
  rank0.join();
  EXPECT_TRUE(first.ok()) << first;
  EXPECT_TRUE(second.ok()) << second;
  EXPECT_EQ(params[0], params[1]);
  EXPECT_EQ(service->version(), 1u);
  return ahead;
}

TEST(ServicePushWindowTest, WorkerWaitsForRepliesBeforePushingFurther) {
  EXPECT_EQ(PushedAheadOfAbsentPeer(8 * sizeof(float), 8 * sizeof(float)), 8 * sizeof(float));
}

TEST(ServicePushWindowTest, WithoutWindowTheWholePushGoesOut) {
  EXPECT_EQ(PushedAheadOfAbsentPeer(0, 64 * sizeof(float)), 64 * sizeof(float));
}

TEST(ServicePushWindowTest, WindowBelowOneChunkPlusOneReplyRangeIsRaisedNotDeadlocked) {
  // 1 byte: raised to one chunk (1 element) plus one reply range (1 element).
  EXPECT_EQ(PushedAheadOfAbsentPeer(1, 2 * sizeof(float)), 2 * sizeof(float));
}

// Tiny HTTP/2 receive windows (16 KiB, the worker's --receive_window_bytes) make the server's reply writers
// block on every worker's flow control while the pushes keep streaming in on the same connections: with 3
// ranks, 2 shards, several steps and 4 KiB reply ranges every rank must still end with the exact average.
TEST(ServiceReceiveWindowTest, SmallReceiveWindowsStayExact) {
  ServiceOptions options;
  options.workers = 3;
  options.step_timeout = absl::Seconds(30);
  options.chunk_bytes = 4096;
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(2, options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  constexpr size_t kCount = 200000;  // 800 KB: 50x the window
  constexpr int kRanks = 3, kSteps = 3;
  std::vector<std::vector<float>> params(kRanks, std::vector<float>(kCount, 0.0f));
  std::vector<std::unique_ptr<PsExchange>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    PsClientOptions client = testing::ClientOptionsFor(*cluster, r, kRanks);
    client.chunk_bytes = 8192;
    client.receive_window_bytes = 16384;
    client.hyperparameters = {1.0f, 0.0f, 0.0f};  // plain SGD, lr 1: params -= mean gradient
    absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(client);
    ASSERT_TRUE(exchange.ok()) << exchange.status();
    ranks.push_back(std::move(*exchange));
  }
  std::vector<absl::Status> statuses(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = ranks[r]->SyncInitialParameters({params[r].data(), kCount});
      std::vector<float> grad(kCount);
      for (int step = 0; step < kSteps && statuses[r].ok(); ++step) {
        for (size_t i = 0; i < kCount; ++i) grad[i] = static_cast<float>((r + 1) * ((i % 7) + step));
        statuses[r] = ranks[r]->Exchange(step, {grad.data(), kCount}, {params[r].data(), kCount}).status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  // Mean gradient of step s at i: (1+2+3)/3 * ((i%7)+s) = 2((i%7)+s); after 3 steps: -2(3(i%7) + 0+1+2).
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < kCount; i += 997) {
      ASSERT_EQ(params[r][i], -2.0f * (3.0f * (i % 7) + 3.0f)) << "rank " << r << " element " << i;
    }
    EXPECT_EQ(params[r], params[0]);
  }
}

TEST(ServiceReceiveWindowTest, WindowsOutsideHttp2LimitsAreRejected) {
  PsClientOptions options;
  options.servers = {"127.0.0.1:1"};
  for (size_t bad : {size_t{1}, size_t{16383}, size_t{1} << 30}) {
    options.receive_window_bytes = bad;
    absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(options);
    ASSERT_FALSE(exchange.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(exchange.status())) << exchange.status();
    EXPECT_NE(exchange.status().message().find("receive window"), std::string::npos) << exchange.status();
  }
  for (size_t good : {size_t{0}, size_t{16384}, size_t{262144}}) {
    options.receive_window_bytes = good;
    EXPECT_TRUE(PsExchange::Create(options).ok()) << good;
  }
}

}  // namespace
}  // namespace psring::ps
