#include "bench/model/validate.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psring::bench::model {

double RelativeError(double predicted, double measured) { return (predicted - measured) / measured; }

absl::StatusOr<double> Quantile(std::vector<double> values, double q) {
  if (values.empty()) return absl::InvalidArgumentError("no values to take a quantile of");
  if (!(q >= 0 && q <= 1)) return absl::InvalidArgumentError(absl::StrCat("quantile ", q, " is outside [0, 1]"));
  for (double v : values) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError(absl::StrCat("value ", v, " is not finite"));
  }
  std::sort(values.begin(), values.end());
  const double position = q * (values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (position - below) * (values[above] - values[below]);
}

absl::StatusOr<ErrorSummary> SummarizeErrors(const std::vector<double>& errors) {
  std::vector<double> abs;
  for (double e : errors) abs.push_back(std::abs(e));
  ErrorSummary summary;
  summary.count = static_cast<int>(abs.size());
  absl::StatusOr<double> median = Quantile(abs, 0.5);
  if (!median.ok()) return median.status();
  summary.median_abs = *median;
  summary.p90_abs = *Quantile(abs, 0.9);
  summary.max_abs = *std::max_element(abs.begin(), abs.end());
  return summary;
}

std::string TieBand::Describe() const {
  const std::string noise_text =
      noise_conditions == 0 ? "no repeated runs to measure noise"
                            : absl::StrFormat("measured noise %.1f %% over %d conditions", 100 * noise,
                                              noise_conditions);
  return absl::StrFormat("%.1f %% (%s; %s)", 100 * band, from_noise ? "the measured noise" : "the floor",
                         noise_text);
}

absl::StatusOr<TieBand> ComputeTieBand(const std::vector<std::vector<double>>& repeats, double floor) {
  if (!(floor >= 0)) return absl::InvalidArgumentError(absl::StrCat("tie band floor ", floor, " is negative"));
  std::vector<double> noises;
  for (const std::vector<double>& runs : repeats) {
    for (double t : runs) {
      if (!(std::isfinite(t) && t > 0)) {
        return absl::InvalidArgumentError(absl::StrCat("run time ", t, " s: every measured time must be > 0"));
      }
    }
    if (runs.size() < 2) continue;
    const auto [lo, hi] = std::minmax_element(runs.begin(), runs.end());
    noises.push_back((*hi - *lo) / *Quantile(runs, 0.5));
  }
  TieBand band;
  band.floor = floor;
  band.noise_conditions = static_cast<int>(noises.size());
  if (!noises.empty()) band.noise = *Quantile(noises, 0.5);
  band.from_noise = band.noise > floor;
  band.band = std::max(floor, band.noise);
  return band;
}

WinnerCall CallWinner(const std::vector<WinnerCandidate>& candidates) {
  WinnerCall call;
  if (candidates.empty()) return call;
  call.fastest = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (candidates[i].value < candidates[call.fastest].value) call.fastest = static_cast<int>(i);
  }
  const WinnerCandidate& b = candidates[call.fastest];
  for (size_t i = 0; i < candidates.size(); ++i) {
    const WinnerCandidate& o = candidates[i];
    if (static_cast<int>(i) == call.fastest || !(b.hi > 0 && o.lo > 0)) continue;
    if (!(b.hi < o.lo)) {
      call.overlapping = static_cast<int>(i);
      break;
    }
  }
  return call;
}

absl::StatusOr<WinnerAccuracy> ScoreWinners(const std::vector<ConditionResult>& conditions, double tie_band) {
  if (!(tie_band >= 0)) return absl::InvalidArgumentError(absl::StrCat("tie band ", tie_band, " is negative"));
  WinnerAccuracy accuracy;
  for (const ConditionResult& c : conditions) {
    if (c.exchanges.size() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("condition '", c.condition, "' has ", c.exchanges.size(),
                       " exchange(s): a winner needs at least two"));
    }
    for (const ExchangeResult& e : c.exchanges) {
      const bool measured_ok = e.excluded || (e.measured_s > 0 && std::isfinite(e.measured_s));
      if (!(e.predicted_s > 0 && std::isfinite(e.predicted_s) && measured_ok)) {
        return absl::InvalidArgumentError(absl::StrCat("condition '", c.condition, "', ", e.exchange,
                                                       ": predicted and measured times must be > 0"));
      }
    }
    std::vector<WinnerCandidate> candidates;
    const ExchangeResult* measured = nullptr;
    for (const ExchangeResult& e : c.exchanges) {
      candidates.push_back({e.predicted_s, e.predicted_lo_s, e.predicted_hi_s});
      if (e.measured_s > 0 && (measured == nullptr || e.measured_s < measured->measured_s)) measured = &e;
    }
    const WinnerCall call = CallWinner(candidates);
    const ExchangeResult* predicted = &c.exchanges[call.fastest];  // >= 2 exchanges: fastest >= 0
    WinnerVerdict v;
    v.condition = c.condition;
    v.predicted_winner = predicted->exchange;
    v.measured_winner = measured != nullptr ? measured->exchange : "";
    double second = INFINITY;
    for (const ExchangeResult& e : c.exchanges) {
      if (&e != measured && !e.excluded) second = std::min(second, e.measured_s);
    }
    v.winner_named = call.clear();
    if (predicted->excluded) {
      v.unjudged_reason = v.winner_named
                              ? absl::StrCat("the predicted winner ", predicted->exchange, " was excluded")
                              : absl::StrCat(
                                    "the model named no winner (intervals overlap), and its "
                                    "point prediction ",
                                    predicted->exchange, " was excluded");
    } else if (measured == nullptr || measured->excluded) {
      v.unjudged_reason = measured == nullptr ? "nothing measured"
                                              : absl::StrCat("the fastest run, ", measured->exchange,
                                                             ", was excluded");
    } else if (!std::isfinite(second)) {
      v.unjudged_reason = "no other usable exchange to compare with";
    } else if (!call.clear()) {
      v.undetermined = true;
      v.unjudged_reason = absl::StrCat("undetermined: the predicted intervals of ", predicted->exchange, " and ",
                                       c.exchanges[call.overlapping].exchange, " overlap");
    }
    v.judged = v.unjudged_reason.empty();
    v.correct = v.judged && v.predicted_winner == v.measured_winner;
    if (v.undetermined) {
      ++accuracy.undetermined;
      accuracy.undetermined_point_right += v.predicted_winner == v.measured_winner;
    } else if (!v.judged) {
      ++accuracy.unjudged;
    } else {
      v.measured_margin = (second - measured->measured_s) / measured->measured_s;
      v.counted = v.measured_margin > tie_band;
      if (v.counted) {
        ++accuracy.counted;
        accuracy.correct += v.correct;
      } else {
        ++accuracy.ties;
      }
    }
    accuracy.verdicts.push_back(v);
  }
  if (accuracy.counted > 0) accuracy.accuracy = static_cast<double>(accuracy.correct) / accuracy.counted;
  return accuracy;
}

}  // namespace psring::bench::model
