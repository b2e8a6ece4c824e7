#include "bench/emulator/probes.h"

#include <atomic>
#include <fstream>

#include "gtest/gtest.h"

namespace psring::bench {
namespace {

TEST(ProbesTest, ParsesProcStat) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  auto t = ParseProcStat("cpu  100 5 50 800 40 3 2 0 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->busy, 100u + 5 + 50 + 3 + 2 + 0);
  EXPECT_EQ(t->total, t->busy + 800 + 40);
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3 4 5 6 7 8\n").ok());
  EXPECT_FALSE(ParseProcStat("cpu  1 2 x 4 5 6 7 8\n").ok());
  EXPECT_FALSE(ParseProcStat("cpu  1 2 3\n").ok());
}

TEST(ProbesTest, BusyFractionBetweenReadings) {
  EXPECT_DOUBLE_EQ(BusyFraction({100, 1000}, {190, 1100}), 0.9);
  EXPECT_DOUBLE_EQ(BusyFraction({100, 1000}, {100, 1000}), -1);  // no time passed
}

BoundInputs Stalled(double host_stall, double link_util) {
  BoundInputs in;
  in.host_stall = host_stall;
  in.stalled_host = 3;
  in.link_util = link_util;
  return in;
}

// Rule (d): a host that waited for a core >= 10 % of the exchange time, and at least the share the busiest
// link fell short of what the network allows, with that link under 80 % of it, marks the run; a full link is
// the network's, however long the host waited.
TEST(ProbesTest, AHostWaitingForACoreWithAnIdleLinkIsEmulatorBound) {
  const BoundVerdict v = ClassifyRun(Stalled(0.47, 0.55));
  EXPECT_TRUE(v.emulator_bound);
  EXPECT_NE(v.reason.find("host 3's tasks waited for a core 47%"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("55%"), std::string::npos) << v.reason;
  EXPECT_TRUE(v.kept.empty()) << v.kept;
  // At the thresholds themselves: the link 21 % short, a wait of 21 % explains it.
  EXPECT_TRUE(ClassifyRun(Stalled(0.21, kLinkUsed - 0.01)).emulator_bound);
  EXPECT_FALSE(ClassifyRun(Stalled(kMaxCpuStall - 0.01, 0.1)).emulator_bound);
  EXPECT_FALSE(ClassifyRun(Stalled(0.9, kLinkUsed)).emulator_bound);  // link-bound, however long it waited
  EXPECT_FALSE(ClassifyRun(Stalled(0.9, -1)).emulator_bound);         // unknown link: no verdict
}

// A wait shorter than the link's shortfall cannot explain it: the box stretched the run by at most the share
// its hosts waited, so the rest is the network's (or the model's miss), and the run is kept, saying why
// (issue 33: PS runs at 48 ms 20-31 % slower than the model were marked by 13-24 % waits).
TEST(ProbesTest, AWaitTooShortToExplainTheShortfallKeepsTheRun) {
  const BoundVerdict v = ClassifyRun(Stalled(0.37, 0.55));  // 45 % short, 37 % waited
  EXPECT_FALSE(v.emulator_bound);
  EXPECT_TRUE(v.reason.empty()) << v.reason;
  EXPECT_NE(v.kept.find("host 3's tasks waited for a core 37%"), std::string::npos) << v.kept;
  EXPECT_NE(v.kept.find("too little to explain the link's 45% shortfall"), std::string::npos) << v.kept;
  // Against what the network allows: 63 % of 79 % is 20 % short; 13 % waited keeps it, 20 % marks it.
  BoundInputs in = Stalled(0.13, 0.63);
  in.link_allowed = 0.79;
  EXPECT_FALSE(ClassifyRun(in).emulator_bound);
  EXPECT_NE(ClassifyRun(in).kept.find("20% shortfall"), std::string::npos) << ClassifyRun(in).kept;
  in.host_stall = 0.21;
  EXPECT_TRUE(ClassifyRun(in).emulator_bound);
  EXPECT_TRUE(ClassifyRun(in).kept.empty());
  // The critical path crosses hosts: the time any task of the box waited (its PSI, the union over hosts)
  // bounds the stretch, not the worst host's alone. 45 % short, the worst host 37 %, the box 50 %: the box.
  BoundInputs crossing = Stalled(0.37, 0.55);
  crossing.cpu_stall = 0.50;
  EXPECT_TRUE(ClassifyRun(crossing).emulator_bound);
  EXPECT_NE(ClassifyRun(crossing).reason.find("some task of the box waited 50%"), std::string::npos)
      << ClassifyRun(crossing).reason;
  EXPECT_EQ(ClassifyRun(Stalled(0.47, 0.55)).reason.find("some task of the box"), std::string::npos);
  crossing.cpu_stall = 0.40;
  EXPECT_FALSE(ClassifyRun(crossing).emulator_bound);
  EXPECT_NE(ClassifyRun(crossing).kept.find("some task of the box 40%"), std::string::npos)
      << ClassifyRun(crossing).kept;
  // A link that carried nothing (a one-node co-located PS: its worker's server is on its own host) has no
  // shortfall to weigh; the waits mark the run (compare's replay part kept one with "a 100% shortfall").
  const BoundVerdict one_node = ClassifyRun(Stalled(0.72, 0.0));
  EXPECT_TRUE(one_node.emulator_bound) << one_node.kept;
  EXPECT_TRUE(one_node.kept.empty()) << one_node.kept;
  // A run the delay program's lateness marks is excluded, and nothing about it is "kept".
  BoundInputs late_too = Stalled(0.37, 0.55);
  late_too.delayed_packets = 1000;
  late_too.late_packets = 50;
  EXPECT_TRUE(ClassifyRun(late_too).emulator_bound);
  EXPECT_TRUE(ClassifyRun(late_too).kept.empty()) << ClassifyRun(late_too).kept;
  // Below the 10 % floor nothing is judged, and a link that is not short says nothing either.
  EXPECT_TRUE(ClassifyRun(Stalled(kMaxCpuStall - 0.01, 0.1)).kept.empty());
  EXPECT_TRUE(ClassifyRun(Stalled(0.05, kLinkUsed)).kept.empty());
}

// Loss on the links is the network's: a queue overflows when more arrives than its link drains within the
// queue's time, whatever the box's cores do. A run whose links dropped >= kLossyDropShare of their packets is
// kept even where the box's waits would explain the shortfall, if the drops, at a round trip each, can have
// cost it (issue 33: the PS at 48 ms lost 0.2 % of its packets at the server's port with a 50 ms queue and
// ran 13-32 % slower than the model, within 4-17 % with 100 ms). Without latency they cost next to nothing.
TEST(ProbesTest, LinksThatDroppedPacketsKeepTheRunWhereTheDropsCanHaveCostTheShortfall) {
  BoundInputs in = Stalled(0.30, 0.57);  // 37 % short of the 91 % allowed, the box's waits explain it
  in.cpu_stall = 0.49;
  in.link_allowed = 0.91;
  ASSERT_TRUE(ClassifyRun(in).emulator_bound);
  in.link_packets = 269000;
  in.dropped_packets = 950;  // 0.35 %
  in.loss_time_share = 1.0;  // e.g. 95 drops a step x 96 ms against a 1.6 s exchange
  const BoundVerdict v = ClassifyRun(in);
  EXPECT_FALSE(v.emulator_bound) << v.reason;
  EXPECT_NE(
      v.kept.find("the links dropped 950 of 269950 packets (0.35%), at a round trip each up to 100% of the "
                  "exchange time"),
      std::string::npos)
      << v.kept;
  // Without latency (or too few drops a step) the loss cannot have cost the shortfall: the box's waits
  // decide, and the reason says what the drops could have cost (the co-located PS at N = 12 without latency).
  in.loss_time_share = 0.0;
  const BoundVerdict no_latency = ClassifyRun(in);
  EXPECT_TRUE(no_latency.emulator_bound);
  EXPECT_NE(
      no_latency.reason.find("the links' 0.35% drops, at a round trip each, can have cost at most 0% of "
                             "the exchange time"),
      std::string::npos)
      << no_latency.reason;
  in.loss_time_share = 0.36;  // just short of the 37 % shortfall
  EXPECT_TRUE(ClassifyRun(in).emulator_bound);
  in.loss_time_share = 1.0;
  // Below the share, drops decide nothing; unknown drops (-1) neither.
  in.dropped_packets = 200;  // 0.07 %
  EXPECT_TRUE(ClassifyRun(in).emulator_bound);
  in.dropped_packets = -1;
  EXPECT_TRUE(ClassifyRun(in).emulator_bound);
  // The delay program's lateness still excludes the run: late releases bunch packets, so its drops may be the
  // emulator's.
  in.dropped_packets = 950;
  in.delayed_packets = 1000;
  in.late_packets = 50;
  EXPECT_TRUE(ClassifyRun(in).emulator_bound);
  EXPECT_TRUE(ClassifyRun(in).kept.empty()) << ClassifyRun(in).kept;
  // Without waits (rule (d) not in play) nothing is kept or marked: the drops only show in the progress line.
  BoundInputs quiet = Stalled(0.02, 0.57);
  quiet.link_packets = 269000;
  quiet.dropped_packets = 950;
  quiet.loss_time_share = 1.0;
  EXPECT_FALSE(ClassifyRun(quiet).emulator_bound);
  EXPECT_TRUE(ClassifyRun(quiet).kept.empty());
}

// How busy the box was marks nothing by itself: the old rules (a) and (b) are gone. A host that never waited
// ran as it would have on a core of its own, and a box without the per-host figure uses its own pressure.
TEST(ProbesTest, ABusyBoxWhoseHostsNeverWaitedIsNotBound) {
  EXPECT_FALSE(ClassifyRun(Stalled(0.0, 0.2)).emulator_bound);
  // Per-host stall known and low: the box's pressure (some other task waited, e.g. the runner) is ignored.
  BoundInputs in = Stalled(0.02, 0.5);
  in.cpu_stall = 0.6;
  EXPECT_FALSE(ClassifyRun(in).emulator_bound);
  // Per-host stall unknown (no groups): the box's pressure stands in, and the reason says so.
  in.host_stall = -1;
  const BoundVerdict v = ClassifyRun(in);
  EXPECT_TRUE(v.emulator_bound);
  EXPECT_NE(v.reason.find("waited for a core 60%"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("no per-host groups"), std::string::npos) << v.reason;
  in.cpu_stall = kMaxCpuStall - 0.01;
  EXPECT_FALSE(ClassifyRun(in).emulator_bound);
  in.cpu_stall = -1;  // a kernel without PSI: unknown, no verdict from it
  EXPECT_FALSE(ClassifyRun(in).emulator_bound);
}

TEST(ProbesTest, AnIdleLinkTheNetworkExplainsIsNotTheBox) {
  // A window-bound PS at 20 ms: the model's own window and latency let the link be busy 40 % of the time. A
  // run that used it 38 % while a host waited is the network's doing (38 >= 0.8 x 40); one that used 20 %,
  // half of it, while a host waited 60 % is not.
  BoundInputs window_bound = Stalled(0.60, 0.38);
  window_bound.link_allowed = 0.40;
  EXPECT_FALSE(ClassifyRun(window_bound).emulator_bound);
  window_bound.link_util = 0.20;
  const BoundVerdict v = ClassifyRun(window_bound);
  EXPECT_TRUE(v.emulator_bound);
  EXPECT_NE(v.reason.find("the network alone allows 40%"), std::string::npos) << v.reason;
  // The delay program's lateness (the links' invariant) marks a run whatever the network allows.
  BoundInputs late = Stalled(0, 0.35);
  late.delayed_packets = 1000;
  late.late_packets = 50;
  late.link_allowed = 0.3;
  EXPECT_TRUE(ClassifyRun(late).emulator_bound);
}

TEST(ProbesTest, LateDelayedPacketsMakeARunEmulatorBound) {
  BoundInputs in = Stalled(0, 0.95);
  in.delayed_packets = 1000;
  in.late_packets = 10;  // 1 %
  EXPECT_TRUE(ClassifyRun(in).emulator_bound);
  in.late_packets = 9;
  EXPECT_FALSE(ClassifyRun(in).emulator_bound);
  BoundInputs both = Stalled(0.95, 0.1);
  both.delayed_packets = 1000;
  both.late_packets = 500;
  const BoundVerdict v = ClassifyRun(both);
  EXPECT_TRUE(v.emulator_bound);
  EXPECT_NE(v.reason.find("; "), std::string::npos) << v.reason;
}

// The worst host over a window: the largest growth of the per-host counters between the samples bounding it.
TEST(ProbesTest, WorstHostStallIsTheLargestGrowthOverTheWindow) {
  std::atomic<int64_t> tick{0};
  RunSampler sampler({}, absl::Milliseconds(5), [&] {
    const int64_t t = tick++;
    return std::vector<int64_t>{100 * t, 1000 * t, 10};  // host 1 waits 1 ms a sample, host 2 never
  });
  const absl::Time start = absl::Now();
  absl::SleepFor(absl::Milliseconds(40));
  const absl::Time end = absl::Now();
  sampler.Stop();
  const HostStall worst = sampler.WorstHostStall(start, end);
  EXPECT_EQ(worst.host, 1);
  EXPECT_GT(worst.seconds, 0.001);  // at least two samples' growth
  EXPECT_LT(worst.seconds, 1.0);
  // Without per-host counters: unknown.
  RunSampler none([] { return std::vector<int64_t>{0}; }, absl::Milliseconds(5));
  absl::SleepFor(absl::Milliseconds(20));
  none.Stop();
  EXPECT_EQ(none.WorstHostStall(start, absl::Now()).host, -1);
}

TEST(ProbesTest, ParsesCpuPressure) {
  const std::string text =
      "some avg10=55.98 avg60=21.97 avg300=15.62 total=4798811251\n"
      "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
  absl::StatusOr<uint64_t> total = ParseCpuPressureTotal(text);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, 4798811251u);
  EXPECT_FALSE(ParseCpuPressureTotal("").ok());
  EXPECT_FALSE(ParseCpuPressureTotal("full avg10=0.00 total=7\n").ok());  // only the "some" line counts
  EXPECT_FALSE(ParseCpuPressureTotal("some avg10=1.0 total=x\n").ok());
}

TEST(ProbesTest, SamplerReadsCountersOverAWindow) {
  std::atomic<int64_t> bytes{0};
  RunSampler sampler(
      [&] {
        return std::vector<int64_t>{bytes.load(), 2 * bytes.load()};
      },
      absl::Milliseconds(5));
  const absl::Time start = absl::Now();
  absl::SleepFor(absl::Milliseconds(30));
  bytes = 1000;
  absl::SleepFor(absl::Milliseconds(30));
  const absl::Time end = absl::Now();
  sampler.Stop();
  sampler.Stop();  // idempotent
  const std::vector<int64_t> deltas = sampler.CounterDeltas(start, end);
  ASSERT_EQ(deltas.size(), 2u);
  EXPECT_EQ(deltas[0], 1000);
  EXPECT_EQ(deltas[1], 2000);
  const double busy = sampler.BusyFraction(start, end);
  EXPECT_GE(busy, 0);
  EXPECT_LE(busy, 1);
  const double stall = sampler.StallFraction(start, end);  // -1 only where the kernel has no PSI
  EXPECT_LE(stall, 1);
  if (std::ifstream("/proc/pressure/cpu").good()) {
    EXPECT_GE(stall, 0);
  }
  // A window before any sample is unknown.
  EXPECT_EQ(sampler.BusyFraction(start - absl::Hours(2), start - absl::Hours(1)), -1);
  EXPECT_EQ(sampler.StallFraction(start - absl::Hours(2), start - absl::Hours(1)), -1);
}

}  // namespace
}  // namespace psring::bench
