#include "bench/emulator/probes.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace psring::bench {

RunSampler::RunSampler(std::function<std::vector<int64_t>()> counters, absl::Duration interval,
                       std::function<std::vector<int64_t>()> host_stalls)
    : counters_(std::move(counters)), interval_(interval), host_stalls_(std::move(host_stalls)) {
  TakeSample();
  thread_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(interval_)) TakeSample();
  });
}

RunSampler::~RunSampler() { Stop(); }

void RunSampler::Stop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
  TakeSample();
}

void RunSampler::TakeSample() {
  const HostCpuReading reading = ReadHostCpu();
  if (!reading.has_cpu) return;  // no /proc (then BusyFraction says -1: unknown)
  Sample sample{reading.time, reading.cpu, reading.stall_us, counters_ ? counters_() : std::vector<int64_t>(),
                host_stalls_ ? host_stalls_() : std::vector<int64_t>()};
  absl::MutexLock lock(&mu_);
  samples_.push_back(std::move(sample));
}

std::pair<const RunSampler::Sample*, const RunSampler::Sample*> RunSampler::Window(absl::Time from,
                                                                                   absl::Time to) const {
  // The last sample at or before `from` and the first at or after `to`.
  const Sample* first = nullptr;
  const Sample* last = nullptr;
  for (const Sample& s : samples_) {
    if (s.time <= from || first == nullptr) first = &s;
    if (s.time >= to) {
      last = &s;
      break;
    }
  }
  if (last == nullptr && !samples_.empty()) last = &samples_.back();
  if (first == nullptr || last == nullptr || first == last) return {nullptr, nullptr};
  return {first, last};
}

double RunSampler::BusyFraction(absl::Time from, absl::Time to) const {
  absl::MutexLock lock(&mu_);
  const auto [first, last] = Window(from, to);
  return first == nullptr ? -1 : bench::BusyFraction(first->cpu, last->cpu);
}

std::vector<int64_t> RunSampler::CounterDeltas(absl::Time from, absl::Time to) const {
  absl::MutexLock lock(&mu_);
  const auto [first, last] = Window(from, to);
  std::vector<int64_t> deltas;
  if (first == nullptr || first->counters.size() != last->counters.size()) return deltas;
  for (size_t i = 0; i < first->counters.size(); ++i)
    deltas.push_back(last->counters[i] - first->counters[i]);
  return deltas;
}

double RunSampler::StallFraction(absl::Time from, absl::Time to) const {
  absl::MutexLock lock(&mu_);
  const auto [first, last] = Window(from, to);
  if (first == nullptr || first->stall_us < 0 || last->stall_us < first->stall_us) return -1;
  const double window_us = absl::ToDoubleMicroseconds(last->time - first->time);
  if (window_us <= 0) return -1;
  return std::clamp(static_cast<double>(last->stall_us - first->stall_us) / window_us, 0.0, 1.0);
}

HostStall RunSampler::WorstHostStall(absl::Time from, absl::Time to) const {
  absl::MutexLock lock(&mu_);
  const auto [first, last] = Window(from, to);
  HostStall worst;
  if (first == nullptr || first->host_stall_us.empty() ||
      first->host_stall_us.size() != last->host_stall_us.size()) {
    return worst;
  }
  for (size_t h = 0; h < first->host_stall_us.size(); ++h) {
    const double seconds = std::max<int64_t>(0, last->host_stall_us[h] - first->host_stall_us[h]) / 1e6;
    if (seconds > worst.seconds) worst = {static_cast<int>(h), seconds};
  }
  return worst;
}

BoundVerdict ClassifyRun(const BoundInputs& in) {
  BoundVerdict v;
  const double allowed = std::clamp(in.link_allowed, 0.01, 1.0);
  const double idle_below = kLinkUsed * allowed;  // the link use below which the box is suspected
  const std::string of_allowed =
      allowed < 1 ? absl::StrFormat(" (the network alone allows %.0f%%)", 100 * allowed) : std::string();
  const bool link_short = in.link_util >= 0 && in.link_util < idle_below;
  // The share of the time the network allows the link that it lost: what the box would have to explain. A
  // link that carried nothing has no shortfall to weigh: the run moved nothing over the network (one node:
  // its time is the box's alone) or moved nothing at all, and its hosts' waits mark it as before.
  const double shortfall = link_short && in.link_util >= kLinkIdle ? 1 - in.link_util / allowed : 0;
  // Whether the box can explain the shortfall: the run's stretch is at most the time in which a task on its
  // critical path waited for a core, and that path crosses hosts, so the bound is the time in which any task
  // of the box waited (its PSI "some", the union over hosts), not the worst host's alone; the worst host's
  // where the box's is unknown. Marks the run where it can; keeps it, saying so, where it cannot.
  const auto judge = [&](double stall, const std::string& waited) {
    if (!(stall >= kMaxCpuStall) || !link_short) return;
    const std::string link = absl::StrFormat("the busiest link carried data %.0f%% of the exchange time%s",
                                             100 * in.link_util, of_allowed);
    const double any_wait = std::max(stall, in.cpu_stall);
    const double lost = DropShare(in.link_packets, in.dropped_packets);  // -1: unknown
    if (lost >= kLossyDropShare && in.loss_time_share >= shortfall) {
      v.kept = absl::StrFormat(
          "%s while %s, but the links dropped %d of %d packets (%.2f%%), at a round trip each up to %.0f%% "
          "of "
          "the exchange time: TCP's loss recovery, the network's, can have held the link short: kept",
          waited, link, in.dropped_packets, in.link_packets + in.dropped_packets, 100 * lost,
          100 * in.loss_time_share);
    } else if (any_wait >= shortfall) {
      v.emulator_bound = true;
      v.reason = absl::StrCat(waited, " while ", link);
      if (lost >= kLossyDropShare) {
        absl::StrAppend(&v.reason,
                        absl::StrFormat("; the links' %.2f%% drops, at a round trip each, can have "
                                        "cost at most %.0f%% of the exchange time",
                                        100 * lost, 100 * in.loss_time_share));
      }
      // The worst host alone is too little: say whose waits explain the shortfall.
      if (stall < shortfall) {
        absl::StrAppend(&v.reason,
                        absl::StrFormat("; some task of the box waited %.0f%% of the measured time, "
                                        "enough to explain the link's %.0f%% shortfall",
                                        100 * any_wait, 100 * shortfall));
      }
    } else {
      v.kept = absl::StrFormat(
          "%s, and some task of the box %.0f%% of the measured time, too little to explain the link's %.0f%% "
          "shortfall against what the network allows (%s): kept, the rest is not the box's",
          waited, 100 * any_wait, 100 * shortfall, link);
    }
  };
  if (in.host_stall >= 0) {
    judge(in.host_stall, absl::StrFormat("host %d's tasks waited for a core %.0f%% of the exchange time",
                                         in.stalled_host, 100 * in.host_stall));
  } else {
    judge(in.cpu_stall,
          absl::StrFormat("runnable tasks waited for a core %.0f%% of the measured time (the box's "
                          "CPU pressure: no per-host groups)",
                          100 * in.cpu_stall));
  }
  if (in.delayed_packets > 0 &&
      static_cast<double>(in.late_packets) >= kLateShare * static_cast<double>(in.delayed_packets)) {
    v.emulator_bound = true;
    if (!v.reason.empty()) v.reason += "; ";
    v.reason += absl::StrFormat("the delay program released %.1f%% of %d packets > 1 ms late",
                                100.0 * in.late_packets / in.delayed_packets, in.delayed_packets);
    v.kept.clear();  // excluded by the links' invariant: nothing is kept, whatever the waits could explain
  }
  return v;
}

}  // namespace psring::bench
