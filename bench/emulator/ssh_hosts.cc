#include "bench/emulator/ssh_hosts.h"

#include <arpa/inet.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/read_file.h"
#include "common/status_macros.h"

namespace psring::bench {
namespace {

// The emulated network (EmulatedCluster gives its hosts 198.18.x.y/15). Open MPI's interface filters and
// the client key's `from=` both name it.
constexpr char kEmulatedNetwork[] = "198.18.0.0/15";
constexpr char kKnownHostsPattern[] = "198.18.*,198.19.*";
constexpr char kSshd[] = "/usr/sbin/sshd";
// sshd's privilege separation needs this directory, which the system's ssh service would create at boot.
constexpr char kPrivsepDir[] = "/run/sshd";

absl::Status ErrnoError(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// kInternal when `path` cannot be read: the files are the harness's own (keys, logs).
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return absl::InternalError(text.status().message());
  return text;
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// An installed program at an absolute path, or kFailedPrecondition with the Debian package that has it.
absl::StatusOr<std::string> Require(const std::string& name, const std::string& package) {
  const std::string path = name == "sshd" && access(kSshd, X_OK) == 0 ? kSshd : FindExecutable(name);
  if (path.find('/') == std::string::npos || access(path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("emulated ssh hosts need ", name, ": install Debian's ",
                                                      package, " (apt-get install ", package, ")"));
  }
  return path;
}

// /proc/net/tcp's form of an IPv4 address and port in LISTEN state: "030012C6:0016 ... 0A".
absl::StatusOr<std::string> ProcListenAddress(const std::string& address, int port) {
  in_addr addr{};
  if (inet_pton(AF_INET, address.c_str(), &addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: '", address, "'"));
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%08X:%04X", addr.s_addr, port);
  return std::string(text);
}

// Whether the network namespace of process `pid` has a TCP socket listening on `listen_address` (in
// ProcListenAddress's form). Reads that process's view of /proc/net/tcp: nothing is spawned.
bool Listening(pid_t pid, const std::string& listen_address) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/net/tcp"));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() > 3 && fields[1] == listen_address && fields[3] == "0A") return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SshHosts>> SshHosts::Start(const EmulatedCluster& cluster,
                                                          const std::string& work_dir) {
  if (!cluster.emulated()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ssh hosts need an emulated cluster (network namespaces); this one is loopback: ",
        cluster.fallback_reason()));
  }
  ASSIGN_OR_RETURN(const std::string sshd, Require("sshd", "openssh-server"));
  ASSIGN_OR_RETURN(const std::string ssh_keygen, Require("ssh-keygen", "openssh-client"));
  ASSIGN_OR_RETURN(const std::string ssh, Require("ssh", "openssh-client"));
  if (work_dir.empty() || work_dir.find_first_of(" \t\n'\"\\") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ssh hosts: work_dir '", work_dir, "' is empty or has whitespace or quotes (Open MPI splits its ssh "
        "command at spaces)"));
  }
  std::error_code error;
  std::filesystem::create_directories(work_dir, error);
  if (error) return absl::InvalidArgumentError(absl::StrCat("cannot create ", work_dir, ": ", error.message()));
  if (mkdir(kPrivsepDir, 0755) != 0 && errno != EEXIST) return ErrnoError(absl::StrCat("mkdir ", kPrivsepDir));

  std::unique_ptr<SshHosts> hosts(new SshHosts());
  std::string pattern = std::filesystem::absolute(work_dir).string() + "/ssh-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return ErrnoError(absl::StrCat("mkdtemp ", pattern));
  hosts->dir_ = pattern;  // mkdtemp makes it 0700; from here on Stop() removes it
  hosts->client_key_ = hosts->dir_ + "/client_key";
  RETURN_IF_ERROR(hosts->MakeKeys(ssh_keygen));
  hosts->ssh_argv_ = {ssh,
                      "-F", "/dev/null",  // this machine's ssh_config and root's ~/.ssh/config do not apply
                      "-i", hosts->client_key_,
                      "-o", "IdentitiesOnly=yes",
                      "-o", "BatchMode=yes",
                      "-o", "StrictHostKeyChecking=yes",
                      "-o", "UserKnownHostsFile=" + hosts->dir_ + "/known_hosts",
                      "-o", "GlobalKnownHostsFile=/dev/null",
                      "-o", "ConnectTimeout=10",
                      "-o", "LogLevel=ERROR"};

  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (int h = 0; h < cluster.hosts(); ++h) RETURN_IF_ERROR(hosts->StartDaemon(cluster, sshd, h));
  RETURN_IF_ERROR(hosts->AwaitListening(cluster, deadline));
  RETURN_IF_ERROR(hosts->CheckLogins(cluster));
  return hosts;
}

absl::Status SshHosts::MakeKeys(const std::string& ssh_keygen) {
  for (const char* name : {"host_key", "client_key"}) {
    RETURN_IF_ERROR(RunCommand({ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C",
                                absl::StrCat("psring emulated hosts ", name), "-f",
                                absl::StrCat(dir_, "/", name)})
                        .status());
  }
  ASSIGN_OR_RETURN(const std::string client_public, ReadFile(client_key_ + ".pub"));
  ASSIGN_OR_RETURN(const std::string host_public, ReadFile(dir_ + "/host_key.pub"));
  RETURN_IF_ERROR(WriteFile(dir_ + "/authorized_keys",
                            absl::StrCat("from=\"", kEmulatedNetwork, "\",restrict ",
                                         absl::StripAsciiWhitespace(client_public), "\n")));
  return WriteFile(dir_ + "/known_hosts", absl::StrCat(kKnownHostsPattern, " ",
                                                       absl::StripAsciiWhitespace(host_public), "\n"));
}

std::string SshHosts::HostName(const EmulatedCluster& cluster, int host) const {
  return absl::StrCat("host ", host, " (", cluster.HostAddress(host), ", namespace ", cluster.HostNamespace(host),
                      ")");
}

std::string SshHosts::LogTail(int host) const {
  absl::StatusOr<std::string> log = ReadFile(absl::StrCat(dir_, "/sshd.h", host, ".log"));
  if (!log.ok()) return "(no sshd log)";
  constexpr size_t kTail = 2000;
  absl::string_view text = absl::StripAsciiWhitespace(*log);
  if (text.size() > kTail) text = text.substr(text.size() - kTail);
  return text.empty() ? "(sshd log empty)" : std::string(text);
}

absl::Status SshHosts::StartDaemon(const EmulatedCluster& cluster, const std::string& sshd, int host) {
  const std::string config = absl::StrCat(dir_, "/sshd_config.h", host);
  // StrictModes off: the key files sit in a directory under /tmp, not in a home directory. No PAM: nothing
  // of this machine's login stack is needed for a key login as root; nor root's shell start-up files (HOME).
  const std::vector<std::string> directives = {
      absl::StrCat("ListenAddress ", cluster.HostAddress(host)),
      "Port 22",
      absl::StrCat("HostKey ", dir_, "/host_key"),
      absl::StrCat("AuthorizedKeysFile ", dir_, "/authorized_keys"),
      absl::StrCat("PidFile ", dir_, "/sshd.h", host, ".pid"),
      "PermitRootLogin prohibit-password",
      "PubkeyAuthentication yes",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "UsePAM no",
      "StrictModes no",
      "X11Forwarding no",
      "PrintMotd no",
      // The session's HOME is the key directory, not root's: bash run by sshd sources ~/.bashrc, and a login
      // shell's start-up (pyenv's rehash waits up to 60 s for a lock a killed login left behind) would hang
      // every login of the job.
      absl::StrCat("SetEnv HOME=", dir_),
      // mpirun opens one connection per host at once; a harness may run several mpiruns side by side.
      "MaxStartups 100",
  };
  RETURN_IF_ERROR(WriteFile(config, absl::StrCat(absl::StrJoin(directives, "\n"), "\n")));
  SpawnOptions spawn;
  spawn.stdout_file = "/dev/null";
  // -D: stays in the foreground, so it is our child; -E: its log (and its configuration errors) to a file.
  ASSIGN_OR_RETURN(Subprocess daemon,
                   Subprocess::Start(cluster.Command(host, {sshd, "-D", "-f", config, "-E",
                                                            absl::StrCat(dir_, "/sshd.h", host, ".log")}),
                                     spawn));
  daemons_.push_back(std::move(daemon));
  return absl::OkStatus();
}

absl::Status SshHosts::AwaitListening(const EmulatedCluster& cluster, absl::Time deadline) {
  for (int h = 0; h < static_cast<int>(daemons_.size()); ++h) {
    ASSIGN_OR_RETURN(const std::string listen, ProcListenAddress(cluster.HostAddress(h), 22));
    // `ip netns exec` execs sshd in place, so the child's pid is sshd's and its /proc shows the host's network.
    while (!Listening(daemons_[h].pid(), listen)) {
      if (daemons_[h].Poll()) {
        return absl::InternalError(absl::StrCat("sshd of ", HostName(cluster, h), " ",
                                                daemons_[h].ExitDescription(), ": ", LogTail(h)));
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("sshd of ", HostName(cluster, h),
                                                        " is not listening on port 22 after 10 s: ", LogTail(h)));
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  return absl::OkStatus();
}

absl::Status SshHosts::CheckLogins(const EmulatedCluster& cluster) {
  // From host 0, as mpirun will: every login crosses host 0's and the target's links.
  std::vector<ProcessSpec> specs;
  for (int h = 0; h < cluster.hosts(); ++h) {
    std::vector<std::string> argv = ssh_argv_;
    argv.insert(argv.end(), {cluster.HostAddress(h), "true"});
    specs.push_back({absl::StrCat("ssh to ", HostName(cluster, h)), cluster.Command(0, argv)});
  }
  JobOptions options;
  options.timeout = absl::Seconds(30);
  ASSIGN_OR_RETURN(const std::vector<ProcessResult> results, RunJob(specs, options));
  for (int h = 0; h < static_cast<int>(results.size()); ++h) {
    const ProcessResult& r = results[h];
    if (r.exit_code == 0) continue;
    const std::string message = absl::StrCat(
        "cannot log in to ", HostName(cluster, h), " over ssh from host 0 (",
        r.timed_out ? "timed out" : (r.term_signal != 0 ? absl::StrCat("signal ", r.term_signal)
                                                        : absl::StrCat("exit ", r.exit_code)),
        "): ", absl::StripAsciiWhitespace(r.stderr_tail), "; its sshd log: ", LogTail(h));
    return r.timed_out ? absl::DeadlineExceededError(message) : absl::InternalError(message);
  }
  return absl::OkStatus();
}

std::string SshHosts::ssh_command() const { return absl::StrJoin(ssh_argv_, " "); }

std::vector<std::string> SshHosts::MpirunArgs() const {
  std::vector<std::string> args = {
      "--mca", "plm_rsh_agent", ssh_command(),
      // Every orted is started by mpirun itself, so only mpirun's host needs to reach the others over ssh.
      "--mca", "plm_rsh_no_tree_spawn", "1",
      "--mca", "oob_tcp_if_include", kEmulatedNetwork,
      "--mca", "btl_tcp_if_include", kEmulatedNetwork,
      "-x", "PATH"};
  // -x of an unset variable only draws a warning, so only what is there.
  if (std::getenv("LD_LIBRARY_PATH") != nullptr) args.insert(args.end(), {"-x", "LD_LIBRARY_PATH"});
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  return args;
}

absl::Status SshHosts::Stop() {
  for (Subprocess& daemon : daemons_) {
    if (!daemon.running()) continue;
    daemon.Signal(SIGTERM);
    if (!daemon.Wait(absl::Seconds(2))) daemon.Kill();
  }
  daemons_.clear();
  if (dir_.empty()) return absl::OkStatus();
  std::error_code error;
  std::filesystem::remove_all(dir_, error);
  const std::string dir = std::exchange(dir_, "");
  if (error) return absl::InternalError(absl::StrCat("cannot remove ", dir, ": ", error.message()));
  return absl::OkStatus();
}

SshHosts::~SshHosts() {
  absl::Status stopped = Stop();
  (void)stopped;
}

}  // namespace psring::bench
