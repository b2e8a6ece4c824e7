#include "bench/emulator/cluster.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <future>
#include <thread>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/emergency_cleanup.h"
#include "common/subprocess.h"
#include "common/socket.h"
#include "common/status_macros.h"

namespace psring::bench {
namespace {

constexpr int kCapNetAdmin = 12;

const std::string& Ip() {
  static const std::string* ip = new std::string(FindExecutable("ip"));
  return *ip;
}

const std::string& Tc() {
  static const std::string* tc = new std::string(FindExecutable("tc"));
  return *tc;
}

bool HasCapNetAdmin() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "CapEff:")) continue;
    uint64_t caps = std::strtoull(std::string(absl::StripAsciiWhitespace(rest)).c_str(), nullptr, 16);
    return (caps >> kCapNetAdmin) & 1;
  }
  return false;
}

bool ProcessAlive(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// Kills what still runs inside `ns`, then deletes it.
absl::Status DeleteNamespace(const std::string& ns) {
  absl::StatusOr<std::string> pids = RunCommand({Ip(), "netns", "pids", ns});
  if (pids.ok()) {
    for (absl::string_view token : absl::StrSplit(*pids, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(token, &pid) && pid > 1) kill(pid, SIGKILL);
    }
  }
  absl::Status deleted = RunCommand({Ip(), "netns", "del", ns}).status();
  UnregisterNamespace(ns);
  return deleted;
}

}  // namespace

absl::StatusOr<DelayCounters> ParseDelayCounters(const std::string& line) {
  DelayCounters c;
  int found = 0;
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
    int64_t value = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(kv.second), &value)) continue;
    if (kv.first == "packets") c.packets = value, ++found;
    if (kv.first == "late_over_100us") c.late_over_100us = value, ++found;
    if (kv.first == "late_over_1ms") c.late_over_1ms = value, ++found;
    if (kv.first == "max_late_us") c.max_late_us = value, ++found;
  }
  if (found != 4) return absl::InternalError(absl::StrCat("unreadable delay program counters: '", line, "'"));
  return c;
}

absl::StatusOr<QueueCounters> ParseQdiscCounters(const std::string& tc_output) {
  // "qdisc tbf 10: dev h3 root refcnt 2 rate 60Mbit burst 15Kb lat 50ms"
  // " Sent 101232775 bytes 100421 pkt (dropped 915, overlimits 71465 requeues 0)"
  QueueCounters counters;
  std::string kind;
  for (absl::string_view line : absl::StrSplit(tc_output, '\n')) {
    const std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.empty()) continue;
    if (words[0] == "qdisc") {
      kind = words.size() > 1 ? std::string(words[1]) : "";
      continue;
    }
    if (words[0] != "Sent") continue;
    int64_t packets = -1, dropped = -1;
    for (size_t i = 1; i + 1 < words.size(); ++i) {
      if (words[i + 1] == "pkt" && !absl::SimpleAtoi(words[i], &packets)) packets = -1;
      if (words[i] == "(dropped" && !absl::SimpleAtoi(absl::StripSuffix(words[i + 1], ","), &dropped))
        dropped = -1;
    }
    if (packets < 0 || dropped < 0) {
      return absl::InternalError(
          absl::StrCat("unreadable qdisc statistics (tc -s qdisc show): '", line, "'"));
    }
    if (kind == "tbf") counters.packets += packets;
    counters.dropped += dropped;
  }
  return counters;
}

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv) {
  JobOptions options;
  options.timeout = absl::Seconds(30);
  ASSIGN_OR_RETURN(std::vector<ProcessResult> results, RunJob({{argv.empty() ? "" : argv[0], argv}}, options));
  const ProcessResult& r = results[0];
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat(
        "command failed (", r.timed_out ? "timed out" : absl::StrCat("exit ", r.exit_code), "): ",
        absl::StrJoin(argv, " "), ": ", absl::StripAsciiWhitespace(r.stderr_tail)));
  }
  return r.stdout_text;
}

bool NamespaceExists(const std::string& name) { return access(("/run/netns/" + name).c_str(), F_OK) == 0; }

absl::StatusOr<std::vector<std::string>> CleanupLeftoverNamespaces(const std::string& family) {
  ASSIGN_OR_RETURN(std::string list, RunCommand({Ip(), "netns", "list"}));
  std::vector<std::string> removed;
  for (absl::string_view line : absl::StrSplit(list, '\n', absl::SkipEmpty())) {
    // "psr1234-h0 (id: 7)" or just "psr1234-h0".
    std::string name(line.substr(0, line.find(' ')));
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, family)) continue;
    size_t dash = rest.find('-');
    int pid = 0;
    if (dash == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, dash), &pid) || pid <= 0) continue;
    if (ProcessAlive(pid)) continue;
    absl::Status deleted = DeleteNamespace(name);
    // Another harness starting at the same time may have removed it first: that is fine.
    if (!deleted.ok() && NamespaceExists(name)) return deleted;
    if (deleted.ok()) removed.push_back(name);
  }
  return removed;
}

absl::StatusOr<std::unique_ptr<EmulatedCluster>> EmulatedCluster::Create(const ClusterOptions& options) {
  if (options.hosts < 1 || options.hosts > 60000) {
    return absl::InvalidArgumentError(absl::StrCat("cluster needs 1..60000 hosts, got ", options.hosts));
  }
  std::unique_ptr<EmulatedCluster> cluster(new EmulatedCluster(options));
  double bits = 0;
  if (!options.link.empty()) {
    ASSIGN_OR_RETURN(bits, ParseLinkRate(options.link));
  }
  ASSIGN_OR_RETURN(cluster->latency_seconds_, ParseLatency(options.latency));
  ASSIGN_OR_RETURN(cluster->burst_seconds_, ParseLinkBurst(options.burst));
  ASSIGN_OR_RETURN(const SlowHost slow, ParseSlowHost(options.slow_host));
  if (slow.host >= options.hosts) {
    return absl::InvalidArgumentError(absl::StrCat("--slow_host=", options.slow_host, ": the cluster has hosts 0 .. ",
                                                   options.hosts - 1));
  }
  if (slow.host >= 0 && (bits <= 0 || slow.bits_per_second >= bits)) {
    return absl::InvalidArgumentError(absl::StrCat("--slow_host=", options.slow_host, ": the rate must be below --link (",
                                                   options.link.empty() ? "unlimited" : options.link, ")"));
  }
  if (options.latency_method != "auto" && options.latency_method != "netem" && options.latency_method != "nfqueue") {
    return absl::InvalidArgumentError(absl::StrCat("latency method '", options.latency_method,
                                                   "' is not one of auto, netem, nfqueue"));
  }
  if (options.delay_queues < 0 || options.delay_queues > 64) {
    return absl::InvalidArgumentError(absl::StrCat("--delay_queues=", options.delay_queues,
                                                   " must be in 0..64 (0: one per 4 cores, 1 to 8)"));
  }
  std::string reason;
  if (options.force_loopback) {
    reason = "loopback requested";
  } else if (!HasCapNetAdmin()) {
    reason = "no CAP_NET_ADMIN (run as root for the emulated cluster)";
  } else {
    InstallEmergencyCleanup();
    absl::StatusOr<std::vector<std::string>> leftovers = CleanupLeftoverNamespaces(options.family);
    if (!leftovers.ok()) return leftovers.status();
    absl::Status built = cluster->Build();
    if (built.ok()) {
      cluster->emulated_ = true;
      cluster->link_bytes_per_second_ = bits / 8;
      return cluster;
    }
    // Do not hide real configuration errors (bad rate, missing netem): only a namespace that cannot be
    // created at all means "no namespaces here".
    const bool no_namespaces = cluster->created_.empty();
    absl::Status destroyed = cluster->Destroy();
    if (!no_namespaces) return built;
    if (!destroyed.ok()) return destroyed;
    reason = absl::StrCat("cannot create network namespaces: ", built.message());
  }
  if (!options.allow_loopback_fallback && !options.force_loopback) {
    return absl::FailedPreconditionError(absl::StrCat("emulated cluster unavailable: ", reason));
  }
  cluster->latency_seconds_ = 0;  // loopback has no emulated latency
  cluster->fallback_reason_ = reason;
  cluster->bridge_namespace_.clear();
  cluster->host_namespaces_.assign(options.hosts, "");
  return cluster;
}

absl::Status EmulatedCluster::Build() {
  const std::string prefix = absl::StrCat(options_.family, getpid(), "-");
  bridge_namespace_ = prefix + "br";
  for (int i = 0; i < options_.hosts; ++i) host_namespaces_.push_back(absl::StrCat(prefix, "h", i));

  auto add_namespace = [&](const std::string& ns) -> absl::Status {
    // Registered first: a Ctrl-C between `add` and the push below must still remove it.
    RegisterNamespace(ns);
    absl::Status added = RunCommand({Ip(), "netns", "add", ns}).status();
    if (!added.ok()) {
      UnregisterNamespace(ns);
      return added;
    }
    created_.push_back(ns);
    return absl::OkStatus();
  };
  const std::string& br = bridge_namespace_;
  RETURN_IF_ERROR(add_namespace(br));
  RETURN_IF_ERROR(DisableIpv6(br));
  if (latency_seconds_ > 0) RETURN_IF_ERROR(ChooseLatencyMethod());
  RETURN_IF_ERROR(RunCommand({Ip(), "-n", br, "link", "add", "br0", "type", "bridge"}).status());
  RETURN_IF_ERROR(RunCommand({Ip(), "-n", br, "link", "set", "br0", "up"}).status());
  for (int i = 0; i < options_.hosts; ++i) {
    const std::string& host = host_namespaces_[i];
    const std::string port = absl::StrCat("h", i);
    RETURN_IF_ERROR(add_namespace(host));
    RETURN_IF_ERROR(RunCommand({Ip(), "-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                                "netns", host})
                        .status());
    RETURN_IF_ERROR(RunCommand({Ip(), "-n", br, "link", "set", port, "master", "br0"}).status());
    RETURN_IF_ERROR(RunCommand({Ip(), "-n", br, "link", "set", port, "up"}).status());
    RETURN_IF_ERROR(DisableIpv6(host));
    RETURN_IF_ERROR(
        RunCommand({Ip(), "-n", host, "addr", "add", HostAddress(i) + "/15", "dev", "eth0"}).status());
    RETURN_IF_ERROR(RunCommand({Ip(), "-n", host, "link", "set", "eth0", "up"}).status());
    RETURN_IF_ERROR(RunCommand({Ip(), "-n", host, "link", "set", "lo", "up"}).status());
    RETURN_IF_ERROR(ReserveJobPorts(host));
    RETURN_IF_ERROR(ApplyTcpCongestion(host));
    RETURN_IF_ERROR(ApplySlowStartAfterIdle(host));
    // --slow_host's host gets its slower rate on both ends of its link (a straggler's link).
    RETURN_IF_ERROR(ShapeLink(host, "eth0", i));
    RETURN_IF_ERROR(ShapeLink(br, port, i));
  }
  if (latency_method_ == "nfqueue") RETURN_IF_ERROR(StartDelayProgram());
  host_cgroups_ = HostCgroups::Create(prefix, options_.hosts);
  return StartSwitchProbe();
}

absl::Status EmulatedCluster::StartSwitchProbe() {
  SpawnOptions spawn;
  spawn.stdout_file = "/dev/null";
  ASSIGN_OR_RETURN(switch_probe_, Subprocess::Start({Ip(), "netns", "exec", bridge_namespace_,
                                                     FindExecutable("sleep"), "infinity"},
                                                    spawn));
  // Ready once `ip netns exec` has entered the namespace and exec'd: the ports show in its net/dev.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (true) {
    absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> ports = AllHostLinkBytes();
    if (ports.ok()) return absl::OkStatus();
    if (absl::Now() > deadline || switch_probe_.Poll()) {
      return absl::InternalError(absl::StrCat("cannot watch the switch's port counters: ", ports.status().message()));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

absl::Status EmulatedCluster::ChooseLatencyMethod() {
  const std::string& br = bridge_namespace_;
  // netem is there when the switch namespace's (unused) loopback device takes a netem qdisc.
  bool netem = false;
  if (options_.latency_method != "nfqueue") {
    netem = RunCommand({Tc(), "-n", br, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"}).ok();
    if (netem) RETURN_IF_ERROR(RunCommand({Tc(), "-n", br, "qdisc", "del", "dev", "lo", "root"}).status());
  }
  if (options_.latency_method == "netem" && !netem) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--latency=", options_.latency, " with --latency_method=netem: this kernel has no sch_netem; use "
        "--latency_method=auto (the NFQUEUE delay program)"));
  }
  if (netem) {
    latency_method_ = "netem";
    netem_delay_ = absl::StrCat(static_cast<int64_t>(std::llround(latency_seconds_ / 2 * 1e6)), "us");
    return absl::OkStatus();
  }
  latency_method_ = "nfqueue";
  if (options_.delay_program.empty() || access(options_.delay_program.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--latency=", options_.latency, " needs the delay program //bench:netdelay (this kernel has no "
        "sch_netem), not found at '", options_.delay_program, "': build it (./bazelw build //bench:netdelay) and "
        "pass --netdelay=PATH"));
  }
  return absl::OkStatus();
}

absl::Status EmulatedCluster::StartDelayProgram() {
  const std::string& br = bridge_namespace_;
  // br_netfilter: bridged IPv4 frames pass the switch namespace's iptables chains (per namespace since 5.3).
  absl::Status bridged = RunCommand({Ip(), "netns", "exec", br, FindExecutable("sysctl"), "-qw",
                                     "net.bridge.bridge-nf-call-iptables=1"})
                             .status();
  if (!bridged.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--latency needs br_netfilter (bridged frames through iptables); load it with `modprobe br_netfilter` "
        "as root: ", bridged.message()));
  }
  // In memory where there is a tmpfs: a rename that replaces a file on a disk file system can stall the
  // delay program for milliseconds (ext4 flushes the new file's data first). In a fresh private directory
  // (mkdtemp, 0700): the delay program runs as root, and a predictable name in a shared directory would let
  // another user plant a link there that it then truncates.
  std::string stats_dir = absl::StrCat(access("/dev/shm", W_OK) == 0 ? "/dev/shm/" : "/tmp/", bridge_namespace_,
                                       "-netdelay-XXXXXX");
  if (mkdtemp(stats_dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot make a directory for the delay program's statistics like ",
                                            stats_dir, ": ", std::strerror(errno)));
  }
  delay_queues_ = options_.delay_queues > 0
                      ? options_.delay_queues
                      : std::clamp(static_cast<int>(BoxCores()) / 4, 1, 8);
  delay_stats_dir_ = stats_dir;
  delay_stats_file_ = stats_dir + "/netdelay.stats";
  SpawnOptions spawn;
  spawn.pipe_output = true;
  ASSIGN_OR_RETURN(delay_program_,
                   Subprocess::Start({Ip(), "netns", "exec", br, options_.delay_program,
                                      absl::StrCat("--latency=", static_cast<int64_t>(std::llround(
                                                                      latency_seconds_ * 1e9)), "ns"),
                                      "--queue_num=0", absl::StrCat("--queues=", delay_queues_),
                                      "--stats_file=" + delay_stats_file_},
                                     spawn));
  // Its "ready" line, then the rule: a packet queued with nobody bound to the queue would be dropped.
  std::string out;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (out.find("netdelay: ready") == std::string::npos) {
    if (absl::Now() > deadline || !delay_program_.running() || delay_program_.Poll()) {
      std::string err(16384, '\0');
      const ssize_t n = read(delay_program_.stderr_fd(), err.data(), err.size());
      err.resize(n > 0 ? n : 0);
      return absl::InternalError(absl::StrCat("the delay program did not start (",
                                              delay_program_.Poll() ? delay_program_.ExitDescription() : "no ready line in 10 s",
                                              "): ", absl::StripAsciiWhitespace(err)));
    }
    pollfd pfd{delay_program_.stdout_fd(), POLLIN, 0};
    if (poll(&pfd, 1, 100) > 0) {
      char buffer[512];
      const ssize_t n = read(delay_program_.stdout_fd(), buffer, sizeof(buffer));
      if (n > 0) out.append(buffer, n);
    }
  }
  const std::string iptables = FindExecutable("iptables");
  // One queue: --queue-num 0. Several: --queue-balance hashes each packet's two addresses (either order), so
  // a host pair's packets, both ways, share a queue and stay in order.
  std::vector<std::string> target = {"--queue-num", "0"};
  if (delay_queues_ > 1) target = {"--queue-balance", absl::StrCat("0:", delay_queues_ - 1)};
  std::vector<std::string> argv = {Ip(), "netns", "exec", br, iptables, "-A", "FORWARD", "-j", "NFQUEUE"};
  argv.insert(argv.end(), target.begin(), target.end());
  absl::Status rule = RunCommand(argv).status();
  if (!rule.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--latency needs iptables with the NFQUEUE target (Debian's iptables; ./bazelw installs it): ",
        rule.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<DelayCounters> EmulatedCluster::ReadDelayCounters() {
  if (latency_method_ != "nfqueue") {
    return absl::FailedPreconditionError("no delay program: the cluster has no NFQUEUE latency");
  }
  if (delay_program_.Poll()) {
    return absl::UnavailableError(absl::StrCat("the emulated switch's delay program (//bench:netdelay) ",
                                               delay_program_.ExitDescription(),
                                               ": every packet between hosts is now dropped"));
  }
  std::ifstream in(delay_stats_file_);
  std::string line;
  if (!std::getline(in, line)) return DelayCounters{};  // not written yet: nothing counted
  return ParseDelayCounters(line);
}

absl::Status EmulatedCluster::ShapeLink(const std::string& ns, const std::string& dev, int host) {
  double bits = 0;
  if (!options_.link.empty()) {
    ASSIGN_OR_RETURN(bits, ParseLinkRate(options_.link));
  }
  ASSIGN_OR_RETURN(const SlowHost slow, ParseSlowHost(options_.slow_host));
  if (host == slow.host) bits = slow.bits_per_second;
  std::string parent = "root";
  if (!netem_delay_.empty()) {
    RETURN_IF_ERROR(RunCommand({Tc(), "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem",
                                "delay", netem_delay_, "limit", "100000"})
                        .status());
    parent = "1:1";
  }
  if (bits <= 0) return absl::OkStatus();
  // Burst: --link_burst of traffic (10 ms; at least 10 full frames), queue: --queue (50 ms).
  const int64_t burst = TbfBurstBytes(bits / 8, burst_seconds_);
  std::vector<std::string> argv = {Tc(), "-n", ns, "qdisc", "add", "dev", dev};
  if (parent == "root") {
    argv.push_back("root");
  } else {
    argv.insert(argv.end(), {"parent", parent});
  }
  argv.insert(argv.end(), {"handle", "10:", "tbf", "rate", absl::StrCat(static_cast<int64_t>(bits), "bit"),
                           "burst", absl::StrCat(burst), "latency", options_.queue});
  return RunCommand(argv).status();
}

std::string EmulatedCluster::HostAddress(int host) const {
  if (!emulated_ && bridge_namespace_.empty()) return "127.0.0.1";
  const int k = host + 1;
  return absl::StrCat("198.18.", k / 256, ".", k % 256);
}

double EmulatedCluster::port_buffer_bytes() const {
  if (!emulated_ || link_bytes_per_second_ <= 0) return 0;
  // Create() gave tc this queue, so it parses; 0 (unknown) if it somehow does not.
  const absl::StatusOr<double> queue_s = ParseQueue(options_.queue);
  if (!queue_s.ok()) return 0;
  return link_bytes_per_second_ * *queue_s +
         static_cast<double>(TbfBurstBytes(link_bytes_per_second_, burst_seconds_));
}

std::string EmulatedCluster::HostsTcp() const {
  if (!emulated_ || tcp_congestion_.empty()) return "";
  return absl::StrCat(tcp_congestion_, ", slow start after idle ", tcp_slow_start_after_idle_);
}

std::string EmulatedCluster::Describe() const {
  if (!emulated_) return absl::StrCat(hosts(), " hosts on 127.0.0.1 without link limits (", fallback_reason_, ")");
  std::string text = absl::StrCat(hosts(), " hosts (network namespaces ", HostNamespace(0), "...), links ",
                                  options_.link.empty() ? "unlimited" : options_.link, " each way");
  if (latency_seconds_ > 0) {
    std::string method = latency_method_;
    if (latency_method_ == "nfqueue") {
      absl::StrAppend(&method, ", ", delay_queues_, delay_queues_ > 1 ? " queues" : " queue");
    }
    absl::StrAppend(&text, ", one-way latency ", options_.latency, " (", method, ")");
  }
  if (!tcp_congestion_.empty()) {
    absl::StrAppend(&text, ", TCP ", tcp_congestion_,
                    options_.tcp_congestion.empty() ? " (the kernel's default)" : " (--tcp_congestion)");
  }
  if (!tcp_slow_start_after_idle_.empty()) {
    absl::StrAppend(&text, ", slow start after idle ", tcp_slow_start_after_idle_,
                    options_.tcp_slow_start_after_idle.empty() ? " (the kernel's default)"
                                                               : " (--tcp_slow_start_after_idle)");
  }
  if (!host_cgroups_.available()) {
    absl::StrAppend(&text, "; no per-host CPU groups (", host_cgroups_.reason(),
                    "): the box's CPU pressure stands in for each host's");
  }
  if (!options_.slow_host.empty()) {
    absl::StrAppend(&text, "; host ", options_.slow_host.substr(0, options_.slow_host.find(':')), "'s link ",
                    options_.slow_host.substr(options_.slow_host.find(':') + 1), " (--slow_host: a straggler's link; "
                    "the model assumes every link is --link)");
  }
  return text;
}

std::string EmulatedCluster::HostNamespace(int host) const {
  return emulated_ ? host_namespaces_.at(host) : "";
}

std::vector<std::string> EmulatedCluster::Command(int host, const std::vector<std::string>& argv) const {
  if (!emulated_) return argv;
  std::vector<std::string> full = {Ip(), "netns", "exec", host_namespaces_.at(host)};
  full.insert(full.end(), argv.begin(), argv.end());
  return host_cgroups_.Wrap(host, full);
}

absl::StatusOr<std::pair<int64_t, int64_t>> EmulatedCluster::HostLinkBytes(int host) const {
  ASSIGN_OR_RETURN(const auto all, AllHostLinkBytes());
  if (host < 0 || host >= static_cast<int>(all.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no host ", host, " (the cluster has ", all.size(), ")"));
  }
  return all[host];
}

absl::StatusOr<QueueCounters> EmulatedCluster::ReadQueueCounters() const {
  if (!emulated_) return absl::FailedPreconditionError("loopback cluster: no shaped link queues");
  // The switch's ports pass each packet once, on its way into its receiver (where many senders meet, where
  // incast drops); each host's own end drops too, but its packets would count every packet twice.
  ASSIGN_OR_RETURN(const std::string ports,
                   RunCommand({Tc(), "-s", "-n", bridge_namespace_, "qdisc", "show"}));
  ASSIGN_OR_RETURN(QueueCounters total, ParseQdiscCounters(ports));
  for (const std::string& host : host_namespaces_) {
    ASSIGN_OR_RETURN(const std::string text,
                     RunCommand({Tc(), "-s", "-n", host, "qdisc", "show", "dev", "eth0"}));
    ASSIGN_OR_RETURN(const QueueCounters end, ParseQdiscCounters(text));
    total.dropped += end.dropped;
  }
  return total;
}

absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> EmulatedCluster::AllHostLinkBytes() const {
  if (!emulated_ && !switch_probe_.started()) {
    return absl::FailedPreconditionError("loopback cluster: no per-host link counters");
  }
  const std::string path = absl::StrCat("/proc/", switch_probe_.pid(), "/net/dev");
  std::ifstream in(path);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  // "  h3: rx_bytes rx_packets errs drop fifo frame compressed multicast tx_bytes ...": port h<i> receives what
  // host i sends and sends what host i receives.
  std::vector<std::pair<int64_t, int64_t>> hosts(host_namespaces_.size(), {-1, -1});
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    absl::string_view name = absl::StripAsciiWhitespace(absl::string_view(line).substr(0, colon));
    int host = -1;
    if (!absl::ConsumePrefix(&name, "h") || !absl::SimpleAtoi(name, &host) || host < 0 ||
        host >= static_cast<int>(hosts.size())) {
      continue;
    }
    std::vector<absl::string_view> fields =
        absl::StrSplit(absl::string_view(line).substr(colon + 1), ' ', absl::SkipEmpty());
    int64_t rx = 0, tx = 0;
    if (fields.size() < 9 || !absl::SimpleAtoi(fields[0], &rx) || !absl::SimpleAtoi(fields[8], &tx)) {
      return absl::InternalError(absl::StrCat("unexpected line in ", path, ": '", line, "'"));
    }
    hosts[host] = {rx, tx};
  }
  for (size_t h = 0; h < hosts.size(); ++h) {
    if (hosts[h].first < 0) return absl::UnavailableError(absl::StrCat(path, " has no port h", h, " (yet)"));
  }
  return hosts;
}

namespace {

// Moves the calling thread (only it) into the named network namespace.
absl::Status EnterNamespace(const std::string& ns) {
  if (ns.empty()) return absl::OkStatus();
  const std::string path = "/run/netns/" + ns;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  const int rc = setns(fd, CLONE_NEWNET);
  const int saved = errno;
  close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat("setns ", path, ": ", std::strerror(saved)));
  return absl::OkStatus();
}

}  // namespace

absl::Status EmulatedCluster::RunPair(int from, int to, const std::function<absl::Status(const Socket&)>& sender,
                                      const std::function<absl::Status(const Socket&)>& receiver) const {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  const std::string to_addr = HostAddress(to);
  std::promise<absl::StatusOr<int>> port_promise;
  std::future<absl::StatusOr<int>> port_future = port_promise.get_future();
  absl::Status server_status, client_status;
  std::thread server([&] {
    auto run = [&]() -> absl::Status {
      RETURN_IF_ERROR(EnterNamespace(HostNamespace(to)));
      ASSIGN_OR_RETURN(Socket listener, ListenTcp(to_addr, 0));
      ASSIGN_OR_RETURN(int port, LocalPort(listener));
      port_promise.set_value(port);
      ASSIGN_OR_RETURN(Socket peer, AcceptTcp(listener, deadline));
      return receiver(peer);
    };
    server_status = run();
    if (!server_status.ok()) {
      try {
        port_promise.set_value(server_status);
      } catch (const std::future_error&) {
        // The port was already published; the client sees the failure as a closed connection.
      }
    }
  });
  std::thread client([&] {
    auto run = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(int port, port_future.get());
      RETURN_IF_ERROR(EnterNamespace(HostNamespace(from)));
      ASSIGN_OR_RETURN(Socket socket, ConnectTcp(to_addr, port, deadline));
      return sender(socket);
    };
    client_status = run();
  });
  server.join();
  client.join();
  RETURN_IF_ERROR(server_status);
  return client_status;
}

absl::StatusOr<double> EmulatedCluster::MeasureStream(int from, int to, size_t bytes) const {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  double seconds = 0;
  size_t measured_bytes = 0;
  RETURN_IF_ERROR(RunPair(
      from, to,
      [&](const Socket& socket) {
        std::vector<char> buffer(bytes, 'x');
        return SendAll(socket, buffer.data(), bytes, deadline);
      },
      [&](const Socket& peer) -> absl::Status {
        std::vector<char> buffer(bytes);
        // The clock starts after the first quarter: by then the token bucket's burst and the socket buffers
        // are used up and the stream runs at the shaped rate.
        const size_t head = bytes / 4;
        RETURN_IF_ERROR(RecvAll(peer, buffer.data(), head, deadline));
        const absl::Time start = absl::Now();
        RETURN_IF_ERROR(RecvAll(peer, buffer.data() + head, bytes - head, deadline));
        seconds = absl::ToDoubleSeconds(absl::Now() - start);
        measured_bytes = bytes - head;
        return absl::OkStatus();
      }));
  if (seconds <= 0) return absl::InternalError("stream measurement took no time");
  return measured_bytes / seconds;
}

absl::StatusOr<double> EmulatedCluster::MeasureRtt(int from, int to, int rounds) const {
  if (rounds < 1) return absl::InvalidArgumentError("MeasureRtt needs at least one round");
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  constexpr int kUnmeasured = 3;  // the connection's first exchanges (ARP, delayed-ACK state)
  std::vector<double> rtts;
  RETURN_IF_ERROR(RunPair(
      from, to,
      [&](const Socket& socket) -> absl::Status {
        char byte = 'p';
        for (int i = 0; i < kUnmeasured + rounds; ++i) {
          const absl::Time start = absl::Now();
          RETURN_IF_ERROR(SendAll(socket, &byte, 1, deadline));
          RETURN_IF_ERROR(RecvAll(socket, &byte, 1, deadline));
          if (i >= kUnmeasured) rtts.push_back(absl::ToDoubleSeconds(absl::Now() - start));
        }
        return absl::OkStatus();
      },
      [&](const Socket& peer) -> absl::Status {
        char byte = 0;
        for (int i = 0; i < kUnmeasured + rounds; ++i) {
          RETURN_IF_ERROR(RecvAll(peer, &byte, 1, deadline));
          RETURN_IF_ERROR(SendAll(peer, &byte, 1, deadline));
        }
        return absl::OkStatus();
      }));
  std::nth_element(rtts.begin(), rtts.begin() + rtts.size() / 2, rtts.end());
  return rtts[rtts.size() / 2];
}

absl::Status EmulatedCluster::Destroy() {
  absl::Status first;
  // The delay program first, so that it releases what it holds; then the namespaces (which kill the rest).
  if (delay_program_.running()) {
    delay_program_.Signal(SIGTERM);
    if (!delay_program_.Wait(absl::Seconds(2))) delay_program_.Kill();
  }
  delay_program_ = Subprocess();
  switch_probe_ = Subprocess();
  if (!delay_stats_file_.empty()) {
    unlink(delay_stats_file_.c_str());
    unlink((delay_stats_file_ + ".tmp").c_str());
  }
  if (!delay_stats_dir_.empty()) rmdir(delay_stats_dir_.c_str());
  while (!created_.empty()) {
    absl::Status deleted = DeleteNamespace(created_.back());
    if (first.ok()) first = deleted;
    created_.pop_back();
  }
  // After the namespaces' processes were killed; a group whose last process is still exiting is left to the
  // next cluster's sweep of leftovers (its name holds this pid), so it fails nothing here.
  (void)host_cgroups_.Remove();
  return first;
}

EmulatedCluster::~EmulatedCluster() {
  absl::Status destroyed = Destroy();
  (void)destroyed;
}

}  // namespace psring::bench
