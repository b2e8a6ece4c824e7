#include "bench/core/attribution.h"

#include <algorithm>
#include <cstddef>

namespace psring::bench {
namespace {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  return (*std::max_element(values.begin(), values.begin() + mid) + upper) / 2;
}

}  // namespace

StepAttribution AttributeSteps(const std::vector<std::vector<double>>& ready) {
  StepAttribution a;
  const int ranks = static_cast<int>(ready.size());
  if (ranks < 2) return a;
  size_t steps = ready[0].size();
  for (const std::vector<double>& r : ready) steps = std::min(steps, r.size());
  a.steps = static_cast<int>(steps);
  a.last_counts.assign(ranks, 0);
  for (size_t s = 0; s < steps; ++s) {
    std::vector<double> times;
    int last = 0;
    for (int r = 0; r < ranks; ++r) {
      times.push_back(ready[r][s]);
      if (ready[r][s] > ready[last][s]) last = r;
    }
    a.last_rank.push_back(last);
    a.lag_s.push_back(ready[last][s] - Median(times));
    ++a.last_counts[last];
  }
  if (steps == 0) return a;
  const int top = static_cast<int>(std::max_element(a.last_counts.begin(), a.last_counts.end()) - a.last_counts.begin());
  std::vector<double> lags;
  for (size_t s = 0; s < steps; ++s) {
    if (a.last_rank[s] == top) lags.push_back(a.lag_s[s]);
  }
  const double lag = Median(lags);
  if (2 * a.last_counts[top] > static_cast<int>(steps) && lag >= kMinStragglerLag) {
    a.straggler = top;
    a.share = static_cast<double>(a.last_counts[top]) / steps;
    a.median_lag_s = lag;
  }
  return a;
}

double QuorumStepSeconds(std::vector<double> rank_step_s, int backup_workers) {
  if (rank_step_s.empty()) return 0;
  const int n = static_cast<int>(rank_step_s.size());
  const int quorum = n - std::clamp(backup_workers, 0, n - 1);
  std::nth_element(rank_step_s.begin(), rank_step_s.begin() + (quorum - 1), rank_step_s.end());
  return rank_step_s[quorum - 1];
}

}  // namespace psring::bench
