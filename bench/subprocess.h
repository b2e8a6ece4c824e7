// Runs a set of cooperating processes (one distributed job) to completion with a deadline.
//
//   std::vector<ProcessSpec> specs = {{"server 0", {"ps/server", "--port=7000"}, /*service=*/true},
//                                     {"worker 0", {"ps/worker", "--servers=..."}}};
//   ASSIGN_OR_RETURN(auto results, RunJob(specs, {.timeout = absl::Seconds(60)}));
//   RETURN_IF_ERROR(JobStatus(results));
//
// Each process gets its own process group (so a timeout kills its whole tree, e.g. `ip netns exec` children),
// stdout captured whole and stderr kept as a bounded tail. Services (e.g. PS servers) start first and are
// expected to exit on their own once the other processes are done; they get `service_grace` to do so and are
// then sent SIGTERM (and SIGKILL after a second). Process groups are registered with emergency_cleanup, so
// Ctrl-C kills them too.
//
// Blocking: RunJob blocks until every process has exited or been killed. Thread-safe (no shared state besides
// the emergency registry).
#ifndef PSRING_BENCH_SUBPROCESS_H_
#define PSRING_BENCH_SUBPROCESS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psring::bench {

struct ProcessSpec {
  std::string name;               // for messages, e.g. "ring rank 3"
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up in PATH
  bool service = false;           // started first; allowed to outlive the others by `service_grace`
  // Services: text the process prints (stdout or stderr) once it accepts connections; the other processes
  // start only after every service printed its ready_text ("" : after JobOptions::service_start).
  std::string ready_text;
};

struct ProcessResult {
  std::string name;
  int exit_code = -1;    // -1 when killed by a signal or never started
  int term_signal = 0;   // the signal that ended it, 0 if it exited
  bool timed_out = false;  // killed by the harness (job deadline or service grace)
  double start_s = 0;      // when it started, seconds after the job started
  double end_s = 0;        // when it was reaped, seconds after the job started
  std::string stdout_text;
  std::string stderr_tail;  // the last 16 KiB of stderr
};

struct JobOptions {
  absl::Duration timeout = absl::Seconds(120);         // whole job; then every group is SIGKILLed
  absl::Duration service_start = absl::Milliseconds(300);  // wait for a service without ready_text
  absl::Duration service_ready_timeout = absl::Seconds(30);  // then the others start anyway
  absl::Duration service_grace = absl::Seconds(10);
  // Called every `heartbeat_interval` while the job runs (progress display); may be empty.
  std::function<void()> on_heartbeat;
  absl::Duration heartbeat_interval = absl::Seconds(10);
  // Called for every complete stderr line as it arrives (progress display); may be empty.
  std::function<void(const std::string& process, const std::string& line)> on_stderr_line;
};

// The path of an executable named `name`, searched in PATH and then in /usr/sbin, /sbin, /usr/bin, /bin
// (`ip` and `tc` live in /usr/sbin, which is not on PATH under `bazel test`). `name` itself when it contains a
// '/' or is not found.
std::string FindExecutable(const std::string& name);

// Starts every process and waits for all of them. The StatusOr is an error only when the harness itself
// fails (pipe, fork, poll); a process that fails or times out is reported in its ProcessResult.
absl::StatusOr<std::vector<ProcessResult>> RunJob(const std::vector<ProcessSpec>& specs,
                                                  const JobOptions& options);

// OK when every non-service process exited 0 and no process timed out (a service stopped after its grace by
// SIGTERM counts as a failure too, since servers must shut down when asked). Otherwise the first failure with
// its exit status and stderr tail: kDeadlineExceeded for timeouts, kInternal for crashes and non-zero exits.
absl::Status JobStatus(const std::vector<ProcessResult>& results);

}  // namespace psring::bench

#endif  // PSRING_BENCH_SUBPROCESS_H_
