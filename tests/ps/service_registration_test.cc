// Registration, sessions and authentication at the ParameterServer service: registration checks, a rank's
// replacement, stale sessions, a restarted shard, hostile callers, the token.
#include <cmath>
#include <memory>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ps/server.h"
#include "ps/wire.h"
#include "tests/ps/ps_cluster.h"
#include "tests/ps/service_fixture.h"
#include "tests/testing/temp_dir.h"

namespace psring::ps {
namespace {

TEST_F(ServiceTest, UnregisteredOrStaleSession) {
  proto::PushHeader h = Push(0, 0);
  SetSession(sessions_[0] + 12345, &h);
  ExpectRejected(h, Gradient(), grpc::StatusCode::FAILED_PRECONDITION, "replaced");
  // A fresh server knows no session at all.
  ServiceOptions options;
  options.workers = kWorkers;
  absl::StatusOr<testing::LocalCluster> other = testing::StartCluster(2, options);
  ASSERT_TRUE(other.ok());
  RawClient fresh(other->addresses[1]);
  grpc::Status status = fresh.PushPull(Push(0, 0), Gradient());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  EXPECT_NE(status.error_message().find("not registered"), std::string::npos);
}

// A few hundred hostile calls from a fixed seed (issue 13): garbage registrations, absurd sizes, bad
// hyperparameters, wrong ranks and sessions, NaN gradients, truncated streams. The server answers every one
// (no crash, no hang), and after each the parameters and version are exactly what they were.
TEST_F(ServiceTest, RandomHostileCallsNeverChangeTheParameters) {
  std::mt19937_64 random(13);
  const auto pick = [&random](auto... values) {
    const std::vector<std::common_type_t<decltype(values)...>> all = {values...};
    return all[random() % all.size()];
  };
  constexpr int kCases = 300;
  int registrations = 0, pushes = 0, accepted = 0;
  for (int i = 0; i < kCases; ++i) {
    if (random() % 2 == 0) {
      ++registrations;
      proto::RegisterHeader h = Header(static_cast<int>(pick(0, 1, -1, 2, 1 << 30)));
      h.set_world_size(static_cast<int>(pick(kWorkers, 0, 3, -5)));
      h.set_total_params(pick(kTotal, uint64_t{0}, uint64_t{1}, uint64_t{1000}, uint64_t{1500000000},
                              uint64_t{1} << 40, ~uint64_t{0}));
      h.mutable_hyperparameters()->set_lr(pick(0.5f, 0.0f, -1.0f, 1e30f, INFINITY, NAN));
      h.mutable_hyperparameters()->set_momentum(pick(0.9f, 1.0f, -0.5f, NAN));
      h.mutable_hyperparameters()->set_weight_decay(pick(0.0f, -1.0f, INFINITY));
      if (random() % 4 == 0) h.mutable_address()->set_shard(static_cast<int>(pick(0, 2, -1)));
      std::vector<float> initial;
      switch (random() % 4) {
        case 0: break;                                                  // no offer
        case 1: initial = Initial(); break;                             // a plausible offer
        case 2: initial = {1, NAN, 3, 4, 5}; break;                     // a poisoned offer
        default: initial.assign(1 + random() % 9, 7.0f); break;         // a wrong length
      }
      RawReply reply = client_->Register(h, initial);
      if (reply.status.ok()) {  // only a legitimate re-registration can succeed: it gets a new session
        ++accepted;
        sessions_[h.rank()] = reply.session;
      }
    } else {
      ++pushes;
      const int rank = static_cast<int>(pick(0, 1, 7, -1));
      proto::PushHeader h = Push(rank >= 0 && rank < kWorkers ? rank : 0, pick(int64_t{0}, int64_t{1}, int64_t{-3}));
      h.set_rank(rank);
      if (random() % 3 == 0) h.set_session(random());
      if (random() % 4 == 0) h.set_num_elements(pick(uint64_t{0}, uint64_t{4}, uint64_t{6}, ~uint64_t{0}));
      std::vector<proto::Chunk> chunks;
      switch (random() % 4) {
        case 0: chunks = {MakeChunk(0, {1, NAN, 1}), MakeChunk(3, {1, 1})}; break;  // NaN
        case 1: chunks = {MakeChunk(0, {1, 1, 1}), MakeChunk(3, {INFINITY, 1})}; break;  // inf, late
        case 2: chunks = {MakeChunk(0, {1, 1, 1})}; break;                             // truncated
        default: chunks = {MakeChunk(2, {1, 1, 1}), MakeChunk(9, {1})}; break;         // gaps, out of range
      }
      const grpc::Status status = client_->PushPull(h, chunks);
      EXPECT_FALSE(status.ok()) << "case " << i;
    }
    ASSERT_EQ(service()->CopyParameters(), before_) << "case " << i;
    ASSERT_EQ(service()->version(), 0u) << "case " << i;
  }
  proto::StatsReply stats;
  EXPECT_TRUE(client_->Stats(&stats).ok());  // still serving
  EXPECT_EQ(stats.total_params(), kTotal);
  EXPECT_GT(registrations, 100);
  EXPECT_GT(pushes, 100);
  EXPECT_LT(accepted, registrations);
  // Legitimate workers still complete a step.
  for (int rank = 0; rank < kWorkers; ++rank) {
    RawReply reply = client_->Register(Header(rank), {});
    ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
    sessions_[rank] = reply.session;
  }
  std::vector<grpc::Status> statuses(kWorkers);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorkers; ++rank) {
    threads.emplace_back([&, rank] { statuses[rank] = RawClient(cluster_.addresses[1]).PushPull(Push(rank, 0), Gradient()); });
  }
  for (std::thread& t : threads) t.join();
  for (const grpc::Status& status : statuses) EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(service()->version(), 1u);
}

TEST_F(ServiceTest, RegistrationChecks) {
  proto::RegisterHeader h = Header(0);
  h.mutable_hyperparameters()->set_lr(0.25f);
  RawReply reply = client_->Register(h, {});
  EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(reply.status.error_message().find("differ from the registered"), std::string::npos);
  h = Header(0);
  h.set_total_params(kTotal + 1);
  EXPECT_EQ(client_->Register(h, {}).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  h = Header(0);
  h.set_world_size(3);
  EXPECT_EQ(client_->Register(h, {}).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  h = Header(2);
  EXPECT_EQ(client_->Register(h, {}).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Offered parameters of the wrong length.
  EXPECT_EQ(client_->Register(Header(0), {1, 2, 3}).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(service()->CopyParameters(), before_);
  // The first registration's parameters win over later offers.
  RawReply again = client_->Register(Header(1), {9, 9, 9, 9, 9});
  ASSERT_TRUE(again.status.ok());
  EXPECT_EQ(again.params, Initial());
  // The re-registration replaced rank 1's old session.
  proto::PushHeader stale = Push(1, 0);
  ExpectRejected(stale, Gradient(), grpc::StatusCode::FAILED_PRECONDITION, "replaced");
}

TEST_F(ServiceTest, ReRegisteredRankEndsTheOldSessionsWaitingPush) {
  // Rank 0's push of step 0 waits for rank 1; then a second process registers rank 0 (a replacement, or a
  // duplicate --rank). The old push fails at once with FAILED_PRECONDITION instead of waiting out the step
  // timeout (which would give DEADLINE_EXCEEDED), and the step completes with the new session's push.
  grpc::Status old_push;
  std::thread pusher([&] { old_push = client_->PushPull(Push(0, 0), Gradient()); });
  WaitUntilFirstPushStreamedIn();
  RawReply again = client_->Register(Header(0), {});
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  pusher.join();
  EXPECT_EQ(old_push.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << old_push.error_message();
  EXPECT_NE(old_push.error_message().find("same --rank"), std::string::npos) << old_push.error_message();
  EXPECT_EQ(service()->CopyParameters(), before_);
  EXPECT_EQ(service()->version(), 0u);
  sessions_[0] = again.session;
  grpc::Status first;
  std::thread new_pusher([&] { first = client_->PushPull(Push(0, 0), Gradient()); });
  ASSERT_TRUE(client_->PushPull(Push(1, 0), Gradient()).ok());
  new_pusher.join();
  EXPECT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(service()->version(), 1u);
}

// An async push that the shard applied (and saved) before a shutdown broke the call is not pushed again
// when the client re-registers with the restarted shard: rank 0's step 1 is applied, then the shard stops
// while rank 0 waits for rank 1 (staleness 1) and restarts from its checkpoint. The result must equal the
// same three pushes without the restart, bit for bit (a second push of step 1 would apply it twice and
// leave rank 0 waiting for rank 1 until the step timeout).
struct AsyncRun {
  std::vector<float> params;
  uint64_t version = 0;
};

AsyncRun RunAsyncPushes(bool restart_after_second_push) {
  ServiceOptions options;
  options.workers = 2;
  options.mode = Mode::kAsync;
  options.staleness = 1;
  options.step_timeout = absl::Seconds(20);
  options.checkpoint_dir =
      psring::testing::FreshTempPath(absl::StrCat("async_restart_", restart_after_second_push));
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(1, options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return {};
  constexpr size_t kCount = 7;
  std::vector<std::vector<float>> params(2, std::vector<float>(kCount, 1.0f));
  std::vector<float> g0(kCount, 0.5f), g1(kCount, -0.25f), h0(kCount, 2.0f);
  std::vector<std::unique_ptr<PsExchange>> ranks;
  for (int r = 0; r < 2; ++r) {
    absl::StatusOr<std::unique_ptr<PsExchange>> exchange =
        PsExchange::Create(testing::ClientOptionsFor(*cluster, r, 2));
    EXPECT_TRUE(exchange.ok()) << exchange.status();
    if (!exchange.ok()) return {};
    ranks.push_back(std::move(*exchange));
    EXPECT_TRUE(ranks[r]->SyncInitialParameters({params[r].data(), kCount}).ok());
  }
  auto exchange = [&](int rank, int64_t step, std::vector<float>& grads) {
    return ranks[rank]->Exchange(step, {grads.data(), kCount}, {params[rank].data(), kCount}).status();
  };
  EXPECT_TRUE(exchange(0, 0, g0).ok());
  absl::Status second;
  std::thread rank0([&] { second = exchange(0, 1, g1); });  // applied, then waits for rank 1
  ParameterServerService* service = cluster->servers[0]->service();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (service->version() < 2 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(service->version(), 2u);
  if (restart_after_second_push) {
    EXPECT_TRUE(cluster->servers[0]->Stop(/*write_checkpoint=*/true).ok());
    EXPECT_TRUE(testing::RestartShard(&*cluster, 0).ok());
    rank0.join();  // re-registered: the shard is past step 1, so the call ends without a second push
  }
  EXPECT_TRUE(exchange(1, 0, h0).ok());  // after a restart: re-registers (unknown session), then pushes
  if (!restart_after_second_push) rank0.join();
  EXPECT_TRUE(second.ok()) << second;
  AsyncRun run;
  run.version = cluster->servers[0]->service()->version();
  run.params.resize(kCount);
  EXPECT_TRUE(ranks[0]->PullParameters({run.params.data(), kCount}).ok());
  return run;
}

TEST(ServiceRestartTest, AsyncPushAppliedBeforeAShutdownIsNotAppliedAgain) {
  const AsyncRun plain = RunAsyncPushes(false);
  const AsyncRun restarted = RunAsyncPushes(true);
  EXPECT_EQ(plain.version, 3u);
  EXPECT_EQ(restarted.version, 3u);
  ASSERT_EQ(plain.params.size(), 7u);
  EXPECT_EQ(restarted.params, plain.params);
  EXPECT_NE(plain.params, std::vector<float>(7, 1.0f));
}

TEST(ServiceAuthTest, TokenRequired) {
  ServiceOptions options;
  options.workers = 1;
  options.auth_token = "s3cret";
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(1, options);
  ASSERT_TRUE(cluster.ok());
  proto::StatsReply stats;
  grpc::Status none = RawClient(cluster->addresses[0]).Stats(&stats);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  RawClient wrong_client(cluster->addresses[0], "s3creT");
  grpc::Status wrong = wrong_client.Stats(&stats);
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // The server's proof of the token failed, so this client sent no proof of its own.
  EXPECT_TRUE(absl::IsUnauthenticated(wrong_client.open_status())) << wrong_client.open_status();
  EXPECT_TRUE(RawClient(cluster->addresses[0], "s3cret").Stats(&stats).ok());

  // The real client: refused without the token, works with it.
  std::vector<float> params = {1, 2, 3}, grads = {1, 1, 1};
  PsClientOptions client_options = testing::ClientOptionsFor(*cluster, 0, 1);
  client_options.auth_token = "";
  absl::StatusOr<std::unique_ptr<PsExchange>> anonymous = PsExchange::Create(client_options);
  ASSERT_TRUE(anonymous.ok());
  absl::Status refused = (*anonymous)->SyncInitialParameters({params.data(), params.size()});
  EXPECT_TRUE(absl::IsUnauthenticated(refused)) << refused;
  client_options.auth_token = "s3cret";
  absl::StatusOr<std::unique_ptr<PsExchange>> member = PsExchange::Create(client_options);
  ASSERT_TRUE(member.ok());
  ASSERT_TRUE((*member)->SyncInitialParameters({params.data(), params.size()}).ok());
  absl::StatusOr<trainer::ExchangeOutcome> outcome =
      (*member)->Exchange(0, {grads.data(), grads.size()}, {params.data(), params.size()});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, trainer::ExchangeOutcome::kParametersUpdated);
}

}  // namespace
}  // namespace psring::ps
