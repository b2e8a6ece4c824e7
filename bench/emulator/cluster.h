// An emulated cluster on one machine: N hosts as network namespaces with rate-limited links.
//
//        namespace <prefix>br                      namespace <prefix>h<i> (one per host)
//     +-----------------------+                   +------------------------------+
//     | br0 (bridge)          |    veth pair      |                              |
//     |   +-- h0 [tbf rate] --+-------------------+-- eth0 [tbf rate] 198.18.x.y |
//     |   +-- h1 ...          |                   |   lo                         |
//     +-----------------------+                   +------------------------------+
//       [FORWARD -> NFQUEUE -> netdelay]  (with --latency on kernels without sch_netem)
//
// Every host link is shaped in both directions: a tbf qdisc on egress of each veth end, so a host sends and
// receives at most `link` each way (full duplex, like a switched port).
//
// Latency (`latency`, one-way host-to-host, so ping's RTT is 2x): where the kernel has sch_netem, a netem
// delay of latency/2 under each end's tbf (a packet crosses two link ends). Without netem (this project's
// machines), the switch holds packets: br_netfilter passes every bridged IPv4 frame through the switch
// namespace's iptables FORWARD chain, which queues it (NFQUEUE) to //bench/emulator:netdelay, started inside that
// namespace, which accepts each packet `latency` after it arrived. Either way the hosts' own TCP sees the
// RTT (slow start, windows); the delay is outside the sending host's stack (holding packets in the sender's
// own OUTPUT chain would throttle TCP through its small-queue limit). bench/PERFORMANCE.md 1 has the figures.
// Addresses come from 198.18.0.0/15 (RFC 2544's benchmarking range). The root namespace is never touched:
// the bridge lives in a namespace of its own. Names are "<family><pid>-..." (family "psr" by default), so a
// later run can recognise and delete namespaces of a run that died (its pid no longer exists).
//
// Without CAP_NET_ADMIN (or where `ip netns add` fails) Create() can fall back to plain loopback: all hosts
// are 127.0.0.1, commands run as they are, links are unlimited; emulated() says which one you got and
// fallback_reason() why.
//
//   ClusterOptions options;
//   options.hosts = 4;
//   ASSIGN_OR_RETURN(std::unique_ptr<EmulatedCluster> cluster, EmulatedCluster::Create(options));
//   std::vector<std::string> argv = cluster->Command(2, {"/path/worker", "--iface_addr=" +
//                                                        cluster->HostAddress(2)});
//
// Teardown happens in the destructor, and on Ctrl-C/SIGTERM through emergency_cleanup. Create() and the
// destructor block while they run `ip`/`tc`. Not thread-safe; one owner.
#ifndef PSRING_BENCH_EMULATOR_CLUSTER_H_
#define PSRING_BENCH_EMULATOR_CLUSTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/core/cluster.h"
#include "bench/core/links.h"
#include "bench/emulator/host_cgroups.h"
#include "common/socket.h"
#include "common/subprocess.h"

namespace psring::bench {

// Runs argv (argv[0] looked up in PATH) and waits; kInternal with the command and its stderr unless it exits 0.
// Returns its stdout.
absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv);

// Deletes namespaces named "<family><pid>-*" whose pid is not a live process (a crashed earlier run), after
// killing any process left inside them. Returns the names it removed.
absl::StatusOr<std::vector<std::string>> CleanupLeftoverNamespaces(const std::string& family);

// Whether a named network namespace exists (a file under /run/netns).
bool NamespaceExists(const std::string& name);

absl::StatusOr<DelayCounters> ParseDelayCounters(const std::string& line);
// The counters in `tc -s qdisc show` output: packets of every tbf qdisc's "Sent ... pkt" and the drops of
// every qdisc's "(dropped N, ...". kInternal when a qdisc's statistics line is unreadable.
absl::StatusOr<QueueCounters> ParseQdiscCounters(const std::string& tc_output);

class EmulatedCluster final : public Cluster {
 public:
  static absl::StatusOr<std::unique_ptr<EmulatedCluster>> Create(const ClusterOptions& options);
  ~EmulatedCluster() override;  // kills processes left in the namespaces and deletes them

  EmulatedCluster(const EmulatedCluster&) = delete;
  EmulatedCluster& operator=(const EmulatedCluster&) = delete;

  int hosts() const override { return static_cast<int>(host_namespaces_.size()); }
  bool emulated() const override { return emulated_; }
  const std::string& fallback_reason() const override { return fallback_reason_; }
  // The link rate in bytes per second, 0 when unlimited (loopback fallback or link "").
  double link_bytes_per_second() const override { return link_bytes_per_second_; }
  // The configured one-way latency in seconds (0: none) and how it is made: "netem", "nfqueue" or "".
  double latency_seconds() const override { return latency_seconds_; }
  const std::string& latency_method() const override { return latency_method_; }
  // The links' tbf queue (--queue) and burst at the link rate, in bytes; 0 on an unlimited link.
  double port_buffer_bytes() const override;
  // The delay program's counters so far (NFQUEUE method only; kFailedPrecondition otherwise). kUnavailable
  // when the program has exited: the links then drop every packet, so no later run can succeed.
  absl::StatusOr<DelayCounters> ReadDelayCounters() override;
  // Both ends of every host link: the switch's ports and each host's eth0 (loopback: kFailedPrecondition).
  absl::StatusOr<QueueCounters> ReadQueueCounters() const override;
  const ClusterOptions& options() const { return options_; }
  // The emulated hosts' TCP congestion control (e.g. "cubic", "bbr"); "" on loopback.
  const std::string& tcp_congestion() const { return tcp_congestion_; }
  // The emulated hosts' net.ipv4.tcp_slow_start_after_idle, "on" or "off"; "" on loopback.
  const std::string& tcp_slow_start_after_idle() const { return tcp_slow_start_after_idle_; }
  // "cubic, slow start after idle off"; "" on loopback.
  std::string HostsTcp() const override;
  // "4 hosts (network namespaces psr123-h0...), links 100mbit each way, one-way latency 5ms (nfqueue), TCP
  // cubic (the kernel's default)", or the loopback fallback and its reason.
  std::string Describe() const override;
  // BoxCores(): every host is a namespace of this machine.
  double box_cores() const override { return BoxCores(); }

  // IPv4 address of host i (198.18.x.y, or 127.0.0.1 on loopback).
  std::string HostAddress(int host) const override;
  // Namespace name of host i ("" on loopback).
  std::string HostNamespace(int host) const;
  // argv that runs `argv` inside host i: {"ip", "netns", "exec", ns, argv...} (behind a /bin/sh prefix that
  // puts it in the host's cgroup, where there are groups), or argv itself on loopback.
  std::vector<std::string> Command(int host, const std::vector<std::string>& argv) const override;

  // Bytes host i's link has carried so far (sent, received), from the counters of its switch port (frames,
  // headers included). kFailedPrecondition on loopback, where there is no per-host link.
  absl::StatusOr<std::pair<int64_t, int64_t>> HostLinkBytes(int host) const;
  // The same for every host at once (index = host): one read of a file, cheap enough to sample often.
  absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> AllHostLinkBytes() const override;
  // Each host's CPU stall from its cgroup (host_cgroups.h); empty without groups.
  std::vector<int64_t> HostStallMicros() const override { return host_cgroups_.StallMicros(); }
  // Why the hosts have no cgroups ("" when they have; Describe() says it too).
  const std::string& host_cgroups_reason() const { return host_cgroups_.reason(); }

  // Sends `bytes` over one TCP connection from host `from` to host `to` and returns the receiver's goodput in
  // bytes per second over the last three quarters (a check that the hosts reach each other, and of the shaped
  // rate). Blocks up to 60 s.
  absl::StatusOr<double> MeasureStream(int from, int to, size_t bytes) const override;

  // Round-trip time of a 1-byte message and its 1-byte answer over one TCP connection (TCP_NODELAY) from
  // host `from` to host `to`, the median of `rounds` exchanges after a few unmeasured ones: the RTT the
  // hosts' TCP sees (2 x latency + the switch's own time). Blocks up to 60 s.
  absl::StatusOr<double> MeasureRtt(int from, int to, int rounds = 21) const override;

  // Explicit teardown reporting failures (the destructor ignores them). Idempotent.
  absl::Status Destroy() override;

 private:
  explicit EmulatedCluster(ClusterOptions options) : options_(std::move(options)) {}
  absl::Status Build();
  absl::Status ShapeLink(const std::string& ns, const std::string& dev, int host);
  absl::Status ChooseLatencyMethod();
  absl::Status StartSwitchProbe();
  // Turns IPv6 off in namespace `ns` (its devices now and later); a no-op on a kernel without IPv6.
  absl::Status DisableIpv6(const std::string& ns) const;
  // Keeps the harness's fixed listening ports (bench/core/job_ports.h) out of host namespace `ns`'s ephemeral
  // ports (net.ipv4.ip_local_reserved_ports), so no outgoing connection takes one before its server binds.
  absl::Status ReserveJobPorts(const std::string& ns) const;
  // Sets host namespace `ns`'s TCP congestion control to options_.tcp_congestion and records the one in use
  // (none given: records the kernel's default, which every new namespace inherits, from the first host only).
  absl::Status ApplyTcpCongestion(const std::string& ns);
  // Reads host namespace `ns`'s congestion control into tcp_congestion_; an error if it is not the one asked.
  absl::Status RecordTcpCongestion(const std::string& ns);
  // Sets host namespace `ns`'s net.ipv4.tcp_slow_start_after_idle to options_.tcp_slow_start_after_idle (none
  // given: leaves the kernel's default) and records the one in use.
  absl::Status ApplySlowStartAfterIdle(const std::string& ns);
  absl::Status StartDelayProgram();
  // Runs `receiver` in host `to`'s namespace on an accepted connection and `sender` in host `from`'s on the
  // connecting end, each on a thread of its own; the first error of either.
  absl::Status RunPair(int from, int to, const std::function<absl::Status(const Socket&)>& sender,
                       const std::function<absl::Status(const Socket&)>& receiver) const;

  ClusterOptions options_;
  bool emulated_ = false;
  std::string fallback_reason_;
  double link_bytes_per_second_ = 0;
  double latency_seconds_ = 0;
  double burst_seconds_ = 0;  // options_.burst, parsed once
  std::string latency_method_;
  std::string netem_delay_;     // netem's delay at each link end (latency / 2), "" without netem
  Subprocess delay_program_;     // the NFQUEUE method's netdelay, in the switch namespace
  int delay_queues_ = 1;         // the NFQUEUEs it serves (options_.delay_queues, 0 resolved)
  std::string tcp_congestion_;   // the hosts' TCP congestion control ("" on loopback)
  std::string tcp_slow_start_after_idle_;  // "on" or "off" ("" on loopback)
  // A process that only sleeps in the switch namespace: /proc/<its pid>/net/dev lists the switch ports'
  // counters without spawning anything.
  Subprocess switch_probe_;
  std::string delay_stats_dir_;  // private (mkdtemp) directory holding delay_stats_file_
  std::string delay_stats_file_;
  std::string bridge_namespace_;
  std::vector<std::string> host_namespaces_;
  std::vector<std::string> created_;  // namespaces created so far, deleted in reverse
  HostCgroups host_cgroups_;  // one CPU-pressure group per host (none on loopback or without cgroup v2)
};

}  // namespace psring::bench

#endif  // PSRING_BENCH_EMULATOR_CLUSTER_H_
