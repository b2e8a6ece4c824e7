#include "bench/cmd/time_limit.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace psring::bench {

double SweepClock::Pace() const {
  return estimated_done_s_ > 0 ? std::max(1.0, actual_done_s_ / estimated_done_s_) : kFirstSweepPace;
}

std::string SweepClock::WhyNot(double estimate_s, absl::Time now) const {
  const double elapsed_s = ElapsedSeconds(now);
  const double end_s = elapsed_s + Pace() * estimate_s;
  if (limit_ == absl::InfiniteDuration() || end_s <= absl::ToDoubleSeconds(limit_)) return "";
  return absl::StrFormat(
      "at %.0f s it would end about %.0f s in (the model's %.0f s x %.2f, %s), past the time limit %.0f s",
      elapsed_s, end_s, estimate_s, Pace(),
      estimated_done_s_ > 0 ? "the pace of the sweeps so far" : "the pace taken before any sweep ran",
      absl::ToDoubleSeconds(limit_));
}

void SweepClock::Ran(double estimate_s, absl::Time now) {
  estimated_done_s_ += estimate_s;
  actual_done_s_ += absl::ToDoubleSeconds(now - sweep_start_);
}

}  // namespace psring::bench
