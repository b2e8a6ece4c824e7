// Chaos with real processes (issue 13): a //ps:server shard killed with SIGKILL mid-training and restarted on
// its port from its checkpoint folder, a shard stopped with SIGSTOP (briefly, and for longer than the
// workers' --timeout), and a //ps:worker stopped with SIGSTOP. Ranks in this process are PsExchange clients
// pushing the gradient-only values (trainer/gradient_only.h), so every parameter a shard holds has an exact
// closed form: after each fault the shards must hold exactly the values of the steps they applied (no step
// half applied, none applied twice), the ranks must fail clearly within their timeouts or recover by
// themselves, and nothing may hang. Loopback only; every wait is bounded.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/socket.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "ps/client.h"
#include "ps/shard_layout.h"
#include "tests/ps/ps_cluster.h"
#include "tests/testing/temp_dir.h"
#include "trainer/gradient_only.h"

namespace psring::ps {
namespace {

constexpr int kRanks = 2;
// Above the 1 MiB push window of each shard, so pushes are held by the window while a fault hits.
constexpr size_t kCount = 600000;
const trainer::SgdOptions kHyper = {0.05f, 0.9f, 5e-4f};

std::string Runfile(const std::string& path) {
  const char* dir = std::getenv("TEST_SRCDIR");
  return std::string(dir != nullptr ? dir : ".") + "/psring/" + path;
}

// K //ps:server processes on loopback ports with checkpoint folders, each restartable on its port.
class ServerProcesses {
 public:
  ServerProcesses(int num_shards, double step_timeout_s, const std::string& dir) {
    absl::StatusOr<std::vector<int>> ports = FreeLoopbackPorts(num_shards);
    EXPECT_TRUE(ports.ok()) << ports.status();
    for (int shard = 0; shard < num_shards && ports.ok(); ++shard) {
      const int port = (*ports)[shard];
      addresses_.push_back(absl::StrCat("127.0.0.1:", port));
      argv_.push_back({Runfile("ps/server"), absl::StrCat("--port=", port), "--bind_addr=127.0.0.1",
                       absl::StrCat("--workers=", kRanks), absl::StrCat("--shard=", shard),
                       absl::StrCat("--num_shards=", num_shards), absl::StrCat("--step_timeout=", step_timeout_s),
                       absl::StrCat("--checkpoint_dir=", dir, "/shard", shard), "--checkpoint_every=1"});
      processes_.emplace_back();
      Start(shard);
    }
  }

  void Start(int shard) {
    absl::StatusOr<Subprocess> process = Subprocess::Start(argv_[shard]);
    ASSERT_TRUE(process.ok()) << process.status();
    processes_[shard] = std::move(*process);
  }
  Subprocess& process(int shard) { return processes_[shard]; }
  const std::vector<std::string>& addresses() const { return addresses_; }

 private:
  std::vector<std::vector<std::string>> argv_;
  std::vector<std::string> addresses_;
  std::vector<Subprocess> processes_;
};

PsClientOptions ClientOptions(const std::vector<std::string>& servers, int rank, absl::Duration timeout) {
  PsClientOptions options;
  options.servers = servers;
  options.rank = rank;
  options.world_size = kRanks;
  options.hyperparameters = kHyper;
  options.timeout = timeout;
  options.reconnect_timeout = absl::Seconds(30);
  return options;
}

// A rank in this process: registered, offering the gradient-only initial values.
struct Rank {
  std::unique_ptr<PsExchange> exchange;
  std::vector<float> params = std::vector<float>(kCount);
  std::vector<float> grads = std::vector<float>(kCount);
  trainer::FloatBuffer p() { return {params.data(), kCount}; }
  trainer::FloatBuffer g() { return {grads.data(), kCount}; }
};

absl::Status Join(Rank* rank, const PsClientOptions& options) {
  absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(options);
  if (!exchange.ok()) return exchange.status();
  rank->exchange = std::move(*exchange);
  for (size_t i = 0; i < kCount; ++i) {
    rank->params[i] = trainer::GradientOnlyInitialValue(i);
    rank->grads[i] = trainer::GradientOnlyValue(options.rank, kRanks, i);
  }
  return rank->exchange->SyncInitialParameters(rank->p());
}

// Checks that `params` holds, in every shard's range, exactly the closed form of the steps that shard
// applied (its version), and returns the versions.
std::vector<uint64_t> ExpectExactPerShard(PsExchange* exchange, const std::vector<float>& params) {
  std::vector<uint64_t> versions;
  const trainer::OptimizerInfo optimizer = exchange->optimizer();
  for (int shard = 0; shard < exchange->num_shards(); ++shard) {
    absl::StatusOr<proto::StatsReply> stats = exchange->Stats(shard);
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok()) return versions;
    versions.push_back(stats->version());
    const std::vector<float> want =
        trainer::ExpectedServerParameters(optimizer, kCount, kRanks, static_cast<int>(stats->version()));
    const ShardRange range = ComputeShardRange(kCount, shard, exchange->num_shards());
    size_t wrong = 0;
    for (uint64_t i = range.begin; i < range.end; ++i) wrong += params[i] != want[i];
    EXPECT_EQ(wrong, 0u) << "shard " << shard << " at version " << stats->version()
                         << " holds values that no sequence of whole steps gives";
  }
  return versions;
}

// Both ranks run `steps` steps (retrying nothing themselves: the client re-registers with a restarted
// shard on its own), then meet at a barrier and pull the final parameters. `done` counts rank 0's steps.
std::vector<absl::Status> Train(std::vector<Rank>* ranks, int steps, std::atomic<int>* done) {
  return testing::RunRanks(kRanks, [&](int r) -> absl::Status {
    Rank& rank = (*ranks)[r];
    for (int step = 0; step < steps; ++step) {
      absl::StatusOr<trainer::ExchangeOutcome> out = rank.exchange->Exchange(step, rank.g(), rank.p());
      if (!out.ok()) return absl::Status(out.status().code(), absl::StrCat("step ", step, ": ", out.status().message()));
      if (r == 0) done->fetch_add(1);
    }
    if (absl::Status s = rank.exchange->Barrier(); !s.ok()) return s;
    return rank.exchange->PullParameters(rank.p());
  });
}

// Registers every rank (in parallel: a synchronous shard's registration completes for all at once).
bool JoinAll(const ServerProcesses& servers, absl::Duration timeout, std::vector<Rank>* ranks) {
  std::vector<absl::Status> joined = testing::RunRanks(kRanks, [&](int r) {
    return Join(&(*ranks)[r], ClientOptions(servers.addresses(), r, timeout));
  });
  for (const absl::Status& s : joined) EXPECT_TRUE(s.ok()) << s;
  return std::all_of(joined.begin(), joined.end(), [](const absl::Status& s) { return s.ok(); });
}

bool WaitFor(const std::atomic<int>& counter, int value, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (counter.load() < value && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
  return counter.load() >= value;
}

TEST(PsChaosTest, KilledServerRestartedOnItsPortResumesFromItsCheckpointExactly) {
  const std::string dir = psring::testing::FreshTempPath("chaos_kill");
  ServerProcesses servers(2, /*step_timeout_s=*/10, dir);
  std::vector<Rank> ranks(kRanks);
  ASSERT_TRUE(JoinAll(servers, absl::Seconds(30), &ranks));

  constexpr int kSteps = 40;
  std::atomic<int> done{0};
  std::vector<absl::Status> trained;
  std::thread training([&] { trained = Train(&ranks, kSteps, &done); });
  const bool reached = WaitFor(done, 10, absl::Seconds(60));
  servers.process(0).Kill();  // SIGKILL, wherever shard 0 is in its step
  absl::SleepFor(absl::Milliseconds(200));
  servers.Start(0);  // same port, same checkpoint folder
  training.join();
  ASSERT_TRUE(reached) << "rank 0 did not complete 10 steps in 60 s";
  for (const absl::Status& s : trained) ASSERT_TRUE(s.ok()) << s;

  EXPECT_EQ(ranks[0].params, ranks[1].params);
  const std::vector<uint64_t> versions = ExpectExactPerShard(ranks[0].exchange.get(), ranks[0].params);
  ASSERT_EQ(versions.size(), 2u);
  // Shard 1 never stopped: it applied every step. Shard 0 lost at most the step it was applying when it died
  // (checkpoints every step), and the ranks skip one step if they were at different steps when it restarted.
  EXPECT_EQ(versions[1], static_cast<uint64_t>(kSteps));
  EXPECT_LE(versions[0], static_cast<uint64_t>(kSteps));
  EXPECT_GE(versions[0], static_cast<uint64_t>(kSteps - 3));
}

TEST(PsChaosTest, StoppedServerResumesAfterSigcontWithEveryStepApplied) {
  const std::string dir = psring::testing::FreshTempPath("chaos_stop");
  ServerProcesses servers(2, /*step_timeout_s=*/10, dir);
  std::vector<Rank> ranks(kRanks);
  ASSERT_TRUE(JoinAll(servers, absl::Seconds(30), &ranks));

  constexpr int kSteps = 30;
  std::atomic<int> done{0};
  std::vector<absl::Status> trained;
  std::thread training([&] { trained = Train(&ranks, kSteps, &done); });
  const bool reached = WaitFor(done, 10, absl::Seconds(60));
  servers.process(1).Signal(SIGSTOP);  // alive, connected, silent
  absl::SleepFor(absl::Seconds(2));
  servers.process(1).Signal(SIGCONT);
  training.join();
  ASSERT_TRUE(reached) << "rank 0 did not complete 10 steps in 60 s";
  for (const absl::Status& s : trained) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ranks[0].params, ranks[1].params);
  const std::vector<uint64_t> versions = ExpectExactPerShard(ranks[0].exchange.get(), ranks[0].params);
  EXPECT_EQ(versions, std::vector<uint64_t>(2, kSteps));
}

TEST(PsChaosTest, ServerStoppedForLongerThanTheTimeoutFailsTheRanksClearly) {
  const std::string dir = psring::testing::FreshTempPath("chaos_stop_long");
  ServerProcesses servers(1, /*step_timeout_s=*/10, dir);
  std::vector<Rank> ranks(kRanks);
  ASSERT_TRUE(JoinAll(servers, absl::Seconds(3), &ranks));
  servers.process(0).Signal(SIGSTOP);
  const absl::Time start = absl::Now();
  std::atomic<int> done{0};
  std::vector<absl::Status> trained = Train(&ranks, 5, &done);
  const absl::Duration waited = absl::Now() - start;
  servers.process(0).Signal(SIGCONT);
  for (const absl::Status& s : trained) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
    EXPECT_NE(s.message().find("--timeout=3s"), std::string::npos) << s;
  }
  EXPECT_EQ(done.load(), 0);
  EXPECT_LT(waited, absl::Seconds(25)) << "a stopped server must fail the ranks at their --timeout";
}

TEST(PsChaosTest, StoppedWorkerFailsTheStepWithinTheStepTimeoutAndLeavesNoPartialStep) {
  const std::string dir = psring::testing::FreshTempPath("chaos_worker");
  ServerProcesses servers(2, /*step_timeout_s=*/1, dir);
  // Rank 1: a real //ps:worker in gradient-only mode with (nearly) endless steps.
  absl::StatusOr<Subprocess> worker = Subprocess::Start(
      {Runfile("ps/worker"), "--servers=" + servers.addresses()[0] + "," + servers.addresses()[1], "--rank=1",
       absl::StrCat("--world_size=", kRanks), absl::StrCat("--model_bytes=", kCount * 4), "--max_steps=1000000",
       "--warmup_steps=0", "--timeout=20", "--lr=0.05", "--momentum=0.9", "--weight_decay=0.0005"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  Rank rank0;
  ASSERT_TRUE(Join(&rank0, ClientOptions(servers.addresses(), 0, absl::Seconds(20))).ok());
  // The worker process may take seconds to start on a loaded machine, longer than the 1 s step timeout the
  // barrier waits: wait until it has registered with both shards first.
  auto registered = [&] {
    for (int shard = 0; shard < 2; ++shard) {
      absl::StatusOr<proto::StatsReply> stats = rank0.exchange->Stats(shard);
      if (!stats.ok() || stats->registered_workers() < kRanks) return false;
    }
    return true;
  };
  const absl::Time registered_by = absl::Now() + absl::Seconds(30);
  while (!registered() && absl::Now() < registered_by) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(registered()) << "the worker process did not register within 30 s";
  ASSERT_TRUE(rank0.exchange->Barrier().ok());  // the worker's barrier before its measured steps
  int step = 0;
  for (; step < 5; ++step) ASSERT_TRUE(rank0.exchange->Exchange(step, rank0.g(), rank0.p()).ok()) << step;

  worker->Signal(SIGSTOP);
  absl::StatusOr<trainer::ExchangeOutcome> failed = trainer::ExchangeOutcome::kParametersUpdated;
  absl::Duration waited;
  // The stopped rank may have pushed a step ahead before it stopped; the first step it never pushed fails.
  for (int tries = 0; tries < 3 && failed.ok(); ++tries, ++step) {
    const absl::Time start = absl::Now();
    failed = rank0.exchange->Exchange(step, rank0.g(), rank0.p());
    waited = absl::Now() - start;
  }
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(failed.status())) << failed.status();
  EXPECT_NE(failed.status().message().find("ranks 1 did not push"), std::string::npos) << failed.status();
  EXPECT_LT(waited, absl::Seconds(15)) << "the servers' 1 s step timeout must end the wait, not the 20 s deadline";

  // The step was rolled back on every shard: what they hold is exactly the steps they completed.
  ASSERT_TRUE(rank0.exchange->PullParameters(rank0.p()).ok());
  ExpectExactPerShard(rank0.exchange.get(), rank0.params);

  // Resumed, the worker ends (its step was dropped, or it waits for rank 0 until the step timeout): no hang.
  worker->Signal(SIGCONT);
  EXPECT_TRUE(worker->Wait(absl::Seconds(30))) << "the resumed worker neither trained on nor exited";
  EXPECT_NE(worker->exit_code(), 0) << worker->ExitDescription();
}

}  // namespace
}  // namespace psring::ps
