#include "bench/emulator/cluster.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/core/job_ports.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace psring::bench {
namespace {

// Tests use their own family so they never touch a concurrent benchmark's namespaces.
constexpr char kFamily[] = "psrtest";

bool CanAdminNetwork() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "CapEff:")) {
      return (std::stoull(line.substr(7), nullptr, 16) >> 12) & 1;
    }
  }
  return false;
}

TEST(ClusterTest, ParsesLinkRates) {
  EXPECT_DOUBLE_EQ(*ParseLinkRate("100mbit"), 100e6);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("1Gbit"), 1e9);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("2.5kbit"), 2500);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("12345"), 12345);
  EXPECT_FALSE(ParseLinkRate("fast").ok());
  EXPECT_FALSE(ParseLinkRate("100mbps").ok());
}

TEST(ClusterTest, ParsesLatencies) {
  EXPECT_DOUBLE_EQ(*ParseLatency(""), 0);
  EXPECT_DOUBLE_EQ(*ParseLatency("0"), 0);
  EXPECT_DOUBLE_EQ(*ParseLatency("5ms"), 0.005);
  EXPECT_DOUBLE_EQ(*ParseLatency("250us"), 250e-6);
  EXPECT_FALSE(ParseLatency("5").ok());       // no unit
  EXPECT_FALSE(ParseLatency("-1ms").ok());
  EXPECT_FALSE(ParseLatency("fast").ok());
  EXPECT_FALSE(ParseLatency("1h").ok());      // beyond 10 s
}

TEST(ClusterTest, TbfBurstIsTheDepthOfTrafficAtLeastTenFrames) {
  // What tc gets and what the cost model counts (model::Conditions::link_burst_bytes).
  EXPECT_EQ(TbfBurstBytes(18.75e6, 10e-3), 187500);
  EXPECT_EQ(TbfBurstBytes(1e6, 1e-3), 15140);
  EXPECT_EQ(TbfBurstBytes(0, 10e-3), 0);
  EXPECT_DOUBLE_EQ(*ParseLinkBurst("10ms"), 0.01);
  EXPECT_FALSE(ParseLinkBurst("0").ok());
  EXPECT_FALSE(ParseLinkBurst("2s").ok());
}

TEST(ClusterTest, ParsesSlowHost) {
  absl::StatusOr<SlowHost> none = ParseSlowHost("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->host, -1);
  absl::StatusOr<SlowHost> slow = ParseSlowHost("3:20mbit");
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_EQ(slow->host, 3);
  EXPECT_DOUBLE_EQ(slow->bits_per_second, 20e6);
  for (const char* bad : {"3", "x:20mbit", "-1:20mbit", "3:fast", "3:0"}) {
    absl::StatusOr<SlowHost> r = ParseSlowHost(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--slow_host"), std::string::npos);
  }
}

TEST(ClusterTest, ParsesDelayCounters) {
  auto c = ParseDelayCounters("packets=120 late_over_100us=7 late_over_1ms=2 max_late_us=1500 max_held=14\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->packets, 120);
  EXPECT_EQ(c->late_over_100us, 7);
  EXPECT_EQ(c->late_over_1ms, 2);
  EXPECT_EQ(c->max_late_us, 1500);
  EXPECT_FALSE(ParseDelayCounters("packets=1").ok());
  EXPECT_FALSE(ParseDelayCounters("").ok());
}

TEST(ClusterTest, ParsesQdiscCounters) {
  // A switch namespace's `tc -s qdisc show`: two shaped ports and the bridge's own noqueue. Packets count the
  // tbf queues only (a netem under a tbf would count them twice); drops count every queue.
  const std::string text =
      "qdisc noqueue 0: dev br0 root refcnt 2 \n"
      " Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n"
      " backlog 0b 0p requeues 0\n"
      "qdisc tbf 10: dev h0 root refcnt 2 rate 60Mbit burst 15000b lat 50ms \n"
      " Sent 10778863 bytes 12141 pkt (dropped 3, overlimits 0 requeues 0) \n"
      " backlog 0b 0p requeues 0\n"
      "qdisc netem 1: dev h1 root refcnt 2 limit 100000 delay 2ms\n"
      " Sent 1000 bytes 10 pkt (dropped 2, overlimits 0 requeues 0) \n"
      "qdisc tbf 10: dev h1 parent 1:1 rate 60Mbit burst 15000b lat 50ms \n"
      " Sent 101232775 bytes 100421 pkt (dropped 915, overlimits 71465 requeues 0) \n"
      " backlog 0b 0p requeues 0\n";
  auto c = ParseQdiscCounters(text);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->packets, 12141 + 100421);
  EXPECT_EQ(c->dropped, 3 + 2 + 915);
  EXPECT_EQ(ParseQdiscCounters("")->packets, 0);
  EXPECT_FALSE(
      ParseQdiscCounters("qdisc tbf 10: dev h0 root\n Sent 5 bytes (dropped 0, overlimits 0)\n").ok());
  EXPECT_FALSE(
      ParseQdiscCounters("qdisc tbf 10: dev h0 root\n Sent 5 bytes 1 pkt (dropped x, overlimits 0)\n").ok());
}

TEST(ClusterTest, RejectsAnUnknownLatencyMethod) {
  ClusterOptions options;
  options.hosts = 2;
  options.family = kFamily;
  options.latency = "1ms";
  options.latency_method = "magic";
  EXPECT_EQ(EmulatedCluster::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

std::string NetdelayPath() {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  return runfiles == nullptr ? "" : runfiles->Rlocation("psring/bench/emulator/netdelay");
}

// Two hosts of the test family, namespaces required, with `latency` made by the delay program in runfiles.
ClusterOptions TwoHosts(const std::string& latency) {
  ClusterOptions options;
  options.hosts = 2;
  options.link = "100mbit";
  options.latency = latency;
  options.delay_program = NetdelayPath();
  options.family = kFamily;
  options.allow_loopback_fallback = false;
  return options;
}

// The smallest of `samples` one-byte round trips between hosts a and b, each on a fresh connection. The delay
// program never releases early, so the smallest is the delay it adds plus the path's own cost; the VM's timer
// lateness only adds to the others.
absl::StatusOr<double> SmallestRtt(const EmulatedCluster& cluster, int a, int b, int samples = 9) {
  double smallest = 1e9;
  for (int i = 0; i < samples; ++i) {
    absl::StatusOr<double> rtt = cluster.MeasureRtt(a, b, /*rounds=*/1);
    if (!rtt.ok()) return rtt.status();
    smallest = std::min(smallest, *rtt);
  }
  return smallest;
}

// The emulated latency is applied once each way: a TCP connection between two hosts sees the configured RTT
// (2 x the one-way latency) at its smallest no lower than -5 %, and its smallest of 9 and median of 21 below
// 1.5x; a stream still gets the link's rate. The bounds tell the emulator's failures apart (no delay: ~0.1 ms;
// delayed twice: 2x, so the upper bound is the midpoint between once and twice; a queue nobody serves: no
// connection). They are not the emulator's fidelity on a given box: that is judged per run, by the delay
// program's own lateness counters (EMULATOR-BOUND, bench/PERFORMANCE.md 1.2). On this VM on 2026-11-28, idle,
// the smallest of 9 ranged 10.4-11.5 ms and medians 10.6-11.1 ms at 5 ms one way (timer wake-ups 67-117 us
// late at the median, 1.6-2 ms at p99); the ± 10 % this test held before failed CI and 2 of 4 runs alone, and
// + 25 % failed CI on 2026-12-07 (one pair of four at 13.5 ms, the other three 10.2 ms): a bound between the
// failure it catches and the box's timer lateness, not a fidelity bound.
TEST(ClusterTest, TcpSeesTheConfiguredRoundTrip) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  const ClusterOptions options = TwoHosts("5ms");
  auto cluster = EmulatedCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_DOUBLE_EQ((*cluster)->latency_seconds(), 0.005);
  EXPECT_FALSE((*cluster)->latency_method().empty());
  // What a port holds (--ps_chunks=capped's cap): the default 50 ms queue and 10 ms burst at 100 Mbit/s.
  EXPECT_DOUBLE_EQ((*cluster)->port_buffer_bytes(), 12.5e6 * 0.050 + 12.5e6 * 0.010);
  auto smallest = SmallestRtt(**cluster, 0, 1);
  ASSERT_TRUE(smallest.ok()) << smallest.status();
  std::printf("smallest TCP round trip %.3f ms via %s\n", *smallest * 1e3, (*cluster)->latency_method().c_str());
  EXPECT_GT(*smallest, 0.0095);
  EXPECT_LT(*smallest, 0.015);
  auto rtt = (*cluster)->MeasureRtt(0, 1);
  ASSERT_TRUE(rtt.ok()) << rtt.status();
  std::printf("median TCP round trip %.3f ms\n", *rtt * 1e3);
  EXPECT_GT(*rtt, 0.0095);
  EXPECT_LT(*rtt, 0.015);
  auto rate = (*cluster)->MeasureStream(1, 0, 8 << 20);
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_GT(*rate, 0.85 * 12.5e6) << "a stream at 5 ms latency should still fill most of 100 Mbit/s";
  if ((*cluster)->latency_method() == "nfqueue") {
    auto counters = (*cluster)->ReadDelayCounters();
    ASSERT_TRUE(counters.ok()) << counters.status();
    // Written every 100 ms: at least the round trips of the RTT measurement are counted by now or soon.
    EXPECT_GE(counters->packets, 0);
  }
  // Without latency the same path is fast: what the test measured above is the emulated latency.
  ASSERT_TRUE((*cluster)->Destroy().ok());
  ClusterOptions plain = options;
  plain.latency = "";
  auto fast = EmulatedCluster::Create(plain);
  ASSERT_TRUE(fast.ok()) << fast.status();
  auto fast_rtt = (*fast)->MeasureRtt(0, 1);
  ASSERT_TRUE(fast_rtt.ok()) << fast_rtt.status();
  EXPECT_LT(*fast_rtt, 0.002);
}

// --delay_queues: the delay program serves several NFQUEUEs, one thread each, and the switch spreads host
// pairs over them. Every pair must still see the configured latency (a queue nobody served would drop its
// packets, and the connection would fail), and the counters add up over the queues.
TEST(ClusterTest, DelaySpreadOverSeveralQueuesKeepsEveryPairsLatency) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  ClusterOptions options = TwoHosts("5ms");
  options.hosts = 4;
  options.delay_queues = 2;  // no more threads than the 2-core CI box has cores
  auto cluster = EmulatedCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  if ((*cluster)->latency_method() != "nfqueue") GTEST_SKIP() << "this kernel makes latency with netem";
  EXPECT_NE((*cluster)->Describe().find("nfqueue, 2 queues"), std::string::npos) << (*cluster)->Describe();
  for (int a = 0; a < 4; ++a) {
    for (int b = a + 1; b < 4; ++b) {
      auto rtt = SmallestRtt(**cluster, a, b);
      ASSERT_TRUE(rtt.ok()) << "hosts " << a << " and " << b << ": " << rtt.status();
      std::printf("hosts %d and %d: smallest TCP round trip %.3f ms\n", a, b, *rtt * 1e3);
      // What this test is for: every pair delayed once each way by a served queue (unserved: no connection;
      // undelayed: ~0.1 ms; delayed twice: 20 ms), judged as in TcpSeesTheConfiguredRoundTrip.
      EXPECT_GT(*rtt, 0.0095) << "hosts " << a << " and " << b;
      EXPECT_LT(*rtt, 0.015) << "hosts " << a << " and " << b;
    }
  }
  auto rate = (*cluster)->MeasureStream(3, 0, 8 << 20);
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_GT(*rate, 0.85 * 12.5e6) << "a stream through one of two queues should still fill most of the link";
  // The counters are rewritten every 100 ms: an 8 MiB stream is thousands of packets.
  absl::SleepFor(absl::Milliseconds(300));
  auto counters = (*cluster)->ReadDelayCounters();
  ASSERT_TRUE(counters.ok()) << counters.status();
  EXPECT_GT(counters->packets, 1000);
  ASSERT_TRUE((*cluster)->Destroy().ok());
  options.delay_queues = 65;
  EXPECT_EQ(EmulatedCluster::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

// Every emulated host's processes run in a CPU-pressure group of their own (bench/emulator/host_cgroups.h),
// so the EMULATOR-BOUND rule can tell which host waited for a core; the groups go with the cluster.
TEST(ClusterTest, HostProcessesRunInTheirHostsGroup) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  ClusterOptions options = TwoHosts("");
  auto cluster = EmulatedCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  if (!(*cluster)->host_cgroups_reason().empty()) {
    EXPECT_NE((*cluster)->Describe().find("no per-host CPU groups"), std::string::npos)
        << (*cluster)->Describe();
    GTEST_SKIP() << "no per-host groups here: " << (*cluster)->host_cgroups_reason();
  }
  EXPECT_EQ((*cluster)->HostStallMicros().size(), 2u);
  JobOptions job;
  job.timeout = absl::Seconds(30);
  auto results = RunJob({{"cat", (*cluster)->Command(1, {"cat", "/proc/self/cgroup"})}}, job);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ((*results)[0].exit_code, 0) << (*results)[0].stderr_tail;
  const std::string& groups = (*results)[0].stdout_text;
  EXPECT_TRUE(absl::StrContains(groups, "/psring/" + (*cluster)->HostNamespace(1))) << groups;
  ASSERT_TRUE((*cluster)->Destroy().ok());
  EXPECT_TRUE((*cluster)->HostStallMicros().empty()) << "the groups go with the cluster";
}

// --slow_host: that host's link carries its slower rate both ways, the other links keep --link.
TEST(ClusterTest, SlowHostGetsItsOwnRate) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  ClusterOptions options = TwoHosts("");
  options.hosts = 3;
  options.slow_host = "2:20mbit";
  auto cluster = EmulatedCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_NE((*cluster)->Describe().find("host 2's link 20mbit"), std::string::npos) << (*cluster)->Describe();
  auto slow_out = (*cluster)->MeasureStream(2, 0, 4 << 20);
  auto slow_in = (*cluster)->MeasureStream(0, 2, 4 << 20);
  auto normal = (*cluster)->MeasureStream(1, 0, 8 << 20);
  ASSERT_TRUE(slow_out.ok() && slow_in.ok() && normal.ok());
  EXPECT_LT(*slow_out, 1.1 * 2.5e6) << "host 2 sends at most 20 Mbit/s";
  EXPECT_LT(*slow_in, 1.1 * 2.5e6) << "host 2 receives at most 20 Mbit/s";
  EXPECT_GT(*normal, 0.85 * 12.5e6) << "the other hosts keep 100 Mbit/s";
  ASSERT_TRUE((*cluster)->Destroy().ok());
  options.slow_host = "3:20mbit";  // no host 3
  EXPECT_EQ(EmulatedCluster::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.slow_host = "1:200mbit";  // not slower than --link
  EXPECT_EQ(EmulatedCluster::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

// The first line of a (/proc) file, "" if it cannot be read.
std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The hosts' TCP congestion control: cubic unless --tcp_congestion names another or is empty (the kernel's
// default), set in every host namespace (not the machine's), named in Describe(); a bad or unknown name is a
// clear error.
TEST(ClusterTest, HostsUseTheTcpCongestionControlAsked) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  constexpr char kFile[] = "/proc/sys/net/ipv4/tcp_congestion_control";
  const std::string machine = ReadFirstLine(kFile);
  ASSERT_FALSE(machine.empty());
  ClusterOptions options = TwoHosts("");
  EXPECT_EQ(options.tcp_congestion, "cubic") << "the default";
  options.tcp_congestion = "";
  {
    auto cluster = EmulatedCluster::Create(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    EXPECT_EQ((*cluster)->tcp_congestion(), machine);
    EXPECT_TRUE(absl::StrContains((*cluster)->Describe(), absl::StrCat("TCP ", machine, " (the kernel's default)")))
        << (*cluster)->Describe();
  }
  // reno is built into every kernel; take cubic where reno is already the default.
  const std::string other = machine == "reno" ? "cubic" : "reno";
  options.tcp_congestion = other;
  auto cluster = EmulatedCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ((*cluster)->tcp_congestion(), other);
  EXPECT_TRUE(absl::StrContains((*cluster)->Describe(), absl::StrCat("TCP ", other, " (--tcp_congestion)")))
      << (*cluster)->Describe();
  for (int host = 0; host < 2; ++host) {
    auto in_host = RunCommand((*cluster)->Command(host, {"/bin/cat", kFile}));
    ASSERT_TRUE(in_host.ok()) << in_host.status();
    EXPECT_EQ(*in_host, other + "\n") << "host " << host;
  }
  EXPECT_EQ(ReadFirstLine(kFile), machine) << "the machine's own setting is left alone";
  ASSERT_TRUE((*cluster)->Destroy().ok());
  options.tcp_congestion = "cubic; reboot";
  auto bad = EmulatedCluster::Create(options);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  options.tcp_congestion = "nosuchcc";
  auto unknown = EmulatedCluster::Create(options);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument) << unknown.status();
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "it offers")) << unknown.status();
  // A loaded one that a namespace may not choose (not in tcp_allowed_congestion_control, as cubic is not
  // where bbr is the machine's default): the cluster adds it to the machine's allowed list and uses it. The
  // test puts the list back as it found it.
  constexpr char kAllowed[] = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
  const std::string allowed_before = ReadFirstLine(kAllowed);
  const std::vector<std::string> available = absl::StrSplit(
      ReadFirstLine("/proc/sys/net/ipv4/tcp_available_congestion_control"), ' ', absl::SkipEmpty());
  const std::vector<std::string> allowed = absl::StrSplit(allowed_before, ' ', absl::SkipEmpty());
  for (const std::string& name : available) {
    if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
    options.tcp_congestion = name;
    auto added = EmulatedCluster::Create(options);
    const std::string allowed_after = ReadFirstLine(kAllowed);
    std::ofstream(kAllowed) << allowed_before << "\n";
    ASSERT_TRUE(added.ok()) << added.status();
    EXPECT_EQ((*added)->tcp_congestion(), name);
    EXPECT_TRUE(absl::StrContains(absl::StrCat(" ", allowed_after, " "), absl::StrCat(" ", name, " ")))
        << allowed_after;
    ASSERT_TRUE((*added)->Destroy().ok());
    break;
  }
  EXPECT_EQ(ReadFirstLine(kAllowed), allowed_before);
}

// TCP's slow start after idle: off unless --tcp_slow_start_after_idle says on or is empty (the kernel's
// default), set in every host namespace (not the machine's), named in Describe(); any other value is a clear
// error.
TEST(ClusterTest, HostsUseTheSlowStartAfterIdleAsked) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  constexpr char kFile[] = "/proc/sys/net/ipv4/tcp_slow_start_after_idle";
  const std::string machine = ReadFirstLine(kFile);
  ASSERT_TRUE(machine == "0" || machine == "1") << machine;
  ClusterOptions options = TwoHosts("");
  EXPECT_EQ(options.tcp_slow_start_after_idle, "off") << "the default";
  for (const std::string want : {"off", "on"}) {
    options.tcp_slow_start_after_idle = want;
    auto cluster = EmulatedCluster::Create(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    EXPECT_EQ((*cluster)->tcp_slow_start_after_idle(), want);
    EXPECT_TRUE(absl::StrContains((*cluster)->Describe(), absl::StrCat("slow start after idle ", want,
                                                                       " (--tcp_slow_start_after_idle)")))
        << (*cluster)->Describe();
    for (int host = 0; host < 2; ++host) {
      auto in_host = RunCommand((*cluster)->Command(host, {"/bin/cat", kFile}));
      ASSERT_TRUE(in_host.ok()) << in_host.status();
      EXPECT_EQ(*in_host, want == "on" ? "1\n" : "0\n") << "host " << host;
    }
    ASSERT_TRUE((*cluster)->Destroy().ok());
  }
  EXPECT_EQ(ReadFirstLine(kFile), machine) << "the machine's own setting is left alone";
  options.tcp_slow_start_after_idle = "";
  {
    auto cluster = EmulatedCluster::Create(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    EXPECT_EQ((*cluster)->tcp_slow_start_after_idle(), machine == "0" ? "off" : "on");
    EXPECT_TRUE(absl::StrContains((*cluster)->Describe(), "(the kernel's default)"))
        << (*cluster)->Describe();
  }
  options.tcp_slow_start_after_idle = "0; reboot";
  auto bad = EmulatedCluster::Create(options);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "must be on, off")) << bad.status();
}

// The harness's fixed listening ports are out of every host's ephemeral ports: a worker's outgoing connection
// took a PS server's port once (the server exited: port in use). The machine's own setting is left alone.
TEST(ClusterTest, HostsReserveTheJobsListeningPorts) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  constexpr char kFile[] = "/proc/sys/net/ipv4/ip_local_reserved_ports";
  const std::string machine = ReadFirstLine(kFile);
  auto cluster = EmulatedCluster::Create(TwoHosts(""));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  for (int host = 0; host < 2; ++host) {
    auto in_host = RunCommand((*cluster)->Command(host, {"/bin/cat", kFile}));
    ASSERT_TRUE(in_host.ok()) << in_host.status();
    EXPECT_EQ(*in_host, JobPortRanges() + "\n") << "host " << host;
  }
  EXPECT_EQ(ReadFirstLine(kFile), machine);
}

TEST(ClusterTest, NfqueueLatencyWithoutTheDelayProgramIsAClearError) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  ClusterOptions options = TwoHosts("1ms");
  options.latency_method = "nfqueue";
  options.delay_program = "/nonexistent/netdelay";
  auto cluster = EmulatedCluster::Create(options);
  ASSERT_FALSE(cluster.ok());
  EXPECT_NE(cluster.status().message().find("//bench:netdelay"), std::string::npos) << cluster.status();
}

TEST(ClusterTest, RunCommandReportsStderr) {
  auto out = RunCommand({"/bin/sh", "-c", "echo out"});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "out\n");
  auto failed = RunCommand({"/bin/sh", "-c", "echo why >&2; exit 2"});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("why"), std::string::npos);
  EXPECT_NE(failed.status().message().find("exit 2"), std::string::npos);
}

TEST(ClusterTest, CreatesShapedHostsAndRemovesThem) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  ClusterOptions options;
  options.hosts = 3;
  options.link = "100mbit";
  options.family = kFamily;
  options.allow_loopback_fallback = false;
  auto cluster = EmulatedCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->emulated()) << (*cluster)->fallback_reason();
  EXPECT_DOUBLE_EQ((*cluster)->link_bytes_per_second(), 12.5e6);
  std::vector<std::string> names;
  for (int i = 0; i < 3; ++i) {
    names.push_back((*cluster)->HostNamespace(i));
    EXPECT_TRUE(NamespaceExists(names.back())) << names.back();
    EXPECT_EQ((*cluster)->HostAddress(i), absl::StrCat("198.18.0.", i + 1));
  }
  // Host 1 has its address and a tbf on its link; the bridge side is shaped too.
  auto addr = RunCommand((*cluster)->Command(1, {FindExecutable("ip"), "-4", "addr", "show", "dev", "eth0"}));
  ASSERT_TRUE(addr.ok()) << addr.status();
  EXPECT_NE(addr->find("198.18.0.2/15"), std::string::npos) << *addr;
  auto qdisc = RunCommand((*cluster)->Command(1, {FindExecutable("tc"), "qdisc", "show", "dev", "eth0"}));
  ASSERT_TRUE(qdisc.ok()) << qdisc.status();
  EXPECT_NE(qdisc->find("tbf"), std::string::npos) << *qdisc;
  EXPECT_NE(qdisc->find("100Mbit"), std::string::npos) << *qdisc;
  const std::string bridge = absl::StrCat(kFamily, getpid(), "-br");
  auto bridge_qdisc = RunCommand({"ip", "netns", "exec", bridge, FindExecutable("tc"), "qdisc", "show", "dev", "h2"});
  ASSERT_TRUE(bridge_qdisc.ok()) << bridge_qdisc.status();
  EXPECT_NE(bridge_qdisc->find("tbf"), std::string::npos) << *bridge_qdisc;
  // Reachability: a stream from host 0 to host 2 through the bridge, seen by both hosts' link counters.
  auto before = (*cluster)->AllHostLinkBytes();
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->size(), 3u);
  auto rate = (*cluster)->MeasureStream(0, 2, 1 << 20);
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_GT(*rate, 0);
  auto after = (*cluster)->AllHostLinkBytes();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE((*after)[0].first - (*before)[0].first, 1 << 20);   // host 0 sent the megabyte
  EXPECT_GE((*after)[2].second - (*before)[2].second, 1 << 20); // host 2 received it
  EXPECT_LT((*after)[1].second - (*before)[1].second, 1 << 16); // host 1 saw none of it
  // The link queues counted the stream's packets (at least 1 MiB of 1500-byte frames) and, with the default
  // deep queue and one flow, lost none of them... or, if any, reported them.
  auto queues = (*cluster)->ReadQueueCounters();
  ASSERT_TRUE(queues.ok()) << queues.status();
  EXPECT_GE(queues->packets, (1 << 20) / 1500);
  EXPECT_GE(queues->dropped, 0);

  ASSERT_TRUE((*cluster)->Destroy().ok());
  for (const auto& name : names) EXPECT_FALSE(NamespaceExists(name)) << name;
  EXPECT_FALSE(NamespaceExists(bridge));
  cluster->reset();
}

// Two senders into one host's port at once (incast): the port receives twice what its link drains, and a
// queue shallower than what their windows put into it overflows. The queue counters say so (the drops rule
// (d) weighs, bench/emulator/probes.h). One sender alone cannot overflow it: its own link end paces it to the
// rate.
TEST(ClusterTest, IncastIntoAShallowQueueDropsAndTheCountersSaySo) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  ClusterOptions options;
  options.hosts = 3;
  options.link = "20mbit";
  options.latency = "10ms";
  options.queue = "1ms";
  options.delay_program = NetdelayPath();
  options.family = kFamily;
  options.allow_loopback_fallback = false;
  auto cluster = EmulatedCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto before = (*cluster)->ReadQueueCounters();
  ASSERT_TRUE(before.ok()) << before.status();
  // 20 Mbit/s x 20 ms = 50 KB in flight per flow, a queue of about 1 ms + the burst (~17 KB) at host 0's
  // port.
  absl::StatusOr<double> rates[2];
  std::thread second([&] { rates[1] = (*cluster)->MeasureStream(2, 0, 4 << 20); });
  rates[0] = (*cluster)->MeasureStream(1, 0, 4 << 20);
  second.join();
  for (const auto& rate : rates) ASSERT_TRUE(rate.ok()) << rate.status();
  auto after = (*cluster)->ReadQueueCounters();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(after->packets - before->packets, 2 * (4 << 20) / 1500);
  EXPECT_GT(after->dropped - before->dropped, 0);
}

TEST(ClusterTest, RemovesLeftoversOfADeadRunOnly) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  // A pid that certainly is not running: a child that has exited and been reaped.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  // A family of this process alone, so that a concurrent run of this test cannot clean our stale one first.
  const std::string family = absl::StrCat(kFamily, getpid(), "x");
  const std::string stale = absl::StrCat(family, dead, "-h0");
  const std::string live = absl::StrCat(family, getpid(), "-h9");
  ASSERT_TRUE(RunCommand({"ip", "netns", "add", stale}).ok());
  ASSERT_TRUE(RunCommand({"ip", "netns", "add", live}).ok());
  auto removed = CleanupLeftoverNamespaces(family);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_FALSE(NamespaceExists(stale));
  EXPECT_TRUE(NamespaceExists(live));
  EXPECT_NE(std::find(removed->begin(), removed->end(), stale), removed->end());
  ASSERT_TRUE(RunCommand({"ip", "netns", "del", live}).ok());
}

// Checks the loopback fallback in a child process that gives up CAP_NET_ADMIN (or directly when the test
// already runs without it). Returns "" on success, else what went wrong.
std::string CheckFallback() {
  ClusterOptions options;
  options.hosts = 2;
  options.family = kFamily;
  auto cluster = EmulatedCluster::Create(options);
  if (!cluster.ok()) return "Create failed: " + std::string(cluster.status().message());
  if ((*cluster)->emulated()) return "emulated without CAP_NET_ADMIN";
  if ((*cluster)->fallback_reason().find("CAP_NET_ADMIN") == std::string::npos) return "reason does not say why";
  if ((*cluster)->HostAddress(1) != "127.0.0.1") return "host address is not loopback";
  if ((*cluster)->Command(1, {"x"}) != std::vector<std::string>{"x"}) return "command was wrapped";
  if ((*cluster)->HostLinkBytes(0).ok()) return "link counters on loopback";
  options.allow_loopback_fallback = false;
  if (EmulatedCluster::Create(options).status().code() != absl::StatusCode::kFailedPrecondition) {
    return "no error with the fallback disallowed";
  }
  return "";
}

bool DropCapNetAdmin() {
  __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  data[0].effective &= ~(1u << 12);
  return syscall(SYS_capset, &header, data) == 0;
}

TEST(ClusterTest, FallsBackToLoopbackWithoutCapNetAdmin) {
  if (!CanAdminNetwork()) {
    EXPECT_EQ(CheckFallback(), "");
    return;
  }
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);  // not inherited by the cluster's own children
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::string problem = DropCapNetAdmin() ? CheckFallback() : "capset failed";
    if (CanAdminNetwork()) problem = "still has CAP_NET_ADMIN";
    ssize_t ignored = write(pipe_fds[1], problem.data(), problem.size());
    (void)ignored;
    _exit(problem.empty() ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::string problem;
  char buf[256];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof(buf))) > 0;) problem.append(buf, n);
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << problem;
}

TEST(ClusterTest, SigtermRemovesTheNamespaces) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);  // not inherited by the cluster's own children
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ClusterOptions options;
    options.hosts = 2;
    options.family = kFamily;
    options.allow_loopback_fallback = false;
    auto cluster = EmulatedCluster::Create(options);
    std::string name = cluster.ok() ? (*cluster)->HostNamespace(1) : "";
    ssize_t ignored = write(pipe_fds[1], name.data(), name.size());
    (void)ignored;
    close(pipe_fds[1]);
    sleep(60);  // killed by the parent long before
    _exit(3);
  }
  close(pipe_fds[1]);
  std::string name;
  char buf[256];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof(buf))) > 0;) name.append(buf, n);
  close(pipe_fds[0]);
  ASSERT_FALSE(name.empty()) << "the child could not create its cluster";
  EXPECT_TRUE(NamespaceExists(name));
  kill(child, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_FALSE(NamespaceExists(name));
  EXPECT_FALSE(NamespaceExists(absl::StrCat(kFamily, child, "-br")));
}

}  // namespace
}  // namespace psring::bench
