// The service tests' helpers (service_test.cc, service_registration_test.cc): a raw client that sends
// hand-built messages, and a fixture of 2 shards with both ranks registered at shard 1.
#ifndef PSRING_TESTS_PS_SERVICE_FIXTURE_H_
#define PSRING_TESTS_PS_SERVICE_FIXTURE_H_

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "ps/call_auth.h"
#include "ps/server.h"
#include "ps/wire.h"
#include "tests/ps/ps_cluster.h"

namespace psring::ps {

inline constexpr int kWorkers = 2;
inline constexpr uint64_t kTotal = 10;  // 2 shards: 5 + 5 elements

struct RawReply {
  grpc::Status status;
  absl::uint128 session = 0;
  int64_t next_step = 0;
  std::vector<float> params;
};

// A raw client: messages are built by hand so tests can send what the real client never would. With a
// token it authenticates (ps/call_auth.h) as `rank` (kOperatorRank: an operator) to shard `shard` of
// `num_shards` on first use, and signs every call; when that fails (a wrong token) calls go unsigned.
class RawClient {
 public:
  explicit RawClient(const std::string& address, std::string token = "", int rank = kOperatorRank,
                     int shard = 0, int num_shards = 1)
      : stub_(proto::ParameterServer::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        token_(std::move(token)), rank_(rank) {
    shard_.set_shard(shard);
    shard_.set_num_shards(num_shards);
  }

  void Prepare(grpc::ClientContext* context, const char* method = "", const std::string& fields = "") {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (token_.empty()) return;
    if (credential_ == nullptr) {
      absl::StatusOr<std::unique_ptr<ChannelCredential>> opened = ChannelCredential::Open(
          stub_.get(), PsKeyFromToken(token_), rank_, kWorkers, shard_, absl::Now() + absl::Seconds(10));
      open_status_ = opened.status();
      if (!opened.ok()) return;
      credential_ = std::move(*opened);
    }
    credential_->Sign(context, method, fields);
  }
  // How the last attempt to authenticate ended.
  const absl::Status& open_status() const { return open_status_; }

  grpc::Status Shutdown() {
    grpc::ClientContext context;
    Prepare(&context, "Shutdown");
    proto::ShutdownReply reply;
    return stub_->Shutdown(&context, proto::ShutdownRequest(), &reply);
  }

  RawReply Register(proto::RegisterHeader header, const std::vector<float>& initial) {
    grpc::ClientContext context;
    header.set_offers_parameters(!initial.empty());
    Prepare(&context, "Register", RegisterFields(header));
    auto stream = stub_->Register(&context);
    proto::RegisterRequest request;
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
    Prepare(&context, "PushPull", PushFields(header));
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
    Prepare(&context, "Stats");
    return stub_->Stats(&context, proto::StatsRequest(), reply);
  }

 private:
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
  std::string token_;
  int rank_;
  proto::ShardAddress shard_;
  std::unique_ptr<ChannelCredential> credential_;
  absl::Status open_status_;
};

inline proto::Chunk MakeChunk(uint64_t offset, const std::vector<float>& values) {
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

}  // namespace psring::ps

#endif  // PSRING_TESTS_PS_SERVICE_FIXTURE_H_
