// The incast term's fit (collective.h IncastCostOf; bench/PERFORMANCE.md 9.24): from held-out validation
// reports of a lossless model, the round trips each of TCP's window cuts costs a synchronous PS whose window
// burst overflows its server's port.
//
// Each usable PS row of a gradient-mode report whose burst is R > 1 times its port's buffer is one point:
// its excess y = measured - predicted (the lossless prediction: a cost the report's model already included,
// "INCAST x2.9 +0.412 s", is taken off) against x = ln(R / R0) / ln(1 / beta) * (2L + buffer / B) (0 for
// R <= R0), the term with c = 1. R0 and c minimize the runs' relative residuals (FitIncast below); their
// standard errors come from a bootstrap, and the term's own scatter is the root mean square of the residuals
// over that of c x. Rows below
// R = 1 (the lossless model's own ground) and rows the report excluded (EMULATOR-BOUND, failed) are not
// points; replayed workloads are skipped (their buckets' bursts differ).
//
//   ASSIGN_OR_RETURN(std::vector<ReportRow> rows, ParseValidationReport(text, "plan18.txt"));
//   ASSIGN_OR_RETURN(std::vector<IncastPoint> points, IncastPointsOf(model, rows, defaults));
//   ASSIGN_OR_RETURN(proto::IncastCost incast, FitIncast(points));
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_INCAST_FIT_H_
#define PSRING_BENCH_MODEL_INCAST_FIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"

namespace psring::bench::model {

// One row of a validation report (bench/report/validation_report.h FormatValidationReport) as printed.
struct ReportRow {
  std::string condition;  // "70mbit 40ms queue 10ms N=8 1MiB"
  Topology topology = Topology::kRing;
  double predicted_s = 0;
  double measured_s = -1;  // -1: not measured ("-")
  bool excluded = false;   // EMULATOR-BOUND, failed or wrong: not judged
  double incast_s = 0;     // the incast cost the prediction included ("INCAST x2.9 +0.412 s"), 0 without
  std::string origin;      // the report's name, for messages
  // The date of the model file that predicted it (the report's "# VALIDATION ... (model of HOST, DATE, ..."
  // header); "" where the text has no such header.
  std::string model_date;
  // The lossless model's prediction: what was printed, less the incast cost it included.
  double lossless_s() const { return predicted_s - incast_s; }
};

// The rows of a report's table (lines that start with two spaces and name an exchange); comment lines and
// the verdict lines are skipped. kInvalidArgument naming `origin` and the line for a row whose numbers do not
// parse, or a text without any row (not a validation report).
absl::StatusOr<std::vector<ReportRow>> ParseValidationReport(absl::string_view text,
                                                             absl::string_view origin);
// The same for the report file at `path` (`origin` names it in messages); kNotFound when it cannot be read.
absl::StatusOr<std::vector<ReportRow>> ReadValidationReport(const std::string& path,
                                                            absl::string_view origin);

// What a report's condition names leave to the cluster (the validation's flags).
struct ReportDefaults {
  int ps_servers = 2;      // K of ps-dedicated (validate --ps_servers)
  double queue_s = 0.050;  // a condition without "queue Q" ran the cluster's --queue
  double burst_s = 0.010;  // the links' --link_burst, in seconds of link time
};

// One point of the fit.
struct IncastPoint {
  ReportRow row;
  Conditions conditions;    // N, K, S, B, L, the tbf burst and the port's buffer
  double ratio = 0;         // IncastOf's R
  double round_trip_s = 0;  // IncastRoundTripS
  double x = 0;             // the term at c = 1 and R0 = 1
  double excess_s = 0;      // measured - lossless_s
  // The lossless prediction the excess is over: the printed one (less its incast cost), shifted to the
  // fitted model's lossless terms where the report was predicted by another file (IncastPointsOf).
  double lossless_s = 0;
};

// The points among `rows`: usable PS rows in gradient mode whose R (from `model`'s windows) exceeds 1 and
// whose round trip is at least kIncastMinRoundTripS. kInvalidArgument naming the row for a condition name
// that does not parse, or for a row another model file predicted (ReportRow::model_date is not the date of
// the file that predicted the reports: `reports_model` where given, else `model`); ParamsOf's errors.
//
// `reports_model`: the file the reports were predicted with, where `model` is another (a recalibration of
// the lossless terms since the reports ran). Each point's lossless prediction is then the printed one plus
// `model`'s lossless time less `reports_model`'s at the row's conditions (both computed here the same way,
// so what the conditions' names leave out, such as the box's cores, cancels), and the excess is over that:
// the term fitted rests on `model`'s lossless terms. nullptr: `model` predicted the reports.
absl::StatusOr<std::vector<IncastPoint>> IncastPointsOf(const proto::CostModelFile& model,
                                                        const std::vector<ReportRow>& rows,
                                                        const ReportDefaults& defaults,
                                                        const proto::CostModelFile* reports_model = nullptr);

// The point's term at c = 1 with onset R0 = `onset` (collective.h IncastCostOf; 0 where R <= R0).
double IncastTermAt(const IncastPoint& point, double onset);

// How FitIncast fits.
struct IncastFitOptions {
  bool fit_onset = true;          // fit R0 (else R0 = 1: the term from the buffer on)
  double max_onset = 3;           // the largest R0 of the grid
  int bootstrap_resamples = 400;  // for the standard errors (< 20: c's from the residuals, R0's none)
};
inline constexpr double kIncastOnsetStep = 0.01;            // the grid's step in R0
inline constexpr uint64_t kIncastBootstrapSeed = 20261129;  // fixed: a refit gives the same file
// A parameter is kept where its standard error is at most this share of its value (the rule).
inline constexpr double kIdentifiedRelativeError = 0.20;

// What the fit found about the onset beside the term it returns.
struct IncastFitReport {
  double onset_fitted = 1;               // the grid's best R0 on all runs (before the identification check)
  double onset_std_error = 0;            // its bootstrap standard error (0: no bootstrap)
  double onset_low = 1, onset_high = 1;  // the bootstrap's 5 % and 95 % quantiles
  bool onset_identified = false;         // standard error <= kIdentifiedRelativeError x R0: kept in the term
};

// The fitted term (fitted_on left to the caller). Weighted least squares on the runs' relative residuals
// (weight 1 / lossless step^2: the validation judges relative step error): for each R0 of the grid (1, 1.01,
// ... options.max_onset), the slope c through the origin; the R0 with the least residual wins. The standard
// errors of c and R0 are the spread of the same fit over bootstrap resamples of the runs (fixed seed). An R0
// whose standard error exceeds kIdentifiedRelativeError of it is dropped (R0 = 1, c refitted, `report` says
// so); R0 = 1 leaves onset_ratio unset. kInvalidArgument for fewer than 3 points, a row without a positive
// prediction, or a slope that is not > 0 (the excess does not grow with the term: nothing to fit).
absl::StatusOr<proto::IncastCost> FitIncast(const std::vector<IncastPoint>& points,
                                            const IncastFitOptions& options = {},
                                            IncastFitReport* report = nullptr);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_INCAST_FIT_H_
