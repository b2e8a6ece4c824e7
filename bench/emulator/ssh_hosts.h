// The emulated hosts as ssh hosts, so that the launchers users already have (Open MPI's mpirun over ssh) start
// processes on them as they would on a real cluster:
//
//   namespace h0                               namespace h2
//   mpirun --host 198.18.0.3:1 prog   --ssh--> sshd (ListenAddress 198.18.0.3:22)
//     ^  (oob TCP over eth0, links shaped)      `-- orted --> prog (in h2: its traffic crosses h2's link)
//     `--------------------------------------------'
//
// One sshd per host namespace, listening on that host's address only (the root namespace and the machine's
// own sshd are untouched). Its keys live in a fresh 0700 directory: an ed25519 host key shared by all hosts (a
// known_hosts entry for 198.18.* makes host key checking strict), and an ed25519 client key whose
// authorized_keys entry is `restrict`ed (no forwarding, no pty) and accepted only from 198.18.0.0/15. Every
// namespace shares this machine's file system, so the same binaries run at the same paths on every host.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<EmulatedCluster> cluster, EmulatedCluster::Create(options));
//   ASSIGN_OR_RETURN(std::unique_ptr<SshHosts> ssh, SshHosts::Start(*cluster, "/tmp/run"));
//   std::vector<std::string> argv = {"mpirun"};
//   for (const std::string& arg : ssh->MpirunArgs()) argv.push_back(arg);
//   argv.insert(argv.end(), {"--host", cluster->HostAddress(1) + ":1", "-np", "1", "/path/prog"});
//   RunJob({{"mpirun", cluster->Command(0, argv)}}, options);  // from host 0's namespace
//
// Processes started over ssh are not this object's: mpirun ends them (its remote orteds kill their children
// when mpirun exits or dies, even of SIGKILL, since they lose their connection to it), and the cluster's
// teardown kills whatever is left in its namespaces. The remote login runs root's shell (bash -c), so its
// start-up files add to every launch.
//
// Needs Debian's openssh-server (/usr/sbin/sshd) and openssh-client, and root. Not thread-safe; one owner.
#ifndef PSRING_BENCH_EMULATOR_SSH_HOSTS_H_
#define PSRING_BENCH_EMULATOR_SSH_HOSTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/emulator/cluster.h"
#include "common/subprocess.h"

namespace psring::bench {

class SshHosts {
 public:
  // Makes the keys and configuration in a new private directory under `work_dir` (created if missing; its
  // path may not contain whitespace or quotes, since Open MPI splits its ssh command at spaces), starts an sshd
  // in every host's namespace and blocks until each accepts the client key over the emulated network (an
  // `ssh true` from host 0 to every host), a few seconds at most. Errors: kFailedPrecondition for a loopback
  // cluster or a missing sshd/ssh/ssh-keygen (with the package to install), kInvalidArgument for an unusable
  // `work_dir`, kInternal or kDeadlineExceeded naming the host whose sshd failed, with its log.
  //
  // The sshds are children of the calling thread (common/subprocess.h): they are killed when it ends, so
  // call Start() from a thread that outlives the object. `cluster` must outlive the object.
  static absl::StatusOr<std::unique_ptr<SshHosts>> Start(const EmulatedCluster& cluster,
                                                         const std::string& work_dir);
  ~SshHosts();  // Stop(), ignoring its errors

  SshHosts(const SshHosts&) = delete;
  SshHosts& operator=(const SshHosts&) = delete;

  // The ssh command line (space-separated, no quoting needed) that reaches any host from any host's namespace
  // as root: Open MPI's rsh agent. `ssh_command() + " 198.18.0.3 true"` runs `true` on host 2.
  std::string ssh_command() const;
  // The same as argv, for running ssh directly (e.g. through EmulatedCluster::Command).
  const std::vector<std::string>& ssh_argv() const { return ssh_argv_; }

  // The mpirun options that launch over these hosts from inside a host's namespace (host 0's, usually): the
  // rsh agent, all daemons started from mpirun's host (no tree spawn), Open MPI's own traffic (oob) and its
  // TCP BTL on the emulated network, --allow-run-as-root when root, and -x PATH (and LD_LIBRARY_PATH when
  // set) so remote processes see this process's. Add --host/-np and the program. mpirun must run inside a
  // host namespace: outside, it has no interface in the emulated network.
  std::vector<std::string> MpirunArgs() const;

  // The private directory with the keys, configurations and each sshd's log (sshd.h<i>.log).
  const std::string& dir() const { return dir_; }

  // Stops every sshd (SIGTERM, then SIGKILL after 2 s) and removes the directory. Idempotent; the first
  // error.
  absl::Status Stop();

 private:
  SshHosts() = default;
  absl::Status MakeKeys(const std::string& ssh_keygen);
  absl::Status StartDaemon(const EmulatedCluster& cluster, const std::string& sshd, int host);
  absl::Status AwaitListening(const EmulatedCluster& cluster, absl::Time deadline);
  absl::Status CheckLogins(const EmulatedCluster& cluster);
  // "host 2 (198.18.0.3, namespace psr12-h2)".
  std::string HostName(const EmulatedCluster& cluster, int host) const;
  std::string LogTail(int host) const;

  std::string dir_;
  std::string client_key_;
  std::vector<std::string> ssh_argv_;
  std::vector<Subprocess> daemons_;  // index = host
};

}  // namespace psring::bench

#endif  // PSRING_BENCH_EMULATOR_SSH_HOSTS_H_
