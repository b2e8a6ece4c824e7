#include "bench/report/scaling_common.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_format.h"

namespace psring::bench {

std::string Size(double bytes) {
  if (bytes >= kMiB) return absl::StrFormat("%.3g MiB", bytes / kMiB);
  if (bytes >= 1024) return absl::StrFormat("%.3g KiB", bytes / 1024);
  return absl::StrFormat("%g B", bytes);
}

int MaxMeasuredNodes(const ScalingResult& result) {
  int n = 1;
  for (int v : result.options.nodes) n = std::max(n, v);
  return n;
}

double SingleWorkerStepSeconds(const ScalingResult& result) {
  if (result.options.mode != "train") return result.options.compute_ms / 1e3;
  int smallest = std::numeric_limits<int>::max();
  for (const auto& r : result.records) {
    if (r.ok()) smallest = std::min(smallest, r.nodes);
  }
  double best = std::numeric_limits<double>::infinity();
  for (const auto& r : result.records) {
    if (r.ok() && r.nodes == smallest) best = std::min(best, std::max(0.0, r.step_s - r.exchange_s));
  }
  return std::isfinite(best) ? best : 0;
}

const RunRecord* Find(const ScalingResult& result, Exchange e, int nodes, size_t bytes) {
  for (const auto& r : result.records) {
    if (r.ok() && r.exchange == e && r.nodes == nodes && r.bytes == bytes) return &r;
  }
  return nullptr;
}

std::vector<int> ModelNodes(int max_nodes) {
  std::set<int> nodes;
  for (int n = 1; n <= std::min(16, max_nodes); ++n) nodes.insert(n);
  for (double k = 4; k <= std::log2(max_nodes) + 1e-9; k += 0.25) nodes.insert(static_cast<int>(std::lround(std::exp2(k))));
  return {nodes.begin(), nodes.end()};
}

std::string LinkText(const ScalingResult& result) {
  if (result.link_bytes_per_second <= 0) return "unlimited";
  const double bits = result.link_bytes_per_second * 8;
  return bits >= 1e9 ? absl::StrFormat("%g Gbit/s", bits / 1e9) : absl::StrFormat("%g Mbit/s", bits / 1e6);
}

}  // namespace psring::bench
