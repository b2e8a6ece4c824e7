// Prediction intervals: how far a prediction can be off, from the calibration's own uncertainty.
//
// Three parts, added in log space: the fitted parameters' covariance (bench/model/fit.h records it in the
// model file) pushed through the prediction by its numeric gradient (the delta method), the scatter a new run
// shows around the fit (the fit's relative residual standard deviation), and beyond the calibrated coverage
// the extrapolation error the calibration measured on itself (fit.h MeasureExtrapolation: per dimension
// outside it, (log_sd_per_log_factor * log(factor))^2; ExtrapolationLogVariance). Where the prediction
// includes the incast term (collective.h IncastCostOf, fitted apart), its share of the prediction times the
// term's scatter and its parameter's relative error adds a fourth (counted with the parameters'). With rel_sd
// the combined standard deviation of log(T), the interval at level L is value * exp(+-z_L * rel_sd).
//
//   ASSIGN_OR_RETURN(PredictionInterval pi, IntervalOf(file, Topology::kRing,
//       [&](const ExchangeParams& p) { return PredictStep(Topology::kRing, p, at, shape)->step_s; }, at,
//       bytes));
//   // pi.lo <= pi.value <= pi.hi, a 90 % interval
//
// A model file written before the covariance was recorded falls back to the parameters' standard errors as
// independent and its median residual as the scatter (said in `source`). Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_UNCERTAINTY_H_
#define PSRING_BENCH_MODEL_UNCERTAINTY_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"

namespace psring::bench::model {

// The level every interval psring prints has, and its two-sided normal quantile.
inline constexpr double kIntervalLevel = 0.90;
inline constexpr double kIntervalZ = 1.6448536269514722;

struct PredictionInterval {
  double value = 0;   // the prediction at the fitted parameters
  double lo = 0;      // value * exp(-z * rel_sd)
  double hi = 0;      // value * exp(+z * rel_sd)
  double rel_sd = 0;  // standard deviation of log(prediction)
  double parameter_rel_sd = 0;  // the parameters' share of it
  double extrapolation_rel_sd = 0;  // the extrapolation's share of it (0 inside the calibrated coverage)
};

// The model's prediction as a function of one exchange's parameters (the rest of the call fixed).
using Predictor = std::function<absl::StatusOr<double>(const ExchangeParams&)>;

// The kIntervalLevel interval of `predict` for `topology` of `file`, predicting at `at` (`bytes`: the
// collective's size as ExtrapolationLogVariance takes it). Over an unlimited link (loopback, CPU-bound) the
// scatter is the file's loopback_residual_rel_sd where it has one; outside the calibrated coverage the
// interval adds ExtrapolationLogVariance. ParamsOf's errors, the predictor's, and kInvalidArgument when the
// prediction is not > 0.
absl::StatusOr<PredictionInterval> IntervalOf(const proto::CostModelFile& file, Topology topology,
                                              const Predictor& predict, const Conditions& at, double bytes);

// The variance of log(T) that predicting `topology` at `at` (`bytes`: the collective's size, a flat step's S
// or the largest bucket; 0: not judged) adds by lying outside the calibrated coverage: the sum over the
// dimensions outside it (model_file.h ExtrapolationFactors) of (log_sd_per_log_factor * log(factor))^2 from
// the file's extrapolation entries. A dimension the file has no entry for, or one never calibrated (infinite
// factor, marked "EXTRAPOLATED (... never calibrated)" instead), adds nothing. 0 inside the coverage.
double ExtrapolationLogVariance(const proto::CostModelFile& file, Topology topology, const Conditions& at,
                                double bytes);

// "1.23 s [1.10, 1.38]"-style text of an interval, in the unit given (1e-3 for ms).
std::string FormatInterval(const PredictionInterval& pi, double unit, int decimals = 2);

// The fastest of `candidates` (by value) when its interval's upper end lies below every other's lower end;
// else -1: undetermined (the intervals overlap, the model cannot tell them apart). -1 for an empty list.
// The rule is validate.h's CallWinner, the one the held-out verdicts use.
int ClearWinner(const std::vector<PredictionInterval>& candidates);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_UNCERTAINTY_H_
