// Issue 34, bounded before authentication: kFloodCalls unauthenticated unary calls (AverageMetrics) of 8 MB
// each (1,000,000 doubles: under the 8 MiB message limit the server had before issue 34) against a real
// //ps:server process with a token, beside a real 2-worker job through it. Before issue 34 gRPC received and
// parsed every such request before the token was checked; now the unary methods are served as streams whose
// request is read only after the call's MAC checked (ps/service.h), and the message limit is a chunk plus
// 1 MiB. Checked: the server's resident size grows by less than kMaxGrowthMiB above its idle size, every flood call is refused (UNAUTHENTICATED, or RESOURCE_EXHAUSTED when gRPC's limits stop it
// first), and the job ends with the closed-form parameters.
// kFloodCalls is 2,000 (the figure; about 20 s on 2 loaded cores); PSRING_FLOOD_CALLS overrides it.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "proto/results.pb.h"
#include "ps/client.h"
#include "tests/ps/ps_cluster.h"
#include "trainer/gradient_only.h"

namespace psring::ps {
namespace {

constexpr char kToken[] = "unary-flood-token-0123456789abcdef";
constexpr int kDefaultFloodCalls = 2000;
constexpr int kInFlight = 16;           // flood calls in flight at once (over 4 connections)
constexpr size_t kValues = 1000000;     // 8,000,000 bytes of doubles per request
constexpr int64_t kMaxGrowthMiB = 128;  // the bound

std::string Runfile(const std::string& path) {
  const char* dir = std::getenv("TEST_SRCDIR");
  return std::string(dir != nullptr ? dir : ".") + "/psring/" + path;
}

std::string TempDir() { return std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp"; }

// VmRSS of process `pid`, KiB (0 when it is gone).
int64_t RssKib(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int64_t kib = 0;
    if (fields.size() >= 2 && fields[0] == "VmRSS:" && absl::SimpleAtoi(fields[1], &kib)) return kib;
  }
  return 0;
}

// Sends `total` AverageMetrics calls without any authentication, kInFlight at a time over 4 connections.
// Returns how many ended with each code.
std::map<grpc::StatusCode, int> Flood(const std::string& address, int total) {
  std::vector<std::unique_ptr<proto::ParameterServer::Stub>> stubs;
  for (int i = 0; i < 4; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxSendMessageSize(16 << 20);
    stubs.push_back(proto::ParameterServer::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
  }
  proto::MetricsRequest request;
  request.mutable_address()->set_shard(0);
  request.mutable_address()->set_num_shards(1);
  for (size_t i = 0; i < kValues; ++i) request.add_values(static_cast<double>(i));
  struct Call {
    grpc::ClientContext context;
    proto::MetricsReply reply;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<proto::MetricsReply>> reader;
  };
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Call>> calls(total);
  int started = 0;
  const auto start = [&] {
    auto& call = calls[started];
    call = std::make_unique<Call>();
    call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    call->reader = stubs[started % stubs.size()]->AsyncAverageMetrics(&call->context, request, &cq);
    call->reader->Finish(&call->reply, &call->status, reinterpret_cast<void*>(static_cast<intptr_t>(started)));
    ++started;
  };
  while (started < std::min(total, kInFlight)) start();
  std::map<grpc::StatusCode, int> codes;
  for (int ended = 0; ended < total; ++ended) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) break;
    const int id = static_cast<int>(reinterpret_cast<intptr_t>(tag));
    ++codes[calls[id]->status.error_code()];
    calls[id].reset();
    if (started < total) start();
  }
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  return codes;
}

TEST(UnaryFloodTest, UnauthenticatedEightMegabyteCallsBesideAJobStayBounded) {
  int flood_calls = kDefaultFloodCalls;
  if (const char* env = std::getenv("PSRING_FLOOD_CALLS"); env != nullptr) {
    ASSERT_TRUE(absl::SimpleAtoi(env, &flood_calls));
  }
  const std::string dir = TempDir();
  const std::string token_file = dir + "/flood.token";
  const std::string port_file = dir + "/flood.port";
  std::remove(port_file.c_str());
  { std::ofstream(token_file) << kToken << "\n"; }
  std::filesystem::permissions(token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::replace);
  absl::StatusOr<Subprocess> server = Subprocess::Start(
      {Runfile("ps/server"), "--port=0", "--bind_addr=127.0.0.1", "--workers=2", "--auth_token_file=" + token_file,
       "--port_file=" + port_file, "--step_timeout=60", "--checkpoint_every=0"});
  ASSERT_TRUE(server.ok()) << server.status();
  int port = 0;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (port == 0 && absl::Now() < give_up) {
    std::ifstream in(port_file);
    if (!(in >> port)) port = 0;
    if (port == 0) absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_NE(port, 0) << "the server did not write --port_file";
  const std::string address = absl::StrCat("127.0.0.1:", port);

  constexpr size_t kBytes = 4 * 100003;
  constexpr int kSteps = 20;
  std::vector<::psring::proto::WorkerResult> results(2);
  std::vector<std::unique_ptr<PsExchange>> exchanges(2);
  for (int rank = 0; rank < 2; ++rank) {
    PsClientOptions options;
    options.servers = {address};
    options.rank = rank;
    options.world_size = 2;
    options.timeout = absl::Seconds(60);
    options.reconnect_timeout = absl::Seconds(60);
    options.auth_token = kToken;
    options.hyperparameters = {0.1f, 0.9f, 1e-2f};
    absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(options);
    ASSERT_TRUE(exchange.ok()) << exchange.status();
    exchanges[rank] = std::move(*exchange);
  }
  const int64_t before_kib = RssKib(server->pid());
  ASSERT_GT(before_kib, 0);
  int64_t peak_kib = before_kib;
  std::atomic<bool> done{false};
  std::thread monitor([&] {
    while (!done) {
      peak_kib = std::max(peak_kib, RssKib(server->pid()));
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  std::map<grpc::StatusCode, int> codes;
  std::thread flood([&] { codes = Flood(address, flood_calls); });
  const absl::Time job_start = absl::Now();
  std::vector<absl::Status> statuses = testing::RunRanks(2, [&](int rank) -> absl::Status {
    trainer::GradientOnlyOptions go;
    go.bytes = kBytes;
    go.warmup_steps = 1;
    go.steps = kSteps;
    absl::StatusOr<::psring::proto::WorkerResult> result = trainer::RunGradientOnly(go, exchanges[rank].get());
    if (!result.ok()) return result.status();
    results[rank] = *result;
    return absl::OkStatus();
  });
  const absl::Duration job_time = absl::Now() - job_start;
  flood.join();
  done = true;
  monitor.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    EXPECT_EQ(results[r].wrong(), 0) << "rank " << r << ": parameters differ from the closed form";
    EXPECT_EQ(results[r].steps(), kSteps);
  }
  int total = 0;
  for (const auto& [code, count] : codes) {
    total += count;
    EXPECT_TRUE(code == grpc::StatusCode::UNAUTHENTICATED || code == grpc::StatusCode::RESOURCE_EXHAUSTED)
        << count << " flood calls ended with code " << code;
  }
  EXPECT_EQ(total, flood_calls);
  std::printf("# %d unauthenticated 8 MB calls: server RSS %lld MiB before, peak %lld MiB (+%lld MiB); "
              "refused UNAUTHENTICATED %d, RESOURCE_EXHAUSTED %d; job of %d steps took %.1f s\n",
              flood_calls, static_cast<long long>(before_kib >> 10), static_cast<long long>(peak_kib >> 10),
              static_cast<long long>((peak_kib - before_kib) >> 10), codes[grpc::StatusCode::UNAUTHENTICATED],
              codes[grpc::StatusCode::RESOURCE_EXHAUSTED], kSteps + 1, absl::ToDoubleSeconds(job_time));
  EXPECT_LT((peak_kib - before_kib) >> 10, kMaxGrowthMiB);
}

}  // namespace
}  // namespace psring::ps
