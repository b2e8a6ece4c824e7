// Issue 34, the parameter server with a token, all on loopback in this process:
//   - a process that binds the server's port first captures everything a worker sends it: no token, no
//     proof, and nothing that makes an authenticated call to the real server once that one holds the port;
//     one that relays a whole job to the real server records bytes that, replayed, change nothing;
//   - a push that stalls midway is ended by the server (a watchdog on every chunk);
//   - per-rank credentials: a worker holding the token cannot register as another live rank, cannot act as
//     another rank, cannot shut the server down unless it is rank 0 of the running job; a crashed rank's
//     replacement gets in once the rank has been silent for --step_timeout;
//   - a gradient over --max_grad_norm is refused naming rank, step and norm, and the job goes on to exactly
//     the parameters of a run without it.
#include <unistd.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/socket.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "ps/call_auth.h"
#include "ps/client.h"
#include "ps/server.h"
#include "tests/ps/ps_cluster.h"
#include "tests/ps/service_fixture.h"

namespace psring::ps {
namespace {

constexpr char kToken[] = "security-test-token-0123456789";

// What a squatter saw of one call: its method, its x-psring-* metadata and its messages as bytes.
struct Captured {
  std::string method;
  std::multimap<std::string, std::string> metadata;
  std::vector<std::string> messages;
};

// A ParameterServer that is not the server: it records every call and answers Authenticate with a challenge
// it cannot sign (it has no token), then fails everything.
class Squatter final : public proto::ParameterServer::Service {
 public:
  grpc::Status Authenticate(grpc::ServerContext* context,
                            grpc::ServerReaderWriter<proto::AuthReply, proto::AuthRequest>* stream) override {
    Captured& call = Begin("Authenticate", context);
    proto::AuthRequest request;
    if (stream->Read(&request)) Record(&call, request.SerializeAsString());
    proto::AuthReply reply;
    reply.mutable_challenge()->set_nonce(RandomBytes(kNonceBytes));
    reply.mutable_challenge()->set_public_key(RandomBytes(32));
    reply.mutable_challenge()->set_proof(RandomBytes(32));
    stream->Write(reply);
    while (stream->Read(&request)) Record(&call, request.SerializeAsString());
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "squatter");
  }
  grpc::Status Register(grpc::ServerContext* context,
                        grpc::ServerReaderWriter<proto::RegisterReply, proto::RegisterRequest>* stream) override {
    return Drain("Register", context, stream);
  }
  grpc::Status PushPull(grpc::ServerContext* context,
                        grpc::ServerReaderWriter<proto::PullReply, proto::PushRequest>* stream) override {
    return Drain("PushPull", context, stream);
  }
  grpc::Status Stats(grpc::ServerContext* context, const proto::StatsRequest*, proto::StatsReply*) override {
    Begin("Stats", context);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "squatter");
  }

  std::vector<Captured> captured() {
    absl::MutexLock lock(&mu_);
    return std::vector<Captured>(calls_.begin(), calls_.end());
  }

 private:
  // Records every message of the call's stream, answers nothing, and refuses it.
  template <typename Reply, typename Request>
  grpc::Status Drain(const std::string& method, grpc::ServerContext* context,
                     grpc::ServerReaderWriter<Reply, Request>* stream) {
    Captured& call = Begin(method, context);
    Request request;
    while (stream->Read(&request)) Record(&call, request.SerializeAsString());
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "squatter");
  }
  Captured& Begin(const std::string& method, grpc::ServerContext* context) {
    absl::MutexLock lock(&mu_);
    Captured& call = calls_.emplace_back();
    call.method = method;
    for (const auto& [key, value] : context->client_metadata()) {
      call.metadata.emplace(std::string(key.data(), key.size()), std::string(value.data(), value.size()));
    }
    return call;
  }
  void Record(Captured* call, std::string bytes) {
    absl::MutexLock lock(&mu_);
    call->messages.push_back(std::move(bytes));
  }
  absl::Mutex mu_;
  std::deque<Captured> calls_ ABSL_GUARDED_BY(mu_);  // a deque: the references Begin returns stay valid
};

PsClientOptions ClientOptions(const std::vector<std::string>& servers, int rank, int world_size) {
  PsClientOptions options;
  options.servers = servers;
  options.rank = rank;
  options.world_size = world_size;
  options.timeout = absl::Seconds(10);
  options.reconnect_timeout = absl::Seconds(1);
  options.auth_token = kToken;
  return options;
}

TEST(PortSquatterTest, WhatAWorkerSendsToAnotherProcessOnThePortOpensNothingOnTheRealServer) {
  Squatter squatter;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&squatter);
  std::unique_ptr<grpc::Server> fake = builder.BuildAndStart();
  ASSERT_NE(fake, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", port);

  // A worker with the token meets the squatter: it refuses the unsigned challenge and sends nothing more.
  std::vector<float> params = {1, 2, 3, 4};
  absl::StatusOr<std::unique_ptr<PsExchange>> worker = PsExchange::Create(ClientOptions({address}, 0, 1));
  ASSERT_TRUE(worker.ok()) << worker.status();
  const absl::Status refused = (*worker)->SyncInitialParameters({params.data(), params.size()});
  EXPECT_TRUE(absl::IsUnauthenticated(refused)) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "did not prove the job's token")) << refused;
  EXPECT_FALSE((*worker)->Stats(0).ok());
  // Every call's metadata, messages and proof; the worker's calls made with the same metadata against the
  // real server below.
  fake->Shutdown();
  fake->Wait();
  const std::vector<Captured> captured = squatter.captured();
  ASSERT_FALSE(captured.empty());
  for (const Captured& call : captured) {
    EXPECT_EQ(call.method, "Authenticate") << "the worker called " << call.method << " before authenticating";
    for (const auto& [key, value] : call.metadata) {
      EXPECT_FALSE(absl::StrContains(value, kToken)) << key;
    }
    // Only the hello: no proof of the token went to a server that did not prove it first.
    EXPECT_EQ(call.messages.size(), 1u);
    for (const std::string& bytes : call.messages) {
      EXPECT_FALSE(absl::StrContains(bytes, kToken));
      EXPECT_FALSE(absl::StrContains(bytes, PsKeyFromToken(kToken)));
    }
  }

  // The real server comes up on the same port. Whatever was captured, replayed, is refused.
  ServerOptions options;
  options.bind_addr = "127.0.0.1";
  options.port = port;
  options.service.workers = 1;
  options.service.auth_token = kToken;
  absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = proto::ParameterServer::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  for (const Captured& call : captured) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    for (const auto& [key, value] : call.metadata) {
      if (absl::StartsWith(key, "x-")) context.AddMetadata(key, value);
    }
    proto::StatsReply stats;
    const grpc::Status status = stub->Stats(&context, proto::StatsRequest(), &stats);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
    // The captured hello, replayed: the server's new challenge wants a proof nothing captured holds.
    for (const std::string& bytes : call.messages) {
      proto::AuthRequest hello;
      ASSERT_TRUE(hello.ParseFromString(bytes));
      grpc::ClientContext auth_context;
      auth_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
      auto stream = stub->Authenticate(&auth_context);
      proto::AuthReply challenge;
      ASSERT_TRUE(stream->Write(hello) && stream->Read(&challenge));
      EXPECT_TRUE(challenge.has_challenge());
      proto::AuthRequest proof;
      proof.mutable_proof()->set_proof(std::string(32, '\0'));
      stream->Write(proof);
      stream->WritesDone();
      proto::AuthReply accepted;
      EXPECT_FALSE(stream->Read(&accepted));
      const grpc::Status auth = stream->Finish();
      EXPECT_EQ(auth.error_code(), grpc::StatusCode::UNAUTHENTICATED) << auth.error_message();
    }
  }
  EXPECT_EQ((*server)->service()->GetStats().registered_workers(), 0);
  // The same worker, once the real server holds the port, gets in.
  absl::StatusOr<std::unique_ptr<PsExchange>> again = PsExchange::Create(ClientOptions({address}, 0, 1));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->SyncInitialParameters({params.data(), params.size()}).ok());
}

// A TCP relay on its own port to a real server that records every byte the client sends (a listener that
// took the port first and forwards, so the worker sees a working server).
class RecordingRelay {
 public:
  explicit RecordingRelay(int target_port) : target_port_(target_port) {
    absl::StatusOr<Socket> listener = ListenTcp("127.0.0.1", 0);
    EXPECT_TRUE(listener.ok()) << listener.status();
    listener_ = std::move(*listener);
    port_ = LocalPort(listener_).value_or(0);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~RecordingRelay() {
    stop_ = true;
    listener_.Shutdown();
    acceptor_.join();
    {
      absl::MutexLock lock(&mu_);
      for (auto& connection : connections_) {
        connection->client.Shutdown();
        connection->server.Shutdown();
      }
    }
    for (std::thread& t : pumps_) t.join();
  }
  int port() const { return port_; }
  // What each connection's client sent so far.
  std::vector<std::string> client_bytes() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> bytes;
    for (auto& connection : connections_) bytes.push_back(connection->sent);
    return bytes;
  }

 private:
  struct Connection {
    Socket client;
    Socket server;
    std::string sent;  // guarded by the relay's mu_
  };
  void AcceptLoop() {
    while (!stop_) {
      absl::StatusOr<Socket> client = AcceptTcp(listener_, absl::Now() + absl::Milliseconds(100));
      if (!client.ok()) continue;
      absl::StatusOr<Socket> server = ConnectTcp("127.0.0.1", target_port_, absl::Now() + absl::Seconds(5));
      if (!server.ok()) continue;
      absl::MutexLock lock(&mu_);
      connections_.push_back(std::make_unique<Connection>());
      Connection* c = connections_.back().get();
      c->client = std::move(*client);
      c->server = std::move(*server);
      pumps_.emplace_back([this, c] { Pump(c->client, c->server, &c->sent); });
      pumps_.emplace_back([this, c] { Pump(c->server, c->client, nullptr); });
    }
  }
  void Pump(const Socket& from, const Socket& to, std::string* record) {
    char buffer[65536];
    while (!stop_) {
      absl::StatusOr<bool> readable = WaitReadable(from, absl::Milliseconds(50));
      if (!readable.ok()) break;
      if (!*readable) continue;
      const ssize_t n = ::read(from.fd(), buffer, sizeof(buffer));
      if (n <= 0) break;
      if (record != nullptr) {
        absl::MutexLock lock(&mu_);
        record->append(buffer, static_cast<size_t>(n));
      }
      if (!SendAll(to, buffer, static_cast<size_t>(n), absl::Now() + absl::Seconds(5)).ok()) break;
    }
  }
  const int target_port_;
  Socket listener_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> pumps_;  // written by the acceptor only, joined after it
};

// A relay that forwards a worker's whole job to the real server records every byte; replayed to the server
// as they were sent, they register nothing, push nothing and leave the worker's session alone.
TEST(PortSquatterTest, ARelaysRecordingReplayedToTheServerChangesNothing) {
  ServiceOptions service;
  service.workers = 1;
  service.auth_token = kToken;
  service.step_timeout = absl::Seconds(10);
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(1, service);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const int server_port = cluster->servers[0]->port();
  ParameterServerService* server = cluster->servers[0]->service();
  auto relay = std::make_unique<RecordingRelay>(server_port);
  absl::StatusOr<std::unique_ptr<PsExchange>> worker =
      PsExchange::Create(ClientOptions({absl::StrCat("127.0.0.1:", relay->port())}, 0, 1));
  ASSERT_TRUE(worker.ok());
  std::vector<float> params = {1, 2, 3, 4}, grads = {1, 1, 1, 1};
  const trainer::FloatBuffer p{params.data(), params.size()}, g{grads.data(), grads.size()};
  ASSERT_TRUE((*worker)->SyncInitialParameters(p).ok());
  for (int step = 0; step < 2; ++step) ASSERT_TRUE((*worker)->Exchange(step, g, p).ok());
  ASSERT_TRUE((*worker)->Barrier().ok());
  ASSERT_EQ(server->version(), 2u);
  const std::vector<std::string> recorded = relay->client_bytes();
  ASSERT_FALSE(recorded.empty());
  for (const std::string& bytes : recorded) {
    EXPECT_GT(bytes.size(), 24u);  // at least HTTP/2's preface
    EXPECT_FALSE(absl::StrContains(bytes, kToken));
    // Replayed byte for byte on a fresh connection to the real server.
    absl::StatusOr<Socket> replay = ConnectTcp("127.0.0.1", server_port, absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(replay.ok()) << replay.status();
    ASSERT_TRUE(SendAll(*replay, bytes.data(), bytes.size(), absl::Now() + absl::Seconds(5)).ok());
    char sink[65536];
    const absl::Time until = absl::Now() + absl::Seconds(1);
    while (absl::Now() < until) {
      absl::StatusOr<bool> readable = WaitReadable(*replay, absl::Milliseconds(50));
      if (!readable.ok()) break;
      if (*readable && ::read(replay->fd(), sink, sizeof(sink)) <= 0) break;
    }
  }
  EXPECT_EQ(server->version(), 2u);
  EXPECT_EQ(server->GetStats().registered_workers(), 1);
  // The worker's session and channel are untouched: it goes on (a replayed Register used to replace them).
  const absl::StatusOr<trainer::ExchangeOutcome> next = (*worker)->Exchange(2, g, p);
  EXPECT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(server->version(), 3u);
  worker->reset();
  relay.reset();
}

class RankCredentialTest : public ::testing::Test {
 protected:
  void StartJob(absl::Duration step_timeout) {
    ServiceOptions service;
    service.workers = 2;
    service.auth_token = kToken;
    service.step_timeout = step_timeout;
    absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(1, service);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    for (int rank = 0; rank < 2; ++rank) {
      absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(Options(rank));
      ASSERT_TRUE(exchange.ok());
      ranks_.push_back(std::move(*exchange));
    }
    std::vector<absl::Status> statuses = testing::RunRanks(2, [&](int rank) {
      return ranks_[rank]->SyncInitialParameters({params_[rank].data(), params_[rank].size()});
    });
    for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
  }
  PsClientOptions Options(int rank) {
    PsClientOptions options = ClientOptions(cluster_.addresses, rank, 2);
    options.reconnect_timeout = absl::ZeroDuration();  // a refusal is reported, not retried
    return options;
  }
  ParameterServerService* service() { return cluster_.servers[0]->service(); }

  testing::LocalCluster cluster_;
  std::vector<std::unique_ptr<PsExchange>> ranks_;
  std::vector<std::vector<float>> params_ = {{1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}};
};

TEST_F(RankCredentialTest, ATokenHolderCannotTakeActAsOrStopAnotherLiveRank) {
  StartJob(absl::Seconds(20));
  // Rank 1 waits in a barrier (a call in flight: live whatever the lease) while an intruder with the token
  // tries to register as rank 1.
  absl::Status barrier1;
  std::thread waiting([&] { barrier1 = ranks_[1]->Barrier(); });
  absl::SleepFor(absl::Milliseconds(300));
  std::vector<float> mine = {9, 9, 9, 9, 9};
  absl::StatusOr<std::unique_ptr<PsExchange>> intruder = PsExchange::Create(Options(1));
  ASSERT_TRUE(intruder.ok());
  const absl::Status taken = (*intruder)->SyncInitialParameters({mine.data(), mine.size()});
  EXPECT_FALSE(taken.ok());
  EXPECT_TRUE(absl::StrContains(taken.message(), "rank 1 is held by another worker's live session")) << taken;
  ASSERT_TRUE(ranks_[0]->Barrier().ok());
  waiting.join();
  EXPECT_TRUE(barrier1.ok()) << barrier1;  // the real rank 1 kept its session

  // Authenticated as rank 0, a caller cannot push as rank 1 (even naming its channel's own rank would need
  // rank 1's session, which belongs to rank 1's channel).
  RawClient as_rank0(cluster_.addresses[0], kToken, 0);
  proto::PushHeader push;
  push.mutable_address()->set_shard(0);
  push.mutable_address()->set_num_shards(1);
  push.set_rank(1);
  push.set_num_elements(5);
  const grpc::Status pushed = as_rank0.PushPull(push, {MakeChunk(0, {1, 1, 1, 1, 1})});
  EXPECT_EQ(pushed.error_code(), grpc::StatusCode::PERMISSION_DENIED) << pushed.error_message();
  EXPECT_TRUE(absl::StrContains(pushed.error_message(), "cannot act as rank 1")) << pushed.error_message();
  push.set_rank(0);
  const grpc::Status own_rank = as_rank0.PushPull(push, {MakeChunk(0, {1, 1, 1, 1, 1})});
  EXPECT_EQ(own_rank.error_code(), grpc::StatusCode::PERMISSION_DENIED) << own_rank.error_message();

  // Shutdown: not from rank 1, not from an operator while the job runs; from rank 0 it works.
  const absl::Status by_rank1 = ranks_[1]->ShutdownServers();
  EXPECT_TRUE(absl::IsPermissionDenied(by_rank1)) << by_rank1;
  EXPECT_TRUE(absl::StrContains(by_rank1.message(), "only rank 0")) << by_rank1;
  RawClient operator_client(cluster_.addresses[0], kToken);
  EXPECT_EQ(operator_client.Shutdown().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_FALSE(service()->WaitForShutdownRequest(absl::ZeroDuration()));
  // Operators still read Stats with the token.
  proto::StatsReply stats;
  EXPECT_TRUE(operator_client.Stats(&stats).ok());
  EXPECT_EQ(stats.registered_workers(), 2);
  // The job goes on, then rank 0 stops the server.
  std::vector<float> grads = {1, 1, 1, 1, 1};
  std::vector<absl::Status> steps = testing::RunRanks(2, [&](int rank) -> absl::Status {
    return ranks_[rank]
        ->Exchange(0, {grads.data(), grads.size()}, {params_[rank].data(), params_[rank].size()})
        .status();
  });
  for (const absl::Status& s : steps) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(params_[0], params_[1]);
  EXPECT_TRUE(ranks_[0]->ShutdownServers().ok());
  EXPECT_TRUE(service()->WaitForShutdownRequest(absl::ZeroDuration()));
}

// Strangers that open Authenticate and then say nothing hold at most max_pending_handshakes threads, each
// for at most handshake_timeout; the others are refused at once, and a running job's steps go on meanwhile.
TEST_F(RankCredentialTest, SilentHandshakesAreCappedAndTheJobGoesOn) {
  StartJob(absl::Seconds(20));
  constexpr int kSilent = 24;  // the default cap is 16
  auto stub = proto::ParameterServer::NewStub(
      grpc::CreateChannel(cluster_.addresses[0], grpc::InsecureChannelCredentials()));
  std::vector<grpc::Status> ended(kSilent);
  std::vector<std::thread> silent;
  for (int i = 0; i < kSilent; ++i) {
    silent.emplace_back([&, i] {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
      auto stream = stub->Authenticate(&context);
      proto::AuthReply reply;
      while (stream->Read(&reply)) {
      }
      ended[i] = stream->Finish();
    });
  }
  absl::SleepFor(absl::Milliseconds(300));
  std::vector<float> grads = {1, 1, 1, 1, 1};
  std::vector<absl::Status> steps = testing::RunRanks(2, [&](int rank) -> absl::Status {
    return ranks_[rank]
        ->Exchange(0, {grads.data(), grads.size()}, {params_[rank].data(), params_[rank].size()})
        .status();
  });
  for (const absl::Status& s : steps) EXPECT_TRUE(s.ok()) << s;
  const absl::Time start = absl::Now();
  for (std::thread& t : silent) t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));  // ended by the server's 2 s handshake limit
  int refused = 0, cancelled = 0;
  for (const grpc::Status& status : ended) {
    refused += status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    cancelled += status.error_code() == grpc::StatusCode::CANCELLED;
  }
  EXPECT_EQ(refused + cancelled, kSilent);
  EXPECT_GE(refused, kSilent - 16);
}

// A push that stalls after its header (and a first chunk) gives its server thread back after --step_timeout:
// every wait for a next chunk is watched (before issue 34 only the first message was, so the call held its
// thread until the client's own deadline, 60 s here).
TEST(StalledPushTest, APushThatStopsMidwayIsEndedByTheServer) {
  ServiceOptions service;
  service.workers = 1;
  service.step_timeout = absl::Milliseconds(500);
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(1, service);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  proto::RegisterHeader header;
  header.mutable_address()->set_shard(0);
  header.mutable_address()->set_num_shards(1);
  header.set_rank(0);
  header.set_world_size(1);
  header.set_total_params(4);
  header.mutable_hyperparameters()->set_lr(0.1f);
  const RawReply registered = RawClient(cluster->addresses[0]).Register(header, {1, 2, 3, 4});
  ASSERT_TRUE(registered.status.ok()) << registered.status.error_message();
  auto stub = proto::ParameterServer::NewStub(
      grpc::CreateChannel(cluster->addresses[0], grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto stream = stub->PushPull(&context);
  proto::PushRequest request;
  request.mutable_header()->mutable_address()->set_shard(0);
  request.mutable_header()->mutable_address()->set_num_shards(1);
  SetSession(registered.session, request.mutable_header());
  request.mutable_header()->set_num_elements(4);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(stream->Write(request));
  *request.mutable_chunk() = MakeChunk(0, {1, 1});  // half the gradient, then nothing
  ASSERT_TRUE(stream->Write(request));
  proto::PullReply reply;
  while (stream->Read(&reply)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_FALSE(status.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << status.error_message();
  EXPECT_EQ(cluster->servers[0]->service()->version(), 0u);
}

// A worker that crashed (its process gone, so it never calls again) is replaced once its rank has been
// silent for --step_timeout; an operator may then shut the idle server down.
TEST_F(RankCredentialTest, ACrashedRanksReplacementGetsInAfterTheLease) {
  StartJob(absl::Seconds(1));
  ranks_[1].reset();  // "crashed"
  absl::SleepFor(absl::Milliseconds(1200));
  std::vector<float> fresh = {0, 0, 0, 0, 0};
  absl::StatusOr<std::unique_ptr<PsExchange>> replacement = PsExchange::Create(Options(1));
  ASSERT_TRUE(replacement.ok());
  const absl::Status joined = (*replacement)->SyncInitialParameters({fresh.data(), fresh.size()});
  ASSERT_TRUE(joined.ok()) << joined;
  EXPECT_EQ(fresh, params_[0]);  // the servers' parameters
  ranks_[0].reset();
  replacement->reset();
  absl::SleepFor(absl::Milliseconds(1200));
  EXPECT_TRUE(RawClient(cluster_.addresses[0], kToken).Shutdown().ok());
  EXPECT_TRUE(service()->WaitForShutdownRequest(absl::ZeroDuration()));
}

// Steps 0..2 of two ranks; with `attack`, rank 1 first pushes a gradient over the bound at step 1. Returns
// the final parameters (and the refusal, when attacked).
std::vector<float> RunNormJob(bool attack, absl::Status* refusal) {
  ServiceOptions service;
  service.workers = 2;
  service.auth_token = kToken;
  service.step_timeout = absl::Seconds(20);
  service.max_grad_norm = 1000;
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(2, service);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return {};
  constexpr size_t kCount = 1001;  // 501 + 500 over two shards
  std::vector<std::vector<float>> params(2, std::vector<float>(kCount, 0.5f));
  std::vector<absl::Status> statuses = testing::RunRanks(2, [&](int rank) -> absl::Status {
    PsClientOptions options = ClientOptions(cluster->addresses, rank, 2);
    options.reconnect_timeout = absl::Seconds(20);
    options.hyperparameters = {0.1f, 0.9f, 0.0f};
    absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(options);
    if (!exchange.ok()) return exchange.status();
    const trainer::FloatBuffer p{params[rank].data(), kCount};
    if (absl::Status s = (*exchange)->SyncInitialParameters(p); !s.ok()) return s;
    for (int step = 0; step < 3; ++step) {
      std::vector<float> grads(kCount);
      for (size_t i = 0; i < kCount; ++i) grads[i] = 0.001f * (rank + 1) * (i % 7) - 0.002f * step;
      if (attack && rank == 1 && step == 1) {
        std::vector<float> huge(kCount, 100.0f);  // norm about 2,236 on each shard
        *refusal = (*exchange)->Exchange(step, {huge.data(), kCount}, p).status();
        // The refused push left nothing; resynchronise and push the real gradient of the same step.
        if (absl::Status s = (*exchange)->PullParameters(p); !s.ok()) return s;
      }
      if (absl::Status s = (*exchange)->Exchange(step, {grads.data(), kCount}, p).status(); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(params[0], params[1]);
  EXPECT_EQ(cluster->servers[0]->service()->version(), 3u);
  return params[0];
}

TEST(GradientNormTest, AGradientOverTheBoundIsRefusedNamingRankAndNormAndTheJobGoesOn) {
  absl::Status refusal;
  const std::vector<float> attacked = RunNormJob(true, &refusal);
  EXPECT_TRUE(absl::IsInvalidArgument(refusal)) << refusal;
  EXPECT_TRUE(absl::StrContains(refusal.message(), "rank 1 step 1: gradient norm 22")) << refusal;
  EXPECT_TRUE(absl::StrContains(refusal.message(), "exceeds --max_grad_norm=1000")) << refusal;
  absl::Status none;
  const std::vector<float> plain = RunNormJob(false, &none);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(attacked, plain);  // exactly the run without the refused push
}

}  // namespace
}  // namespace psring::ps
