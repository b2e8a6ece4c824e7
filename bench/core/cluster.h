// The cluster seam: where a run's processes go, and what the links between them are. The harness
// (bench/harness/) places and starts every rank and server through this interface only, so the sweep,
// tables, fits, checks, calibration and validation run unchanged on any cluster that implements it:
//
//   implementation                  hosts are               a command starts by         the link is
//   EmulatedCluster (emulator/)     network namespaces      ip netns exec <ns> argv     tbf rate + delay
//   loopback (EmulatedCluster's     127.0.0.1               argv as it is               unlimited
//     fallback)
//   real hosts (next: mpirun/srun)  hosts of a host list    the launcher (ssh)          measured, not shaped
//
//   const Cluster& cluster = ...;
//   std::vector<std::string> argv = cluster.Command(host, {"/path/ring_worker",
//                                                          "--iface_addr=" + cluster.HostAddress(host)});
//
// Host indices are those of a placement (bench/core/exchange.h): host 0 .. hosts() - 1. Implementations say
// whether they are thread-safe; the harness uses one from one thread.
#ifndef PSRING_BENCH_CORE_CLUSTER_H_
#define PSRING_BENCH_CORE_CLUSTER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/core/links.h"

namespace psring::bench {

// Cumulative counters of a latency emulator that holds packets (the NFQUEUE delay program,
// bench/emulator/netdelay_main.cc); differences between two reads describe what happened in between. A packet
// released more than 100 us after it was due means the delay program did not get a core in time: the
// emulator, not the emulated network, set that packet's latency.
struct DelayCounters {
  int64_t packets = 0;
  int64_t late_over_100us = 0;
  int64_t late_over_1ms = 0;
  int64_t max_late_us = 0;  // over the program's life (not a difference)
};

// Cumulative counters of the emulated links' queues (tc's statistics of the link ends' qdiscs, summed): the
// packets the switch's shaped ports passed and those any queue dropped because it was full. A drop is the
// network's, not the box's: a link end's queue overflows when more arrives than the link drains within its
// queue time (many senders into one port at once, incast), however the box's cores are doing.
struct QueueCounters {
  int64_t packets = 0;  // passed by the rate-limiting (tbf) queues of the switch's ports: each packet once
  int64_t dropped = 0;  // dropped by any queue at either end of a link
};

// dropped / (packets + dropped): the share of the links' packets their queues dropped; -1 when `dropped` is
// unknown (< 0), 0 when nothing was offered.
inline double DropShare(int64_t packets, int64_t dropped) {
  if (dropped < 0) return -1;
  if (packets + dropped <= 0) return 0;
  return static_cast<double>(dropped) / static_cast<double>(packets + dropped);
}

// The drop share from which a run counts as lossy, one figure for rule (d) (bench/emulator/probes.h: drops
// that can have cost the link's shortfall keep the run), calibration (leaves lossy runs out) and validation
// (summarizes them apart). By Mathis et al.'s bound (rate <= 1.22 MSS / (RTT sqrt(p))), at p = 0.1 % a TCP
// flow with a 100 ms round trip moves at most ~0.56 MB/s, less than its share of a 60 Mbit/s link among ten
// senders; below it, drops are shown and decide nothing.
inline constexpr double kLossyDropShare = 0.001;

class Cluster {
 public:
  virtual ~Cluster() = default;

  virtual int hosts() const = 0;
  // False when every host is this machine's loopback with unlimited links (no link to measure);
  // fallback_reason() then says why.
  virtual bool emulated() const = 0;
  virtual const std::string& fallback_reason() const = 0;
  // One line for the progress output: what the hosts are and what the links are.
  virtual std::string Describe() const = 0;
  // What the progress output calls it ("emulated cluster", "hosts"), and lines it prints after Describe()
  // (real hosts: the measured link matrix; "" for none).
  virtual std::string label() const { return "emulated cluster"; }
  virtual std::string LinkReport() const { return ""; }
  // The hosts' TCP as far as it changes the exchanges' timing, e.g. "cubic, slow start after idle off"; ""
  // where unknown (real hosts, loopback). A cost model fitted under one TCP does not hold under another.
  virtual std::string HostsTcp() const { return ""; }

  // The cores every host's processes share: this machine's for an emulated cluster (all hosts on one box,
  // which the model's CPU term accounts for); 0 where each host has cores of its own.
  virtual double box_cores() const = 0;

  // The address processes on `host` bind to and their peers connect to.
  virtual std::string HostAddress(int host) const = 0;
  // argv that runs `argv` on `host`.
  virtual std::vector<std::string> Command(int host, const std::vector<std::string>& argv) const = 0;

  // The link: bytes per second per host and direction (0: unlimited or unknown), the configured one-way
  // latency in seconds (0: none) and how it is made ("netem", "nfqueue" or "").
  virtual double link_bytes_per_second() const = 0;
  virtual double latency_seconds() const = 0;
  virtual const std::string& latency_method() const = 0;
  // What one switch port toward a host holds before it drops, in bytes: its queue and its burst at the link
  // rate; 0 where unknown (real hosts, an unlimited link). The PS's chunk rule --ps_chunks=capped keeps its
  // workers' window bursts below it (bench/harness/ps_chunk_rule.h).
  virtual double port_buffer_bytes() const { return 0; }

  // Bytes every host's link has carried so far (index = host; sent, received). kFailedPrecondition where
  // the cluster has no per-host link counters.
  virtual absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> AllHostLinkBytes() const = 0;
  // Each host's cumulative wait for a core so far, in microseconds (index = host; its cgroup's CPU pressure,
  // bench/emulator/host_cgroups.h); empty where hosts have no such groups (real hosts, or a kernel without
  // cgroup v2 PSI). Cheap enough to sample every 50 ms; thread-safe.
  virtual std::vector<int64_t> HostStallMicros() const { return {}; }
  // The link queues' counters so far; kFailedPrecondition where the cluster shapes no links (loopback, real
  // hosts). Runs tc once per namespace: read it before and after a job, not in a sampling loop.
  virtual absl::StatusOr<QueueCounters> ReadQueueCounters() const {
    return absl::FailedPreconditionError("this cluster shapes no links: no queue counters");
  }
  // The delay program's counters so far; kFailedPrecondition where latency_method() is not "nfqueue".
  virtual absl::StatusOr<DelayCounters> ReadDelayCounters() = 0;

  // One TCP stream's goodput from host `from` to host `to` (bytes/s) after sending `bytes`, and the median
  // TCP round trip of `rounds` one-byte exchanges (seconds). Each blocks up to 60 s.
  virtual absl::StatusOr<double> MeasureStream(int from, int to, size_t bytes) const = 0;
  virtual absl::StatusOr<double> MeasureRtt(int from, int to, int rounds) const = 0;

  // Stops what the cluster started and removes what it created, reporting failures. Idempotent.
  virtual absl::Status Destroy() = 0;
};

// The cores this process may run on (sched_getaffinity; hardware_concurrency as a fallback): what every
// process of an emulated cluster on this machine shares.
double BoxCores();

// Makes the cluster of a sweep: `options` with hosts set to what the sweep's largest run needs. The harness
// uses the emulated cluster when a sweep gives none.
using ClusterFactory = std::function<absl::StatusOr<std::unique_ptr<Cluster>>(const ClusterOptions& options)>;

}  // namespace psring::bench

#endif  // PSRING_BENCH_CORE_CLUSTER_H_
