#include "bench/model/collective.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace psring::bench::model {
namespace {

absl::Status NonNegativeFinite(const char* name, double value, const char* fix) {
  if (std::isfinite(value) && value >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, " must be finite and >= 0, got ", value, ": ", fix));
}

// A share in [0, 1] of `what`.
absl::Status UnitShare(const char* name, double value, const char* what, const char* fix) {
  if (std::isfinite(value) && value >= 0 && value <= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, " must be in [0, 1] (a share of ", what, "), got ", value, ": ", fix));
}

// The PS's streams into one server: one per worker, less the co-located host's own (it crosses no link).
double StreamsIntoAServer(Topology topology, int nodes) {
  return topology == Topology::kPsColocated ? nodes - 1 : nodes;
}

// A PS stream's bytes in flight at once: its window, or its whole flow where that is smaller or there is no
// window (IncastOf's burst and the drain's window part).
double StreamWindowBytes(const ExchangeParams& p, const Counts& counts) {
  return p.window_bytes > 0 ? std::min(p.window_bytes, counts.flow_bytes) : counts.flow_bytes;
}

}  // namespace

std::vector<Topology> AllTopologies() {
  return {Topology::kRing, Topology::kPsOne, Topology::kPsColocated, Topology::kPsDedicated};
}

std::string TopologyName(Topology topology) {
  switch (topology) {
    case Topology::kRing: return "ring";
    case Topology::kPsOne: return "ps-1";
    case Topology::kPsColocated: return "ps-colocated";
    case Topology::kPsDedicated: return "ps-dedicated";
  }
  return "ring";
}

absl::StatusOr<Topology> ParseTopology(const std::string& name) {
  std::vector<std::string> names;
  for (Topology t : AllTopologies()) {
    if (TopologyName(t) == name) return t;
    names.push_back(TopologyName(t));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown exchange '", name, "': use one of ", absl::StrJoin(names, ", ")));
}

std::string BoundName(Bound bound) {
  switch (bound) {
    case Bound::kLink: return "link";
    case Bound::kLatency: return "latency";
    case Bound::kWindow: return "window";
    case Bound::kCpu: return "cpu";
    case Bound::kCompute: return "compute";
  }
  return "link";
}

const std::vector<ParamTerm>& ParamTerms() {
  static const auto* const kTerms =
      new std::vector<ParamTerm>{{"software_s", &ExchangeParams::software_s, false},
                                 {"efficiency", &ExchangeParams::efficiency, true},
                                 {"window_bytes", &ExchangeParams::window_bytes, false},
                                 {"cpu_bytes_per_second", &ExchangeParams::cpu_bytes_per_second, false},
                                 {"burst_share", &ExchangeParams::burst_share, true},
                                 {"window_queueing", &ExchangeParams::window_queueing, true},
                                 {"stream_contention", &ExchangeParams::stream_contention, true},
                                 {"window_round_s", &ExchangeParams::window_round_s, false},
                                 {"drain_windows", &ExchangeParams::drain_windows, false}};
  return *kTerms;
}

double ExchangeParams::*ParamMember(absl::string_view name) {
  for (const ParamTerm& t : ParamTerms()) {
    if (name == t.name) return t.member;
  }
  return nullptr;
}

const char* ParamName(double ExchangeParams::*member) {
  for (const ParamTerm& t : ParamTerms()) {
    if (member == t.member) return t.name;
  }
  return "";
}

bool ParamAtMostOne(double ExchangeParams::*member) {
  for (const ParamTerm& t : ParamTerms()) {
    if (member == t.member) return t.at_most_one;
  }
  return false;
}

absl::Status ValidateParams(const ExchangeParams& p) {
  const char* kRefit = "refit the model (//bench:calibrate) or fix the model file";
  if (auto s = NonNegativeFinite("software_s", p.software_s, kRefit); !s.ok()) return s;
  if (!(std::isfinite(p.efficiency) && p.efficiency > 0 && p.efficiency <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "efficiency must be in (0, 1] (no exchange is faster than its link), got ", p.efficiency, ": ", kRefit));
  }
  if (auto s = NonNegativeFinite("window_bytes", p.window_bytes, kRefit); !s.ok()) return s;
  if (auto s = UnitShare("window_queueing", p.window_queueing, "the other streams' bursts", kRefit);
      !s.ok()) {
    return s;
  }
  if (auto s = UnitShare("stream_contention", p.stream_contention, "the smaller of the link and window times",
                         kRefit);
      !s.ok()) {
    return s;
  }
  if (auto s = UnitShare("burst_share", p.burst_share, "the link's burst credit", kRefit); !s.ok()) return s;
  if (auto s = UnitShare("window_update_share", p.window_update_share,
                         "the window consumed before credit returns", kRefit);
      !s.ok()) {
    return s;
  }
  if (auto s = NonNegativeFinite("window_round_s", p.window_round_s, kRefit); !s.ok()) return s;
  if (auto s = NonNegativeFinite("drain_windows", p.drain_windows, kRefit); !s.ok()) return s;
  if (auto s = NonNegativeFinite("incast_round_trips", p.incast_round_trips,
                                 "refit the incast term (//bench:fit_incast) or fix the model file");
      !s.ok()) {
    return s;
  }
  if (!(std::isfinite(p.incast_onset_ratio) && p.incast_onset_ratio >= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "incast_onset_ratio ", p.incast_onset_ratio,
        " is not a finite ratio >= 1; refit the incast term (//bench:fit_incast) or fix the model "
        "file"));
  }
  return NonNegativeFinite("cpu_bytes_per_second", p.cpu_bytes_per_second, kRefit);
}

absl::Status ValidateConditions(Topology topology, const Conditions& c) {
  if (c.nodes < 1) return absl::InvalidArgumentError(absl::StrCat("nodes must be >= 1, got ", c.nodes));
  if (topology == Topology::kPsDedicated && c.servers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps-dedicated needs servers (K) >= 1, got ", c.servers, ": pass the number of PS hosts"));
  }
  if (auto s = NonNegativeFinite("bytes", c.bytes, "pass the collective's gradient bytes"); !s.ok()) return s;
  if (auto s = NonNegativeFinite("link_bytes_per_second", c.link_bytes_per_second,
                                 "pass the link rate in bytes/s (0 for unlimited)");
      !s.ok()) {
    return s;
  }
  if (auto s = NonNegativeFinite("latency_s", c.latency_s, "pass the one-way latency in seconds"); !s.ok()) {
    return s;
  }
  if (auto s = NonNegativeFinite("box_cores", c.box_cores, "pass the shared box's cores (0: a real cluster)");
      !s.ok()) {
    return s;
  }
  if (auto s = NonNegativeFinite("link_burst_bytes", c.link_burst_bytes,
                                 "pass the emulated link's burst in bytes (0 for a real port)");
      !s.ok()) {
    return s;
  }
  if (!(std::isfinite(c.cpu_speedup) && c.cpu_speedup > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu_speedup must be finite and > 0 (1 = this host's CPU), got ", c.cpu_speedup));
  }
  return absl::OkStatus();
}

int ServersOf(Topology topology, int nodes, int servers) {
  switch (topology) {
    case Topology::kRing: return 0;
    case Topology::kPsOne: return 1;
    case Topology::kPsColocated: return nodes;
    case Topology::kPsDedicated: return servers;
  }
  return 0;
}

Counts CountsOf(Topology topology, int nodes, int servers, double s) {
  const double n = nodes;
  switch (topology) {
    case Topology::kRing: {
      // N-1 reduce-scatter and N-1 allgather steps, each one S/N chunk to the right neighbour.
      const double ring_bytes = 2 * (n - 1) / n * s;
      return {2 * (n - 1), 2 * (n - 1), ring_bytes, ring_bytes, ring_bytes};
    }
    case Topology::kPsOne:
      // The server link carries N pushes in and N replies out.
      return {2, 2 * n, n * s, s, n * s};
    case Topology::kPsDedicated: {
      const double k = std::max(servers, 1);
      const double busiest = std::max(s, n * s / k);
      return {2, 2 * n, busiest, s / k, busiest};
    }
    case Topology::kPsColocated:
      // Each host's worker pushes S/N to N-1 remote shards and its shard replies S/N to N-1 remote workers;
      // its software handles all N slices of both (the local one over loopback): 2S bytes, 4N messages.
      return {nodes > 1 ? 2.0 : 0.0, 4 * n, 2 * (n - 1) / n * s, s / n, 2 * s};
  }
  return {};
}

int ProcessesOf(Topology topology, int nodes, int servers) {
  switch (topology) {
    case Topology::kRing: return nodes;
    case Topology::kPsOne: return nodes + 1;
    case Topology::kPsColocated: return 2 * nodes;
    case Topology::kPsDedicated: return nodes + std::max(servers, 1);
  }
  return nodes;
}

double CpuShareOf(Topology topology, const Conditions& c) {
  if (!(c.box_cores > 0)) return 1;
  return std::min(1.0, c.box_cores / ProcessesOf(topology, c.nodes, c.servers));
}

CollectiveTime PredictCollectiveUnchecked(Topology topology, const ExchangeParams& p, const Conditions& c) {
  const Counts counts = CountsOf(topology, c.nodes, ServersOf(topology, c.nodes, c.servers), c.bytes);
  CollectiveTime t;
  if (topology == Topology::kRing && c.nodes == 1) return t;  // nothing to exchange
  const double latency = c.latency_s;
  t.latency_s = counts.hops * latency;
  t.software_s = counts.messages * p.software_s;
  const bool windowed = p.window_bytes > 0 && latency > 0 && counts.link_bytes > 0;
  const double eb = c.link_bytes_per_second > 0 ? p.efficiency * c.link_bytes_per_second : 0;  // 0: unlimited
  if (topology == Topology::kRing) {
    // The ring's wire: the dependency chain (at chain_rate) or the link's own bytes (at stream_rate), the longer.
    // A window caps each flow at window / RTT, so it enters the same pipelined formula as a slower rate (a
    // window larger than the bandwidth-delay product never binds); charging it as flow_bytes * RTT / window on
    // top of every hop's latency made a window fitted at 100 Mbit/s and 50 ms bind at 150 Mbit/s and 45 ms,
    // where the ring measured at its link (held-out plan 3: +29 % and +47 %; PERFORMANCE.md 9.11).
    const double chunk = c.bytes / c.nodes;
    const double unit = std::min(chunk, kRingSegmentBytes);
    // The chain ends when the last hop has delivered its whole chunk, not only the segment that lets a next
    // step start: the rest of that chunk follows its first segment at the stream rate (a two-rank ring of
    // 1.5 MiB at 44 ms measured 0.141-0.144 s where the chain of first segments alone gave 0.124; plan 15).
    const auto wire = [&](double chain_rate, double stream_rate, double credit) {
      const double chain =
          counts.hops * (latency + std::max(0.0, unit - credit) / chain_rate) + (chunk - unit) / stream_rate;
      return std::max(chain, counts.hops * chunk / stream_rate + latency);
    };
    // What a tbf link that idled for L passes at once, as far as the hosts' TCP sends fast enough to use it.
    const double credit = p.burst_share * std::min(c.link_burst_bytes, latency * eb);
    if (eb > 0 && counts.link_bytes > 0) t.link_s = wire(eb, eb, credit) - t.latency_s;
    const double window_rate = windowed ? p.window_bytes / (2 * latency) : 0;
    if (windowed && (eb <= 0 || window_rate < eb)) {
      // A segment that fits in the window crosses a hop at the link's rate; only a stream longer than the
      // window is held to window / RTT.
      const double chain_rate = unit <= p.window_bytes && eb > 0 ? eb : window_rate;
      t.window_s = wire(chain_rate, window_rate, credit) - t.latency_s;
    }
  } else {
    // Each round trip of a stream whose window is below its link's bandwidth-delay product also waits for a
    // share of the other streams' window bursts at its server's link, whether the window or the link binds
    // (collective.h window_queueing).
    const double streams = StreamsIntoAServer(topology, c.nodes);
    const double bursty = windowed && eb > 0 ? std::min(1.0, 2 * latency * eb / p.window_bytes) : 0;
    const double queueing =
        eb > 0 ? p.window_queueing * bursty * std::max(0.0, streams - 1) * counts.flow_bytes / eb : 0;
    // Near the knee of the two bounds the streams take turns at the link: each stream beyond the first adds a
    // share of the smaller time (collective.h stream_contention).
    // Each window costs a round trip and the round's own cost (collective.h window_round_s), in files of
    // 2026-11-28 to 2026-11-30 instead the share of it the receiver consumes before it returns credit, sent
    // at the link's rate (window_update_share).
    const double window_time = windowed
                                   ? counts.flow_bytes * (2 * latency + p.window_round_s) / p.window_bytes +
                                         (eb > 0 ? p.window_update_share * counts.flow_bytes / eb : 0)
                                   : 0;
    const double link_time = eb > 0 ? counts.link_bytes / eb : 0;
    const double contention =  // windowed: there are link bytes
        windowed && eb > 0
            ? p.stream_contention * std::max(0.0, streams - 1) * std::min(link_time, window_time)
            : 0;
    // When the link binds, the last ranges' replies wait for each stream's last window still queued at the
    // server's port, or for its last chunk where that is larger (above 1 Gbit/s the PS's 1 MiB chunks;
    // collective.h drain_windows).
    const double drain =
        eb > 0 && p.window_bytes > 0 && p.drain_windows > 0
            ? streams *
                  std::max(p.drain_windows * StreamWindowBytes(p, counts),
                           std::min(PsChunkBytes(c.link_bytes_per_second), counts.flow_bytes)) /
                  eb
            : 0;
    if (eb > 0 && counts.link_bytes > 0) {
      t.link_s = link_time + queueing + contention + drain;
      t.drain_s = drain;
    }
    if (windowed) t.window_s = window_time + queueing + contention;
  }
  if (p.cpu_bytes_per_second > 0) {
    t.cpu_s = counts.cpu_bytes / (p.cpu_bytes_per_second * c.cpu_speedup * CpuShareOf(topology, c));
  }
  const double throughput_s = std::max({t.link_s, t.window_s, t.cpu_s});
  t.incast_s = IncastCostOf(topology, p, c);
  t.seconds = t.latency_s + t.software_s + throughput_s + t.incast_s;
  if (t.latency_s + t.software_s >= throughput_s) {
    t.bound = Bound::kLatency;
  } else if (throughput_s == t.link_s) {
    t.bound = Bound::kLink;
  } else if (throughput_s == t.window_s) {
    t.bound = Bound::kWindow;
  } else {
    t.bound = Bound::kCpu;
  }
  return t;
}

double PsChunkBytes(double link_bytes_per_second) {
  return link_bytes_per_second > 0 && link_bytes_per_second <= kSlowLinkBytesPerSecond ? kSlowLinkPsChunkBytes
                                                                                       : kPsChunkBytes;
}

bool Incast::marked() const { return ratio() > kIncastMarkRatio; }

Incast IncastOf(Topology topology, const ExchangeParams& params, const Conditions& conditions) {
  Incast incast;
  incast.buffer_bytes = conditions.port_buffer_bytes;
  if (topology == Topology::kRing) return incast;
  const Counts counts = CountsOf(topology, conditions.nodes,
                                 ServersOf(topology, conditions.nodes, conditions.servers), conditions.bytes);
  incast.burst_bytes =
      std::max(0.0, StreamsIntoAServer(topology, conditions.nodes) - 1) * StreamWindowBytes(params, counts);
  return incast;
}

std::string IncastMark(const Incast& incast) {
  return incast.marked() ? absl::StrFormat("INCAST x%.1f", incast.ratio()) : "";
}

double IncastRoundTripS(const Conditions& conditions) {
  if (!(conditions.link_bytes_per_second > 0)) return 0;
  return 2 * conditions.latency_s + conditions.port_buffer_bytes / conditions.link_bytes_per_second;
}

double IncastCutsTime(double ratio, double onset, double round_trip_s) {
  if (!(ratio > onset)) return 0;
  return std::log(ratio / onset) / std::log(1 / kCubicMultiplicativeDecrease) * round_trip_s;
}

double IncastCostOf(Topology topology, const ExchangeParams& params, const Conditions& conditions) {
  if (topology == Topology::kRing || !(params.incast_round_trips > 0)) return 0;
  const double ratio = IncastOf(topology, params, conditions).ratio();
  const double round_trip = IncastRoundTripS(conditions);
  if (round_trip < kIncastMinRoundTripS) return 0;
  return params.incast_round_trips *
         IncastCutsTime(ratio, std::max(kIncastMarkRatio, params.incast_onset_ratio), round_trip);
}

absl::StatusOr<CollectiveTime> PredictCollective(Topology topology, const ExchangeParams& params,
                                                 const Conditions& conditions) {
  if (auto s = ValidateParams(params); !s.ok()) return s;
  if (auto s = ValidateConditions(topology, conditions); !s.ok()) return s;
  return PredictCollectiveUnchecked(topology, params, conditions);
}

}  // namespace psring::bench::model
