// //ring:ring_worker as real processes on loopback: gradient-only allreduce checked against the closed form,
// a rank killed or stalled mid-allreduce, an authenticated job with forged ranks, ranks with different
// hyperparameters, launch by torchrun-style environment and by mpirun. Processes run under
// common/subprocess.h, which kills every child on every exit path.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/harness/result_line.h"
#include "common/auth.h"
#include "common/socket.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace psring::ring {
namespace {

constexpr char kWorker[] = "ring/ring_worker";

std::vector<ProcessSpec> Ranks(int n, int port, const std::vector<std::string>& extra) {
  std::vector<ProcessSpec> specs;
  for (int r = 0; r < n; ++r) {
    ProcessSpec spec{absl::StrCat("rank ", r),
                     {kWorker, absl::StrCat("--rank=", r), absl::StrCat("--world_size=", n),
                      "--master_addr=127.0.0.1", absl::StrCat("--master_port=", port), "--timeout=30"}};
    spec.argv.insert(spec.argv.end(), extra.begin(), extra.end());
    specs.push_back(spec);
  }
  return specs;
}

std::vector<ProcessResult> RunAll(const std::vector<ProcessSpec>& specs) {
  JobOptions options;
  options.timeout = absl::Seconds(50);
  absl::StatusOr<std::vector<ProcessResult>> results = RunJob(specs, options);
  EXPECT_TRUE(results.ok()) << results.status();
  return results.ok() ? *results : std::vector<ProcessResult>{};
}

// The PSRING_RESULT line of one process (fails the test when there is not exactly one).
proto::WorkerResult ResultOf(const ProcessResult& p) {
  absl::StatusOr<bench::ResultLines> lines = bench::ExtractResults(p.stdout_text);
  EXPECT_TRUE(lines.ok()) << lines.status();
  EXPECT_EQ(lines.ok() ? lines->workers.size() : 0, 1u) << p.name << " stdout:\n"
                                                        << p.stdout_text << p.stderr_tail;
  return lines.ok() && lines->workers.size() == 1 ? lines->workers.front() : proto::WorkerResult{};
}

TEST(RingWorkerTest, GradientOnlyAllReduceIsExactAcrossProcesses) {
  struct Case {
    int n;
    int64_t bytes;
    int64_t segment;
  };
  // World sizes 2..8; non-divisible counts (1009, 65539 and 7919 floats), fewer floats than ranks (1 and 5),
  // and many segments (64 and 256 bytes).
  for (const Case& c :
       {Case{2, 4 * 1009, 512 << 10}, Case{3, 4, 512 << 10}, Case{4, 4 * 65539, 256}, Case{5, 4 * 1009, 64},
        Case{6, 4 * 5, 512 << 10}, Case{7, 4 * 7919, 256}, Case{8, 4 * 65539, 4096}}) {
    SCOPED_TRACE(absl::StrCat("world ", c.n, " bytes ", c.bytes));
    std::vector<ProcessResult> results =
        RunAll(Ranks(c.n, FreeLoopbackPort().value(),
                     {absl::StrCat("--model_bytes=", c.bytes), absl::StrCat("--segment_bytes=", c.segment),
                      "--warmup_steps=1", "--max_steps=3"}));
    ASSERT_EQ(results.size(), static_cast<size_t>(c.n));
    for (int r = 0; r < c.n; ++r) {
      ASSERT_EQ(results[r].exit_code, 0) << results[r].stderr_tail;
      const proto::WorkerResult line = ResultOf(results[r]);
      EXPECT_EQ(line.exchange(), "ring-tcp");
      EXPECT_EQ(line.rank(), r);
      EXPECT_EQ(line.world_size(), c.n);
      EXPECT_EQ(line.steps(), 3);
      EXPECT_EQ(line.bytes(), c.bytes);
      EXPECT_EQ(line.wrong(), 0);
      EXPECT_GT(line.bytes_sent(), 0);
    }
  }
}

// `argv` run with PSRING_AUTH_TOKEN=`token` in its environment (the way a launcher passes the secret).
std::vector<std::string> WithToken(const std::string& token, std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/usr/bin/env", "PSRING_AUTH_TOKEN=" + token});
  return argv;
}

// Runs `ranks` gradient-only ranks "forever" on 16 MB buffers with --timeout=`timeout_s`; rank 1 runs as
// `/bin/sh -c '<rank 1> & pid=$!; <then>'`, which signals it. The job is authenticated (a token in the
// environment of every rank).
std::vector<ProcessResult> RunWithVictim(int ranks, int timeout_s, const std::string& then) {
  std::vector<ProcessSpec> specs =
      Ranks(ranks, FreeLoopbackPort().value(),
            {"--model_bytes=16777216", "--max_steps=1000000", "--warmup_steps=0",
             absl::StrCat("--timeout=", timeout_s)});                // the later --timeout wins
  for (ProcessSpec& s : specs) s.argv = WithToken("chaos-test-token-0123", s.argv);  // an authenticated job
  std::string victim;
  for (const std::string& a : specs[1].argv) victim += " '" + a + "'";
  specs[1].argv = {"/bin/sh", "-c", absl::StrCat(victim, " & pid=$!; ", then)};
  return RunAll(specs);
}

// A survivor exited on its own with status 1 and a dead-peer error. UNAVAILABLE: a neighbour's links closed;
// DEADLINE_EXCEEDED: a neighbour stalled (or a very slow machine had not connected the ring in time).
void ExpectFailedWithPeerError(const ProcessResult& p, int rank) {
  EXPECT_FALSE(p.timed_out) << "rank " << rank << " hung";
  EXPECT_EQ(p.exit_code, 1) << p.stderr_tail;
  EXPECT_TRUE(absl::StrContains(p.stderr_tail, "UNAVAILABLE") ||
              absl::StrContains(p.stderr_tail, "DEADLINE_EXCEEDED"))
      << p.stderr_tail;
}

TEST(RingWorkerTest, AKilledRankMakesTheOthersExitWithAnError) {
  // Rank 1 is SIGKILLed after two seconds, mid-allreduce.
  std::vector<ProcessResult> results = RunWithVictim(3, 20, "sleep 2; kill -9 $pid; exit 0");
  ASSERT_EQ(results.size(), 3u);
  for (int r : {0, 2}) ExpectFailedWithPeerError(results[r], r);
}

TEST(RingWorkerTest, AStalledRankMakesTheOthersExitWithinTheTimeout) {
  // Rank 1 is SIGSTOPped after two seconds (alive, connected, silent) and only SIGKILLed 14 s later. With
  // --timeout=2 the others fail about 2-4 s after the stall; rank 0, which serves the store, must not wait
  // for the stalled rank's store connection to close (its 10 s shutdown grace) before exiting.
  std::vector<ProcessResult> results =
      RunWithVictim(3, 2, "sleep 2; kill -STOP $pid; sleep 14; kill -9 $pid; exit 0");
  ASSERT_EQ(results.size(), 3u);
  for (int r : {0, 2}) {
    ExpectFailedWithPeerError(results[r], r);
    // Before the stalled rank is killed (16 s): the timeout, not the stalled rank, ends the job.
    EXPECT_LT(results[r].end_s, 13.0) << "rank " << r << " waited for the stalled rank";
  }
}

TEST(RingWorkerTest, AuthenticatedJobIsExactAndAForgedRankIsRefused) {
  const int port = FreeLoopbackPort().value();
  // Long enough (hundreds of steps) that the forgers, started at the same time, reach rank 0's store while
  // the job still runs, even on a loaded machine: a forger that finds the store already gone tests nothing.
  std::vector<ProcessSpec> specs = Ranks(3, port, {"--model_bytes=400000", "--max_steps=400"});
  for (ProcessSpec& s : specs) s.argv = WithToken("s3cret-of-16-bytes-or-more", s.argv);
  // A fourth process claims rank 2 without the token (and one with a wrong token claims rank 1): refused by
  // rank 0's store before it can read an address or take a rank.
  ProcessSpec no_token{"forger", Ranks(3, port, {"--model_bytes=40000", "--max_steps=3"})[2].argv};
  ProcessSpec wrong_token{
      "forger 2",
      WithToken("a-guess-of-16-bytes-or-more", Ranks(3, port, {"--model_bytes=40000", "--max_steps=3"})[1].argv)};
  // Under sh, which reports the forger's exit status and exits 0 itself: a failed process would make the
  // harness kill the real ranks a few seconds later.
  for (ProcessSpec* f : {&no_token, &wrong_token}) {
    f->argv.insert(f->argv.begin(), {"/bin/sh", "-c", "\"$@\"; echo \"forger exit status $?\" >&2", "sh"});
    specs.push_back(*f);
  }
  std::vector<ProcessResult> results = RunAll(specs);
  ASSERT_EQ(results.size(), 5u);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(results[r].exit_code, 0) << results[r].stderr_tail;
    EXPECT_EQ(ResultOf(results[r]).wrong(), 0);
    EXPECT_FALSE(absl::StrContains(results[r].stderr_tail, "s3cret"));
  }
  for (int f : {3, 4}) {
    EXPECT_TRUE(absl::StrContains(results[f].stderr_tail, "forger exit status 1")) << results[f].stderr_tail;
    EXPECT_TRUE(absl::StrContains(results[f].stderr_tail, "UNAUTHENTICATED")) << results[f].stderr_tail;
    EXPECT_FALSE(absl::StrContains(results[f].stderr_tail, "s3cret")) << results[f].stderr_tail;
  }
}

// Issue 34: ring_worker loads its token exactly as the parameter server does (LoadAuthToken) and applies the
// same rule off loopback (RequireTokenOffLoopback), so a 10-byte token, or no token with a master that is not
// on loopback and no --insecure, is refused with the very message //ps:server gives for the same mistake. The
// landed ring_worker took any token and listened on routable addresses without one.
TEST(RingWorkerTest, RefusesWhatThePsRefusesWithTheSameMessage) {
  const std::vector<std::string> gradient_only = {"--model_bytes=4096", "--max_steps=1", "--timeout=5"};
  struct Case {
    std::string what;
    std::vector<std::string> ring_args, ps_args;
    std::string message;
  };
  const std::string short_message =
      "the token from --auth_token has 10 bytes; use at least 16 random bytes (e.g. `openssl rand -hex 16`), a "
      "short one can be guessed offline";
  const std::string routable = "192.0.2.1";  // TEST-NET-1: not loopback, never reached (refused before)
  for (const Case& c : {
           Case{"10-byte token", {"--auth_token=0123456789", "--master_addr=127.0.0.1"},
                {"--auth_token=0123456789", "--bind_addr=127.0.0.1"}, short_message},
           Case{"no token, routable master", {"--master_addr=" + routable}, {"--bind_addr=" + routable},
                routable + " " + kNoTokenOffLoopback},
       }) {
    SCOPED_TRACE(c.what);
    std::vector<std::string> ring = {kWorker, "--rank=1", "--world_size=2", "--master_port=29999"};
    ring.insert(ring.end(), c.ring_args.begin(), c.ring_args.end());
    ring.insert(ring.end(), gradient_only.begin(), gradient_only.end());
    std::vector<std::string> ps = {"ps/server", "--port=0", "--workers=1"};
    ps.insert(ps.end(), c.ps_args.begin(), c.ps_args.end());
    // No PSRING_AUTH_TOKEN from the test's environment.
    for (std::vector<std::string>* argv : {&ring, &ps}) argv->insert(argv->begin(), {"/usr/bin/env", "-u", kAuthTokenEnv});
    std::vector<ProcessResult> results = RunAll({{"ring_worker", ring}, {"ps server", ps}});
    ASSERT_EQ(results.size(), 2u);
    for (const ProcessResult& p : results) {
      SCOPED_TRACE(p.name);
      EXPECT_FALSE(p.timed_out);
      EXPECT_NE(p.exit_code, 0) << p.stderr_tail;
      EXPECT_TRUE(absl::StrContains(p.stderr_tail, c.message)) << p.stderr_tail;
    }
  }
}

// Issue 13: ranks with momentum 0.9 and 0 (or lr 0.03 and 0.5) trained "fine" and exited 0. Every rank now
// fails at rendezvous, with the flag and both values in its message.
TEST(RingWorkerTest, RanksWithDifferentHyperparametersAllFail) {
  struct Case {
    std::string flag, zero, other, message;
  };
  for (const Case& c : {Case{"momentum", "0.9", "0", "--momentum: rank 0 has 0.9, rank 1 has 0"},
                        Case{"lr", "0.03", "0.5", "--lr: rank 0 has 0.03, rank 1 has 0.5"}}) {
    SCOPED_TRACE(c.flag);
    std::vector<ProcessSpec> specs =
        Ranks(3, FreeLoopbackPort().value(), {"--model_bytes=4096", "--max_steps=2"});
    specs[0].argv.push_back(absl::StrCat("--", c.flag, "=", c.zero));
    specs[1].argv.push_back(absl::StrCat("--", c.flag, "=", c.other));
    specs[2].argv.push_back(absl::StrCat("--", c.flag, "=", c.zero));
    std::vector<ProcessResult> results = RunAll(specs);
    ASSERT_EQ(results.size(), 3u);
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(results[r].exit_code, 1) << results[r].stderr_tail;
      EXPECT_TRUE(absl::StrContains(results[r].stderr_tail, c.message)) << results[r].stderr_tail;
    }
  }
}

TEST(RingWorkerTest, TorchrunStyleEnvironment) {
  constexpr int kRanks = 2;
  const int port = FreeLoopbackPort().value();
  std::vector<ProcessSpec> specs;
  for (int r = 0; r < kRanks; ++r) {
    specs.push_back({absl::StrCat("rank ", r),
                     {"/usr/bin/env", absl::StrCat("RANK=", r), absl::StrCat("WORLD_SIZE=", kRanks),
                      absl::StrCat("LOCAL_RANK=", r), "MASTER_ADDR=127.0.0.1",
                      absl::StrCat("MASTER_PORT=", port), kWorker, "--model_bytes=4096", "--max_steps=2"}});
  }
  std::vector<ProcessResult> results = RunAll(specs);
  ASSERT_EQ(results.size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(results[r].exit_code, 0) << results[r].stderr_tail;
    const proto::WorkerResult line = ResultOf(results[r]);
    EXPECT_EQ(line.rank(), r);
    EXPECT_EQ(line.wrong(), 0);
  }
}

TEST(RingWorkerTest, MpirunLaunchTrainsAndPrintsTheAccuracy) {
  const std::string mpirun = FindExecutable("mpirun");
  if (mpirun == "mpirun") GTEST_SKIP() << "mpirun is not installed (apt-get install openmpi-bin)";
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  std::vector<ProcessResult> results =
      RunAll({{"mpirun",
               {mpirun, "-np", "2", "--oversubscribe", kWorker,
                absl::StrCat("--master_port=", FreeLoopbackPort().value()), "--dataset=synthetic",
                "--synthetic_samples=1024", "--max_steps=12", "--log_every=4", "--timeout=30"}}});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_EQ(results[0].exit_code, 0) << results[0].stdout_text << results[0].stderr_tail;
  EXPECT_TRUE(absl::StrContains(results[0].stdout_text, "test accuracy:")) << results[0].stdout_text;
  absl::StatusOr<bench::ResultLines> lines = bench::ExtractResults(results[0].stdout_text);
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->workers.size(), 2u) << results[0].stdout_text;
  // Both ranks end with the same parameters, so they report the same accuracy.
  EXPECT_EQ(lines->workers[0].test_accuracy(), lines->workers[1].test_accuracy());
  EXPECT_GE(lines->workers[0].test_accuracy(), 0);
  EXPECT_EQ(lines->workers[0].world_size(), 2);
}

}  // namespace
}  // namespace psring::ring
