#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/emergency_cleanup.h"
#include "common/exit_codes.h"
#include "common/status_macros.h"

namespace psring {
namespace {

constexpr size_t kStderrTail = 16 << 10;
// After the first failing process, the others get this long to report their own errors before being killed.
constexpr absl::Duration kFailureGrace = absl::Seconds(3);
constexpr absl::Duration kKillAfterTerm = absl::Seconds(1);

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

// Between fork and exec only async-signal-safe calls: everything the child needs is prepared before the fork.
[[noreturn]] void ExecChild(pid_t parent, const char* program, char* const* argv, const int* out_pipe,
                            const int* err_pipe, const char* stdout_file) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the launcher ended before prctl
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
  if (out_pipe != nullptr) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
  } else if (stdout_file != nullptr) {
    const int fd = ::open(stdout_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0) ::_exit(127);
  }
  // Default signal handling whatever the launcher installed, blocked or ignored (exec keeps masks and
  // ignored signals).
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(sig, SIG_DFL);
  ::execv(program, argv);
  const char* msg = "exec failed: ";
  ssize_t ignored = ::write(STDERR_FILENO, msg, std::strlen(msg));
  ignored = ::write(STDERR_FILENO, program, std::strlen(program));
  ignored = ::write(STDERR_FILENO, "\n", 1);
  (void)ignored;
  ::_exit(127);
}

}  // namespace

std::string FindExecutable(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return name;
  const char* env = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(absl::StrCat(env != nullptr ? env : "", ":/usr/sbin:/sbin:/usr/bin:/bin"), ':',
                      absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

absl::StatusOr<Subprocess> Subprocess::Start(const std::vector<std::string>& argv,
                                             const SpawnOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("cannot start a process: empty command");
  const std::string program = FindExecutable(argv[0]);
  std::vector<char*> args = {const_cast<char*>(program.c_str())};
  for (size_t i = 1; i < argv.size(); ++i) args.push_back(const_cast<char*>(argv[i].c_str()));
  args.push_back(nullptr);
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (options.pipe_output) {
    if (::pipe2(out, O_CLOEXEC) != 0) return Errno("pipe2");
    if (::pipe2(err, O_CLOEXEC) != 0) {
      absl::Status status = Errno("pipe2");
      for (int* fd : {&out[0], &out[1]}) CloseFd(fd);
      return status;
    }
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    absl::Status status = Errno(absl::StrCat("fork for ", program));
    for (int* fd : {&out[0], &out[1], &err[0], &err[1]}) CloseFd(fd);
    return status;
  }
  if (pid == 0) {
    ExecChild(parent, program.c_str(), args.data(), options.pipe_output ? out : nullptr, err,
              options.stdout_file.empty() ? nullptr : options.stdout_file.c_str());
  }
  ::setpgid(pid, pid);  // also in the parent, so the group exists before we might signal it
  RegisterProcessGroup(pid);
  Subprocess child;
  child.pid_ = pid;
  CloseFd(&out[1]);
  CloseFd(&err[1]);
  child.stdout_fd_ = out[0];
  child.stderr_fd_ = err[0];
  return child;
}

Subprocess::~Subprocess() { Release(); }

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      exited_(other.exited_),
      exit_code_(other.exit_code_),
      term_signal_(other.term_signal_),
      stdout_fd_(std::exchange(other.stdout_fd_, -1)),
      stderr_fd_(std::exchange(other.stderr_fd_, -1)) {}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    Release();
    pid_ = std::exchange(other.pid_, -1);
    exited_ = other.exited_;
    exit_code_ = other.exit_code_;
    term_signal_ = other.term_signal_;
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    stderr_fd_ = std::exchange(other.stderr_fd_, -1);
  }
  return *this;
}

void Subprocess::Release() {
  Kill();
  CloseStdout();
  CloseStderr();
}

void Subprocess::Reaped(int wait_status) {
  exited_ = true;
  if (WIFEXITED(wait_status)) exit_code_ = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) term_signal_ = WTERMSIG(wait_status);
  // Whatever the child left in its group (e.g. the children of `ip netns exec`) goes with it.
  ::kill(-pid_, SIGKILL);
  UnregisterProcessGroup(pid_);
}

bool Subprocess::Poll() {
  if (!running()) return exited_;
  int wait_status = 0;
  if (::waitpid(pid_, &wait_status, WNOHANG) == pid_) Reaped(wait_status);
  return exited_;
}

bool Subprocess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!Poll() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  return exited_;
}

void Subprocess::Signal(int sig) {
  if (running()) ::kill(-pid_, sig);
}

void Subprocess::Kill() {
  if (!running()) return;
  ::kill(-pid_, SIGKILL);
  int wait_status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &wait_status, 0);
  } while (r < 0 && errno == EINTR);
  Reaped(r == pid_ ? wait_status : 0);
}

std::string Subprocess::ExitDescription() const {
  if (!exited_) return "is still running";
  if (term_signal_ != 0) return absl::StrCat("died of signal ", term_signal_);
  return absl::StrCat("exited with code ", exit_code_);
}

void Subprocess::CloseStdout() { CloseFd(&stdout_fd_); }
void Subprocess::CloseStderr() { CloseFd(&stderr_fd_); }

absl::StatusOr<std::vector<ProcessResult>> RunJob(const std::vector<ProcessSpec>& specs,
                                                  const JobOptions& options) {
  InstallEmergencyCleanup();
  struct Running {
    Subprocess process;       // the destructor kills whatever still runs on every return path
    bool terminated = false;  // SIGTERM sent
    absl::Time term_time;
    std::string err_line;  // partial stderr line for on_stderr_line
  };
  std::vector<ProcessResult> results(specs.size());
  std::vector<Running> runs(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) results[i].name = specs[i].name;

  // Services first; the others once every service is ready, so servers listen before workers connect.
  const absl::Time job_start = absl::Now();
  SpawnOptions spawn;
  spawn.pipe_output = true;
  auto start_all = [&](bool services) -> absl::Status {
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].service != services) continue;
      results[i].start_s = absl::ToDoubleSeconds(absl::Now() - job_start);
      absl::StatusOr<Subprocess> process = Subprocess::Start(specs[i].argv, spawn);
      if (!process.ok()) return Annotate(process.status(), specs[i].name);
      runs[i].process = std::move(*process);
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(start_all(true));
  const absl::Time services_started = absl::Now();
  bool workers_started = false;
  auto services_ready = [&]() {
    const absl::Duration waited = absl::Now() - services_started;
    if (waited >= options.service_ready_timeout) return true;  // the workers' own connect retries take over
    for (size_t i = 0; i < specs.size(); ++i) {
      if (!specs[i].service) continue;
      if (specs[i].ready_text.empty()) {
        if (waited < options.service_start) return false;
      } else if (results[i].stdout_text.find(specs[i].ready_text) == std::string::npos &&
                 results[i].stderr_tail.find(specs[i].ready_text) == std::string::npos) {
        return false;
      }
    }
    return true;
  };

  const absl::Time deadline = absl::Now() + options.timeout;
  absl::Time kill_services_at = absl::InfiniteFuture();
  absl::Time abort_at = absl::InfiniteFuture();
  absl::Time all_reaped_at = absl::InfiniteFuture();
  absl::Time next_heartbeat = absl::Now() + options.heartbeat_interval;
  char buf[1 << 16];

  while (true) {
    if (!workers_started && abort_at == absl::InfiniteFuture() && services_ready()) {
      workers_started = true;
      RETURN_IF_ERROR(start_all(false));
    }
    // Read whatever output is ready.
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, bool>> owners;  // (process index, is_stdout)
    for (size_t i = 0; i < runs.size(); ++i) {
      const Subprocess& p = runs[i].process;
      if (p.stdout_fd() >= 0) {
        fds.push_back({p.stdout_fd(), POLLIN, 0});
        owners.push_back({i, true});
      }
      if (p.stderr_fd() >= 0) {
        fds.push_back({p.stderr_fd(), POLLIN, 0});
        owners.push_back({i, false});
      }
    }
    if (!fds.empty()) {
      int ready = ::poll(fds.data(), fds.size(), 50);
      if (ready < 0 && errno != EINTR) return Errno("poll");
      for (size_t f = 0; ready > 0 && f < fds.size(); ++f) {
        if (!(fds[f].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto [i, is_out] = owners[f];
        ssize_t n = ::read(fds[f].fd, buf, sizeof(buf));
        if (n <= 0) {
          if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
          if (is_out) {
            runs[i].process.CloseStdout();
          } else {
            runs[i].process.CloseStderr();
          }
          continue;
        }
        if (is_out) {
          results[i].stdout_text.append(buf, n);
        } else {
          std::string& tail = results[i].stderr_tail;
          tail.append(buf, n);
          if (tail.size() > kStderrTail) tail.erase(0, tail.size() - kStderrTail);
          if (options.on_stderr_line) {
            std::string& line = runs[i].err_line;
            for (ssize_t k = 0; k < n; ++k) {
              if (buf[k] == '\n') {
                options.on_stderr_line(specs[i].name, line);
                line.clear();
              } else {
                line.push_back(buf[k]);
              }
            }
          }
        }
      }
    } else {
      absl::SleepFor(absl::Milliseconds(20));
    }

    // Reap.
    bool workers_running = false;
    bool all_reaped = true;
    for (size_t i = 0; i < runs.size(); ++i) {
      Running& run = runs[i];
      if (!run.process.started()) {  // a worker while services get ready, or after an early abort
        if (!workers_started) workers_running = true;
        continue;
      }
      if (run.process.running() && run.process.Poll()) {
        results[i].end_s = absl::ToDoubleSeconds(absl::Now() - job_start);
        results[i].exit_code = run.process.exit_code();
        results[i].term_signal = run.process.term_signal();
        bool failed = results[i].exit_code != 0 && !(specs[i].service && run.terminated);
        if (failed && abort_at == absl::InfiniteFuture()) abort_at = absl::Now() + kFailureGrace;
      }
      if (run.process.running()) {
        all_reaped = false;
        if (!specs[i].service) workers_running = true;
      }
    }
    bool pipes_open = false;
    for (const auto& run : runs) pipes_open |= run.process.stdout_fd() >= 0 || run.process.stderr_fd() >= 0;
    if (all_reaped && !pipes_open) break;

    const absl::Time now = absl::Now();
    if (options.on_heartbeat && now >= next_heartbeat) {
      options.on_heartbeat();
      next_heartbeat = now + options.heartbeat_interval;
    }
    if (!workers_running && kill_services_at == absl::InfiniteFuture()) {
      kill_services_at = now + options.service_grace;
    }
    if (all_reaped && all_reaped_at == absl::InfiniteFuture()) all_reaped_at = now;
    if (now - all_reaped_at > absl::Seconds(1)) {
      // A grandchild that left its process group holds a pipe open; stop waiting for its EOF.
      for (auto& run : runs) {
        run.process.CloseStdout();
        run.process.CloseStderr();
      }
    }
    if (now >= deadline || now >= abort_at) {
      for (size_t i = 0; i < runs.size(); ++i) {
        if (runs[i].process.running()) {
          results[i].timed_out = true;
          runs[i].process.Signal(SIGKILL);
        }
      }
      workers_started = true;  // never start them after an abort
      abort_at = absl::InfiniteFuture();
    } else if (now >= kill_services_at) {
      for (size_t i = 0; i < runs.size(); ++i) {
        Running& run = runs[i];
        if (!run.process.running() || !specs[i].service) continue;
        if (!run.terminated) {
          run.terminated = true;
          run.term_time = now;
          results[i].timed_out = true;
          run.process.Signal(SIGTERM);
        } else if (now - run.term_time > kKillAfterTerm) {
          run.process.Signal(SIGKILL);
        }
      }
    }
  }
  return results;
}

absl::Status JobStatus(const std::vector<ProcessResult>& results) {
  // Prefer a process that failed on its own over those killed because of it.
  const ProcessResult* first = nullptr;
  for (const auto& r : results) {
    if (!r.timed_out && r.exit_code != 0) {
      first = &r;
      break;
    }
  }
  if (first == nullptr) {
    for (const auto& r : results) {
      if (r.timed_out) {
        first = &r;
        break;
      }
    }
  }
  if (first == nullptr) return absl::OkStatus();
  const std::string how = first->timed_out          ? "was killed after the job's time limit"
                          : first->term_signal != 0 ? absl::StrCat("died of signal ", first->term_signal)
                                                    : absl::StrCat("exited with code ", first->exit_code);
  std::string tail = first->stderr_tail;
  if (tail.size() > 2000) tail = "..." + tail.substr(tail.size() - 2000);
  std::string message = absl::StrCat(first->name, " ", how, "; its stderr ends with:\n", tail);
  if (first->timed_out) return absl::DeadlineExceededError(message);
  if (first->exit_code == kExitPortInUse) return PortInUseError(message);
  return absl::InternalError(message);
}

}  // namespace psring
