// The incast term's fit (collective.h IncastCostOf; bench/PERFORMANCE.md 9.24): from held-out validation
// reports of a lossless model, the round trips each of TCP's window cuts costs a synchronous PS whose window
// burst overflows its server's port.
//
// Each usable PS row of a gradient-mode report whose burst is R > 1 times its port's buffer is one point:
// its excess y = measured - predicted (the lossless prediction: a cost the report's model already included,
// "INCAST x2.9 +0.412 s", is taken off) against x = ln(R) / ln(1 / beta) * (2L + buffer / B), the term with
// c = 1. c is the least-squares slope through the origin, sum(x y) / sum(x^2), its standard error from the
// residuals, and the term's own scatter the root mean square of the residuals over that of c x. Rows below
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
  double x = 0;             // the term at c = 1
  double excess_s = 0;      // measured - lossless prediction
};

// The points among `rows`: usable PS rows in gradient mode whose R (from `model`'s windows) exceeds 1 and
// whose round trip is at least kIncastMinRoundTripS. kInvalidArgument naming the row for a condition name
// that does not parse, or for a row another model file predicted (ReportRow::model_date is not `model`'s
// date: its predictions are not this model's lossless ones); ParamsOf's errors.
absl::StatusOr<std::vector<IncastPoint>> IncastPointsOf(const proto::CostModelFile& model,
                                                        const std::vector<ReportRow>& rows,
                                                        const ReportDefaults& defaults);

// The fitted term (fitted_on left to the caller). kInvalidArgument for fewer than 3 points, or a slope that
// is not > 0 (the excess does not grow with the term: nothing to fit).
absl::StatusOr<proto::IncastCost> FitIncast(const std::vector<IncastPoint>& points);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_INCAST_FIT_H_
