#include "bench/harness/ps_chunk_rule.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psring::bench {
namespace {

// launch.cc keeps its own copies (it is a data-path source the calibrated model fingerprints): where the
// harness uses 32 KiB chunks, links up to 1 Gbit/s.
constexpr double kHarnessSlowLinkBytesPerSecond = 125e6;
constexpr double kHarnessSlowLinkChunkBytes = 32 << 10;
constexpr double kLargestChunkBytes = 2 << 20;  // half the servers' 4 MiB stream window
constexpr double kConnectionWindowBytes = 64 << 10;  // gRPC's HTTP/2 connection window, the servers' fixed

}  // namespace

absl::StatusOr<PsChunks> ParsePsChunks(const std::string& text) {
  for (PsChunks rule : {PsChunks::kHarness, PsChunks::kBdp, PsChunks::kCapped}) {
    if (text == PsChunksName(rule)) return rule;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--ps_chunks='", text, "': use harness (the calibrated default), bdp (the chunk sized by one ",
      "connection's share of the link's bandwidth-delay product) or capped (that chunk kept within what ",
      "the servers' ports and links hold, and for the co-located PS only where it pays)"));
}

int PsFanIn(const Placement& placement) {
  int most = 0;
  for (int server : std::set<int>(placement.server_hosts.begin(), placement.server_hosts.end())) {
    most = std::max<int>(most, std::count_if(placement.worker_hosts.begin(), placement.worker_hosts.end(),
                                             [server](int host) { return host != server; }));
  }
  return most;
}

int64_t BdpChunkBytes(double link_bytes_per_second, double latency_s, int fan_in) {
  if (link_bytes_per_second <= 0 || link_bytes_per_second > kHarnessSlowLinkBytesPerSecond ||
      latency_s <= 0 || fan_in <= 0) {
    return 0;
  }
  const double share = link_bytes_per_second * 2 * latency_s / fan_in;
  const double chunk =
      std::clamp(std::exp2(std::round(std::log2(share))), kHarnessSlowLinkChunkBytes, kLargestChunkBytes);
  return chunk > kHarnessSlowLinkChunkBytes ? static_cast<int64_t>(chunk) : 0;
}

int64_t CappedChunkBytes(double link_bytes_per_second, double latency_s, int fan_in, double port_buffer_bytes,
                         bool colocated) {
  const int64_t bdp = BdpChunkBytes(link_bytes_per_second, latency_s, fan_in);
  if (bdp == 0 || port_buffer_bytes <= 0) return 0;
  const double in_flight = link_bytes_per_second * 2 * latency_s;
  if (colocated && in_flight / fan_in < kColocatedGateBytes) return 0;
  // Each connection keeps gRPC's 64 KiB window and one chunk in flight (PERFORMANCE.md 9.36).
  const double room = kCappedPortShare * (in_flight + port_buffer_bytes);
  auto chunk = static_cast<int64_t>(kHarnessSlowLinkChunkBytes);
  while (chunk < bdp && fan_in * (kConnectionWindowBytes + 2.0 * chunk) <= room) chunk *= 2;
  return chunk > kHarnessSlowLinkChunkBytes ? chunk : 0;
}

}  // namespace psring::bench
