// //ps:local — a whole parameter-server job on this machine: K server shards and N workers on 127.0.0.1
// (free ports picked by the servers themselves, --port=0 --port_file), torn down on exit, error or Ctrl-C.
//   bazel run //ps:local -- --workers=4 --num_shards=2 [--mode=async --staleness=2] -- --epochs=1
// Arguments after a second `--` go to every worker (training flags, --model_bytes, ...).
//
// The children run under common/subprocess.h (each in its own process group, killed if the launcher dies), so
// SIGINT/SIGTERM to the launcher, a failing worker, or the launcher dying all end the whole job.
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/auth.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "ps/binary_main.h"

ABSL_FLAG(int, workers, 2,
          "Number of worker processes N (ranks 0..N-1, each told --world_size=N); every server waits for N.");
ABSL_FLAG(int, num_shards, 1,
          "Number of server processes K; the parameters are split into K contiguous shards, one per server.");
ABSL_FLAG(std::string, mode, "sync",
          "Server mode: sync (average all N gradients of a step, then update) or async (apply each push on "
          "arrival, bounded by --staleness); see //ps:server --help.");
ABSL_FLAG(int, staleness, 0,
          "Async mode: a worker may run at most this many steps ahead of the slowest (>= 0; 0 acts as sync).");
ABSL_FLAG(int, backup_workers, 0,
          "Sync mode: B backup workers (0 <= B < --workers): each step averages the first N - B pushes and "
          "drops the rest (passed to every server; see //ps:server --help).");
ABSL_FLAG(double, step_timeout, 60,
          "Seconds a server waits for all workers of a step before failing the step with DEADLINE_EXCEEDED "
          "(passed to every server as --step_timeout).");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Folder where every server writes its shard's checkpoint (ps-shard-<i>-of-<K>.ckpt) and resumes "
          "from it. Empty: no server checkpoints. (The workers' own --checkpoint_dir goes after the second "
          "--.)");
ABSL_FLAG(std::string, auth_token, "",
          "Shared secret (at least 16 bytes) for every server and worker, passed to them in the environment "
          "(PSRING_AUTH_TOKEN), never on their command lines. Empty: --auth_token_file, else this process's "
          "PSRING_AUTH_TOKEN, else no authentication.");
ABSL_FLAG(std::string, auth_token_file, "", "File holding the shared secret (instead of --auth_token).");
ABSL_FLAG(double, job_timeout, 3600,
          "Seconds after which the whole job is killed and the launcher fails (> 0).");
ABSL_FLAG(std::string, server_bin, "",
          "Path of the //ps:server binary; default: 'server' next to this launcher (bazel run builds it).");
ABSL_FLAG(std::string, worker_bin, "",
          "Path of the //ps:worker binary; default: 'worker' next to this launcher.");

namespace psring::ps {
namespace {

volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

std::string SiblingBinary(const std::string& name) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return name;
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + name;
}

// The job's children; ends whatever is left on destruction.
class Job {
 public:
  ~Job() { Terminate(absl::Seconds(5)); }

  // Starts a child named `what` in messages; returns its index for Running().
  absl::StatusOr<size_t> Spawn(const std::vector<std::string>& argv, const std::string& what) {
    ASSIGN_OR_RETURN(Subprocess process, Subprocess::Start(argv));
    children_.push_back({std::move(process), what});
    return children_.size() - 1;
  }

  // Reaps exited children without blocking. Returns the first failure.
  absl::Status Poll() {
    for (Child& c : children_) {
      if (!c.process.running() || !c.process.Poll()) continue;
      if (c.process.exit_code() != 0) {
        return absl::InternalError(
            absl::StrCat(c.what, " failed (", c.process.ExitDescription(), "); see its stderr above"));
      }
    }
    return absl::OkStatus();
  }

  bool AnyRunning() const {
    for (const Child& c : children_) {
      if (c.process.running()) return true;
    }
    return false;
  }

  bool Running(size_t child) const { return children_[child].process.running(); }

  // SIGTERM to every child (servers then write their checkpoint, print their result line and exit),
  // SIGKILL to those still running after `grace`; reaps them all. Blocks at most `grace` plus the reaping.
  void Terminate(absl::Duration grace) {
    for (Child& c : children_) c.process.Signal(SIGTERM);
    const absl::Time give_up = absl::Now() + grace;
    while (AnyRunning() && absl::Now() < give_up) {
      Poll().IgnoreError();  // reaps; failures no longer matter
      absl::SleepFor(absl::Milliseconds(20));
    }
    for (Child& c : children_) c.process.Kill();
  }

 private:
  struct Child {
    Subprocess process;
    std::string what;
  };
  std::vector<Child> children_;
};

absl::Status CheckInterrupted() {
  if (g_signal != 0) return absl::CancelledError(absl::StrCat("interrupted by signal ", g_signal));
  return absl::OkStatus();
}

absl::Status Run(const std::vector<std::string>& worker_args) {
  const int n = absl::GetFlag(FLAGS_workers), k = absl::GetFlag(FLAGS_num_shards);
  if (n < 1 || k < 1) return absl::InvalidArgumentError("--workers and --num_shards must be >= 1");
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode != "sync" && mode != "async") {
    return absl::InvalidArgumentError(absl::StrCat("--mode=", mode, ": use sync or async"));
  }
  if (absl::GetFlag(FLAGS_staleness) < 0) return absl::InvalidArgumentError("--staleness must be >= 0");
  if (!(absl::GetFlag(FLAGS_job_timeout) > 0)) return absl::InvalidArgumentError("--job_timeout must be > 0");
  const std::string server_bin =
      absl::GetFlag(FLAGS_server_bin).empty() ? SiblingBinary("server") : absl::GetFlag(FLAGS_server_bin);
  const std::string worker_bin =
      absl::GetFlag(FLAGS_worker_bin).empty() ? SiblingBinary("worker") : absl::GetFlag(FLAGS_worker_bin);
  for (const std::string& bin : {server_bin, worker_bin}) {
    if (::access(bin.c_str(), X_OK) != 0) {
      return absl::NotFoundError(absl::StrCat(bin,
                                              " is not executable; build //ps:server and //ps:worker "
                                              "or pass --server_bin/--worker_bin"));
    }
  }
  char dir_template[] = "/tmp/psring-local-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string dir = dir_template;
  struct RemoveOnExit {
    std::string path;
    ~RemoveOnExit() {
      std::error_code error;
      std::filesystem::remove_all(path, error);  // best effort: a leftover temporary folder is harmless
    }
  } remove_dir{dir};
  const absl::Time deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_job_timeout));
  ASSIGN_OR_RETURN(const std::string token,
                   LoadAuthToken(absl::GetFlag(FLAGS_auth_token), absl::GetFlag(FLAGS_auth_token_file)));
  // Children inherit the environment: /proc/<pid>/cmdline, readable by every local user, never holds it
  // (the environment is readable only by the same user).
  if (token.empty()) {
    ::unsetenv(kAuthTokenEnv);
  } else if (::setenv(kAuthTokenEnv, token.c_str(), 1) != 0) {
    return absl::InternalError(absl::StrCat("cannot set ", kAuthTokenEnv, " for the children"));
  }

  Job job;
  std::vector<size_t> servers;
  std::vector<std::string> port_files;
  for (int shard = 0; shard < k; ++shard) {
    port_files.push_back(absl::StrCat(dir, "/port-", shard));
    std::vector<std::string> argv = {server_bin,
                                     "--bind_addr=127.0.0.1",
                                     "--port=0",
                                     "--port_file=" + port_files.back(),
                                     absl::StrCat("--workers=", n),
                                     absl::StrCat("--shard=", shard),
                                     absl::StrCat("--num_shards=", k),
                                     "--mode=" + mode,
                                     absl::StrCat("--staleness=", absl::GetFlag(FLAGS_staleness)),
                                     absl::StrCat("--backup_workers=", absl::GetFlag(FLAGS_backup_workers)),
                                     absl::StrCat("--step_timeout=", absl::GetFlag(FLAGS_step_timeout)),
                                     "--checkpoint_dir=" + absl::GetFlag(FLAGS_checkpoint_dir)};
    ASSIGN_OR_RETURN(size_t server, job.Spawn(argv, absl::StrCat("server shard ", shard)));
    servers.push_back(server);
  }
  std::vector<std::string> addresses;
  for (int shard = 0; shard < k; ++shard) {
    int port = 0;
    const absl::Time port_deadline = std::min(deadline, absl::Now() + absl::Seconds(30));
    while (port == 0) {
      RETURN_IF_ERROR(CheckInterrupted());
      RETURN_IF_ERROR(job.Poll());
      if (!job.Running(servers[shard]))
        return absl::InternalError(absl::StrCat("server shard ", shard, " exited"));
      std::ifstream in(port_files[shard]);
      if (!(in >> port)) port = 0;
      if (port == 0) {
        if (absl::Now() > port_deadline) {
          return absl::DeadlineExceededError(
              absl::StrCat("server shard ", shard, " did not start within 30 s"));
        }
        absl::SleepFor(absl::Milliseconds(20));
      }
    }
    std::remove(port_files[shard].c_str());
    addresses.push_back(absl::StrCat("127.0.0.1:", port));
  }
  std::fprintf(stderr, "ps local: %d server(s) at %s; starting %d worker(s)\n", k,
               absl::StrJoin(addresses, ",").c_str(), n);
  std::vector<size_t> workers;
  for (int rank = 0; rank < n; ++rank) {
    std::vector<std::string> argv = {worker_bin,
                                     "--servers=" + absl::StrJoin(addresses, ","),
                                     absl::StrCat("--rank=", rank),
                                     absl::StrCat("--world_size=", n),
                                     "--shutdown_servers"};
    argv.insert(argv.end(), worker_args.begin(), worker_args.end());
    ASSIGN_OR_RETURN(size_t worker, job.Spawn(argv, absl::StrCat("worker rank ", rank)));
    workers.push_back(worker);
  }
  // Workers first; then the servers, which exit after rank 0's Shutdown call.
  for (const std::vector<size_t>* group : {&workers, &servers}) {
    for (size_t child : *group) {
      while (job.Running(child)) {
        RETURN_IF_ERROR(CheckInterrupted());
        RETURN_IF_ERROR(job.Poll());
        if (absl::Now() > deadline)
          return absl::DeadlineExceededError("--job_timeout passed; killing the job");
        absl::SleepFor(absl::Milliseconds(20));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace psring::ps

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Runs a parameter-server job on loopback: K servers and N workers, torn down on exit, error or "
      "Ctrl-C. Arguments after a second `--` go to every worker (see //ps:worker --help).\n"
      "  bazel run //ps:local -- --workers=4 --num_shards=2 -- --epochs=1 --hidden=256,256",
      {"common/", "ps/"});
  return psring::ps::RunMain(argc, argv, "ps local", [](const std::vector<std::string>& worker_args) {
    struct sigaction action {};
    action.sa_handler = psring::ps::OnSignal;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGHUP, &action, nullptr);
    return psring::ps::Run(worker_args);
  });
}
