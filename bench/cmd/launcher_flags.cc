#include "bench/cmd/launcher_flags.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/core/links.h"
#include "bench/emulator/cluster.h"
#include "bench/emulator/ssh_hosts.h"
#include "bench/hosts/host_list.h"
#include "bench/hosts/launcher_cluster.h"
#include "common/runfiles.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, launcher, "",
          "Where the runs' processes go. Empty: the emulated cluster on this machine (network namespaces, "
          "shaped links: --link, --latency). 'mpirun': the real hosts of --hosts or --hostfile, each process "
          "started by Open MPI's mpirun (ssh to the host; the binaries must be at the same paths there). "
          "'srun': the nodes of the Slurm allocation this runs in (SLURM_JOB_NODELIST; run inside salloc or "
          "sbatch), each process a job step. On real hosts nothing shapes the links: --link and --latency do "
          "not apply; the harness measures every host pair's goodput and round trip (the link matrix) and "
          "evaluates the model there. 'mpirun-emulated': the test rig, mpirun over ssh into this machine's "
          "emulated hosts (each namespace runs an sshd; needs Debian's openssh-server), links as --link/--latency.");
ABSL_FLAG(std::string, hosts, "",
          "--launcher=mpirun: the hosts and their slots, Open MPI style: node1:4,node2:4 (no :N: 1 slot). "
          "Processes are placed round robin over the hosts (rank 0 on the first, rank 1 on the second...).");
ABSL_FLAG(std::string, hostfile, "",
          "--launcher=mpirun: an Open MPI hostfile instead of --hosts (lines 'node1 slots=4').");
ABSL_FLAG(std::string, launcher_args, "",
          "Extra options for every mpirun or srun, space-separated (e.g. \"--mca btl_tcp_if_include eth0\" or "
          "\"--partition=bench\").");
ABSL_FLAG(std::string, link_probe, "",
          "Path of //bench/hosts:link_probe (the same on every host). Default: this binary's runfiles.");
ABSL_FLAG(
    double, port_buffer_kb, 0,
    "Real hosts (--launcher=mpirun or srun): what one switch port toward a host holds before it drops, in "
    "kB (the switch's buffer per port; 0: not known). scaling --ps_chunks=capped keeps the PS's window "
    "bursts within it and the measured links' bandwidth-delay product; not known, it keeps the harness's "
    "chunks. The emulated cluster knows its own (--queue and --link_burst at the link rate).");
ABSL_FLAG(bool, link_matrix, true,
          "Real hosts: measure every ordered host pair (the all-pairs link matrix); false: only host 0 <-> 1.");

namespace psring::bench {
namespace {

std::vector<std::string> ProgramList(const BinaryPaths& programs, const std::string& probe) {
  std::vector<std::string> out = {probe};
  for (const std::string* p : {&programs.ring_worker, &programs.ps_server, &programs.ps_worker}) {
    if (!p->empty()) out.push_back(*p);
  }
  return out;
}

// Keeps the ssh servers of the rig alive as long as the cluster, and stops them before the namespaces go.
struct RigCompanion {
  std::unique_ptr<SshHosts> ssh;
};

}  // namespace

absl::StatusOr<ClusterFactory> ClusterFactoryFromFlags(const char* argv0, const BinaryPaths& programs) {
  const std::string launcher = absl::GetFlag(FLAGS_launcher);
  const std::string host_list = absl::GetFlag(FLAGS_hosts);
  const std::string hostfile = absl::GetFlag(FLAGS_hostfile);
  ASSIGN_OR_RETURN(const double port_buffer_bytes,
                   PortBufferBytes(absl::GetFlag(FLAGS_port_buffer_kb), "--port_buffer_kb"));
  if (port_buffer_bytes > 0 && (launcher.empty() || launcher == "mpirun-emulated")) {
    return absl::InvalidArgumentError(
        "--port_buffer_kb is for real hosts (--launcher=mpirun or srun): the emulated cluster's ports hold "
        "--queue and --link_burst at the link rate");
  }
  if (launcher.empty()) {
    if (!host_list.empty() || !hostfile.empty()) {
      return absl::InvalidArgumentError("--hosts/--hostfile need --launcher=mpirun");
    }
    return ClusterFactory();
  }
  if (launcher != "mpirun" && launcher != "srun" && launcher != "mpirun-emulated") {
    return absl::InvalidArgumentError(
        absl::StrCat("--launcher=", launcher, ": use mpirun, srun or mpirun-emulated (or leave it empty)"));
  }
  LauncherOptions base;
  base.launcher = launcher == "srun" ? "srun" : "mpirun";
  base.launcher_args = absl::StrSplit(absl::GetFlag(FLAGS_launcher_args), ' ', absl::SkipWhitespace());
  base.measure_links = absl::GetFlag(FLAGS_link_matrix);
  base.port_buffer_bytes = port_buffer_bytes;
  ASSIGN_OR_RETURN(base.link_probe,
                   FindRunfile(argv0, {absl::GetFlag(FLAGS_link_probe), "psring/bench/hosts/link_probe",
                                       "--link_probe", "build it (./bazelw build //bench/hosts:link_probe)",
                                       /*executable=*/true}));
  base.programs = ProgramList(programs, base.link_probe);
  if (launcher == "mpirun") {
    if (host_list.empty() == hostfile.empty()) {
      return absl::InvalidArgumentError("--launcher=mpirun needs exactly one of --hosts=node1:4,node2:4 and --hostfile");
    }
    if (!host_list.empty()) {
      ASSIGN_OR_RETURN(base.hosts, ParseHostList(host_list));
    } else {
      ASSIGN_OR_RETURN(base.hosts, ReadHostfile(hostfile));
    }
  } else if (!host_list.empty() || !hostfile.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--launcher=", launcher, " takes no --hosts/--hostfile (",
                                                   launcher == "srun" ? "the allocation's nodes are the hosts"
                                                                      : "the emulated hosts are the hosts",
                                                   ")"));
  } else if (launcher == "srun") {
    ASSIGN_OR_RETURN(base.hosts, SlurmHostsFromEnv());
  }
  const bool rig = launcher == "mpirun-emulated";
  return ClusterFactory([base, rig](const ClusterOptions& cluster_options)
                            -> absl::StatusOr<std::unique_ptr<Cluster>> {
    // Calibration's loopback runs (CPU ceilings) stay on this machine whatever the launcher.
    if (cluster_options.force_loopback) {
      ASSIGN_OR_RETURN(std::unique_ptr<EmulatedCluster> local, EmulatedCluster::Create(cluster_options));
      return std::unique_ptr<Cluster>(std::move(local));
    }
    LauncherOptions options = base;
    options.processes = cluster_options.hosts;
    if (!rig) {
      ASSIGN_OR_RETURN(std::unique_ptr<LauncherCluster> hosts, LauncherCluster::Create(std::move(options)));
      return std::unique_ptr<Cluster>(std::move(hosts));
    }
    ClusterOptions emulated_options = cluster_options;
    emulated_options.allow_loopback_fallback = false;
    ASSIGN_OR_RETURN(std::unique_ptr<EmulatedCluster> emulated, EmulatedCluster::Create(emulated_options));
    auto companion = std::make_shared<RigCompanion>();
    ASSIGN_OR_RETURN(companion->ssh, SshHosts::Start(*emulated, "/tmp"));
    for (int h = 0; h < emulated->hosts(); ++h) options.hosts.push_back({emulated->HostAddress(h), 1});
    options.prefix = {"ip", "netns", "exec", emulated->HostNamespace(0)};
    const std::vector<std::string> ssh_args = companion->ssh->MpirunArgs();
    options.launcher_args.insert(options.launcher_args.begin(), ssh_args.begin(), ssh_args.end());
    options.companion = companion;
    ASSIGN_OR_RETURN(std::unique_ptr<LauncherCluster> hosts,
                     LauncherCluster::Create(std::move(options), std::move(emulated)));
    return std::unique_ptr<Cluster>(std::move(hosts));
  });
}

}  // namespace psring::bench
