#include "bench/emulator/cluster_flags.h"

#include "common/runfiles.h"

#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

ABSL_FLAG(std::string, link, psring::bench::ClusterOptions().link,
          "Bandwidth of every emulated host link, each direction, as a tc rate (e.g. 100mbit, 1gbit). Empty: "
          "unlimited.");
ABSL_FLAG(std::string, latency, psring::bench::ClusterOptions().latency,
          "One-way host-to-host latency of the emulated network (e.g. 5ms, 250us; ping's RTT is twice this). "
          "Empty or 0: none. Made with netem where the kernel has it, else by //bench:netdelay holding the "
          "switch's packets (bench/cluster.h).");
ABSL_FLAG(std::string, latency_method, psring::bench::ClusterOptions().latency_method,
          "How --latency is made: auto (netem when the kernel has sch_netem, else nfqueue), netem, nfqueue.");
ABSL_FLAG(std::string, netdelay, "",
          "Path of the delay program //bench:netdelay (--latency without netem). Default: the copy in this "
          "binary's Bazel runfiles.");
ABSL_FLAG(int, delay_queues, psring::bench::ClusterOptions().delay_queues,
          "NFQUEUEs the delay program serves (--latency without netem), one thread each; the switch spreads host "
          "pairs over them. 0: one per 4 cores of this box, 1 to 8. One thread falls behind at about 500 000 "
          "packets per run (a 16-host cluster at 20 ms), and its late packets mark the run EMULATOR-BOUND.");
ABSL_FLAG(std::string, queue, psring::bench::ClusterOptions().queue,
          "Queue of every emulated link end (tc tbf latency): how long the bytes waiting for the link may take "
          "to drain, e.g. 5ms for a shallow-buffered switch port, 50ms for a deep one.");
ABSL_FLAG(std::string, link_burst, psring::bench::ClusterOptions().burst,
          "Token-bucket depth of every emulated link end (tc tbf burst) as the time its bytes take at the link "
          "rate (at least 10 full frames): what an idle link passes at once. A real port never sends above its "
          "rate; the model counts the burst of the emulated links. Below ~2ms this 2-core box spends more on "
          "timer wake-ups than it has.");
ABSL_FLAG(std::string, slow_host, psring::bench::ClusterOptions().slow_host,
          "One emulated host with a slower link, HOST:RATE (e.g. 3:20mbit; tc units, below --link): a straggler's "
          "link (issue 35). Host indices are the placement's: rank r's host is r for every exchange, ps-1's server "
          "is host N, ps-dedicated's servers hosts N.. N+K-1. The model still assumes --link everywhere. Empty: none.");
ABSL_FLAG(
    std::string, tcp_congestion, psring::bench::ClusterOptions().tcp_congestion,
    "TCP congestion control of every emulated host, a name this kernel offers (cubic, bbr, reno; "
    "/proc/sys/net/ipv4/tcp_available_congestion_control; one this machine does not allow namespaces "
    "yet is added to tcp_allowed_congestion_control, with a note). Empty: the kernel's default, which the "
    "hosts inherit from this machine. The default, cubic (Linux's), is what the committed model was "
    "calibrated with; the report's cluster line says which ran, and the model line warns when the model "
    "was fitted with another. Match your real cluster's: at 40 ms a window-limited PS step differs by "
    "~15 % between bbr and cubic.");
ABSL_FLAG(
    std::string, tcp_slow_start_after_idle, psring::bench::ClusterOptions().tcp_slow_start_after_idle,
    "net.ipv4.tcp_slow_start_after_idle of every emulated host: on, off, or empty for the kernel's default "
    "(on). On, a connection idle longer than its retransmission timeout (>= 200 ms) restarts from its "
    "initial window: at 45 ms a ring at N = 16 idles that long between collectives, and under cubic each "
    "chunk then slow-starts (8.6-9.1 s a step against 1.37 s off). Default off, as training clusters are "
    "tuned and as the committed model was calibrated; the report's cluster line says which ran.");
ABSL_FLAG(bool, loopback, psring::bench::ClusterOptions().force_loopback,
          "Run every host on 127.0.0.1 without namespaces or link limits, even as root (the automatic "
          "fallback without CAP_NET_ADMIN).");

namespace psring::bench {

ClusterOptions ClusterOptionsFromFlags(const char* argv0) {
  ClusterOptions options;
  options.link = absl::GetFlag(FLAGS_link);
  options.latency = absl::GetFlag(FLAGS_latency);
  options.latency_method = absl::GetFlag(FLAGS_latency_method);
  options.delay_program = absl::GetFlag(FLAGS_netdelay);
  if (options.delay_program.empty()) options.delay_program = RunfilePath(argv0, kNetdelayRunfile);
  options.delay_queues = absl::GetFlag(FLAGS_delay_queues);
  options.queue = absl::GetFlag(FLAGS_queue);
  options.burst = absl::GetFlag(FLAGS_link_burst);
  options.force_loopback = absl::GetFlag(FLAGS_loopback);
  options.slow_host = absl::GetFlag(FLAGS_slow_host);
  options.tcp_congestion = absl::GetFlag(FLAGS_tcp_congestion);
  options.tcp_slow_start_after_idle = absl::GetFlag(FLAGS_tcp_slow_start_after_idle);
  return options;
}

std::vector<std::string> HostCommand(const std::vector<std::string>& command, int host, int hosts,
                                     absl::string_view addr, absl::string_view master_addr,
                                     absl::string_view workspace) {
  std::vector<std::string> argv;
  for (const std::string& arg : command) {
    std::string word = absl::StrReplaceAll(arg, {{"{rank}", absl::StrCat(host)},
                                                 {"{world}", absl::StrCat(hosts)},
                                                 {"{addr}", addr},
                                                 {"{master_addr}", master_addr}});
    if (!workspace.empty() && !word.empty() && word[0] != '/' && word[0] != '-') {
      const std::string in_workspace = absl::StrCat(workspace, "/", word);
      struct stat info;
      if (stat(in_workspace.c_str(), &info) == 0) word = in_workspace;
    }
    argv.push_back(std::move(word));
  }
  return argv;
}

}  // namespace psring::bench
