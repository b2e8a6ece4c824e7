#include "bench/model/collective.h"

#include "gtest/gtest.h"
#include "ring/ring_allreduce.h"

namespace psring::bench::model {
namespace {

constexpr double kMB = 1e6;

// Parameters where every term is easy to compute by hand.
ExchangeParams Hand() { return {1e-4, 0.5}; }

// A share outside [0, 1] (or not a number) in `member` is kInvalidArgument naming it.
void ExpectShareRejected(ExchangeParams p, double ExchangeParams::*member, const char* name,
                         Topology topology, const Conditions& c) {
  for (double bad : {-0.1, 1.5, static_cast<double>(NAN)}) {
    p.*member = bad;
    absl::StatusOr<CollectiveTime> t = PredictCollective(topology, p, c);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << name << " = " << bad;
    EXPECT_NE(t.status().message().find(name), std::string::npos) << t.status();
  }
}

TEST(CollectiveTest, RingByHand) {
  // N = 4, S = 8 MB, B = 10 MB/s at efficiency 0.5 (eB = 5 MB/s), L = 1 ms: 6 hops, 6 messages, chunks
  // c = 2 MB, larger than the 512 KiB segment: the link (6 chunks = 12 MB, 2.4 s) binds and the segments
  // pipeline the latency away but for the last one: wire = 2.4 s + 1 ms.
  const Conditions c{4, 0, 8 * kMB, 10 * kMB, 1e-3};
  absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kRing, Hand(), c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->latency_s, 6e-3);
  EXPECT_DOUBLE_EQ(t->software_s, 6e-4);
  EXPECT_DOUBLE_EQ(t->link_s, 12.0 / (0.5 * 10) + 1e-3 - 6e-3);
  EXPECT_EQ(t->window_s, 0);
  EXPECT_EQ(t->cpu_s, 0);
  EXPECT_DOUBLE_EQ(t->seconds, 6e-4 + 2.4 + 1e-3);
  EXPECT_EQ(t->bound, Bound::kLink);
}

TEST(CollectiveTest, RingSmallChunksPayLatencyAndBytesPerStep) {
  // N = 4, S = 400 kB: chunks of 100 kB (< one segment) must arrive whole before the next step sends:
  // 6 * (10 ms + 100 kB / 5 MB/s) = 6 * 30 ms.
  const Conditions c{4, 0, 0.4 * kMB, 10 * kMB, 10e-3};
  absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kRing, Hand(), c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->latency_s + t->link_s, 6 * 30e-3, 1e-12);
  // An emulated link with a token bucket of 30 kB passes min(30 kB, L * eB = 50 kB) of each chunk at once
  // after idling L: 6 * (10 ms + 70 kB / 5 MB/s) = 6 * 24 ms.
  Conditions burst = c;
  burst.link_burst_bytes = 30e3;
  t = PredictCollective(Topology::kRing, Hand(), burst);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->latency_s + t->link_s, 6 * 24e-3, 1e-12);
  // A bucket deeper than L * eB: only L * eB refills while the step waits (6 * (10 ms + 10 ms)), and the
  // link's own bytes (6 * 20 ms + 10 ms) bind.
  burst.link_burst_bytes = 1e6;
  t = PredictCollective(Topology::kRing, Hand(), burst);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->latency_s + t->link_s, 6 * 20e-3 + 10e-3, 1e-12);
  // The PS's wire term ignores the burst (one stream per step keeps its links busy).
  EXPECT_DOUBLE_EQ(PredictCollective(Topology::kPsOne, Hand(), burst)->seconds,
                   PredictCollective(Topology::kPsOne, Hand(), c)->seconds);
}

TEST(CollectiveTest, BurstShareScalesTheRingsCredit) {
  // As above (chunks of 100 kB, 30 kB bucket): a share of the credit realized. Share 1: 6 * 24 ms; share 0.5
  // passes 15 kB at once, 6 * (10 ms + 85 kB / 5 MB/s) = 6 * 27 ms; share 0 is the link without a burst.
  Conditions burst{4, 0, 0.4 * kMB, 10 * kMB, 10e-3};
  burst.link_burst_bytes = 30e3;
  ExchangeParams p = Hand();
  EXPECT_EQ(p.burst_share, 1);  // the default: the whole credit, as files fitted before the term
  for (auto [share, per_step] : {std::pair{1.0, 24e-3}, {0.5, 27e-3}, {0.0, 30e-3}}) {
    SCOPED_TRACE(share);
    p.burst_share = share;
    absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kRing, p, burst);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_NEAR(t->latency_s + t->link_s, 6 * per_step, 1e-12);
    // The PS has no credit to share.
    EXPECT_DOUBLE_EQ(PredictCollective(Topology::kPsOne, p, burst)->seconds,
                     PredictCollective(Topology::kPsOne, Hand(), burst)->seconds);
  }
  // Without a burst (a real port, projections) the share changes nothing.
  Conditions port = burst;
  port.link_burst_bytes = 0;
  p.burst_share = 0.3;
  EXPECT_DOUBLE_EQ(PredictCollective(Topology::kRing, p, port)->seconds,
                   PredictCollective(Topology::kRing, Hand(), port)->seconds);
  ExpectShareRejected(p, &ExchangeParams::burst_share, "burst_share", Topology::kRing, burst);
}

TEST(CollectiveTest, WindowQueueingAddsTheOtherStreamsBurstsToEachRound) {
  // ps-1, N = 4, S = 1 MB, eB = 5 MB/s, L = 10 ms, window 50 kB: the stalled-flow term 1 MB * 20 ms / 50 kB =
  // 0.4 s; with a share q = 0.5 of the 3 other streams' bursts each round also waits 0.5 * 3 * 50 kB / 5 MB/s
  // = 15 ms, 20 rounds: + 0.3 s = 0.5 * 3 * 1 MB / 5 MB/s.
  ExchangeParams p{0, 0.5, 50e3, 0};
  const Conditions c{4, 0, 1 * kMB, 10 * kMB, 10e-3};
  EXPECT_EQ(p.window_queueing, 0);  // the default: none, as files fitted before the term
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, p, c)->window_s, 0.4, 1e-12);
  p.window_queueing = 0.5;
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, p, c)->window_s, 0.4 + 0.3, 1e-12);
  // ps-dedicated (K = 2): N streams into each server, flow S / K. ps-colocated: N - 1 remote streams, flow S
  // / N.
  Conditions k2 = c;
  k2.servers = 2;
  EXPECT_NEAR(PredictCollective(Topology::kPsDedicated, p, k2)->window_s, 0.2 + 0.5 * 3 * 0.5e6 / 5e6, 1e-12);
  EXPECT_NEAR(PredictCollective(Topology::kPsColocated, p, c)->window_s, 0.1 + 0.5 * 2 * 0.25e6 / 5e6, 1e-12);
  // One stream waits for no other; the ring's wire has no such term.
  Conditions one = c;
  one.nodes = 1;
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, p, one)->window_s, 0.4, 1e-12);
  ExchangeParams ring = p;
  ring.window_queueing = 0;
  EXPECT_DOUBLE_EQ(PredictCollective(Topology::kRing, p, c)->seconds,
                   PredictCollective(Topology::kRing, ring, c)->seconds);
  // Link-bound (a window of 500 kB passes 25 MB/s per stream, above the 5 MB/s link) the other streams'
  // bursts still cost each round: the link term grows by the same q b (F - 1) flow / eB, with b = 2 L eB / W
  // = 0.2 of a round trip's worth of the link in a window.
  ExchangeParams wide = p;
  wide.window_bytes = 500e3;
  const CollectiveTime linked = *PredictCollective(Topology::kPsOne, wide, c);
  EXPECT_EQ(linked.bound, Bound::kLink);
  EXPECT_NEAR(linked.link_s, 4 * 1e6 / 5e6 + 0.5 * 0.2 * 3 * 1e6 / 5e6, 1e-12);
  // No window (none fitted) means no bursts, and so no term.
  ExchangeParams unlimited = p;
  unlimited.window_bytes = 0;
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, unlimited, c)->link_s, 4 * 1e6 / 5e6, 1e-12);
  ExpectShareRejected(p, &ExchangeParams::window_queueing, "window_queueing", Topology::kPsOne, c);
}

TEST(CollectiveTest, StreamContentionAddsAShareOfTheSmallerTimePerExtraStream) {
  // ps-1, N = 4, S = 1 MB, eB = 5 MB/s, L = 10 ms, window 50 kB: link time 4 MB / 5 MB/s = 0.8 s, window time
  // 1 MB * 20 ms / 50 kB = 0.4 s. With c = 0.1 each of the 3 streams beyond the first adds 0.1 * 0.4 s, to
  // whichever bound binds: 0.8 + 0.12 s.
  ExchangeParams p{0, 0.5, 50e3, 0};
  const Conditions c{4, 0, 1 * kMB, 10 * kMB, 10e-3};
  EXPECT_EQ(p.stream_contention, 0);  // the default: none, as files fitted before the term
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, p, c)->link_s, 0.8, 1e-12);
  p.stream_contention = 0.1;
  CollectiveTime t = *PredictCollective(Topology::kPsOne, p, c);
  EXPECT_NEAR(t.link_s, 0.8 + 0.1 * 3 * 0.4, 1e-12);
  EXPECT_NEAR(t.window_s, 0.4 + 0.1 * 3 * 0.4, 1e-12);
  EXPECT_EQ(t.bound, Bound::kLink);
  // Window-bound (a 10 kB window: 2 s) the smaller time is the link's 0.8 s.
  ExchangeParams narrow = p;
  narrow.window_bytes = 10e3;
  t = *PredictCollective(Topology::kPsOne, narrow, c);
  EXPECT_EQ(t.bound, Bound::kWindow);
  EXPECT_NEAR(t.window_s, 2 + 0.1 * 3 * 0.8, 1e-12);
  // ps-colocated: N - 1 = 3 remote streams into each server, 2 beyond the first; link 2 (N - 1) / N S / eB =
  // 0.3 s, window S / N * 20 ms / 50 kB = 0.1 s.
  EXPECT_NEAR(PredictCollective(Topology::kPsColocated, p, c)->link_s, 0.3 + 0.1 * 2 * 0.1, 1e-12);
  // One stream contends with none; without latency (no window time) or without a window there is no knee.
  Conditions one = c;
  one.nodes = 1;
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, p, one)->link_s, 0.2, 1e-12);
  Conditions near = c;
  near.latency_s = 0;
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, p, near)->link_s, 0.8, 1e-12);
  ExchangeParams unlimited = p;
  unlimited.window_bytes = 0;
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, unlimited, c)->link_s, 0.8, 1e-12);
  // The ring has no such term.
  ExchangeParams ring = p;
  ring.stream_contention = 0;
  EXPECT_DOUBLE_EQ(PredictCollective(Topology::kRing, p, c)->seconds,
                   PredictCollective(Topology::kRing, ring, c)->seconds);
  ExpectShareRejected(p, &ExchangeParams::stream_contention, "stream_contention", Topology::kPsOne, c);
}

// A term of the PS's window time: without latency there is no window time at all, and the ring's time does
// not depend on `member`.
void ExpectPsWindowTermOnly(const ExchangeParams& p, double ExchangeParams::*member, const Conditions& c) {
  Conditions near = c;
  near.latency_s = 0;
  EXPECT_EQ(PredictCollective(Topology::kPsOne, p, near)->window_s, 0);
  ExchangeParams ring = p;
  ring.*member = 0;
  EXPECT_DOUBLE_EQ(PredictCollective(Topology::kRing, p, c)->seconds,
                   PredictCollective(Topology::kRing, ring, c)->seconds);
}

TEST(CollectiveTest, WindowUpdateShareAddsTheHalfWindowTheReceiverWaitsFor) {
  // ps-1, N = 2, S = 1 MB, eB = 5 MB/s, L = 10 ms, window 20 kB: the stalled-flow window time is
  // 1 MB * 20 ms / 20 kB = 1 s; each of the 50 windows also waits for the half the receiver consumes before
  // it returns credit, 10 kB at 5 MB/s: 50 * 2 ms = 0.1 s = 0.5 * S / eB. The link's time (2 MB / 5 MB/s) is
  // unchanged.
  ExchangeParams p{0, 0.5, 20e3, 0};
  const Conditions c{2, 0, 1 * kMB, 10 * kMB, 10e-3};
  EXPECT_EQ(p.window_update_share, 0);  // the default: none, as files fitted before the term
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, p, c)->window_s, 1, 1e-12);
  p.window_update_share = 0.5;  // gRPC's rule, as files of 2026-11-28 to 2026-11-30 set it
  CollectiveTime t = *PredictCollective(Topology::kPsOne, p, c);
  EXPECT_NEAR(t.window_s, 1.1, 1e-12);
  EXPECT_NEAR(t.link_s, 0.4, 1e-12);
  EXPECT_EQ(t.bound, Bound::kWindow);
  EXPECT_NEAR(t.seconds, 2 * 10e-3 + 1.1, 1e-12);
  // The streams of the co-located PS carry S / N each: half of that at the link's rate.
  EXPECT_NEAR(PredictCollective(Topology::kPsColocated, p, c)->window_s, 0.5 + 0.5 * 0.5 * kMB / (5 * kMB),
              1e-12);
  // Without a link rate there is no serialization to wait for.
  Conditions unlimited = c;
  unlimited.link_bytes_per_second = 0;
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, p, unlimited)->window_s, 1, 1e-12);
  ExpectPsWindowTermOnly(p, &ExchangeParams::window_update_share, c);
  ExpectShareRejected(p, &ExchangeParams::window_update_share, "window_update_share", Topology::kPsOne, c);
}

TEST(CollectiveTest, WindowRoundAddsItsCostToEveryWindowRound) {
  // ps-1, N = 2, S = 1 MB, eB = 5 MB/s, L = 10 ms, window 20 kB: 50 windows of a 20 ms round trip, 1 s; a
  // round's own cost of 4 ms adds 50 * 4 ms = 0.2 s, whatever the link's rate. The link's time (2 MB / 5
  // MB/s) is unchanged.
  ExchangeParams p{0, 0.5, 20e3, 0};
  const Conditions c{2, 0, 1 * kMB, 10 * kMB, 10e-3};
  EXPECT_EQ(p.window_round_s, 0);  // the default: none, as files fitted before the term
  p.window_round_s = 4e-3;
  CollectiveTime t = *PredictCollective(Topology::kPsOne, p, c);
  EXPECT_NEAR(t.window_s, 1.2, 1e-12);
  EXPECT_NEAR(t.link_s, 0.4, 1e-12);
  EXPECT_NEAR(t.seconds, 2 * 10e-3 + 1.2, 1e-12);
  Conditions slower = c;
  slower.link_bytes_per_second = 4 * kMB;  // eB 2 MB/s: the link's time 1 s, the window's still 1.2 s
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, p, slower)->window_s, 1.2, 1e-12);
  // The co-located PS's streams carry S / N each: 25 windows.
  EXPECT_NEAR(PredictCollective(Topology::kPsColocated, p, c)->window_s, 0.6, 1e-12);
  ExpectPsWindowTermOnly(p, &ExchangeParams::window_round_s, c);
  p.window_round_s = -1e-3;
  EXPECT_NE(PredictCollective(Topology::kPsOne, p, c).status().message().find("window_round_s"),
            std::string::npos);
}

TEST(CollectiveTest, DrainAddsAWindowPerStreamIntoAServerToTheLinkTime) {
  // ps-1, N = 4, S = 1 MB, eB = 5 MB/s, L = 10 ms, window 50 kB: link time 4 MB / 5 MB/s = 0.8 s, window time
  // 1 MB * 20 ms / 50 kB = 0.4 s (link-bound). A drain of 1.5 windows: each of the 4 streams into the server
  // still has 1.5 windows to cross its port, 4 * 1.5 * 50 kB / 5 MB/s = 0.06 s on the link time only.
  ExchangeParams p{0, 0.5, 50e3, 0};
  const Conditions c{4, 0, 1 * kMB, 10 * kMB, 10e-3};
  EXPECT_EQ(p.drain_windows, 0);  // the default: none, as files fitted before the term
  p.drain_windows = 1.5;
  CollectiveTime t = *PredictCollective(Topology::kPsOne, p, c);
  EXPECT_NEAR(t.link_s, 0.8 + 0.06, 1e-12);
  EXPECT_NEAR(t.window_s, 0.4, 1e-12);
  EXPECT_EQ(t.bound, Bound::kLink);
  EXPECT_NEAR(t.seconds, 2 * 10e-3 + 0.86, 1e-12);
  // A flow smaller than the window is in flight whole: the dedicated PS with K = 2 at S = 40 kB carries 20 kB
  // a stream, 4 streams into each server: 4 * 1.5 * 20 kB / 5 MB/s.
  const Conditions small{4, 2, 40e3, 10 * kMB, 10e-3};
  ExchangeParams none = p;
  none.drain_windows = 0;
  EXPECT_NEAR(PredictCollective(Topology::kPsDedicated, p, small)->link_s -
                  PredictCollective(Topology::kPsDedicated, none, small)->link_s,
              4 * 1.5 * 20e3 / (5 * kMB), 1e-12);
  // The co-located PS: N - 1 remote streams into each server, each S / N.
  EXPECT_NEAR(PredictCollective(Topology::kPsColocated, p, c)->link_s -
                  PredictCollective(Topology::kPsColocated, none, c)->link_s,
              3 * 1.5 * 50e3 / (5 * kMB), 1e-12);
  // Without a window (none fitted) or a link rate there is nothing queued at a port; the ring has no server.
  ExchangeParams unlimited = p;
  unlimited.window_bytes = 0;
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, unlimited, c)->link_s, 0.8, 1e-12);
  Conditions loopback = c;
  loopback.link_bytes_per_second = 0;
  EXPECT_EQ(PredictCollective(Topology::kPsOne, p, loopback)->link_s, 0);
  EXPECT_DOUBLE_EQ(PredictCollective(Topology::kRing, p, c)->seconds,
                   PredictCollective(Topology::kRing, none, c)->seconds);
  // Above 1 Gbit/s the PS pipelines in 1 MiB chunks, more than 1.5 windows: each stream's last chunk drains.
  // ps-1 N = 4, S = 4 MB at 2 Gbit/s (eB 125 MB/s): 4 * 1 MiB / eB; at 1 Gbit/s the chunk is 32 KiB, below
  // the 1.5 windows. Without the term (files before it) neither part.
  const Conditions fast{4, 0, 4 * kMB, 250 * kMB, 10e-3};
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, p, fast)->link_s -
                  PredictCollective(Topology::kPsOne, none, fast)->link_s,
              4 * kPsChunkBytes / (125 * kMB), 1e-12);
  Conditions gigabit = fast;
  gigabit.link_bytes_per_second = 125 * kMB;
  EXPECT_NEAR(PredictCollective(Topology::kPsOne, p, gigabit)->link_s -
                  PredictCollective(Topology::kPsOne, none, gigabit)->link_s,
              4 * 1.5 * 50e3 / (62.5 * kMB), 1e-12);
  EXPECT_EQ(PsChunkBytes(125 * kMB), 32 << 10);
  EXPECT_EQ(PsChunkBytes(126 * kMB), 1 << 20);
  EXPECT_EQ(PsChunkBytes(0), 1 << 20);
  p.drain_windows = -0.5;
  EXPECT_NE(PredictCollective(Topology::kPsOne, p, c).status().message().find("drain_windows"),
            std::string::npos);
}

TEST(CollectiveTest, ParamTermsNameEveryFittedMemberOnce) {
  std::vector<std::string> names;
  for (const ParamTerm& t : ParamTerms()) {
    EXPECT_EQ(ParamMember(t.name), t.member) << t.name;
    EXPECT_STREQ(ParamName(t.member), t.name);
    names.push_back(t.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"software_s", "efficiency", "window_bytes",
                                             "cpu_bytes_per_second", "burst_share", "window_queueing",
                                             "stream_contention", "window_round_s", "drain_windows"}));
  EXPECT_EQ(ParamMember("window"), nullptr);
  std::vector<std::string> at_most_one;  // the efficiency and the shares (ValidateParams)
  for (const ParamTerm& t : ParamTerms()) {
    if (ParamAtMostOne(t.member)) at_most_one.push_back(t.name);
  }
  EXPECT_EQ(at_most_one,
            (std::vector<std::string>{"efficiency", "burst_share", "window_queueing", "stream_contention"}));
}

TEST(CollectiveTest, CpuCeilingIsSharedByTheProcessesOfOneBox) {
  // Loopback (no link), ring N = 4 on a 2-core box: four ranks share two cores, so the busiest gets half of
  // its 1 GB/s: cpu_bytes 2*3/4 * 100 MB = 150 MB in 0.3 s, not 0.15 s. A cluster (box_cores 0) gets all.
  const ExchangeParams p{0, 1, 0, 1e9};
  Conditions c{4, 0, 100 * kMB, 0, 0};
  EXPECT_DOUBLE_EQ(PredictCollective(Topology::kRing, p, c)->cpu_s, 0.15);
  c.box_cores = 2;
  EXPECT_DOUBLE_EQ(PredictCollective(Topology::kRing, p, c)->cpu_s, 0.3);
  // ps-dedicated N = 4, K = 2: 6 processes on 2 cores; ps-1: 5; co-located: 8; N = 1 ring: 1 (share 1).
  c.servers = 2;
  EXPECT_DOUBLE_EQ(CpuShareOf(Topology::kPsDedicated, c), 2.0 / 6);
  EXPECT_DOUBLE_EQ(CpuShareOf(Topology::kPsOne, c), 2.0 / 5);
  EXPECT_DOUBLE_EQ(CpuShareOf(Topology::kPsColocated, c), 2.0 / 8);
  c.nodes = 1;
  EXPECT_DOUBLE_EQ(CpuShareOf(Topology::kRing, c), 1);
}

TEST(CollectiveTest, RingSegmentIsTheRingsOwn) {
  EXPECT_EQ(kRingSegmentBytes, static_cast<double>(ring::RingOptions().segment_bytes));
}

TEST(CollectiveTest, PsOneByHand) {
  // The server link carries N*S = 32 MB; one round trip (2 hops), 2N = 8 messages.
  const Conditions c{4, 0, 8 * kMB, 10 * kMB, 1e-3};
  absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kPsOne, Hand(), c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->seconds, 2e-3 + 8e-4 + 32.0 / 5);
}

TEST(CollectiveTest, PsDedicatedByHand) {
  // K = 2: server links carry N*S/K = 16 MB, worker links S = 8 MB: the servers' links bind.
  Conditions c{4, 2, 8 * kMB, 10 * kMB, 1e-3};
  absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kPsDedicated, Hand(), c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->seconds, 2e-3 + 8e-4 + 16.0 / 5);
  // K = 8 > N: every worker's own link (S) binds.
  c.servers = 8;
  t = PredictCollective(Topology::kPsDedicated, Hand(), c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->link_s, 8.0 / 5);
}

TEST(CollectiveTest, PsColocatedByHand) {
  // K = N = 4: each host sends 3/4 S of pushes and 3/4 S of replies = 12 MB; 4N = 16 messages.
  const Conditions c{4, 0, 8 * kMB, 10 * kMB, 1e-3};
  absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kPsColocated, Hand(), c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->seconds, 2e-3 + 16e-4 + 12.0 / 5);
}

TEST(CollectiveTest, OneNode) {
  const Conditions c{1, 0, 8 * kMB, 10 * kMB, 1e-3};
  EXPECT_EQ(PredictCollective(Topology::kRing, Hand(), c)->seconds, 0);
  // The co-located PS of one host pays only its software (no link, no hops).
  EXPECT_DOUBLE_EQ(PredictCollective(Topology::kPsColocated, Hand(), c)->seconds, 4e-4);
}

TEST(CollectiveTest, WindowBindsAtHighLatency) {
  // One ring flow carries 2(N-1)/N S = 1 MB (N = 2, S = 1 MB); window 64 KB over RTT 2*10 ms -> 3.2 MB/s,
  // slower than the 0.5 * 100 MB/s link.
  ExchangeParams p = Hand();
  p.window_bytes = 64e3;
  const Conditions c{2, 0, kMB, 100 * kMB, 10e-3};
  absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kRing, p, c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->window_s, kMB * 20e-3 / 64e3);
  EXPECT_DOUBLE_EQ(t->seconds, 2 * 10e-3 + 2e-4 + t->window_s);
  EXPECT_EQ(t->bound, Bound::kWindow);
  // No latency, no window limit.
  Conditions no_delay = c;
  no_delay.latency_s = 0;
  EXPECT_EQ(PredictCollective(Topology::kRing, p, no_delay)->window_s, 0);
}

// The ring's chain ends when the last hop has delivered its whole chunk: two ranks, 1.5 MiB, 160 Mbit/s at
// 44 ms with a 10 ms token bucket (plan 15 measured 0.141-0.144 s; the chain of first segments alone gave
// 0.124). By hand: the first 512 KiB segment less the credit crosses each of the 2 hops, then the last hop's
// other 256 KiB follow at the link's rate.
TEST(CollectiveTest, RingChainEndsWithTheLastHopsWholeChunk) {
  ExchangeParams p = Hand();
  p.efficiency = 1;
  p.burst_share = 0.5;
  Conditions c{2, 0, 1.5 * (1 << 20), 20 * kMB, 44e-3};
  c.link_burst_bytes = 0.2 * kMB;  // 10 ms of the link
  absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kRing, p, c);
  ASSERT_TRUE(t.ok()) << t.status();
  const double segment = 512 << 10, chunk = 0.75 * (1 << 20), credit = 0.5 * 0.2 * kMB, rate = 20 * kMB;
  const double chain = 2 * (44e-3 + (segment - credit) / rate) + (chunk - segment) / rate;
  EXPECT_DOUBLE_EQ(t->link_s + t->latency_s, chain);
  EXPECT_GT(chain, 2 * chunk / rate + 44e-3);  // the stream part is shorter
  // A chunk no larger than a segment has nothing after it: the chain is the hops' alone.
  c.bytes = 1 << 20;
  t = PredictCollective(Topology::kRing, p, c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->link_s + t->latency_s, 2 * (44e-3 + (segment - credit) / rate));
}

// The ring's window caps each flow at window / RTT inside its pipelined wire term, so a window above the
// bandwidth-delay product never binds it (the stalled-flow form charged it at 150 Mbit/s, 45 ms: plan 3).
TEST(CollectiveTest, RingWindowAboveTheBandwidthDelayProductNeverBinds) {
  // N = 3, S = 4 MB, eB = 0.5 * 40 MB/s = 20 MB/s, L = 45 ms: BDP = 20 MB/s * 90 ms = 1.8 MB.
  ExchangeParams p = Hand();
  const Conditions c{3, 0, 4 * kMB, 40 * kMB, 45e-3};
  p.window_bytes = 2 * kMB;
  absl::StatusOr<CollectiveTime> above = PredictCollective(Topology::kRing, p, c);
  ASSERT_TRUE(above.ok()) << above.status();
  EXPECT_EQ(above->window_s, 0);
  EXPECT_NE(above->bound, Bound::kWindow);
  // Chunks of 4/3 MB: a step's first 512 KiB segment arrives 45 ms + 26.2 ms after it left, later than the
  // link streams the chunk (66.7 ms), so the chain binds: 4 hops of a segment, then the last hop's rest of
  // its chunk (0.325 s against the stream's 4 hops * 4/3 MB / 20 MB/s + 45 ms = 0.312 s).
  const double segment = 512 << 10;
  EXPECT_DOUBLE_EQ(above->link_s + above->latency_s,
                   4 * (45e-3 + segment / (20 * kMB)) + (4.0 / 3 * kMB - segment) / (20 * kMB));
  EXPECT_GT(above->link_s + above->latency_s, 4 * (4.0 / 3) / 20 + 45e-3);
  // 0.9 MB: 10 MB/s per flow. The 512 KiB segment fits the window and crosses a hop at the link's rate; the
  // stream is held to 10 MB/s: 4 * 4/3 MB / 10 MB/s + 45 ms.
  p.window_bytes = 0.9 * kMB;
  absl::StatusOr<CollectiveTime> below = PredictCollective(Topology::kRing, p, c);
  ASSERT_TRUE(below.ok()) << below.status();
  EXPECT_EQ(below->bound, Bound::kWindow);
  EXPECT_DOUBLE_EQ(below->window_s + below->latency_s, 4 * (4.0 / 3) / 10 + 45e-3);
  EXPECT_DOUBLE_EQ(below->link_s, above->link_s);
  // The PS keeps the stalled-flow form: ps-1's flow of S waits a round trip per window.
  absl::StatusOr<CollectiveTime> ps = PredictCollective(Topology::kPsOne, p, c);
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_DOUBLE_EQ(ps->window_s, 4 * kMB * 90e-3 / (0.9 * kMB));
}

TEST(CollectiveTest, CpuCeilingBindsOnFastLinksAndScalesWithSpeedup) {
  // ps-1, N = 8, S = 100 MB: N*S = 800 MB on a 3.125 GB/s link (0.256 s at efficiency 1) but the server's
  // CPU moves 0.7 GB/s (1.14 s).
  ExchangeParams p{0, 1, 0, 0.7e9};
  Conditions c{8, 0, 100 * kMB, 3.125e9, 5e-6};
  absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kPsOne, p, c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->bound, Bound::kCpu);
  EXPECT_DOUBLE_EQ(t->cpu_s, 800 * kMB / 0.7e9);
  c.cpu_speedup = 10;
  t = PredictCollective(Topology::kPsOne, p, c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->bound, Bound::kLink);
  EXPECT_DOUBLE_EQ(t->link_s, 800 * kMB / 3.125e9);
}

TEST(CollectiveTest, LatencyBindsSmallCollectives) {
  const Conditions c{16, 0, 1e3, 12.5 * kMB, 1e-3};
  absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kRing, Hand(), c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->bound, Bound::kLatency);
  EXPECT_DOUBLE_EQ(t->latency_s, 30e-3);
}

TEST(CollectiveTest, RejectsBadInput) {
  const Conditions good{2, 0, kMB, kMB};
  ExchangeParams faster_than_wire = Hand();
  faster_than_wire.efficiency = 1.2;
  absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kRing, faster_than_wire, good);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("efficiency"), std::string::npos) << t.status();
  ExchangeParams negative = Hand();
  negative.software_s = -1;
  EXPECT_FALSE(PredictCollective(Topology::kRing, negative, good).ok());
  Conditions no_servers = good;
  t = PredictCollective(Topology::kPsDedicated, Hand(), no_servers);
  EXPECT_NE(t.status().message().find("servers"), std::string::npos) << t.status();
  Conditions zero_nodes = good;
  zero_nodes.nodes = 0;
  EXPECT_FALSE(PredictCollective(Topology::kRing, Hand(), zero_nodes).ok());
  Conditions nan_latency = good;
  nan_latency.latency_s = NAN;
  EXPECT_FALSE(PredictCollective(Topology::kRing, Hand(), nan_latency).ok());
}

// Incast (collective.h IncastOf): the streams into one server's port, each with its window (or its whole flow
// where that is smaller), less the one the port drains, against what the port holds. The ring has none; an
// unknown buffer marks nothing; the port's buffer changes no predicted time.
TEST(CollectiveTest, IncastIsTheWindowBurstIntoAServersPortOverItsBuffer) {
  ExchangeParams p = Hand();
  p.window_bytes = 64 << 10;
  // 60 Mbit/s, 50 ms of queue plus a 10 ms burst: 450 kB (as the emulated port at 60mbit).
  Conditions c{13, 2, 1 << 20, 7.5e6, 48e-3};
  c.port_buffer_bytes = 7.5e6 * 0.05 + 75000;
  const Incast one = IncastOf(Topology::kPsOne, p, c);
  EXPECT_DOUBLE_EQ(one.burst_bytes, 12.0 * (64 << 10));
  EXPECT_DOUBLE_EQ(one.ratio(), 12.0 * (64 << 10) / 450000);
  EXPECT_TRUE(one.marked());
  EXPECT_EQ(IncastMark(one), "INCAST x1.7");
  // Dedicated: N streams into each of K servers, each a window of its S / K flow.
  EXPECT_DOUBLE_EQ(IncastOf(Topology::kPsDedicated, p, c).burst_bytes, 12.0 * (64 << 10));
  // Co-located: N - 1 remote streams into each host's server.
  EXPECT_DOUBLE_EQ(IncastOf(Topology::kPsColocated, p, c).burst_bytes, 11.0 * (64 << 10));
  const Incast ring = IncastOf(Topology::kRing, p, c);
  EXPECT_EQ(ring.burst_bytes, 0);
  EXPECT_FALSE(ring.marked());
  EXPECT_EQ(IncastMark(ring), "");
  // A flow smaller than the window bursts whole: co-located at N = 32 sends S / 32 = 32 KiB per stream.
  Conditions wide = c;
  wide.nodes = 32;
  EXPECT_DOUBLE_EQ(IncastOf(Topology::kPsColocated, p, wide).burst_bytes, 30.0 * (32 << 10));
  // Without a window the whole flow bursts.
  ExchangeParams unwindowed = Hand();
  EXPECT_DOUBLE_EQ(IncastOf(Topology::kPsOne, unwindowed, c).burst_bytes, 12.0 * (1 << 20));
  // A port that holds the burst (exactly, too) is not marked; one of unknown size neither.
  Conditions deep = c;
  deep.port_buffer_bytes = one.burst_bytes;
  EXPECT_DOUBLE_EQ(IncastOf(Topology::kPsOne, p, deep).ratio(), 1);
  EXPECT_FALSE(IncastOf(Topology::kPsOne, p, deep).marked());
  Conditions unknown = c;
  unknown.port_buffer_bytes = 0;
  EXPECT_EQ(IncastOf(Topology::kPsOne, p, unknown).ratio(), 0);
  EXPECT_FALSE(IncastOf(Topology::kPsOne, p, unknown).marked());
  // A single worker has no incast.
  Conditions alone = c;
  alone.nodes = 1;
  EXPECT_EQ(IncastOf(Topology::kPsOne, p, alone).burst_bytes, 0);
  // Without the incast term (c = 0) the model's time does not depend on the port's buffer.
  for (Topology t : AllTopologies()) {
    EXPECT_EQ(PredictCollectiveUnchecked(t, p, c).seconds, PredictCollectiveUnchecked(t, p, unknown).seconds)
        << TopologyName(t);
    EXPECT_EQ(PredictCollectiveUnchecked(t, p, c).incast_s, 0) << TopologyName(t);
  }
}

TEST(CollectiveTest, IncastCostsRoundTripsPerWindowCutUntilTheBurstFits) {
  ExchangeParams p = Hand();
  p.window_bytes = 64 << 10;
  p.incast_round_trips = 1.5;
  Conditions c{13, 2, 1 << 20, 7.5e6, 48e-3};
  c.port_buffer_bytes = 7.5e6 * 0.05 + 75000;  // 450 kB: R = 12 x 64 KiB / 450 kB = 1.748
  // The round trip through the full port: 2 x 48 ms + 450 kB / 7.5 MB/s = 156 ms.
  EXPECT_DOUBLE_EQ(IncastRoundTripS(c), 0.156);
  // ln(1.748) / ln(1 / 0.7) = 1.565 cuts, 1.5 round trips each: 0.3663 s (computed by hand).
  EXPECT_NEAR(IncastCostOf(Topology::kPsOne, p, c), 0.36625, 1e-5);
  EXPECT_NEAR(IncastCostOf(Topology::kPsDedicated, p, c), 0.36625, 1e-5);
  EXPECT_NEAR(IncastCostOf(Topology::kPsColocated, p, c), 0.30917, 1e-5);  // 11 streams: R = 1.602
  EXPECT_EQ(IncastCostOf(Topology::kRing, p, c), 0);
  // It is paid on top of the lossless time, in its own part.
  ExchangeParams lossless = p;
  lossless.incast_round_trips = 0;
  const CollectiveTime with = PredictCollectiveUnchecked(Topology::kPsOne, p, c);
  const CollectiveTime without = PredictCollectiveUnchecked(Topology::kPsOne, lossless, c);
  EXPECT_NEAR(with.incast_s, 0.36625, 1e-5);
  EXPECT_DOUBLE_EQ(with.seconds, without.seconds + with.incast_s);
  EXPECT_EQ(with.bound, without.bound);
  // Nothing where the burst fits, the buffer or the link rate is unknown, or below the round-trip floor.
  Conditions deep = c;
  deep.port_buffer_bytes = 12.0 * (64 << 10);
  EXPECT_EQ(IncastCostOf(Topology::kPsOne, p, deep), 0);
  Conditions unknown = c;
  unknown.port_buffer_bytes = 0;
  EXPECT_EQ(IncastCostOf(Topology::kPsOne, p, unknown), 0);
  Conditions loopback = c;
  loopback.link_bytes_per_second = 0;
  EXPECT_EQ(IncastCostOf(Topology::kPsOne, p, loopback), 0);
  // A data-center port (25 Gbit/s, 5 us, 2 MB): marked, but a 0.65 ms round trip is below the 10 ms floor
  // where Linux's timers, not round trips, set the loss's cost.
  Conditions dc{64, 2, 1 << 20, 3.125e9, 5e-6};
  dc.port_buffer_bytes = 2e6;
  EXPECT_TRUE(IncastOf(Topology::kPsOne, p, dc).marked());
  EXPECT_LT(IncastRoundTripS(dc), kIncastMinRoundTripS);
  EXPECT_EQ(IncastCostOf(Topology::kPsOne, p, dc), 0);
  // A negative or non-finite c is refused.
  for (double bad : {-1.0, static_cast<double>(NAN)}) {
    ExchangeParams q = p;
    q.incast_round_trips = bad;
    absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kPsOne, q, c);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(t.status().message().find("incast_round_trips"), std::string::npos) << t.status();
  }
}

// With an onset R0 the port drops from a burst R0 times its buffer: ln(R / R0) cuts, none up to R0.
TEST(CollectiveTest, IncastCostCountsTheCutsFromTheOnset) {
  ExchangeParams p = Hand();
  p.window_bytes = 64 << 10;
  p.incast_round_trips = 1.5;
  p.incast_onset_ratio = 1.25;
  Conditions c{13, 2, 1 << 20, 7.5e6, 48e-3};
  c.port_buffer_bytes = 7.5e6 * 0.05 + 75000;  // R = 1.748, round trip 156 ms (above)
  // ln(1.748 / 1.25) / ln(1 / 0.7) = 0.9396 cuts x 1.5 x 0.156 s = 0.21986 s (computed by hand).
  EXPECT_NEAR(IncastCostOf(Topology::kPsOne, p, c), 0.21986, 1e-5);
  // ps-colocated's 11 streams: R = 1.602, ln(1.602 / 1.25) / ln(1 / 0.7) x 0.234 s = 0.16277 s.
  EXPECT_NEAR(IncastCostOf(Topology::kPsColocated, p, c), 0.16277, 1e-5);
  // Below the onset: marked (the burst exceeds the buffer), no cost.
  p.incast_onset_ratio = 1.8;
  EXPECT_TRUE(IncastOf(Topology::kPsOne, p, c).marked());
  EXPECT_EQ(IncastCostOf(Topology::kPsOne, p, c), 0);
  // An onset below 1 or not finite is refused.
  for (double bad : {0.9, static_cast<double>(NAN)}) {
    ExchangeParams q = p;
    q.incast_onset_ratio = bad;
    absl::StatusOr<CollectiveTime> t = PredictCollective(Topology::kPsOne, q, c);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(t.status().message().find("incast_onset_ratio"), std::string::npos) << t.status();
  }
}

TEST(CollectiveTest, NamesRoundTrip) {
  for (Topology t : AllTopologies()) EXPECT_EQ(*ParseTopology(TopologyName(t)), t);
  absl::StatusOr<Topology> bad = ParseTopology("allgather");
  EXPECT_NE(bad.status().message().find("ps-colocated"), std::string::npos) << bad.status();
  EXPECT_EQ(BoundName(Bound::kWindow), "window");
}

}  // namespace
}  // namespace psring::bench::model
