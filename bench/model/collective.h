// The time of one collective (a flat exchange or one bucket) of S bytes over N workers, from terms that each
// mean something (derived in bench/PERFORMANCE.md 9):
//
//   T = messages(N) * software_s                     per-message software cost on the busiest host
//     + max( wire(N,K,S),                            latency and the busiest link, efficiency <= 1
//            hops * L + flow_bytes * RTT / window,   one flow's flow-control window per RTT (PS; the ring:
//                                                    its wire at min(eB, window / RTT), see below)
//            hops * L + cpu_bytes / (cpu_bytes_per_second * x * share) )  the busiest host's CPU ceiling
//                                                    (share < 1 where N processes share this box's cores)
//
// with RTT = 2L, eB = efficiency * B. The wire term is where PS and ring differ:
//
//   PS:    wire = hops * L + link_bytes / eB         one round trip, the busiest link's bytes streamed
//   ring:  wire = max( hops * (L + (u - credit)+ / eB)    the dependency chain: a step forwards a segment
//                        + (c - u) / eB,                   only once it arrived, and the last hop delivers
//                      hops * c / eB + L )                 its whole chunk; the link's own bytes
//          c = S/N (a step's chunk), u = min(c, segment) (what must arrive before the next step can send;
//          the ring pipelines 512 KiB segments, ring/ring_allreduce.h), credit = min(burst, L * eB): the
//          bytes an emulated link (tbf, bench/emulator/cluster.h) passes at once after idling L, 0 on a real
//          port, times the fitted share of it the hosts' TCP realizes (burst_share).
//          Small chunks pay latency plus bytes per step; large ones keep the link busy and hide it.
//          A window W caps the ring's flows at W / RTT inside the same formula (the stream part at that rate,
//          the chain part too where a segment exceeds W): a window above the bandwidth-delay product never
//          binds the ring. The PS's window term below is the stalled-flow form (each PushPull stream waits a
//          round trip per window, as its gRPC flow control does).
//
// The three limits are bottlenecks of one pipeline, so the slowest sets the pace (max), while per-message
// costs are paid in addition. The counts per exchange:
//
//   exchange       K       hops     messages  link_bytes        flow_bytes   cpu_bytes
//   ring           0       2(N-1)   2(N-1)    2(N-1)/N * S      2(N-1)/N*S   2(N-1)/N * S
//   ps-1           1       2        2N        N * S             S            N * S
//   ps-dedicated   K       2        2N        max(S, N*S/K)     S/K          max(S, N*S/K)
//   ps-colocated   N       2        4N        2(N-1)/N * S      S/N          2 * S
//
// The PS's window round is the stalled-flow one plus what its receiver waits for before it returns credit:
// gRPC (chttp2) sends a connection WINDOW_UPDATE once half its window is consumed, so a stream sends its
// window and the first half's credit comes back a round trip after that half left: 2L + W / (2 eB) a window,
// and the window term gains window_update_share * flow_bytes / eB (share 1/2; 0 in files before the term).
//
// and, for the PS's window term, the streams into one server F: ps-1 and ps-dedicated N, ps-colocated N - 1
// (its own worker's slice stays on the host); the window term is flow_bytes * (2L / W + q (F - 1) / eB), and
// both the PS's link and window terms add c (F - 1) min(link_bytes / eB, flow_bytes 2L / W)
// (stream_contention); the PS's link term adds d_w F min(W, flow_bytes) / eB, the windows still in flight
// when the pushes end (drain_windows).
//
// (the PS partitions every collective across all K shards, as BytePS does; one PushPull stream per worker
// and shard carries the push out and the averaged parameters back: one round trip, 2 hops). At N = 1 the
// ring and the co-located PS move nothing over a link: T = 0 and T = messages * software_s + cpu term.
//
// Where a synchronous PS's window burst overflows a known port buffer, the loss's cost is added on top
// (IncastCostOf below; the model otherwise assumes a lossless network).
//
// Each prediction says which bound binds: the largest of the latency part (hops * L + messages * software_s)
// and the throughput part, the latter named by its slowest limit (link, window or cpu).
//
//   ExchangeParams ring{20e-6, 0.95, 4 << 20, 1.2e9};   // software_s, efficiency, window, CPU ceiling
//   Conditions c{8, 0, 100e6, 3.125e9, 5e-6};           // N, K, S, B (25 Gbit/s), L
//   ASSIGN_OR_RETURN(CollectiveTime t, PredictCollective(Topology::kRing, ring, c));
//   t.seconds, t.bound ...
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_COLLECTIVE_H_
#define PSRING_BENCH_MODEL_COLLECTIVE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psring::bench::model {

// The four placements of the race (bench/exchanges.h runs them; names are the same).
enum class Topology { kRing, kPsOne, kPsColocated, kPsDedicated };

std::vector<Topology> AllTopologies();  // table order: ring, ps-1, ps-colocated, ps-dedicated
std::string TopologyName(Topology topology);
// kInvalidArgument listing the known names.
absl::StatusOr<Topology> ParseTopology(const std::string& name);

// Which resource sets a prediction's time.
enum class Bound { kLink, kLatency, kWindow, kCpu, kCompute };
std::string BoundName(Bound bound);  // "link", "latency", "window", "cpu", "compute"

// The fitted parameters of one exchange (bench/model/fit.h fits them; model_file.h freezes them).
struct ExchangeParams {
  double software_s = 0;            // per message on the busiest host, seconds (>= 0)
  double efficiency = 1;            // fraction of the link rate the exchange reaches, (0, 1]
  double window_bytes = 0;          // bytes in flight per flow; 0: no window limit (never bound)
  double cpu_bytes_per_second = 0;  // cpu_bytes the busiest host moves per second; 0: no CPU limit known
  // The share of an emulated link's burst credit (Conditions::link_burst_bytes) the exchange's hosts realize,
  // [0, 1]: a TCP that paces near the link rate (bbr) sends a chunk through the token bucket little faster
  // than the rate, one that bursts (cubic) nearer memory speed (PERFORMANCE.md 9.12). 1: all of it (model
  // files before the term); 0: none. No effect without a burst (real ports, projections, maps).
  double burst_share = 1;
  // The PS: the share of the other streams' window bursts a stream's round trip waits for at its server's
  // link, [0, 1]. Each of F streams into one server sends its window at once when the window opens; the
  // bursts queue behind each other, so a round takes 2L + q (F - 1) W / eB and the stream's time grows by
  // q b (F - 1) flow_bytes / eB, whether its window or its link binds (PERFORMANCE.md 9.12: ps-1 at 12 ms
  // takes its modelled time with one stream and 11-14 % more with two, on a link loaded to 61 %; 9.13; 9.15:
  // link-bound ps-1 and ps-dedicated at 14 ms, N = 5-10, 8-10 % slower than a model with the term on the
  // window alone). b = min(1, 2 L eB / W) is how bursty the stream is: 1 where the window is below the link's
  // bandwidth-delay product (the stream sends a window and waits), less where a round trip's worth of the
  // link exceeds it; 0 without a window or a link rate. 0: none (files before the term). The ring: no effect.
  double window_queueing = 0;
  // The PS: what each stream beyond the first into one server adds, as a share of the smaller of the link
  // time (link_bytes / eB) and the window time (flow_bytes 2L / W), [0, 1]. Near the knee where the streams'
  // joint window N W meets the server link's bandwidth-delay product, neither bound is reached: the streams
  // take turns filling the link, and the more of them, the more of the round is lost
  // (PERFORMANCE.md 9.16-9.17: ps-1 at N = 12-16 and 20-45 ms measured 5-23 % of the smaller time slower than
  // max(link, window), at N <= 8 about none; at 5 ms, where the window time is small, none). Far from the
  // knee the smaller time is small and so is the term. The time grows by c (F - 1) min(link, window)
  // whichever binds; 0 without a window, latency or link rate. 0: none (files before the term). The ring: no
  // effect.
  double stream_contention = 0;
  // The PS: the share of its window a stream's receiver consumes before it returns credit, [0, 1]. gRPC's
  // chttp2 transport sends the connection's WINDOW_UPDATE once its announced window falls below half the
  // target (TransportFlowControl::UpdateAction), so a stream that sends its window W at the link's rate gets
  // the first half's credit back 2L + W / (2 eB) after it began: each window costs that, and the window time
  // is flow_bytes (2L / W + share / eB) (PERFORMANCE.md 9.19: the window-bound PS runs' effective window grew
  // with the round trip, 62-68 KiB at 5 ms to 76-81 KiB at 50 ms, as this form says). Set to
  // gRPC's 1/2 for the PS exchanges by the fits of 2026-11-28 to 2026-11-30; later fits leave it 0
  // and fit window_round_s instead (PERFORMANCE.md 9.28). 0: none. The ring: no effect.
  double window_update_share = 0;
  // The PS: what each window round costs beyond the round trip, seconds (>= 0): the receiver's wake-up,
  // read and WINDOW_UPDATE and the sender's wake-up before it sends on. The window time is
  // flow_bytes (2L + d) / W. Runs at 40-250 Mbit/s showed a window round that does not lengthen as the link
  // slows, as a share of the window at the link's rate (window_update_share) would: at 40 Mbit/s 25-45 ms
  // that form was 12-23 % too slow, at 250 Mbit/s 2-8 % too fast (PERFORMANCE.md 9.28). 0: none (files
  // fitted before the term). The ring: no effect.
  double window_round_s = 0;
  // The PS: the windows per stream still to cross its server's port when the link binds, >= 0. The
  // synchronous PS is pipelined per element range (ps/service.h): a range's update and replies leave once all
  // F streams into the server have delivered it, and each stream keeps its flow-control window w =
  // min(window_bytes, flow_bytes) in flight, queued at the server's port while the link binds; the last
  // ranges' replies wait for the slowest stream's last window, so the step ends about F windows after the
  // port would have carried the pushes at its rate. Nor can it end before each stream's last chunk has
  // crossed whole (PsChunkBytes: a chunk's replies leave only once it arrived from every stream). The link
  // time gains F max(drain_windows w, min(chunk, flow_bytes)) / eB (PERFORMANCE.md 9.33: link-bound ps-1 and
  // ps-dedicated at N = 4-16 slower than the model by a fixed number of bytes per stream, -16 % at 384 KiB,
  // -2 % at 3 MiB; with the PS's 1 MiB chunks above 1 Gbit/s about a chunk per stream). 0: none, the chunk
  // part included (files fitted before the term; the ring).
  double drain_windows = 0;
  // The PS on a port its streams' window burst overflows (IncastOf ratio R > 1): the round trips each of
  // TCP's window cuts costs, c in IncastCostOf. Fitted once for every PS exchange (model file's `incast`,
  // //bench:fit_incast), not by the exchange fit. 0: no loss cost (files before the term; the ring).
  double incast_round_trips = 0;
  // R0 of IncastCostOf (>= 1): the burst ratio from which the port drops. 1: from the buffer on (files before
  // the onset was fitted).
  double incast_onset_ratio = 1;
};

// The fitted terms of ExchangeParams by the names the model file, its covariance and the reports use, in
// this order: software_s, efficiency, window_bytes, cpu_bytes_per_second, burst_share, window_queueing,
// stream_contention, window_round_s, drain_windows.
struct ParamTerm {
  const char* name;
  double ExchangeParams::*member;
  bool at_most_one;  // bounded above by 1: the efficiency and the shares (ValidateParams)
};
const std::vector<ParamTerm>& ParamTerms();
// The member `name` denotes; nullptr for an unknown name.
double ExchangeParams::*ParamMember(absl::string_view name);
// The name of a member of ParamTerms() ("" for another).
const char* ParamName(double ExchangeParams::*member);
// Whether a member of ParamTerms() is bounded above by 1 (false for another).
bool ParamAtMostOne(double ExchangeParams::*member);

// kInvalidArgument naming the parameter when one is negative, not finite, efficiency is outside (0, 1], or
// burst_share, window_queueing, stream_contention or window_update_share outside [0, 1].
absl::Status ValidateParams(const ExchangeParams& params);

// Where and how large one collective runs.
struct Conditions {
  int nodes = 1;                      // N workers (>= 1)
  int servers = 0;                    // K of ps-dedicated (>= 1 there); the others fix K themselves
  double bytes = 0;                   // S, the gradient bytes of this collective (>= 0)
  double link_bytes_per_second = 0;   // B per host and direction; 0: unlimited (loopback)
  double latency_s = 0;               // L, one-way host-to-host latency (>= 0)
  double cpu_speedup = 1;             // the target host's CPU over the calibration host's (> 0)
  // The emulated link's token-bucket depth in bytes (bench/cluster.h --link_burst): what an idle link
  // passes at once. 0: a real port, which never sends above its rate (projections, crossover maps).
  double link_burst_bytes = 0;
  // The cores of the one box every process of the run shared (calibration and validation here: all ranks
  // and servers on this machine); 0: every host has its own cores (a real cluster, projections). The CPU
  // term then gives the busiest process min(1, box_cores / processes) of a core's throughput.
  double box_cores = 0;
  // What one switch port can queue, in bytes (an emulated link end: tbf's limit, rate x queue + burst); 0:
  // not known (a lossless network). IncastOf compares it with a synchronous PS's window burst into a server's
  // port; where the burst exceeds it, IncastCostOf adds the loss's cost (with a fitted incast term).
  double port_buffer_bytes = 0;
};

// The processes a run of `topology` starts: ring N, ps-1 N + 1, ps-colocated 2N, ps-dedicated N + K.
int ProcessesOf(Topology topology, int nodes, int servers);
// The share of its own host's CPU the busiest process gets: min(1, box_cores / processes), 1 without a box.
double CpuShareOf(Topology topology, const Conditions& conditions);

// The chunk the PS pipelines its steps in (a range's update and replies leave once every stream delivered
// it): the PS's own default (ps/client.h ClientOptions::chunk_bytes, 1 MiB), and on links of at most 1 Gbit/s
// the harness's 32 KiB (bench/harness/launch.cc kSlowLinkChunkBytes, which keeps the pipeline's fill and
// drain short on slow links). PsChunkBytes: the chunk at a link rate (0: unlimited, the PS's own).
inline constexpr double kPsChunkBytes = 1 << 20;
inline constexpr double kSlowLinkPsChunkBytes = 32 << 10;
inline constexpr double kSlowLinkBytesPerSecond = 125e6;
double PsChunkBytes(double link_bytes_per_second);

// The segment the TCP ring pipelines (ring/ring_allreduce.h RingOptions::segment_bytes).
constexpr double kRingSegmentBytes = 512 << 10;

// kInvalidArgument naming the field (nodes < 1, K < 1 for ps-dedicated, negative or non-finite values).
absl::Status ValidateConditions(Topology topology, const Conditions& conditions);

// The counts of the table above (pure, no validation).
struct Counts {
  double hops = 0;
  double messages = 0;
  double link_bytes = 0;
  double flow_bytes = 0;
  double cpu_bytes = 0;
};
Counts CountsOf(Topology topology, int nodes, int servers, double bytes);
// K as the topology places it: ring 0, ps-1 1, ps-colocated N, ps-dedicated `servers`.
int ServersOf(Topology topology, int nodes, int servers);

// One collective's time and its parts (seconds). seconds = software_s + latency_s + max(link_s, window_s,
// cpu_s) + incast_s, where link_s is the wire term beyond the hops' latency (for the ring, less than
// link_bytes / eB where pipelining hides latency).
struct CollectiveTime {
  double seconds = 0;
  double latency_s = 0;   // hops * L
  double software_s = 0;  // messages * software_s
  double link_s = 0;      // 0 on unlimited links
  double window_s = 0;    // 0 without latency or window limit
  double cpu_s = 0;       // 0 without a CPU ceiling
  double incast_s = 0;    // IncastCostOf, paid on top (0: no loss, or none modelled)
  double drain_s = 0;     // the PS's drain (ExchangeParams::drain_windows), included in link_s
  Bound bound = Bound::kLatency;
};

// Incast (bench/PERFORMANCE.md 9.23): when a synchronous PS step's pushes begin, the F streams into one
// server's port (ps-1 and ps-dedicated N, ps-colocated N - 1) each send their window w = min(window_bytes,
// flow_bytes) (the whole flow without a window) at the link's rate at once; the port drains one stream's
// worth while F arrive, so it must queue (F - 1) w. Where that exceeds the port's buffer the port drops, and
// TCP's recovery costs round trips (IncastCostOf below, where the model has the term; without it the time
// there is likely too short). The ring sends one flow into each port (no incast).
struct Incast {
  double burst_bytes = 0;   // (F - 1) w; 0 for the ring or a single stream
  double buffer_bytes = 0;  // Conditions::port_buffer_bytes
  // burst / buffer; 0 where the buffer is not known or nothing bursts.
  double ratio() const { return buffer_bytes > 0 ? burst_bytes / buffer_bytes : 0; }
  // Marked beyond kIncastMarkRatio: the burst does not fit the port's buffer.
  bool marked() const;
};
inline constexpr double kIncastMarkRatio = 1;
// The burst of `topology`'s streams into one server port at `conditions` (`bytes` as Conditions::bytes).
Incast IncastOf(Topology topology, const ExchangeParams& params, const Conditions& conditions);
// "INCAST x2.4" (the burst over the port's buffer) where marked, else "".
std::string IncastMark(const Incast& incast);

// The incast's cost (bench/PERFORMANCE.md 9.24-9.25): where the burst is R > R0 times the port's buffer, the
// streams' TCP cuts its windows until their burst fits, ln(R / R0) / ln(1 / beta) cuts (beta, the
// multiplicative decrease: cubic's 0.7, the hosts' TCP of the calibration), and each cut costs c round trips
// through the full port, 2L + buffer / B (the loss is found and repaired in round trips; the port's queue is
// full when it drops):
//
//   incast_s = c * ln(R / R0) / ln(1 / beta) * (2L + port_buffer / B)      (R > R0 >= 1, round trip >=
//   kIncastMinRoundTripS)
//
// c = params.incast_round_trips and R0 = params.incast_onset_ratio, fitted on held-out runs of shallow ports
// (a burst a little over the buffer mostly passes: its first packets leave while the last arrive). Paid
// once per collective (the PS's step: once per stream, schedule.h). 0 for the ring, without a port buffer, a
// link rate or c, and below kIncastMinRoundTripS, where Linux's loss timers (the tail-loss probe's 10 ms
// floor, the retransmission timeout's 200 ms) set what a loss costs, which the round trips here do not say:
// such a prediction stays marked INCAST without a cost.
inline constexpr double kCubicMultiplicativeDecrease = 0.7;
inline constexpr double kIncastMinRoundTripS = 0.010;
// The round trip through the full port the cost is counted in: 2L + port_buffer / B (0 without a link rate).
double IncastRoundTripS(const Conditions& conditions);
// The term at c = 1: ln(R / R0) / ln(1 / beta) cuts of `round_trip_s` each; 0 where `ratio` <= `onset`.
double IncastCutsTime(double ratio, double onset, double round_trip_s);
double IncastCostOf(Topology topology, const ExchangeParams& params, const Conditions& conditions);

// The model's time; errors as ValidateParams and ValidateConditions.
absl::StatusOr<CollectiveTime> PredictCollective(Topology topology, const ExchangeParams& params,
                                                 const Conditions& conditions);

// The same without validation, for inner loops (fit, maps) whose inputs were validated once.
CollectiveTime PredictCollectiveUnchecked(Topology topology, const ExchangeParams& params,
                                          const Conditions& conditions);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_COLLECTIVE_H_
