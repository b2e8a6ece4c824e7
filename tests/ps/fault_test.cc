// Faults with real processes: a //ps:worker process killed (SIGKILL) in the middle of training makes the
// other rank's step fail with DEADLINE_EXCEEDED after the server's --step_timeout, the server keeps
// serving, and a replacement for the dead rank joins and training goes on. Also //ps:local end to end (with
// backup workers and a straggler too), and //ps:server refusing bad --backup_workers.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "ps/client.h"
#include "tests/ps/ps_cluster.h"

namespace psring::ps {
namespace {

std::string Runfile(const std::string& path) {
  const char* dir = std::getenv("TEST_SRCDIR");
  return std::string(dir != nullptr ? dir : ".") + "/psring/" + path;
}

// A child process with its stdout in `stdout_path`; killed and reaped on destruction whatever happens in the
// test. Fails the test when it cannot be started.
Subprocess StartChild(const std::vector<std::string>& argv, const std::string& stdout_path = "/dev/null") {
  SpawnOptions options;
  options.stdout_file = stdout_path;
  absl::StatusOr<Subprocess> child = Subprocess::Start(argv, options);
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? std::move(*child) : Subprocess();
}

TEST(FaultTest, KilledWorkerFailsOthersWithinTimeoutAndCanBeReplaced) {
  constexpr size_t kCount = 50000;
  ServiceOptions service;
  service.workers = 2;
  service.step_timeout = absl::Seconds(1);
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(2, service);
  ASSERT_TRUE(cluster.ok()) << cluster.status();

  // Rank 1: a real worker process in gradient-only mode with (nearly) endless steps.
  Subprocess worker = StartChild(
      {Runfile("ps/worker"), "--servers=" + cluster->addresses[0] + "," + cluster->addresses[1], "--rank=1",
       "--world_size=2", absl::StrCat("--model_bytes=", kCount * 4), "--max_steps=1000000",
       "--warmup_steps=0", "--timeout=20", "--lr=0.05", "--momentum=0.9", "--weight_decay=0.0005"});
  ASSERT_TRUE(worker.running());

  // Rank 0 in this process, with the worker binary's default hyperparameters.
  PsClientOptions options = testing::ClientOptionsFor(*cluster, 0, 2);
  options.hyperparameters = {0.05f, 0.9f, 5e-4f};
  options.timeout = absl::Seconds(20);
  absl::StatusOr<std::unique_ptr<PsExchange>> rank0 = PsExchange::Create(options);
  ASSERT_TRUE(rank0.ok());
  std::vector<float> params(kCount, 0.5f), grads(kCount, 0.01f);
  const trainer::FloatBuffer p{params.data(), kCount}, g{grads.data(), kCount};
  ASSERT_TRUE((*rank0)->SyncInitialParameters(p).ok());
  // The worker process may take seconds to start on a loaded machine, longer than the 1 s step timeout the
  // barrier waits: wait until it has registered with both shards first.
  const absl::Time registered_by = absl::Now() + absl::Seconds(30);
  auto registered = [&] {
    return cluster->servers[0]->service()->GetStats().registered_workers() == 2 &&
           cluster->servers[1]->service()->GetStats().registered_workers() == 2;
  };
  while (!registered() && absl::Now() < registered_by) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(registered()) << "the worker process did not register within 30 s";
  ASSERT_TRUE((*rank0)->Barrier().ok());  // the worker's barrier before its measured steps
  for (int step = 0; step < 5; ++step) ASSERT_TRUE((*rank0)->Exchange(step, g, p).ok()) << "step " << step;

  worker.Kill();  // mid-training: it may be anywhere in its next push
  // The dead rank may have pushed a step or two ahead before it died; the first step it never pushed fails.
  absl::StatusOr<trainer::ExchangeOutcome> failed = trainer::ExchangeOutcome::kParametersUpdated;
  absl::Duration waited;
  for (int step = 5; step < 10 && failed.ok(); ++step) {
    const absl::Time start = absl::Now();
    failed = (*rank0)->Exchange(step, g, p);
    waited = absl::Now() - start;
  }
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(failed.status())) << failed.status();
  EXPECT_NE(failed.status().message().find("ranks 1 did not push"), std::string::npos) << failed.status();
  EXPECT_LT(waited, absl::Seconds(10))
      << "the server's 1 s step timeout must end the wait, not the 20 s RPC deadline";

  // The server keeps serving: a replacement rank 1 registers, and both ranks complete steps again.
  const uint64_t version = cluster->servers[0]->service()->version();
  PsClientOptions replacement_options = testing::ClientOptionsFor(*cluster, 1, 2);
  replacement_options.hyperparameters = options.hyperparameters;
  absl::StatusOr<std::unique_ptr<PsExchange>> rank1 = PsExchange::Create(replacement_options);
  ASSERT_TRUE(rank1.ok());
  std::vector<float> params1(kCount, 0.0f);
  const trainer::FloatBuffer p1{params1.data(), kCount};
  ASSERT_TRUE((*rank1)->SyncInitialParameters(p1).ok());
  EXPECT_EQ(params1, params);  // the replacement starts from the servers' parameters
  std::vector<absl::Status> statuses = testing::RunRanks(2, [&](int rank) -> absl::Status {
    for (int step = 0; step < 3; ++step) {
      absl::StatusOr<trainer::ExchangeOutcome> out =
          rank == 0 ? (*rank0)->Exchange(step, g, p) : (*rank1)->Exchange(step, g, p1);
      if (!out.ok()) return out.status();
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(cluster->servers[0]->service()->version(), version + 3);
  EXPECT_EQ(params1, params);
}

// A step timeout must end a push that is held by the push window: with a model larger than the window the
// worker stops pushing until replies come back, and the server's reader waits for more gradient. The
// server's --step_timeout must still end the call promptly (it once waited for the client's own --timeout).
TEST(FaultTest, StepTimeoutEndsAPushHeldByThePushWindow) {
  constexpr size_t kCount = 1 << 20;  // 4 MiB: four times the default 1 MiB push window
  ServiceOptions service;
  service.workers = 2;
  service.step_timeout = absl::Seconds(1);
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(1, service);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<std::unique_ptr<PsExchange>> ranks;
  std::vector<float> params(kCount, 0.5f), grads(kCount, 0.01f);
  const trainer::FloatBuffer p{params.data(), kCount}, g{grads.data(), kCount};
  for (int rank = 0; rank < 2; ++rank) {
    PsClientOptions options = testing::ClientOptionsFor(*cluster, rank, 2);
    options.timeout = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(options);
    ASSERT_TRUE(exchange.ok()) << exchange.status();
    ASSERT_TRUE((*exchange)->SyncInitialParameters(p).ok());
    ranks.push_back(std::move(*exchange));
  }
  // Rank 1 registered but never pushes (a stalled worker).
  const absl::Time start = absl::Now();
  absl::StatusOr<trainer::ExchangeOutcome> failed = ranks[0]->Exchange(0, g, p);
  const absl::Duration waited = absl::Now() - start;
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(failed.status())) << failed.status();
  EXPECT_NE(failed.status().message().find("ranks 1 did not push"), std::string::npos) << failed.status();
  EXPECT_LT(waited, absl::Seconds(20)) << "the server's 1 s step timeout must end the wait, not the 30 s deadline";
  EXPECT_EQ(cluster->servers[0]->service()->version(), 0u);
  // The shard rolled the step back: both ranks still step together afterwards.
  std::vector<float> params1(kCount, 0.0f);
  const trainer::FloatBuffer p1{params1.data(), kCount};
  ASSERT_TRUE(ranks[1]->PullParameters(p1).ok());
  ASSERT_TRUE(ranks[0]->PullParameters(p).ok());
  EXPECT_EQ(params1, std::vector<float>(kCount, 0.5f));
  std::vector<absl::Status> statuses = testing::RunRanks(2, [&](int rank) -> absl::Status {
    absl::StatusOr<trainer::ExchangeOutcome> out = ranks[rank]->Exchange(0, g, rank == 0 ? p : p1);
    return out.status();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(params1, params);
  EXPECT_EQ(cluster->servers[0]->service()->version(), 1u);
}

// After a server restart the ranks may be one trainer step apart: a rank still pushing the older step,
// held by its push window, must learn at once that the newer step replaced it (ABORTED: it pulls and goes
// on), not after its --timeout. This is how the rare 60 s wait after a restart came about.
TEST(FaultTest, ARankAheadReplacesTheStepOfARankHeldByThePushWindowAtOnce) {
  constexpr size_t kCount = 1 << 20;  // four push windows
  ServiceOptions service;
  service.workers = 2;
  service.step_timeout = absl::Seconds(20);
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(1, service);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<std::unique_ptr<PsExchange>> ranks(2);
  std::vector<std::vector<float>> params(2, std::vector<float>(kCount, 0.5f));
  std::vector<float> grads(kCount, 0.01f);
  const trainer::FloatBuffer g{grads.data(), kCount};
  std::vector<absl::Status> joined = testing::RunRanks(2, [&](int rank) -> absl::Status {
    PsClientOptions options = testing::ClientOptionsFor(*cluster, rank, 2);
    options.timeout = absl::Seconds(40);
    absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(options);
    if (!exchange.ok()) return exchange.status();
    ranks[rank] = std::move(*exchange);
    return ranks[rank]->SyncInitialParameters({params[rank].data(), kCount});
  });
  for (const absl::Status& s : joined) ASSERT_TRUE(s.ok()) << s;
  const absl::Time start = absl::Now();
  std::vector<absl::Status> statuses = testing::RunRanks(2, [&](int rank) -> absl::Status {
    const trainer::FloatBuffer p{params[rank].data(), kCount};
    if (rank == 0) {  // behind: trainer step 5, then 6
      for (int step = 5; step <= 6; ++step) {
        absl::StatusOr<trainer::ExchangeOutcome> out = ranks[0]->Exchange(step, g, p);
        if (!out.ok()) return out.status();
      }
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(300));  // rank 0's push of step 5 is held by its window by now
    return ranks[1]->Exchange(6, g, p).status();
  });
  const absl::Duration took = absl::Now() - start;
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  EXPECT_LT(took, absl::Seconds(30)) << "rank 0 waited for its 40 s --timeout instead of being told at once";
  EXPECT_EQ(cluster->servers[0]->service()->version(), 1u);  // step 6 only; step 5 was skipped
  EXPECT_EQ(params[0], params[1]);
}

// //ps:worker processes whose command line contains `token`.
// A file of the process whose /proc folder is `proc_dir` (cmdline, environ); "" once it has exited. Plain read():
// libstdc++'s streams throw when a process exits while they read its file (ESRCH).
std::string ProcFile(const std::filesystem::path& proc_dir, const char* name) {
  std::string cmdline;
  const int fd = ::open((proc_dir / name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return cmdline;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) cmdline.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return cmdline;
}

std::string CommandLine(const std::filesystem::path& proc_dir) { return ProcFile(proc_dir, "cmdline"); }

int CountProcessesWith(const std::string& token) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string cmdline = CommandLine(entry.path());
    const std::string program = cmdline.substr(0, cmdline.find('\0'));
    const bool worker = program.size() >= 9 && program.compare(program.size() - 9, 9, "ps/worker") == 0;
    if (worker && cmdline.find(token) != std::string::npos) ++count;
  }
  return count;
}

TEST(FaultTest, LocalLauncherTearsDownOnCtrlC) {
  // A token no other process has, so the scan below sees only this job's workers.
  const std::string token = absl::StrCat("--synthetic_samples=", 100000 + ::getpid() % 100000);
  Subprocess local = StartChild(
      {Runfile("ps/local"), "--workers=2", "--num_shards=2", "--server_bin=" + Runfile("ps/server"),
       "--worker_bin=" + Runfile("ps/worker"), "--job_timeout=50", "--", "--dataset=synthetic", token,
       "--hidden=16", "--epochs=1000", "--log_every=0", "--evaluate=false", "--device=cpu"});
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (CountProcessesWith(token) < 2 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_EQ(CountProcessesWith(token), 2) << "the workers did not start";
  local.Signal(SIGINT);
  ASSERT_TRUE(local.Wait(absl::Seconds(20))) << "the launcher did not exit after SIGINT";
  EXPECT_EQ(local.exit_code(), 1) << "the launcher " << local.ExitDescription();
  EXPECT_EQ(CountProcessesWith(token), 0) << "workers survived the launcher";
}

// Issue 22: //ps:local hands the token to its servers and workers in the environment; no command line
// (readable by every local user in /proc/<pid>/cmdline) holds it.
TEST(FaultTest, LocalLauncherKeepsTheTokenOffCommandLines) {
  const std::string token = absl::StrCat("local-token-", ::getpid(), "-0123456789abcdef");
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string token_file = dir + "/local.token";
  { std::ofstream(token_file) << token << "\n"; }
  // Readable by this user only: a token file others may read is refused (issue 34).
  std::filesystem::permissions(token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::replace);
  const std::string marker = absl::StrCat("--synthetic_samples=", 200000 + ::getpid() % 100000);
  Subprocess local = StartChild(
      {Runfile("ps/local"), "--workers=2", "--num_shards=1", "--server_bin=" + Runfile("ps/server"),
       "--worker_bin=" + Runfile("ps/worker"), "--job_timeout=50", "--auth_token_file=" + token_file, "--",
       "--dataset=synthetic", marker, "--hidden=16", "--epochs=1000", "--log_every=0", "--evaluate=false",
       "--device=cpu"});
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (CountProcessesWith(marker) < 2 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_EQ(CountProcessesWith(marker), 2) << "the workers did not start (refused by the servers?)";
  int with_token_in_environment = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    EXPECT_EQ(CommandLine(entry.path()).find(token), std::string::npos) << entry.path();
    const std::string cmdline = CommandLine(entry.path());
    if (cmdline.find(marker) == std::string::npos) continue;
    const std::string env = ProcFile(entry.path(), "environ");
    with_token_in_environment += env.find(absl::StrCat("PSRING_AUTH_TOKEN=", token)) != std::string::npos;
  }
  EXPECT_EQ(with_token_in_environment, 2);
  local.Signal(SIGINT);
  ASSERT_TRUE(local.Wait(absl::Seconds(20))) << "the launcher did not exit after SIGINT";
}

TEST(FaultTest, LocalLauncherRunsAWholeJob) {
  const std::string out =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/local.out";
  Subprocess local =
      StartChild({Runfile("ps/local"), "--workers=3", "--num_shards=2",
                  "--server_bin=" + Runfile("ps/server"), "--worker_bin=" + Runfile("ps/worker"),
                  "--job_timeout=50", "--", "--model_bytes=40000", "--max_steps=5"},
                 out);
  ASSERT_TRUE(local.Wait(absl::Seconds(55))) << "the launcher did not finish";
  EXPECT_EQ(local.exit_code(), 0) << "the launcher " << local.ExitDescription();
  std::FILE* f = std::fopen(out.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char line[4096];
  int workers = 0, servers = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    const std::string text(line);
    if (text.rfind("PSRING_RESULT ", 0) != 0) continue;
    if (text.find("\"role\":\"worker\"") != std::string::npos) {
      ++workers;
      EXPECT_NE(text.find("\"wrong\":0,"), std::string::npos) << text;
      EXPECT_NE(text.find("\"steps\":5,"), std::string::npos) << text;
    }
    if (text.find("\"role\":\"server\"") != std::string::npos) ++servers;
  }
  std::fclose(f);
  EXPECT_EQ(workers, 3);
  EXPECT_EQ(servers, 2);
}

// Backup workers through the real binaries: //ps:local passes --backup_workers to its servers; a replayed
// MLP with rank 2 computing 4x slower finishes with nothing wrong, and each server's result line reports the
// pushes it dropped.
TEST(FaultTest, LocalLauncherRunsBackupWorkersWithAStraggler) {
  const std::string out =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/local_backup.out";
  Subprocess local =
      StartChild({Runfile("ps/local"), "--workers=3", "--num_shards=2", "--backup_workers=1",
                  "--server_bin=" + Runfile("ps/server"), "--worker_bin=" + Runfile("ps/worker"),
                  "--job_timeout=50", "--", "--workload=mlp", "--max_steps=6", "--straggler=2:4"},
                 out);
  ASSERT_TRUE(local.Wait(absl::Seconds(55))) << "the launcher did not finish";
  EXPECT_EQ(local.exit_code(), 0) << "the launcher " << local.ExitDescription();
  std::ifstream in(out);
  std::string text;
  int workers = 0, servers = 0;
  while (std::getline(in, text)) {
    if (text.rfind("PSRING_RESULT ", 0) != 0) continue;
    if (text.find("\"role\":\"worker\"") != std::string::npos) {
      ++workers;
      EXPECT_NE(text.find("\"wrong\":0,"), std::string::npos) << text;
    } else {
      ++servers;
      EXPECT_NE(text.find("\"backup_workers\":1,\"dropped_pushes\":"), std::string::npos) << text;
      EXPECT_NE(text.find("\"dropped_by_rank\":["), std::string::npos) << text;
    }
  }
  EXPECT_EQ(workers, 3);
  EXPECT_EQ(servers, 2);
}

TEST(FaultTest, ServerRefusesBadBackupWorkers) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--workers=3", "--backup_workers=3"}, "--backup_workers=3 must be in [0, --workers=3)"},
      {{"--workers=3", "--backup_workers=-1"}, "--backup_workers=-1 must be in [0, --workers=3)"},
      {{"--workers=3", "--backup_workers=1", "--mode=async", "--staleness=2"}, "needs --mode=sync"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> argv = {Runfile("ps/server"), "--port=0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    JobOptions options;
    options.timeout = absl::Seconds(30);
    absl::StatusOr<std::vector<ProcessResult>> results = RunJob({ProcessSpec{"server", argv}}, options);
    ASSERT_TRUE(results.ok()) << results.status();
    const ProcessResult& server = (*results)[0];
    EXPECT_NE(server.exit_code, 0) << message;
    EXPECT_NE(server.stderr_tail.find(message), std::string::npos) << server.stderr_tail;
  }
}

}  // namespace
}  // namespace psring::ps
