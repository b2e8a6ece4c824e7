#include "trainer/straggler.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace psring::trainer {
namespace {

// "A:B" -> {A, B}; kInvalidArgument naming the flag and the expected form.
absl::StatusOr<std::vector<std::string>> Parts(const std::string& value, const char* flag, const char* form,
                                               size_t min_parts, size_t max_parts) {
  std::vector<std::string> parts = absl::StrSplit(value, ':');
  if (parts.size() < min_parts || parts.size() > max_parts) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, ": write ", form));
  }
  return parts;
}

}  // namespace

absl::StatusOr<StragglerOptions> ParseStragglerFlags(const std::string& straggler, const std::string& step_noise,
                                                     const std::string& pause) {
  StragglerOptions o;
  if (!straggler.empty()) {
    const char* form = "RANK:FACTOR with RANK >= 0 and FACTOR >= 1, e.g. --straggler=3:2";
    auto parts = Parts(straggler, "straggler", form, 2, 2);
    if (!parts.ok()) return parts.status();
    if (!absl::SimpleAtoi((*parts)[0], &o.slow_rank) || o.slow_rank < 0 || !absl::SimpleAtod((*parts)[1], &o.factor) ||
        !std::isfinite(o.factor) || o.factor < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--straggler=", straggler, ": write ", form));
    }
  }
  if (!step_noise.empty()) {
    const char* form = "SIGMA or SIGMA:SEED with 0 <= SIGMA <= 3, e.g. --step_noise=0.5:7";
    auto parts = Parts(step_noise, "step_noise", form, 1, 2);
    if (!parts.ok()) return parts.status();
    if (!absl::SimpleAtod((*parts)[0], &o.noise_sigma) || !std::isfinite(o.noise_sigma) || o.noise_sigma < 0 ||
        o.noise_sigma > 3 || (parts->size() == 2 && !absl::SimpleAtoi((*parts)[1], &o.noise_seed))) {
      return absl::InvalidArgumentError(absl::StrCat("--step_noise=", step_noise, ": write ", form));
    }
  }
  if (!pause.empty()) {
    const char* form = "EVERY:DURATION with EVERY >= 1 steps and a duration like 200ms, e.g. --pause=10:0.5s";
    auto parts = Parts(pause, "pause", form, 2, 2);
    if (!parts.ok()) return parts.status();
    absl::Duration duration;
    if (!absl::SimpleAtoi((*parts)[0], &o.pause_every) || o.pause_every < 1 ||
        !absl::ParseDuration((*parts)[1], &duration) || duration < absl::ZeroDuration() ||
        duration > absl::Seconds(60)) {
      return absl::InvalidArgumentError(absl::StrCat("--pause=", pause, ": write ", form, " (at most 60s)"));
    }
    o.pause_s = absl::ToDoubleSeconds(duration);
  }
  return o;
}

Straggler::Straggler(const StragglerOptions& options, int rank)
    : options_(options),
      rank_(rank),
      active_(options.any()),
      generator_(options.noise_seed + static_cast<uint64_t>(rank)) {}

double Straggler::StepFactor(int64_t /*step*/) {
  double factor = rank_ == options_.slow_rank ? options_.factor : 1.0;
  if (options_.noise_sigma > 0) factor *= std::max(1.0, std::exp(options_.noise_sigma * normal_(generator_)));
  return factor;
}

double Straggler::PauseSeconds(int64_t step) const {
  if (options_.pause_every <= 0 || step <= 0 || step % options_.pause_every != 0) return 0;
  return options_.pause_s;
}

}  // namespace psring::trainer
