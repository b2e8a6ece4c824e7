#include "common/subprocess.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace psring {
namespace {

TEST(SubprocessTest, CapturesStdoutStderrAndExitCodes) {
  std::vector<ProcessSpec> specs = {
      {"ok", {"/bin/sh", "-c", "echo hello; echo err >&2"}},
      {"fails", {"/bin/sh", "-c", "echo boom >&2; exit 3"}},
  };
  std::vector<std::string> lines;
  JobOptions options;
  options.timeout = absl::Seconds(20);
  options.on_stderr_line = [&](const std::string& name, const std::string& line) {
    lines.push_back(name + ":" + line);
  };
  auto results = RunJob(specs, options);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ((*results)[0].exit_code, 0);
  EXPECT_EQ((*results)[0].stdout_text, "hello\n");
  EXPECT_EQ((*results)[0].stderr_tail, "err\n");
  EXPECT_EQ((*results)[1].exit_code, 3);
  EXPECT_FALSE((*results)[1].timed_out);
  EXPECT_EQ(lines.size(), 2u);
  absl::Status status = JobStatus(*results);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("fails exited with code 3"), std::string::npos) << status;
  EXPECT_NE(status.message().find("boom"), std::string::npos) << status;
}

TEST(SubprocessTest, TimeoutKillsTheWholeProcessGroup) {
  // The shell starts a grandchild; both must die at the deadline.
  std::vector<ProcessSpec> specs = {{"sleeper", {"/bin/sh", "-c", "sleep 100 & sleep 100; echo never"}}};
  JobOptions options;
  options.timeout = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  auto results = RunJob(specs, options);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_TRUE((*results)[0].timed_out);
  EXPECT_EQ((*results)[0].term_signal, SIGKILL);
  EXPECT_EQ((*results)[0].stdout_text, "");
  EXPECT_EQ(JobStatus(*results).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(SubprocessTest, ServiceIsStoppedAfterWorkersFinish) {
  // A service that never exits by itself is terminated after the grace and reported.
  std::vector<ProcessSpec> specs = {
      {"server", {"/bin/sh", "-c", "echo up; exec sleep 100"}, /*service=*/true},
      {"worker", {"/bin/sh", "-c", "echo done"}},
  };
  JobOptions options;
  options.timeout = absl::Seconds(30);
  options.service_grace = absl::Milliseconds(200);
  auto results = RunJob(specs, options);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ((*results)[1].exit_code, 0);
  EXPECT_EQ((*results)[0].stdout_text, "up\n");
  EXPECT_TRUE((*results)[0].timed_out);
  EXPECT_EQ((*results)[0].term_signal, SIGTERM);
  EXPECT_FALSE(JobStatus(*results).ok());
}

TEST(SubprocessTest, ServiceThatExitsOnItsOwnIsOk) {
  std::vector<ProcessSpec> specs = {
      {"server", {"/bin/sh", "-c", "sleep 0.3; echo bye"}, /*service=*/true},
      {"worker", {"/bin/sh", "-c", "echo done"}},
  };
  JobOptions options;
  options.service_start = absl::ZeroDuration();
  auto results = RunJob(specs, options);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_TRUE(JobStatus(*results).ok()) << JobStatus(*results);
  EXPECT_EQ((*results)[0].stdout_text, "bye\n");
}

TEST(SubprocessTest, WorkersStartAfterTheServiceIsReady) {
  const std::string flag = std::string(std::getenv("TEST_TMPDIR")) + "/ready_flag";
  std::vector<ProcessSpec> specs = {
      {"server",
       {"/bin/sh", "-c", "sleep 0.5; touch " + flag + "; echo server listening on x >&2; sleep 0.5"},
       /*service=*/true,
       /*ready_text=*/"listening on"},
      {"worker", {"/bin/sh", "-c", "test -f " + flag}},
  };
  JobOptions options;
  options.service_start = absl::ZeroDuration();
  options.timeout = absl::Seconds(30);
  auto results = RunJob(specs, options);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ((*results)[1].exit_code, 0) << "the worker started before the server was ready";
  EXPECT_TRUE(JobStatus(*results).ok()) << JobStatus(*results);
}

TEST(SubprocessTest, ServiceDyingBeforeReadyFailsTheJob) {
  std::vector<ProcessSpec> specs = {
      {"server", {"/bin/sh", "-c", "echo cannot bind >&2; exit 4"}, /*service=*/true, "listening on"},
      {"worker", {"/bin/sh", "-c", "exit 0"}},
  };
  auto results = RunJob(specs, JobOptions{});
  ASSERT_TRUE(results.ok()) << results.status();
  absl::Status status = JobStatus(*results);
  EXPECT_NE(status.message().find("server exited with code 4"), std::string::npos) << status;
}

TEST(SubprocessTest, FailureAbortsTheRestSoon) {
  std::vector<ProcessSpec> specs = {
      {"hang", {"/bin/sh", "-c", "exec sleep 100"}},
      {"crash", {"/bin/sh", "-c", "exit 1"}},
  };
  JobOptions options;
  options.timeout = absl::Seconds(50);
  const absl::Time start = absl::Now();
  auto results = RunJob(specs, options);
  ASSERT_TRUE(results.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(40));  // far below the job limit, not a timing assertion
  EXPECT_TRUE((*results)[0].timed_out);
  absl::Status status = JobStatus(*results);
  EXPECT_NE(status.message().find("crash exited with code 1"), std::string::npos) << status;
}

TEST(SubprocessTest, MissingBinaryIsReported) {
  auto results = RunJob({{"ghost", {"/nonexistent/binary"}}}, JobOptions{});
  ASSERT_TRUE(results.ok());
  EXPECT_EQ((*results)[0].exit_code, 127);
  EXPECT_NE((*results)[0].stderr_tail.find("exec failed"), std::string::npos);
}

TEST(SubprocessTest, JobStatusMarksPortInUseByItsExitCode) {
  auto results = RunJob({{"server", {"/bin/sh", "-c", absl::StrCat("exit ", kExitPortInUse)}}}, JobOptions{});
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ((*results)[0].exit_code, kExitPortInUse);
  EXPECT_TRUE(IsPortInUse(JobStatus(*results))) << JobStatus(*results);
}

TEST(SubprocessTest, ReportsExitCodeAndWritesStdoutToAFile) {
  const std::string out = testing::FreshTempPath("child.out");
  SpawnOptions options;
  options.stdout_file = out;
  absl::StatusOr<Subprocess> child = Subprocess::Start({"/bin/sh", "-c", "echo hi; exit 5"}, options);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(child->Wait(absl::Seconds(20)));
  EXPECT_FALSE(child->running());
  EXPECT_EQ(child->exit_code(), 5);
  EXPECT_EQ(child->term_signal(), 0);
  EXPECT_EQ(child->ExitDescription(), "exited with code 5");
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "hi\n");
}

TEST(SubprocessTest, SignalReachesTheProcessGroupAndWaitTimesOut) {
  absl::StatusOr<Subprocess> child = Subprocess::Start({"/bin/sh", "-c", "sleep 100 & wait"});
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_FALSE(child->Wait(absl::Milliseconds(50)));
  EXPECT_TRUE(child->running());
  child->Signal(SIGTERM);
  ASSERT_TRUE(child->Wait(absl::Seconds(20)));
  EXPECT_EQ(child->term_signal(), SIGTERM);
  EXPECT_EQ(child->exit_code(), -1);
  EXPECT_EQ(child->ExitDescription(), absl::StrCat("died of signal ", SIGTERM));
}

TEST(SubprocessTest, DestructionKillsAndReapsTheChild) {
  pid_t pid = -1;
  {
    absl::StatusOr<Subprocess> child = Subprocess::Start({"/bin/sh", "-c", "exec sleep 100"});
    ASSERT_TRUE(child.ok()) << child.status();
    pid = child->pid();
    Subprocess moved = std::move(*child);  // the moved-from object no longer owns it
    EXPECT_FALSE(child->started());
    EXPECT_TRUE(moved.running());
  }
  EXPECT_EQ(::kill(pid, 0), -1) << "the child survived its Subprocess";
}

TEST(SubprocessTest, EmptyCommandIsAnError) {
  EXPECT_EQ(Subprocess::Start({}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psring
