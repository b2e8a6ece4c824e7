// Statistics of held-out validation on plain data: relative errors (median, p90), the tie band, and winner
// accuracy, the figure users care about (does the model name the exchange that really is fastest?).
//
//   ASSIGN_OR_RETURN(ErrorSummary e, SummarizeErrors(errors));      // e.median_abs, e.p90_abs
//   ASSIGN_OR_RETURN(TieBand band, ComputeTieBand(repeated_run_times));
//   ASSIGN_OR_RETURN(WinnerAccuracy w, ScoreWinners(conditions, band.band));
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_VALIDATE_H_
#define PSRING_BENCH_MODEL_VALIDATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psring::bench::model {

// (predicted - measured) / measured.
double RelativeError(double predicted, double measured);

// The q-quantile (0 <= q <= 1) with linear interpolation between the closest ranks (numpy's default):
// position q * (n - 1) in the sorted values. kInvalidArgument when empty, q is outside [0, 1] or a value is
// not finite.
absl::StatusOr<double> Quantile(std::vector<double> values, double q);

struct ErrorSummary {
  int count = 0;
  double median_abs = 0;  // of |relative error|
  double p90_abs = 0;
  double max_abs = 0;
};
// Summary of |e| over relative errors `errors` (Quantile's errors).
absl::StatusOr<ErrorSummary> SummarizeErrors(const std::vector<double>& errors);

// Margins below the band are ties: the measured winner is not known well enough to score the model on it.
struct TieBand {
  double band = 0;         // fraction, e.g. 0.05
  double floor = 0;        // the fixed floor it started from
  double noise = 0;        // measured run-to-run noise (0 when nothing was repeated)
  int noise_conditions = 0;
  bool from_noise = false; // true when the measured noise is larger than the floor and sets the band
  std::string Describe() const;  // "5.0 % (the floor; measured noise 2.1 % over 6 conditions)"
};
// `repeats`: for each condition measured more than once, its run times (conditions with one run are
// skipped). The noise of a condition is (max - min) / median of its runs, the band the larger of `floor` and
// the median noise over conditions. kInvalidArgument for a negative floor or a run time not > 0.
absl::StatusOr<TieBand> ComputeTieBand(const std::vector<std::vector<double>>& repeats, double floor = 0.05);

struct ExchangeResult {
  std::string exchange;
  double predicted_s = 0;
  double measured_s = 0;  // <= 0: not measured (failed, or not run)
  // EMULATOR-BOUND or failed: its time says nothing about the network, so it can neither win nor be judged.
  bool excluded = false;
  // The prediction's interval (bench/model/uncertainty.h); both 0: none (the point prediction decides).
  double predicted_lo_s = 0;
  double predicted_hi_s = 0;
};
struct ConditionResult {
  std::string condition;  // e.g. "resnet50 N=8 1gbit 1ms bucketed"
  std::vector<ExchangeResult> exchanges;
};

// The predicted winner is the one printed before the run: the fastest prediction over every exchange, named
// only where its interval clears every other's (else "undetermined"). A condition whose predicted winner, or
// whose fastest measured run, is excluded is unjudged: the model named a winner nobody could measure, or the
// box may have slowed the others. An undetermined condition is unjudged too, counted apart.
struct WinnerVerdict {
  std::string condition;
  std::string measured_winner;  // the fastest measured run ("" when none was measured)
  std::string predicted_winner;
  double measured_margin = 0;  // (second fastest usable - fastest) / fastest, measured (judged only)
  bool judged = true;          // neither winner excluded, and the prediction named a winner
  std::string unjudged_reason;  // why not judged ("" when judged)
  // The predicted winner's interval overlaps another's: the model named no winner ("undetermined"), so
  // there is nothing to score; `predicted_winner` is then only the fastest point prediction.
  bool undetermined = false;
  // The model named `predicted_winner` (its interval cleared the others'). False where the intervals overlap:
  // the condition printed "fastest undetermined", and if it is unjudged (a run excluded) the report says so
  // rather than naming a winner the model never named.
  bool winner_named = true;
  bool counted = false;        // judged and margin > band
  bool correct = false;        // predicted winner == measured winner
};
struct WinnerAccuracy {
  int counted = 0;
  int correct = 0;
  int ties = 0;          // judged conditions whose measured margin is within the band
  int unjudged = 0;      // conditions whose printed or measured winner was excluded
  int undetermined = 0;  // conditions (not excluded) where the predicted intervals overlap: no winner named
  int undetermined_point_right = 0;  // of those, where the fastest point prediction was the measured winner
  double accuracy = -1;  // correct / counted; -1 when nothing was counted
  std::vector<WinnerVerdict> verdicts;
};
// One candidate of psring's winner rule: its point prediction and its interval (lo or hi <= 0: none).
struct WinnerCandidate {
  double value = 0;
  double lo = 0;
  double hi = 0;
};
// The rule every "fastest" psring prints (validation verdicts, projections, crossover-map cells): `fastest` is
// the candidate with the smallest value (the first of equals; -1 for an empty list); the model names it only
// where its interval's upper end lies below every other's lower end (a pair where either has no interval is
// not compared). Else `overlapping` is the first candidate whose interval overlaps it: "undetermined", the
// model cannot tell them apart.
struct WinnerCall {
  int fastest = -1;
  int overlapping = -1;
  bool clear() const { return fastest >= 0 && overlapping < 0; }
};
WinnerCall CallWinner(const std::vector<WinnerCandidate>& candidates);

// kInvalidArgument for a condition with fewer than two exchanges, a prediction not > 0, a measured time not
// > 0 of an exchange that is not excluded, a negative band.
absl::StatusOr<WinnerAccuracy> ScoreWinners(const std::vector<ConditionResult>& conditions, double tie_band);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_VALIDATE_H_
