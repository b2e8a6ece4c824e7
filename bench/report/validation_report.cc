// Held-out validation's report and scatter plot (validation_report.h).
#include "bench/report/validation_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/model/uncertainty.h"
#include "bench/model/validate.h"
#include "bench/report/plot.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace psring::bench {
namespace {

std::string FormatSummary(const std::string& what, const model::ErrorSummary& s) {
  if (s.count == 0) return absl::StrFormat("# %s: no usable run\n", what);
  return absl::StrFormat("# %s: median |error| %.1f %%, p90 %.1f %%, max %.1f %% over %d runs\n", what,
                         100 * s.median_abs, 100 * s.p90_abs, 100 * s.max_abs, s.count);
}

// "; inside the calibrated coverage 17 of 18 (94 %), beyond it 3 of 7 (43 %)" when some usable runs lie
// beyond the coverage (their intervals carry the scatter of the runs inside it), else "".
std::string IntervalSplit(const ValidationSummary& s) {
  if (s.interval_rows_beyond == 0) return "";
  const int rows_inside = s.interval_rows - s.interval_rows_beyond;
  const int inside = s.interval_inside - s.interval_inside_beyond;
  std::string out = "; inside the calibrated coverage ";
  if (rows_inside > 0) {
    absl::StrAppendFormat(&out, "%d of %d (%.0f %%)", inside, rows_inside, 100.0 * inside / rows_inside);
  } else {
    out += "none";
  }
  absl::StrAppendFormat(&out, ", beyond it %d of %d (%.0f %%)", s.interval_inside_beyond,
                        s.interval_rows_beyond, 100.0 * s.interval_inside_beyond / s.interval_rows_beyond);
  return out;
}

// "INCAST x2.4" after `separator` where the prediction marks the row (ValidationRow::incast_marked), with the
// loss's cost the prediction includes ("INCAST x2.4 +0.412 s") where the model has the term, else "".
std::string IncastNote(const ValidationRow& row, const char* separator) {
  if (!row.incast_marked()) return "";
  return row.incast_s > 0 ? absl::StrFormat("%sINCAST x%.1f +%.3f s", separator, row.incast, row.incast_s)
                          : absl::StrFormat("%sINCAST x%.1f", separator, row.incast);
}

}  // namespace

std::string FormatPrediction(const std::vector<ValidationRow>& rows) {
  if (rows.empty()) return "";
  std::vector<std::string> parts;
  std::vector<model::PredictionInterval> intervals;
  size_t fastest = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    parts.push_back(absl::StrFormat("%s %.3f s [%.3f, %.3f] (%s%s)", ExchangeName(rows[i].exchange),
                                    rows[i].predicted_step_s, rows[i].predicted_lo_s, rows[i].predicted_hi_s,
                                    rows[i].bound, IncastNote(rows[i], ", ")));
    intervals.push_back({rows[i].predicted_step_s, rows[i].predicted_lo_s, rows[i].predicted_hi_s, 0, 0});
    if (rows[i].predicted_step_s < rows[fastest].predicted_step_s) fastest = i;
  }
  // The rule projections and ScoreWinners use: a winner only where its interval clears every other's.
  const bool clear = model::ClearWinner(intervals) == static_cast<int>(fastest);
  return absl::StrFormat("# PREDICTED before running %s (%.0f %% intervals): %s; %s\n", rows[0].condition,
                         100 * model::kIntervalLevel, absl::StrJoin(parts, ", "),
                         rows.size() < 2 ? "" : clear ? absl::StrCat("fastest ", ExchangeName(rows[fastest].exchange))
                                       : absl::StrCat("fastest undetermined (point prediction ",
                                                      ExchangeName(rows[fastest].exchange),
                                                      "; the intervals overlap)"));
}

absl::Status WriteValidationFiles(const std::string& dir, const std::string& report,
                                  const std::vector<ValidationRow>& rows, const std::string& subtitle,
                                  std::ostream* out) {
  const std::string txt = dir + "/validation.txt";
  const std::string svg = dir + "/validation.svg";
  RETURN_IF_ERROR(WriteFileAtomically(svg, ValidationScatterSvg(rows, subtitle)));
  RETURN_IF_ERROR(WriteFileAtomically(txt, report));
  *out << "# wrote " << txt << ", " << svg << "\n";
  return absl::OkStatus();
}

std::string FormatHeldOutChecks(const ValidationSummary& s) {
  std::string out;
  if (s.winners.counted == 0) {
    absl::StrAppendFormat(&out,
                          "# info held-out winner: no condition outside the tie band %s (%d ties, %d unjudged: a "
                          "printed or measured winner excluded, %d undetermined: the predicted intervals overlap): "
                          "nothing to judge\n",
                          s.band.Describe(), s.winners.ties, s.winners.unjudged, s.winners.undetermined);
  } else {
    absl::StrAppendFormat(&out,
                          "# check held-out winner: %d of %d conditions outside the tie band %s named right (judged "
                          "ones; %d unjudged: a printed or measured winner excluded; %d undetermined: the "
                          "predicted intervals overlap): %s\n",
                          s.winners.correct, s.winners.counted, s.band.Describe(), s.winners.unjudged,
                          s.winners.undetermined, s.winners.correct == s.winners.counted ? "PASS" : "FAIL");
  }
  if (s.interval_rows > 0) {
    absl::StrAppendFormat(
        &out, "# info held-out %.0f %% prediction intervals: %d of %d usable runs inside (%.0f %%)%s\n",
        100 * model::kIntervalLevel, s.interval_inside, s.interval_rows,
        100.0 * s.interval_inside / s.interval_rows, IntervalSplit(s));
  }
  // Compared as printed: an error of exactly the target (10.0 % against 10 %) meets it, whatever the last bit.
  const auto met = [](double error, double target) { return error <= target + 1e-9 ? "met" : "missed"; };
  if (s.step.count > 0) {
    absl::StrAppendFormat(&out,
                          "# info held-out step time: |error| median %.1f %% (target %.0f %%: %s), p90 %.1f %% "
                          "(target %.0f %%: %s) over %d runs\n",
                          100 * s.step.median_abs, 100 * kTargetStepMedian, met(s.step.median_abs, kTargetStepMedian),
                          100 * s.step.p90_abs, 100 * kTargetStepP90, met(s.step.p90_abs, kTargetStepP90),
                          s.step.count);
  }
  if (s.exposed.count > 0) {
    absl::StrAppendFormat(&out,
                          "# info held-out exposed exchange time: |error| median %.1f %% (target %.0f %%: %s) over "
                          "%d runs\n",
                          100 * s.exposed.median_abs, 100 * kTargetExposedMedian,
                          met(s.exposed.median_abs, kTargetExposedMedian), s.exposed.count);
  }
  if (s.emulator_bound > 0 || s.failed > 0 || s.out_of_time > 0) {
    absl::StrAppendFormat(
        &out, "# info held-out runs left out: %d EMULATOR-BOUND, %d failed%s (of %d)%s\n", s.emulator_bound,
        s.failed, s.out_of_time > 0 ? absl::StrFormat(", %d not run (time limit)", s.out_of_time) : "",
        s.rows,
        s.step_all.count > s.step.count
            ? absl::StrFormat("; over every measured run, excluded ones included: median "
                              "|error| %.1f %%, p90 %.1f %% over %d runs",
                              100 * s.step_all.median_abs, 100 * s.step_all.p90_abs, s.step_all.count)
            : "");
  }
  return out;
}

std::string FormatValidationReport(const Validation& v) {
  const ValidationSummary& s = v.summary;
  std::string out = absl::StrFormat(
      "# VALIDATION on held-out conditions (model of %s, %s, frozen; predicted before each run): %d runs, %d "
      "usable, %d EMULATOR-BOUND (excluded), %d failed (excluded)%s\n",
      v.model_host, v.model_date, s.rows, s.usable, s.emulator_bound, s.failed,
      s.out_of_time > 0
          ? absl::StrFormat(", %d not run (time limit: counted in neither, their conditions not scored)",
                            s.out_of_time)
          : "");
  if (!v.hosts_tcp.empty()) {
    if (v.model_hosts_tcp.empty() || v.model_hosts_tcp == v.hosts_tcp) {
      absl::StrAppend(&out, "# the hosts' TCP: ", v.hosts_tcp,
                      v.model_hosts_tcp.empty() ? " (the model file does not say which it was fitted with)"
                                                : " (as the model's calibration)",
                      "\n");
    } else {
      absl::StrAppend(&out, "# WARNING: the hosts ran TCP ", v.hosts_tcp, ", the model was fitted with ",
                      v.model_hosts_tcp, ": its emulated-link terms do not hold for these runs\n");
    }
  }
  absl::StrAppendFormat(&out, "# %-38s %-13s %9s %-19s %9s %7s %9s %9s %7s  %-8s %s\n", "condition", "exchange",
                        "pred_s", absl::StrFormat("%.0f%% interval", 100 * model::kIntervalLevel), "meas_s", "err",
                        "pred_exp", "meas_exp", "err", "bound", "note");
  for (const ValidationRow& r : v.rows) {
    const bool measured = r.measured_step_s > 0;
    const std::string step_error =
        measured
            ? absl::StrFormat("%+.1f%%", 100 * model::RelativeError(r.predicted_step_s, r.measured_step_s))
            : "-";
    std::string exposed_error = "-";
    if (r.exposed_comparable()) {
      exposed_error =
          absl::StrFormat("%+.1f%%", 100 * model::RelativeError(r.predicted_exposed_s, r.measured_exposed_s));
    } else if (r.usable()) {
      exposed_error = "hidden";
    }
    std::string note = r.emulator_bound ? absl::StrCat("EMULATOR-BOUND (", r.note, ")") : r.note;
    if (note.empty()) note = r.remark;
    if (r.incast_marked()) note = note.empty() ? IncastNote(r, "") : absl::StrCat(note, IncastNote(r, "; "));
    if (r.usable() && r.predicted_hi_s > 0 &&
        (r.measured_step_s < r.predicted_lo_s || r.measured_step_s > r.predicted_hi_s)) {
      note = note.empty() ? "outside interval" : note + "; outside interval";
    }
    absl::StrAppendFormat(&out, "  %-38s %-13s %9.3f %-19s %9s %7s %9.3f %9s %7s  %-8s %s\n", r.condition,
                          ExchangeName(r.exchange), r.predicted_step_s,
                          absl::StrFormat("[%.3f, %.3f]", r.predicted_lo_s, r.predicted_hi_s),
                          measured ? absl::StrFormat("%.3f", r.measured_step_s) : "-", step_error,
                          r.predicted_exposed_s,
                          r.measured_exposed_s >= 0 ? absl::StrFormat("%.3f", r.measured_exposed_s) : "-",
                          exposed_error, r.bound, note);
  }
  absl::StrAppend(&out, FormatSummary("step time", s.step));
  if (s.step_lossy.count > 0) {
    // Which of the lossy runs the model costs: its incast term's, where it has one and marked the run.
    const std::string loss = s.lossy_costed == 0 ? std::string("not in the model")
                             : s.lossy_costed == s.step_lossy.count
                                 ? std::string("the model's incast term in each")
                                 : absl::StrFormat("the model's incast term in %d of them", s.lossy_costed);
    absl::StrAppend(&out, FormatSummary(absl::StrCat("step time, usable runs whose links dropped >= 0.1 % of "
                                                     "their packets (loss: ",
                                                     loss, ")"),
                                        s.step_lossy));
    absl::StrAppend(&out, FormatSummary("step time, the other usable runs", s.step_lossless));
  }
  if (s.step_box_waited.count > 0) {
    absl::StrAppend(
        &out,
        FormatSummary(absl::StrFormat("step time, usable runs whose busiest host waited for a core >= %.0f "
                                      "%% of the exchange time (kept: their links carried what the "
                                      "network allows; the box may still stretch each window's round)",
                                      100 * ValidationRow::kBoxWaitShare),
                      s.step_box_waited));
    absl::StrAppend(&out, FormatSummary("step time, usable runs whose hosts waited less", s.step_box_quiet));
  }
  if (s.incast_marked + s.incast_unmarked > 0) {
    absl::StrAppendFormat(
        &out,
        "# incast mark (before the runs: a PS's window burst into a server's port over its "
        "buffer > %.0f): %d of %d marked usable PS runs dropped >= 0.1 %% of their packets, "
        "%d of %d unmarked ones\n",
        model::kIncastMarkRatio, s.incast_marked_lossy, s.incast_marked, s.incast_unmarked_lossy,
        s.incast_unmarked);
    absl::StrAppend(&out, FormatSummary("step time, usable PS runs marked INCAST", s.step_incast_marked));
    absl::StrAppend(&out, FormatSummary("step time, usable PS runs not marked", s.step_incast_unmarked));
  }
  if (s.step_incast_costed.count > 0) {
    absl::StrAppend(&out, FormatSummary("step time, usable runs whose prediction has an incast cost",
                                        s.step_incast_costed));
    absl::StrAppend(&out,
                    FormatSummary("step time, the same runs without the incast term (the lossless model)",
                                  s.step_incast_costed_lossless));
    absl::StrAppendFormat(&out, "# %.0f %% intervals of those runs: %d of %d hold the measured step\n",
                          100 * model::kIntervalLevel, s.incast_costed_interval_inside,
                          s.incast_costed_interval_rows);
  }
  if (s.step_all.count > s.step.count) {
    absl::StrAppend(&out, FormatSummary("step time over every measured run, excluded ones included", s.step_all));
  }
  absl::StrAppend(
      &out, FormatSummary(absl::StrFormat("exposed exchange time (runs where it is >= %.0f %% of the step)",
                                          100 * ValidationRow::kMinExposedShare)
                              .c_str(),
                          s.exposed));
  absl::StrAppend(&out, "# tie band: ", s.band.Describe(), "\n");
  for (const model::WinnerVerdict& w : s.winners.verdicts) {
    if (w.undetermined) {
      absl::StrAppendFormat(&out, "#   %-38s measured %-13s, predicted UNDETERMINED (%s; point prediction %s)\n",
                            w.condition, w.measured_winner, w.unjudged_reason, w.predicted_winner);
      continue;
    }
    if (!w.judged) {
      absl::StrAppendFormat(&out, "#   %-38s predicted %-13s UNJUDGED: %s\n", w.condition,
                            w.winner_named ? w.predicted_winner : std::string("UNDETERMINED"),
                            w.unjudged_reason);
      continue;
    }
    absl::StrAppendFormat(&out, "#   %-38s measured %-13s by %5.1f %%, predicted %-13s %s\n", w.condition,
                          w.measured_winner, 100 * w.measured_margin, w.predicted_winner,
                          !w.counted  ? "tie (within the band)"
                          : w.correct ? "right"
                                      : "WRONG");
  }
  if (s.winners.counted == 0) {
    absl::StrAppendFormat(&out,
                          "# winner accuracy: no judged condition outside the tie band (%d ties, %d unjudged, %d "
                          "undetermined)\n",
                          s.winners.ties, s.winners.unjudged, s.winners.undetermined);
  } else {
    absl::StrAppendFormat(
        &out,
        "# winner accuracy: %d of %d = %.0f %% (judged conditions outside the tie band; %d ties; %d unjudged: a "
        "printed or measured winner excluded; %d undetermined: intervals overlap, the model named no winner)\n",
        s.winners.correct, s.winners.counted, 100 * s.winners.accuracy, s.winners.ties, s.winners.unjudged,
        s.winners.undetermined);
  }
  if (s.winners.undetermined > 0) {
    absl::StrAppendFormat(&out, "# undetermined conditions: the point prediction named the measured winner in %d of %d\n",
                          s.winners.undetermined_point_right, s.winners.undetermined);
  }
  if (s.interval_rows > 0) {
    absl::StrAppendFormat(&out, "# %.0f %% prediction intervals: %d of %d usable runs inside (%.0f %%)%s\n",
                          100 * model::kIntervalLevel, s.interval_inside, s.interval_rows,
                          100.0 * s.interval_inside / s.interval_rows, IntervalSplit(s));
  }
  if (v.wall_s > 0) absl::StrAppendFormat(&out, "# validation ran %.0f s\n", v.wall_s);
  return out;
}

std::string ValidationScatterSvg(const std::vector<ValidationRow>& rows, const std::string& subtitle) {
  Figure figure;
  figure.title = "Cost model on held-out runs: predicted vs measured";
  figure.subtitle = subtitle;
  for (bool exposed : {false, true}) {
    Panel& panel = figure.panels.emplace_back();
    panel.title = exposed ? "exposed exchange time" : "step time";
    panel.x_label = "predicted (s)";
    panel.y_label = "measured (s)";
    panel.x_scale = Scale::kLog10;
    panel.y_scale = Scale::kLog10;
    double lo = INFINITY, hi = 0;
    const std::vector<Exchange> exchanges = AllExchanges();
    for (size_t i = 0; i < exchanges.size(); ++i) {
      Series series{ExchangeName(exchanges[i]), PaletteColor(static_cast<int>(i)), {}, Style::kMarkers};
      for (const ValidationRow& r : rows) {
        if (r.exchange != exchanges[i] || !(exposed ? r.exposed_comparable() : r.usable())) continue;
        const double p = exposed ? r.predicted_exposed_s : r.predicted_step_s;
        const double m = exposed ? r.measured_exposed_s : r.measured_step_s;
        if (!(p > 0 && m > 0)) continue;
        series.points.push_back({p, m});
        lo = std::min({lo, p, m});
        hi = std::max({hi, p, m});
      }
      panel.series.push_back(std::move(series));
    }
    if (hi > 0)
      panel.series.push_back({"measured = predicted", "#888888", {{lo, lo}, {hi, hi}}, Style::kDashedLine});
  }
  return RenderSvg(figure);
}

}  // namespace psring::bench
