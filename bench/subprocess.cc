#include "bench/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/emergency_cleanup.h"
#include "common/status_macros.h"

namespace psring::bench {
namespace {

constexpr size_t kStderrTail = 16 << 10;
// After the first failing process, the others get this long to report their own errors before being killed.
constexpr absl::Duration kFailureGrace = absl::Seconds(3);
constexpr absl::Duration kKillAfterTerm = absl::Seconds(1);

struct Running {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  bool reaped = false;
  bool terminated = false;  // SIGTERM sent
  absl::Time term_time;
  std::string err_line;  // partial stderr line for on_stderr_line
};

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::Status Start(const ProcessSpec& spec, Running* run) {
  if (spec.argv.empty()) return absl::InvalidArgumentError(absl::StrCat(spec.name, ": empty command"));
  const std::string program = FindExecutable(spec.argv[0]);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Errno("pipe2");
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return Errno("pipe2");
  }
  std::vector<char*> argv = {const_cast<char*>(program.c_str())};
  for (size_t i = 1; i < spec.argv.size(); ++i) argv.push_back(const_cast<char*>(spec.argv[i].c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return Errno("fork");
  }
  if (pid == 0) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    // Default signal dispositions for the child, whatever the harness installed.
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    execvp(argv[0], argv.data());
    const char* msg = "exec failed: ";
    ssize_t ignored = write(STDERR_FILENO, msg, std::strlen(msg));
    ignored = write(STDERR_FILENO, argv[0], std::strlen(argv[0]));
    ignored = write(STDERR_FILENO, "\n", 1);
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also in the parent, so the group exists before we might kill it
  RegisterProcessGroup(pid);
  close(out[1]);
  close(err[1]);
  run->pid = pid;
  run->out_fd = out[0];
  run->err_fd = err[0];
  return absl::OkStatus();
}

void KillGroup(Running* run, int sig) {
  if (run->pid > 0) kill(-run->pid, sig);
}

}  // namespace

std::string FindExecutable(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return name;
  const char* env = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(absl::StrCat(env != nullptr ? env : "", ":/usr/sbin:/sbin:/usr/bin:/bin"), ':',
                      absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

absl::StatusOr<std::vector<ProcessResult>> RunJob(const std::vector<ProcessSpec>& specs,
                                                  const JobOptions& options) {
  InstallEmergencyCleanup();
  std::vector<ProcessResult> results(specs.size());
  std::vector<Running> runs(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) results[i].name = specs[i].name;

  auto kill_all = [&](int sig) {
    for (auto& run : runs) {
      if (run.pid > 0 && !run.reaped) KillGroup(&run, sig);
    }
  };
  auto cleanup = [&]() {
    kill_all(SIGKILL);
    for (auto& run : runs) {
      if (run.pid > 0 && !run.reaped) waitpid(run.pid, nullptr, 0);
      if (run.pid > 0) UnregisterProcessGroup(run.pid);
      for (int fd : {run.out_fd, run.err_fd}) {
        if (fd >= 0) close(fd);
      }
    }
  };

  // Services first; the others once every service is ready, so servers listen before workers connect.
  const absl::Time job_start = absl::Now();
  auto start_all = [&](bool services) -> absl::Status {
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].service != services) continue;
      results[i].start_s = absl::ToDoubleSeconds(absl::Now() - job_start);
      RETURN_IF_ERROR(Start(specs[i], &runs[i]));
    }
    return absl::OkStatus();
  };
  absl::Status started = start_all(true);
  if (!started.ok()) {
    cleanup();
    return started;
  }
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
      started = start_all(false);
      if (!started.ok()) {
        cleanup();
        return started;
      }
    }
    // Read whatever output is ready.
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, bool>> owners;  // (process index, is_stdout)
    for (size_t i = 0; i < runs.size(); ++i) {
      if (runs[i].out_fd >= 0) {
        fds.push_back({runs[i].out_fd, POLLIN, 0});
        owners.push_back({i, true});
      }
      if (runs[i].err_fd >= 0) {
        fds.push_back({runs[i].err_fd, POLLIN, 0});
        owners.push_back({i, false});
      }
    }
    if (!fds.empty()) {
      int ready = poll(fds.data(), fds.size(), 50);
      if (ready < 0 && errno != EINTR) {
        absl::Status status = Errno("poll");
        cleanup();
        return status;
      }
      for (size_t f = 0; ready > 0 && f < fds.size(); ++f) {
        if (!(fds[f].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto [i, is_out] = owners[f];
        ssize_t n = read(fds[f].fd, buf, sizeof(buf));
        if (n <= 0) {
          if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
          close(fds[f].fd);
          (is_out ? runs[i].out_fd : runs[i].err_fd) = -1;
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
      if (run.pid <= 0) {  // not started (a worker while services get ready, or after an early abort)
        if (!workers_started) workers_running = true;
        continue;
      }
      if (!run.reaped) {
        int wstatus = 0;
        pid_t r = waitpid(run.pid, &wstatus, WNOHANG);
        if (r == run.pid) {
          run.reaped = true;
          results[i].end_s = absl::ToDoubleSeconds(absl::Now() - job_start);
          // Anything the process left in its group (e.g. children of `ip netns exec`) goes with it.
          kill(-run.pid, SIGKILL);
          if (WIFEXITED(wstatus)) {
            results[i].exit_code = WEXITSTATUS(wstatus);
          } else if (WIFSIGNALED(wstatus)) {
            results[i].term_signal = WTERMSIG(wstatus);
          }
          bool failed = results[i].exit_code != 0 && !(specs[i].service && run.terminated);
          if (failed && abort_at == absl::InfiniteFuture()) abort_at = absl::Now() + kFailureGrace;
        }
      }
      if (!run.reaped) {
        all_reaped = false;
        if (!specs[i].service) workers_running = true;
      }
    }
    bool pipes_open = false;
    for (const auto& run : runs) pipes_open |= run.out_fd >= 0 || run.err_fd >= 0;
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
        for (int* fd : {&run.out_fd, &run.err_fd}) {
          if (*fd >= 0) close(*fd);
          *fd = -1;
        }
      }
    }
    if (now >= deadline || now >= abort_at) {
      for (size_t i = 0; i < runs.size(); ++i) {
        if (runs[i].pid > 0 && !runs[i].reaped) {
          results[i].timed_out = true;
          KillGroup(&runs[i], SIGKILL);
        }
      }
      workers_started = true;  // never start them after an abort
      abort_at = absl::InfiniteFuture();
    } else if (now >= kill_services_at) {
      for (size_t i = 0; i < runs.size(); ++i) {
        Running& run = runs[i];
        if (run.reaped || !specs[i].service) continue;
        if (!run.terminated) {
          run.terminated = true;
          run.term_time = now;
          results[i].timed_out = true;
          KillGroup(&run, SIGTERM);
        } else if (now - run.term_time > kKillAfterTerm) {
          KillGroup(&run, SIGKILL);
        }
      }
    }
  }
  cleanup();
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
  std::string how = first->timed_out ? "was killed after the job's time limit"
                    : first->term_signal != 0
                        ? absl::StrCat("died of signal ", first->term_signal)
                        : absl::StrCat("exited with code ", first->exit_code);
  std::string tail = first->stderr_tail;
  if (tail.size() > 2000) tail = "..." + tail.substr(tail.size() - 2000);
  std::string message = absl::StrCat(first->name, " ", how, "; its stderr ends with:\n", tail);
  return first->timed_out ? absl::DeadlineExceededError(message) : absl::InternalError(message);
}

}  // namespace psring::bench
