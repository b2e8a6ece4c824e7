// The links a bench run is measured on, as the user names them (--link, --latency, --queue, --link_burst,
// --loopback) and the units they are given in: plain data and pure parsing, shared by the cluster that shapes
// them (bench/emulator/cluster.h), the harness that records them and the reports and model that read them.
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_CORE_LINKS_H_
#define PSRING_BENCH_CORE_LINKS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace psring::bench {

struct ClusterOptions {
  int hosts = 2;
  std::string link = "100mbit";  // tc rate of every host link, each direction ("" or "0": unlimited)
  // One-way host-to-host latency, e.g. "5ms", "250us" ("" or "0": none). How: `latency_method`.
  std::string latency;
  // "auto" (netem where the kernel has it, else the NFQUEUE delay program), "netem" or "nfqueue".
  std::string latency_method = "auto";
  // Path of //bench/emulator:netdelay (the NFQUEUE method); the bench binaries find it in their runfiles.
  std::string delay_program;
  // NFQUEUEs the delay program serves, one thread each (host pairs hashed over them); 0: one per 4 of the
  // box's cores, 1 to 8 (so 1 on a 2-core box, 4 on a 16-core host).
  int delay_queues = 0;
  std::string queue = "50ms";    // tbf queue of every link end, as the time its bytes take at the link rate
  // tbf burst (token bucket depth) of every link end, as the time its bytes take at the link rate; at least
  // 10 full frames. A real port never sends above its rate: an idle link passes this many bytes at memory
  // speed, which the model's ring term counts (bench/model/collective.h). Shallower buckets cost this 2-core
  // box more timer wake-ups than it has (1 ms: EMULATOR-BOUND runs), see PERFORMANCE.md 1.
  std::string burst = "10ms";
  std::string family = "psr";    // name prefix family; the pid and '-' follow
  bool allow_loopback_fallback = true;  // without CAP_NET_ADMIN: loopback (true) or an error (false)
  bool force_loopback = false;           // loopback even where namespaces would work
  // One host with a slower link (issue 35's straggler link): "H:RATE", e.g. "3:20mbit" (tc units); "" none.
  std::string slow_host;
  // TCP congestion control of every emulated host (a name the kernel offers: "cubic", "bbr", "reno"); "":
  // the kernel's default, which new namespaces inherit from the host. cubic, Linux's default, unless asked:
  // the emulated hosts then run the same TCP whatever this machine's default is, and the committed model was
  // calibrated with it. It changes what window-limited streams get at high latency (ps-1 at 40 ms, N = 4:
  // 4.6 s with bbr, 5.2 s with cubic; PERFORMANCE.md 9.9), and bbr's pace, which follows its own estimate,
  // decides how much of an emulated link's burst a ring's chunk uses (PERFORMANCE.md 9.20).
  std::string tcp_congestion = "cubic";
  // net.ipv4.tcp_slow_start_after_idle of every emulated host: "on", "off", or "" (the kernel's default, on
  // in Linux). On, a connection idle for longer than its retransmission timeout (at least 200 ms) restarts
  // from its initial window (RFC 2861). At 45 ms one-way latency a ring at N = 16 idles that long between its
  // collectives, and under cubic every chunk then slow-starts: 8.6-9.1 s a step against 1.37 s with it off
  // (PERFORMANCE.md 9.20). Off, as clusters that train over TCP are tuned, unless asked.
  std::string tcp_slow_start_after_idle = "off";
};

// --slow_host "H:RATE" -> the host and its rate in bits per second; {-1, 0} for "". kInvalidArgument naming
// the flag otherwise.
struct SlowHost {
  int host = -1;
  double bits_per_second = 0;
};
absl::StatusOr<SlowHost> ParseSlowHost(const std::string& slow_host);

// Bits per second of a tc rate like "100mbit", "1gbit", "500kbit" or "1000000" (bit/s); tc's decimal units.
absl::StatusOr<double> ParseLinkRate(const std::string& rate);

// One-way latency in seconds of a duration like "5ms", "250us", "0" or "" (none); kInvalidArgument otherwise.
absl::StatusOr<double> ParseLatency(const std::string& latency);

// The token-bucket depth --link_burst in seconds of link time, in (0, 1]; kInvalidArgument otherwise.
absl::StatusOr<double> ParseLinkBurst(const std::string& burst);

// The links' queue --queue (tbf latency: how long a packet may wait in a link end's queue) in seconds, > 0;
// kInvalidArgument otherwise.
absl::StatusOr<double> ParseQueue(const std::string& queue);

// A switch port's buffer in bytes from the kB a flag `flag` gave (>= 0; 0: not known); kInvalidArgument
// naming the flag otherwise.
absl::StatusOr<double> PortBufferBytes(double kb, const std::string& flag);

// The tbf burst in bytes of every link end of `link_bytes_per_second` with a depth of `burst_s` seconds: that
// much of the link's traffic, at least 10 full frames; 0 without a link limit. What ShapeLink gives tc and
// what the cost model counts as the emulated link's burst (model::Conditions::link_burst_bytes).
int64_t TbfBurstBytes(double link_bytes_per_second, double burst_s);

}  // namespace psring::bench

#endif  // PSRING_BENCH_CORE_LINKS_H_
