// Real hosts behind a launcher: the cluster seam (bench/core/cluster.h) for a host list started through Open
// MPI's mpirun (ssh to each host, as Open MPI does) or, inside a Slurm allocation, through srun. The sweep,
// tables, model, calibration and validation run on it unchanged.
//
//   host list (--hosts, --hostfile, SLURM_JOB_NODELIST)   node1:2, node2:2
//   logical hosts the harness places processes on         0 -> node1, 1 -> node2, 2 -> node1, ... (by node)
//   a command on logical host h                           mpirun --host node1:1 -np 1 --bind-to none ARGV
//                                                         srun --nodes=1 --ntasks=1 --nodelist=node1 --overlap ARGV
//
// Every process is its own one-process launch (mpirun -np 1, one srun job step), so the harness keeps its own
// placement, start order (servers before workers), result lines and time limits for every exchange; ranks
// and world size come from the harness's flags (common/cluster_env.cc: flags win over the launcher's
// OMPI_COMM_WORLD_RANK or SLURM_PROCID). Killing the launcher process kills its remote process.
//
// Nothing shapes a real link, so Create() measures what the links are: through the launcher, //bench/hosts:
// link_probe reports each host's name, usable cores and missing programs, then one TCP stream's goodput and
// the median round trip between every ordered pair of hosts (an all-pairs matrix, as JSC LinkTest prints).
// link_bytes_per_second() is the slowest pair's goodput and latency_seconds() half the median round trip:
// the conditions the model is evaluated at. Where `links` is given (the test rig: ssh into the emulated
// cluster's namespaces) the links, their counters and the box's cores are that cluster's instead.
//
// Not thread-safe; one owner. Create() blocks while it probes (about 1 s per host pair plus the launches).
#ifndef PSRING_BENCH_HOSTS_LAUNCHER_CLUSTER_H_
#define PSRING_BENCH_HOSTS_LAUNCHER_CLUSTER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/core/cluster.h"
#include "bench/hosts/host_list.h"

namespace psring::bench {

struct LauncherOptions {
  std::string launcher = "mpirun";             // "mpirun" or "srun"
  std::vector<HostSlots> hosts;                // physical hosts and their slots
  int processes = 1;                           // logical hosts the sweep needs (its largest run)
  std::vector<std::string> launcher_args;      // extra launcher options (--mpirun_args / --srun_args)
  std::vector<std::string> prefix;             // argv before the launcher (the test rig: ip netns exec h0)
  std::string launcher_path;                   // "" : "mpirun" / "srun" from PATH
  std::string link_probe;                      // //bench/hosts:link_probe (the same path on every host)
  std::vector<std::string> programs;           // paths every host must have (the workers): checked first
  bool measure_links = true;                   // the all-pairs matrix (off: only host 0 <-> 1)
  int64_t stream_bytes = 32 << 20;             // bytes of each pair's stream
  // Real hosts: what one switch port toward a host holds, in bytes (--port_buffer_kb; 0: not known). The rig
  // takes its emulated links' own.
  double port_buffer_bytes = 0;
  // Lives as long as the cluster and is released first by Destroy() (the rig's ssh servers).
  std::shared_ptr<void> companion;
};

// What Create() measured.
struct HostReport {
  std::string name;     // as the host calls itself
  std::string address;  // what processes there bind to (IPv4)
  int cores = 0;
  int slots = 0;
};

class LauncherCluster final : public Cluster {
 public:
  // `links`: an emulated cluster whose hosts the launcher reaches (the test rig), owned; nullptr on real
  // hosts. Errors name the host: unreachable, missing programs, too few slots.
  static absl::StatusOr<std::unique_ptr<LauncherCluster>> Create(LauncherOptions options,
                                                                 std::unique_ptr<Cluster> links = nullptr);
  ~LauncherCluster() override;

  int hosts() const override { return static_cast<int>(host_of_.size()); }
  bool emulated() const override { return true; }  // a network with known (measured) links
  const std::string& fallback_reason() const override { return fallback_reason_; }
  std::string Describe() const override;
  std::string label() const override { return links_ ? "hosts (mpirun over ssh into the emulated cluster)" : "hosts"; }
  std::string LinkReport() const override { return LinkMatrix(); }
  double box_cores() const override { return links_ ? links_->box_cores() : 0; }
  std::string HostAddress(int host) const override;
  std::vector<std::string> Command(int host, const std::vector<std::string>& argv) const override;
  double link_bytes_per_second() const override;
  double latency_seconds() const override;
  const std::string& latency_method() const override;
  // The rig's emulated ports, or on real hosts what --port_buffer_kb said (0: not known).
  double port_buffer_bytes() const override;
  absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> AllHostLinkBytes() const override;
  absl::StatusOr<DelayCounters> ReadDelayCounters() override;
  absl::StatusOr<double> MeasureStream(int from, int to, size_t bytes) const override;
  absl::StatusOr<double> MeasureRtt(int from, int to, int rounds) const override;
  absl::Status Destroy() override;

  const std::vector<HostReport>& host_reports() const { return reports_; }
  // "# link matrix" lines: goodput MB/s and RTT ms from each physical host to each other ("" unmeasured).
  std::string LinkMatrix() const;

 private:
  explicit LauncherCluster(LauncherOptions options) : options_(std::move(options)) {}
  // argv that runs `argv` on physical host `physical`.
  std::vector<std::string> PhysicalCommand(int physical, const std::vector<std::string>& argv) const;
  absl::Status ProbeHosts();
  // srun: the name of every job step this process starts, and the cancel of those still running.
  static std::string StepName();
  void CancelLeftoverSteps() const;
  absl::Status ProbeLinks();
  // One probe pair between physical hosts: the listener on `to`, the connecting end on `from`; the
  // PSRING_PROBE value named `key` of whichever end prints it.
  absl::StatusOr<double> ProbePair(int from, int to, const std::vector<std::string>& mode_flags,
                                   const std::string& key) const;

  LauncherOptions options_;
  std::unique_ptr<Cluster> links_;
  std::vector<int> host_of_;  // logical host -> physical host
  std::vector<HostReport> reports_;
  std::vector<std::vector<double>> goodput_;  // [from][to] bytes/s, 0 unmeasured
  std::vector<std::vector<double>> rtt_;      // [from][to] seconds, 0 unmeasured
  double link_bytes_per_second_ = 0;
  double latency_seconds_ = 0;
  std::string latency_method_ = "measured";
  std::string fallback_reason_;
};

}  // namespace psring::bench

#endif  // PSRING_BENCH_HOSTS_LAUNCHER_CLUSTER_H_
