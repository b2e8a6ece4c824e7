// Every malformed or ill-timed request, sent straight at the ParameterServer service with a raw stub, gets
// its precise status, and the shard's parameters and version stay untouched. Also: authentication, the
// replacement of a rank, hyperparameter checks.
#include <cmath>
#include <memory>
#include <random>
#include <type_traits>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ps/server.h"
#include "ps/wire.h"
#include "tests/ps/ps_cluster.h"
#include "tests/testing/temp_dir.h"

namespace psring::ps {
namespace {

constexpr int kWorkers = 2;
constexpr uint64_t kTotal = 10;  // 2 shards: 5 + 5 elements

struct RawReply {
  grpc::Status status;
  absl::uint128 session = 0;
  int64_t next_step = 0;
  std::vector<float> params;
};

// A raw client: messages are built by hand so tests can send what the real client never would.
class RawClient {
 public:
  RawClient(const std::string& address, std::string token = "")
      : stub_(proto::ParameterServer::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        token_(std::move(token)) {}

  void Prepare(grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token_.empty()) context->AddMetadata(kAuthMetadataKey, token_);
  }

  RawReply Register(proto::RegisterHeader header, const std::vector<float>& initial) {
    grpc::ClientContext context;
    Prepare(&context);
    auto stream = stub_->Register(&context);
    proto::RegisterRequest request;
    header.set_offers_parameters(!initial.empty());
    *request.mutable_header() = header;
    uint64_t bytes = 0;
    if (stream->Write(request)) {
      WriteChunks<proto::RegisterRequest>(stream.get(), initial.data(), initial.size(), 2, &bytes);
    }
    stream->WritesDone();
    RawReply result;
    proto::RegisterReply reply;
    while (stream->Read(&reply)) {
      if (reply.has_header()) {
        result.session = GetSession(reply.header());
        result.next_step = reply.header().next_step();
      } else {
        const std::string& data = reply.chunk().data();
        const size_t at = result.params.size();
        result.params.resize(at + data.size() / 4);
        std::memcpy(result.params.data() + at, data.data(), data.size());
      }
    }
    result.status = stream->Finish();
    return result;
  }

  grpc::Status PushPull(const proto::PushHeader& header, const std::vector<proto::Chunk>& chunks) {
    grpc::ClientContext context;
    Prepare(&context);
    auto stream = stub_->PushPull(&context);
    proto::PushRequest request;
    *request.mutable_header() = header;
    if (stream->Write(request)) {
      for (const proto::Chunk& chunk : chunks) {
        *request.mutable_chunk() = chunk;
        if (!stream->Write(request)) break;
      }
    }
    stream->WritesDone();
    proto::PullReply reply;
    while (stream->Read(&reply)) {
    }
    return stream->Finish();
  }

  grpc::Status Stats(proto::StatsReply* reply) {
    grpc::ClientContext context;
    Prepare(&context);
    return stub_->Stats(&context, proto::StatsRequest(), reply);
  }

 private:
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
  std::string token_;
};

proto::Chunk MakeChunk(uint64_t offset, const std::vector<float>& values) {
  proto::Chunk chunk;
  chunk.set_offset(offset);
  chunk.set_data(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return chunk;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServiceOptions options;
    options.workers = kWorkers;
    options.step_timeout = absl::Seconds(5);
    Configure(&options);
    absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(2, options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    client_ = std::make_unique<RawClient>(cluster_.addresses[1]);
    for (int rank = 0; rank < kWorkers; ++rank) {
      RawReply reply = client_->Register(Header(rank), rank == 0 ? Initial() : std::vector<float>());
      ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
      EXPECT_EQ(reply.params, Initial());  // rank 0 offered them; rank 1 receives them
      sessions_.push_back(reply.session);
    }
    before_ = service()->CopyParameters();
  }

  virtual void Configure(ServiceOptions* options) {}

  ParameterServerService* service() { return cluster_.servers[1]->service(); }

  // Waits (at most 10 s) until the shard has read at least `bytes` (registrations included).
  void WaitForBytesReceived(uint64_t bytes) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (service()->GetStats().bytes_received() < bytes && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  static std::vector<float> Initial() { return {1, 2, 3, 4, 5}; }

  static proto::RegisterHeader Header(int rank) {
    proto::RegisterHeader h;
    h.mutable_address()->set_shard(1);
    h.mutable_address()->set_num_shards(2);
    h.set_rank(rank);
    h.set_world_size(kWorkers);
    h.set_total_params(kTotal);
    h.mutable_hyperparameters()->set_lr(0.5f);
    h.mutable_hyperparameters()->set_momentum(0.9f);
    h.mutable_hyperparameters()->set_weight_decay(0.0f);
    return h;
  }

  proto::PushHeader Push(int rank, int64_t step) {
    proto::PushHeader h;
    h.mutable_address()->set_shard(1);
    h.mutable_address()->set_num_shards(2);
    h.set_rank(rank);
    SetSession(sessions_[rank], &h);
    h.set_step(step);
    h.set_num_elements(5);
    return h;
  }

  static std::vector<proto::Chunk> Gradient() { return {MakeChunk(0, {1, 1, 1}), MakeChunk(3, {1, 1})}; }

  void ExpectRejected(const proto::PushHeader& header, const std::vector<proto::Chunk>& chunks,
                      grpc::StatusCode code, const std::string& fragment) {
    grpc::Status status = client_->PushPull(header, chunks);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_NE(status.error_message().find(fragment), std::string::npos) << status.error_message();
    EXPECT_EQ(service()->CopyParameters(), before_);
    EXPECT_EQ(service()->version(), 0u);
  }

  // Waits (at most 10 s) until one push streamed in: 20 bytes of initial parameters + 20 of gradient.
  void WaitUntilFirstPushStreamedIn() { WaitForBytesReceived(40); }

  testing::LocalCluster cluster_;
  std::unique_ptr<RawClient> client_;
  std::vector<absl::uint128> sessions_;
  std::vector<float> before_;
};

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

TEST(ServiceAuthTest, TokenRequired) {
  ServiceOptions options;
  options.workers = 1;
  options.auth_token = "s3cret";
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(1, options);
  ASSERT_TRUE(cluster.ok());
  proto::StatsReply stats;
  grpc::Status none = RawClient(cluster->addresses[0]).Stats(&stats);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status wrong = RawClient(cluster->addresses[0], "s3creT").Stats(&stats);
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
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
