#include "ps/metrics_barrier.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psring::ps {

MetricsBarrier::MetricsBarrier(int workers) : arrived_(workers, false), values_(workers) {}

absl::StatusOr<uint64_t> MetricsBarrier::Arrive(int rank, std::vector<double> values) {
  if (arrived_[rank]) {
    return absl::AlreadyExistsError(absl::StrCat("rank ", rank, " is already waiting in AverageMetrics/Barrier"));
  }
  for (size_t r = 0; r < arrived_.size(); ++r) {
    if (arrived_[r] && values_[r].size() != values.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " averages ", values.size(), " values, others ", values_[r].size()));
    }
  }
  values_[rank] = std::move(values);
  arrived_[rank] = true;
  const uint64_t round = round_;
  if (std::all_of(arrived_.begin(), arrived_.end(), [](bool a) { return a; })) {
    // Summed in rank order, so every rank gets the same bits whatever the arrival order.
    result_.assign(values_[rank].size(), 0.0);
    for (size_t r = 0; r < arrived_.size(); ++r) {
      for (size_t i = 0; i < result_.size(); ++i) result_[i] += values_[r][i];
      arrived_[r] = false;
    }
    for (double& v : result_) v /= arrived_.size();
    result_round_ = round;
    ++round_;
  }
  return round;
}

const std::vector<double>* MetricsBarrier::Result(uint64_t round) const {
  return result_round_ == round ? &result_ : nullptr;
}

std::vector<int> MetricsBarrier::Abandon() {
  std::vector<int> missing;
  for (int r = 0; r < static_cast<int>(arrived_.size()); ++r) {
    if (!arrived_[r]) missing.push_back(r);
    arrived_[r] = false;
  }
  ++round_;
  return missing;
}

}  // namespace psring::ps
