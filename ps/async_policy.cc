#include "ps/async_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psring::ps {

StalenessPolicy::StalenessPolicy(int workers, int staleness)
    : staleness_(staleness), clocks_(workers, 0), receiving_(workers, 0) {}

void StalenessPolicy::RestoreClocks(const std::vector<int64_t>& clocks) {
  for (size_t r = 0; r < clocks_.size() && r < clocks.size(); ++r) clocks_[r] = clocks[r];
}

bool StalenessPolicy::MayProceed(int64_t step) const {
  return *std::min_element(clocks_.begin(), clocks_.end()) >= step + 1 - staleness_;
}

absl::Status StalenessPolicy::TimeoutError(int rank, int64_t step, absl::Duration timeout) const {
  const int64_t needed = step + 1 - staleness_;
  std::vector<int> behind;
  for (int r = 0; r < static_cast<int>(clocks_.size()); ++r) {
    if (clocks_[r] < needed) behind.push_back(r);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "rank ", rank, " is more than --staleness=", staleness_, " steps ahead of ranks ", absl::StrJoin(behind, ","),
      " which did not reach step ", needed, " within --step_timeout=", absl::FormatDuration(timeout),
      " (dead or stuck worker?)"));
}

}  // namespace psring::ps
