// //bench:fit_incast: fits the model's incast term (bench/model/incast_fit.h, collective.h IncastCostOf) on
// validation reports of held-out runs with shallow port queues, and writes the model file with it.
//
//   bazel run //bench:fit_incast -- --model=bench/results/committed_model.json
//       --reports=bench/results/validation_incast_onset_box_2026-11-29.txt,... --out=/tmp/model.json
//   (one command line)
//
// Prints every point (condition, exchange, R, the round trip, the measured excess over the lossless
// prediction, the term), the fitted c and onset R0 with their standard errors (or why R0 was dropped), and
// the fitted rows' step error without and with the term (in sample: a held-out plan judges it,
// bench/PERFORMANCE.md 9.24-9.25). The lossless terms are untouched; a model file's earlier incast term is
// replaced.
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/core/links.h"
#include "bench/model/collective.h"
#include "bench/model/incast_fit.h"
#include "bench/model/model_file.h"
#include "bench/model/validate.h"
#include "common/binary_main.h"
#include "common/flags_usage.h"
#include "common/runfiles.h"
#include "common/status_macros.h"

ABSL_FLAG(
    std::string, model, "",
    "The frozen model file the reports' predictions came from (JSON, bench/model/cost_model_file.proto). "
    "Required.");
ABSL_FLAG(
    std::vector<std::string>, reports, {},
    "Validation reports (//bench:validate's text output, comma-separated) of held-out runs whose PS "
    "window bursts exceed their ports' buffers (plans with \"queue\": \"5ms\"-style sweeps). Required.");
ABSL_FLAG(std::string, out, "", "Where to write the model file with the fitted term. Required.");
ABSL_FLAG(std::string, reports_model, "",
          "The model file the reports were predicted with, where --model is another (its lossless terms "
          "recalibrated since the reports ran): each row's printed lossless prediction is shifted by the two "
          "files' lossless difference at its conditions, so the term rests on --model's lossless terms. The "
          "path is recorded in the term (incast.reports_model; give it relative to the repository root for a "
          "committed model). Empty: --model predicted the reports.");
ABSL_FLAG(int, ps_servers, 2, "K of ps-dedicated the reports ran (validate --ps_servers).");
ABSL_FLAG(std::string, queue, "50ms",
          "The links' queue of conditions whose names give none (validate --queue, the cluster's default).");
ABSL_FLAG(std::string, link_burst, "10ms", "The links' tbf burst the reports ran (validate --link_burst).");
ABSL_FLAG(
    bool, fit_onset, true,
    "Fit the onset R0, the burst ratio from which the port drops (a grid from 1 to 3; kept only where a "
    "bootstrap gives it a standard error of at most 20 % of its value). --nofit_onset: R0 = 1.");

namespace psring::bench::model {
namespace {

// How the model file's note names the term (the note's last part).
constexpr char kNoteTerm[] = "incast term c = ";

std::string ErrorLine(const char* what, const std::vector<double>& errors) {
  absl::StatusOr<ErrorSummary> s = SummarizeErrors(errors);
  if (!s.ok()) return absl::StrCat("# ", what, ": none\n");
  return absl::StrFormat("# %s: median |error| %.1f %%, p90 %.1f %%, max %.1f %% over %d runs\n", what,
                         100 * s->median_abs, 100 * s->p90_abs, 100 * s->max_abs, s->count);
}

absl::Status Run() {
  const std::string model_path = FromWhereTyped(absl::GetFlag(FLAGS_model));
  const std::string out_path = FromWhereTyped(absl::GetFlag(FLAGS_out));
  if (model_path.empty() || out_path.empty() || absl::GetFlag(FLAGS_reports).empty()) {
    return absl::InvalidArgumentError("--model, --reports and --out are required (see --help)");
  }
  ASSIGN_OR_RETURN(proto::CostModelFile model, ReadModelFile(model_path));
  ReportDefaults defaults;
  defaults.ps_servers = absl::GetFlag(FLAGS_ps_servers);
  if (defaults.ps_servers < 1) return absl::InvalidArgumentError("--ps_servers must be >= 1");
  absl::StatusOr<double> queue = ParseQueue(absl::GetFlag(FLAGS_queue));
  if (!queue.ok()) return absl::InvalidArgumentError(absl::StrCat("--queue: ", queue.status().message()));
  defaults.queue_s = *queue;
  absl::StatusOr<double> burst = ParseLinkBurst(absl::GetFlag(FLAGS_link_burst));
  if (!burst.ok())
    return absl::InvalidArgumentError(absl::StrCat("--link_burst: ", burst.status().message()));
  defaults.burst_s = *burst;

  std::optional<proto::CostModelFile> reports_model;
  const std::string reports_model_name = absl::GetFlag(FLAGS_reports_model);
  if (!reports_model_name.empty()) {
    ASSIGN_OR_RETURN(reports_model, ReadModelFile(FromWhereTyped(reports_model_name)));
  }
  std::vector<IncastPoint> points;
  std::vector<std::string> names;
  for (const std::string& report : absl::GetFlag(FLAGS_reports)) {
    ASSIGN_OR_RETURN(const std::vector<ReportRow> rows, ReadValidationReport(FromWhereTyped(report), report));
    ASSIGN_OR_RETURN(std::vector<IncastPoint> more,
                     IncastPointsOf(model, rows, defaults, reports_model ? &*reports_model : nullptr));
    std::cout << absl::StrFormat("# %s: %d rows, %d points (usable PS runs with R > 1)\n", report,
                                 rows.size(), more.size());
    points.insert(points.end(), more.begin(), more.end());
    names.push_back(report);
  }
  IncastFitOptions options;
  options.fit_onset = absl::GetFlag(FLAGS_fit_onset);
  IncastFitReport fit;
  ASSIGN_OR_RETURN(proto::IncastCost incast, FitIncast(points, options, &fit));
  for (const std::string& n : names) incast.add_fitted_on(n);
  if (reports_model) {
    incast.set_reports_model(reports_model_name);
    std::cout << absl::StrFormat(
        "# the reports were predicted by the model of %s (%s): the excess is over this model's lossless "
        "terms (%s)\n",
        reports_model->date(), reports_model_name, model.date());
  }

  const double c = incast.round_trips_per_cut().value();
  const double onset = incast.has_onset_ratio() ? incast.onset_ratio().value() : 1;
  std::cout << absl::StrFormat("# %-38s %-13s %6s %8s %9s %9s %9s %9s\n", "condition", "exchange", "R",
                               "rtt_ms", "lossless", "meas_s", "excess_s", "term_s");
  std::vector<double> before, after;
  for (const IncastPoint& p : points) {
    const double lossless = p.lossless_s;
    std::cout << absl::StrFormat("  %-38s %-13s %6.2f %8.1f %9.3f %9.3f %+9.3f %9.3f\n", p.row.condition,
                                 TopologyName(p.row.topology), p.ratio, 1e3 * p.round_trip_s, lossless,
                                 p.row.measured_s, p.excess_s, c * IncastTermAt(p, onset));
    before.push_back(RelativeError(lossless, p.row.measured_s));
    after.push_back(RelativeError(lossless + c * IncastTermAt(p, onset), p.row.measured_s));
  }
  if (!options.fit_onset) {
    std::cout
        << "# onset: not fitted (--nofit_onset): the term from a burst over the port's buffer (R0 = 1)\n";
  } else if (fit.onset_identified) {
    std::cout << absl::StrFormat(
        "# onset: R0 = %.2f +- %.2f (bootstrap 90 %%: %.2f-%.2f): the port drops from a burst %.2f times its "
        "buffer\n",
        onset, fit.onset_std_error, fit.onset_low, fit.onset_high, onset);
  } else {
    std::cout << absl::StrFormat(
        "# onset: R0 = %.2f +- %.2f is not identified by these runs (standard error over %.0f %% of it): "
        "dropped, the term from a burst over the port's buffer (R0 = 1)\n",
        fit.onset_fitted, fit.onset_std_error, 100 * kIdentifiedRelativeError);
  }
  std::cout << absl::StrFormat(
      "# incast term: c = %.3f +- %.3f round trips per window cut (beta %.2f) from R0 = %.2f, the excess's "
      "scatter around it %.0f %% of the term, over %d runs with round trips of %.0f-%.0f ms\n",
      c, incast.round_trips_per_cut().std_error(), incast.multiplicative_decrease(), onset,
      100 * incast.residual_rel_sd(), incast.runs(), 1e3 * incast.min_round_trip_s(),
      1e3 * incast.max_round_trip_s());
  std::cout << ErrorLine("step time of these runs, lossless model (in sample)", before)
            << ErrorLine("step time of these runs, with the term (in sample; a held-out plan judges it)",
                         after);

  *model.mutable_incast() = incast;
  // An earlier term's words in the note go with it.
  std::string note = model.note();
  if (const size_t at = note.find(kNoteTerm); at != std::string::npos) {
    note.erase(at >= 2 && note.compare(at - 2, 2, "; ") == 0 ? at - 2 : at);
  }
  model.set_note(absl::StrCat(
      note, note.empty() ? "" : "; ",
      absl::StrFormat("%s%.3f from R0 = %.2f fitted on %d held-out runs (%s)%s", kNoteTerm, c, onset,
                      incast.runs(), absl::StrJoin(names, ", "),
                      reports_model
                          ? absl::StrCat(", which the model of ", reports_model->date(), " predicted (",
                                         reports_model_name, "), over this file's lossless terms")
                          : "")));
  RETURN_IF_ERROR(WriteModelFile(out_path, model));
  std::cout << "# wrote " << out_path << "\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace psring::bench::model

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Fits the cost model's incast term (the synchronous PS's loss at a server port its streams' window "
      "burst overflows) on validation reports of held-out runs with shallow queues, and writes the model "
      "file with it.\n"
      "  bazel run //bench:fit_incast -- --model=bench/results/committed_model.json "
      "--reports=report1.txt,report2.txt --out=/tmp/model.json",
      {"bench/"});
  return psring::RunMain(argc, argv, "fit_incast",
                         [](const std::vector<std::string>&) { return psring::bench::model::Run(); });
}
