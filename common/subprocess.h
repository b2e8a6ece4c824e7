// Child processes: one at a time (Subprocess, for launchers that react to their children as they go, e.g.
// //ps:local) or a whole cooperating job run to completion with a deadline (RunJob, for the bench harness and
// multi-process tests).
//
//   ASSIGN_OR_RETURN(Subprocess server, Subprocess::Start({"ps/server", "--port=0"}));
//   ...
//   if (server.Poll() && server.exit_code() != 0) return ... server.ExitDescription() ...
//
//   std::vector<ProcessSpec> specs = {{"server 0", {"ps/server", "--port=7000"}, /*service=*/true},
//                                     {"worker 0", {"ps/worker", "--servers=..."}}};
//   JobOptions options;
//   options.timeout = absl::Seconds(60);
//   ASSIGN_OR_RETURN(auto results, RunJob(specs, options));
//   RETURN_IF_ERROR(JobStatus(results));
//
// Every child gets its own process group, so a signal or a kill reaches whatever it started too (e.g. the
// children of `ip netns exec` or mpirun), and once a child has exited whatever it left in its group is
// killed. Children never outlive the launcher: they are SIGKILLed when the thread that started them ends
// (Linux's PR_SET_PDEATHSIG, so that thread must outlive them) and, once InstallEmergencyCleanup() ran, when
// the launcher gets SIGINT, SIGTERM or SIGHUP. Their stdin is /dev/null.
#ifndef PSRING_COMMON_SUBPROCESS_H_
#define PSRING_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psring {

// The path of an executable named `name`, searched in PATH and then in /usr/sbin, /sbin, /usr/bin, /bin
// (`ip` and `tc` live in /usr/sbin, which is not on PATH under `bazel test`). `name` itself when it
// contains a '/' or is not found.
std::string FindExecutable(const std::string& name);

struct SpawnOptions {
  // Where the child's stdout and stderr go: by default to this process's own. pipe_output: to two pipes this
  // process must read (Subprocess::stdout_fd/stderr_fd), or the child blocks once a pipe is full.
  bool pipe_output = false;
  // When not piped: the child's stdout goes to this file (created or truncated), e.g. "/dev/null".
  std::string stdout_file;
};

// One child process, killed (with its process group) and reaped on destruction. Move-only; a
// default-constructed Subprocess is "not started". Thread-compatible.
class Subprocess {
 public:
  // Starts argv[0] (a path, or a name looked up with FindExecutable) with the rest as its arguments. An error
  // only when the launcher itself fails (pipe, fork, open of stdout_file); a program that cannot be executed
  // prints "exec failed: <path>" on the child's stderr and exits with 127.
  static absl::StatusOr<Subprocess> Start(const std::vector<std::string>& argv,
                                          const SpawnOptions& options = {});

  Subprocess() = default;
  ~Subprocess();
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }  // also its process group id; -1 when not started
  bool started() const { return pid_ > 0; }
  bool running() const { return started() && !exited_; }

  // Never blocks: reaps the child when it has exited. True once it has exited (then exit_code/term_signal).
  bool Poll();
  // Blocks until the child exits or `timeout` passes; true when it has exited.
  bool Wait(absl::Duration timeout);
  // Sends `sig` to the child's process group while the child runs.
  void Signal(int sig);
  // SIGKILL to the process group; blocks until the child is reaped. No-op once it has exited.
  void Kill();

  // After exit: the exit code (-1 when a signal ended it) and the signal (0 when it exited).
  int exit_code() const { return exit_code_; }
  int term_signal() const { return term_signal_; }
  // "exited with code 3" or "died of signal 9".
  std::string ExitDescription() const;

  // With pipe_output: the read ends of the child's stdout and stderr (-1 once closed). The caller reads them
  // (e.g. with poll) and closes each at EOF.
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }
  void CloseStdout();
  void CloseStderr();

 private:
  void Reaped(int wait_status);
  void Release();  // kills, reaps and closes everything this object holds

  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
  int term_signal_ = 0;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
};

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
  int exit_code = -1;      // -1 when killed by a signal or never started
  int term_signal = 0;     // the signal that ended it, 0 if it exited
  bool timed_out = false;  // killed by the harness (job deadline or service grace)
  double start_s = 0;      // when it started, seconds after the job started
  double end_s = 0;        // when it was reaped, seconds after the job started
  std::string stdout_text;
  std::string stderr_tail;  // the last 16 KiB of stderr
};

struct JobOptions {
  absl::Duration timeout = absl::Seconds(120);               // whole job; then every group is SIGKILLed
  absl::Duration service_start = absl::Milliseconds(300);    // wait for a service without ready_text
  absl::Duration service_ready_timeout = absl::Seconds(30);  // then the others start anyway
  absl::Duration service_grace = absl::Seconds(10);
  // Called every `heartbeat_interval` while the job runs (progress display); may be empty.
  std::function<void()> on_heartbeat;
  absl::Duration heartbeat_interval = absl::Seconds(10);
  // Called for every complete stderr line as it arrives (progress display); may be empty.
  std::function<void(const std::string& process, const std::string& line)> on_stderr_line;
};

// Starts every process of a job and waits for all of them. Services (e.g. PS servers) start first and are
// expected to exit on their own once the other processes are done; they get `service_grace` to do so and are
// then sent SIGTERM (and SIGKILL after a second). After the first failure the others get a few seconds to
// report their own errors and are then killed. stdout is captured whole, stderr as a bounded tail. Installs
// the emergency cleanup (Ctrl-C kills the job).
//
// Blocks until every process has exited or been killed. Thread-safe (no shared state besides the emergency
// registry). The StatusOr is an error only when the harness itself fails (pipe, fork, poll); a process that
// fails or times out is reported in its ProcessResult.
absl::StatusOr<std::vector<ProcessResult>> RunJob(const std::vector<ProcessSpec>& specs,
                                                  const JobOptions& options);

// OK when every non-service process exited 0 and no process timed out (a service stopped after its grace by
// SIGTERM counts as a failure too, since servers must shut down when asked). Otherwise the first failure with
// its exit status and stderr tail: kDeadlineExceeded for timeouts, PortInUseError (common/exit_codes.h) when
// it exited with kExitPortInUse, kInternal for other crashes and non-zero exits.
absl::Status JobStatus(const std::vector<ProcessResult>& results);

}  // namespace psring

#endif  // PSRING_COMMON_SUBPROCESS_H_
