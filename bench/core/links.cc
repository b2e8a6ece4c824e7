#include "bench/core/links.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace psring::bench {

absl::StatusOr<double> ParseLinkRate(const std::string& rate) {
  const std::string lower = absl::AsciiStrToLower(rate);
  absl::string_view text = lower;
  double scale = 1;
  for (auto [suffix, factor] : {std::pair<const char*, double>{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3},
                                {"bit", 1}}) {
    if (absl::ConsumeSuffix(&text, suffix)) {
      scale = factor;
      break;
    }
  }
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || value < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad link rate '", rate, "': use a tc rate like 100mbit, 1gbit, 500kbit (decimal bits per second)"));
  }
  return value * scale;
}

absl::StatusOr<double> ParseLatency(const std::string& latency) {
  if (latency.empty() || latency == "0") return 0.0;
  absl::Duration d;
  if (!absl::ParseDuration(latency, &d) || d < absl::ZeroDuration() || d > absl::Seconds(10)) {
    return absl::InvalidArgumentError(absl::StrCat("bad latency '", latency,
                                                   "': use a one-way duration like 5ms, 250us, 0 (at most 10s)"));
  }
  return absl::ToDoubleSeconds(d);
}

absl::StatusOr<double> ParseQueue(const std::string& queue) {
  absl::StatusOr<double> seconds = ParseLatency(queue);
  if (!seconds.ok() || *seconds <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad --queue '", queue,
                     "': use a duration > 0 like 50ms (how long a packet may wait in a link's queue)"));
  }
  return *seconds;
}

absl::StatusOr<double> PortBufferBytes(double kb, const std::string& flag) {
  if (!(kb >= 0) || !std::isfinite(kb)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", kb, ": give a switch port's buffer in kB >= 0 (0: not known)"));
  }
  return kb * 1e3;
}

absl::StatusOr<double> ParseLinkBurst(const std::string& burst) {
  absl::Duration d;
  if (!absl::ParseDuration(burst, &d) || d <= absl::ZeroDuration() || d > absl::Seconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad link burst '", burst, "': use a duration in (0, 1s] like 10ms (the token bucket's depth as the ",
        "time its bytes take at the link rate)"));
  }
  return absl::ToDoubleSeconds(d);
}

int64_t TbfBurstBytes(double link_bytes_per_second, double burst_s) {
  if (!(link_bytes_per_second > 0) || !(burst_s > 0)) return 0;
  return std::max<int64_t>(static_cast<int64_t>(link_bytes_per_second * burst_s), 15140);
}

absl::StatusOr<SlowHost> ParseSlowHost(const std::string& slow_host) {
  SlowHost out;
  if (slow_host.empty()) return out;
  const size_t colon = slow_host.find(':');
  absl::StatusOr<double> bits =
      colon == std::string::npos ? absl::InvalidArgumentError("no rate") : ParseLinkRate(slow_host.substr(colon + 1));
  if (colon == std::string::npos || !absl::SimpleAtoi(slow_host.substr(0, colon), &out.host) || out.host < 0 ||
      !bits.ok() || *bits <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("--slow_host=", slow_host,
                                                   ": write HOST:RATE with a host index >= 0 and a tc rate, e.g. "
                                                   "--slow_host=3:20mbit"));
  }
  out.bits_per_second = *bits;
  return out;
}

}  // namespace psring::bench
