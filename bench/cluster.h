// An emulated cluster on one machine: N hosts as network namespaces with rate-limited links.
//
//        namespace <prefix>br                      namespace <prefix>h<i> (one per host)
//     +-----------------------+                   +------------------------------+
//     | br0 (bridge)          |    veth pair      |                              |
//     |   +-- h0 [tbf rate] --+-------------------+-- eth0 [tbf rate] 198.18.x.y |
//     |   +-- h1 ...          |                   |   lo                         |
//     +-----------------------+                   +------------------------------+
//
// Every host link is shaped in both directions: a tbf qdisc (optionally under netem for latency) on egress of
// each veth end, so a host sends and receives at most `link` each way (full duplex, like a switched port).
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
#ifndef PSRING_BENCH_CLUSTER_H_
#define PSRING_BENCH_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace psring::bench {

struct ClusterOptions {
  int hosts = 2;
  std::string link = "100mbit";  // tc rate of every host link, each direction ("" or "0": unlimited)
  std::string delay;             // one-way netem delay added on each link end, e.g. "1ms" ("": none)
  std::string queue = "50ms";    // tbf queue of every link end, as the time its bytes take at the link rate
  std::string family = "psr";    // name prefix family; the pid and '-' follow
  bool allow_loopback_fallback = true;  // without CAP_NET_ADMIN: loopback (true) or an error (false)
  bool force_loopback = false;           // loopback even where namespaces would work
};

// Bits per second of a tc rate like "100mbit", "1gbit", "500kbit" or "1000000" (bit/s); tc's decimal units.
absl::StatusOr<double> ParseLinkRate(const std::string& rate);

// Runs argv (argv[0] looked up in PATH) and waits; kInternal with the command and its stderr unless it exits 0.
// Returns its stdout.
absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv);

// Deletes namespaces named "<family><pid>-*" whose pid is not a live process (a crashed earlier run), after
// killing any process left inside them. Returns the names it removed.
absl::StatusOr<std::vector<std::string>> CleanupLeftoverNamespaces(const std::string& family);

// Whether a named network namespace exists (a file under /run/netns).
bool NamespaceExists(const std::string& name);

class EmulatedCluster {
 public:
  static absl::StatusOr<std::unique_ptr<EmulatedCluster>> Create(const ClusterOptions& options);
  ~EmulatedCluster();  // kills processes left in the namespaces and deletes them

  EmulatedCluster(const EmulatedCluster&) = delete;
  EmulatedCluster& operator=(const EmulatedCluster&) = delete;

  int hosts() const { return static_cast<int>(host_namespaces_.size()); }
  bool emulated() const { return emulated_; }
  const std::string& fallback_reason() const { return fallback_reason_; }
  // The link rate in bytes per second, 0 when unlimited (loopback fallback or link "").
  double link_bytes_per_second() const { return link_bytes_per_second_; }
  const ClusterOptions& options() const { return options_; }

  // IPv4 address of host i (198.18.x.y, or 127.0.0.1 on loopback).
  std::string HostAddress(int host) const;
  // Namespace name of host i ("" on loopback).
  std::string HostNamespace(int host) const;
  // argv that runs `argv` inside host i: {"ip", "netns", "exec", ns, argv...}, or argv itself on loopback.
  std::vector<std::string> Command(int host, const std::vector<std::string>& argv) const;

  // Bytes host i's link has carried so far (sent, received), from its interface counters (frames, headers
  // included). kFailedPrecondition on loopback, where there is no per-host link.
  absl::StatusOr<std::pair<int64_t, int64_t>> HostLinkBytes(int host) const;

  // Sends `bytes` over one TCP connection from host `from` to host `to` and returns the receiver's goodput in
  // bytes per second over the last three quarters (a check that the hosts reach each other, and of the shaped
  // rate). Blocks up to 60 s.
  absl::StatusOr<double> MeasureStream(int from, int to, size_t bytes) const;

  // Explicit teardown reporting failures (the destructor ignores them). Idempotent.
  absl::Status Destroy();

 private:
  explicit EmulatedCluster(ClusterOptions options) : options_(std::move(options)) {}
  absl::Status Build();
  absl::Status ShapeLink(const std::string& ns, const std::string& dev);

  ClusterOptions options_;
  bool emulated_ = false;
  std::string fallback_reason_;
  double link_bytes_per_second_ = 0;
  std::string bridge_namespace_;
  std::vector<std::string> host_namespaces_;
  std::vector<std::string> created_;  // namespaces created so far, deleted in reverse
};

}  // namespace psring::bench

#endif  // PSRING_BENCH_CLUSTER_H_
