#include "bench/tta/report.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/report/plot.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace psring::bench::tta {
namespace {

std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string StatJson(const Stat& s) {
  if (s.count == 0) return "null";
  return absl::StrFormat(R"({"median":%.6g,"min":%.6g,"max":%.6g,"n":%d})", s.median, s.min, s.max, s.count);
}

std::string CellLabel(const Cell& c) { return absl::StrCat(c.variant.name, " N=", c.nodes, " factor ", c.factor); }

}  // namespace

std::string ReportHeader(const TtaOptions& o, const std::string& setting) {
  std::string out = absl::StrFormat(
      "# time to accuracy: MLP with hidden layers %s on %s, batch %d per worker; target %.1f%% test accuracy on the first %d test "
      "images (never trained on), evaluated by rank 0 every %d steps, at most %d steps\n",
      o.base.hidden, o.base.dataset, o.base.batch_size, 100 * o.target, o.eval_samples, o.eval_every, o.max_steps);
  absl::StrAppendFormat(
      &out,
      "# times: from the first step, with the evaluation pauses left out (every rank waits while rank 0 "
      "evaluates); s/step likewise: the slowest rank's mean step (with backup workers the time between step "
      "closes, the (N-B)-th fastest rank's); %d run(s) per cell, --seed=%d in every run (same initial model and data "
      "order)\n",
      o.reps, o.seed);
  out +=
      "# straggler: factor F > 1 makes the last rank's compute F times as long (--straggler=N-1:F, a sleep before "
      "each step); factor 1: none\n";
  out +=
      "# determinism: ring and sync PS runs of a cell train the same model step for step (fixed summation "
      "order), so only their times vary; with backup workers (which pushes are dropped) and async updates "
      "(the order pushes are applied) the model itself depends on timing\n";
  if (!setting.empty()) absl::StrAppend(&out, "# ", setting, "\n");
  return out;
}

std::string FormatTable(const std::vector<TtaCell>& cells, double target) {
  std::string out = absl::StrFormat("#%-12s %3s %7s %8s %8s  [%7s .. %7s] %6s  [%5s .. %5s] %8s %10s %9s  %s\n",
                                    " exchange", "N", "factor", "reached", "time_s", "min", "max", "steps", "min",
                                    "max", "s/step", "final_acc", "best_acc", "straggler");
  std::vector<std::string> never;
  int failed = 0;
  for (const TtaCell& c : cells) {
    failed += c.failed;
    const bool any = c.reached > 0;
    const std::string straggler =
        c.cell.factor > 1 ? absl::StrFormat("named %d/%d", c.straggler_named, c.runs) : "-";
    absl::StrAppendFormat(&out, " %-12s %3d %7g %5d/%-2d ", c.cell.variant.name, c.cell.nodes, c.cell.factor,
                          c.reached, c.runs);
    if (any) {
      absl::StrAppendFormat(&out, "%8.2f  [%7.2f .. %7.2f] %6.0f  [%5.0f .. %5.0f]", c.wall_to_target_s.median,
                            c.wall_to_target_s.min, c.wall_to_target_s.max, c.steps_to_target.median,
                            c.steps_to_target.min, c.steps_to_target.max);
    } else {
      absl::StrAppendFormat(&out, "%8s  [%7s .. %7s] %6s  [%5s .. %5s]", "never", "-", "-", "-", "-", "-");
    }
    auto percent = [](const Stat& s) { return s.count > 0 ? absl::StrFormat("%.2f%%", 100 * s.median) : "-"; };
    absl::StrAppendFormat(&out, " %8s %10s %9s  %s", c.step_s.count > 0 ? absl::StrFormat("%.5f", c.step_s.median) : "-",
                          percent(c.final_accuracy), percent(c.best_accuracy), straggler);
    if (c.failed > 0) absl::StrAppendFormat(&out, "  (%d failed: %s)", c.failed, c.first_error);
    out += "\n";
    if (c.runs > 0 && c.reached < c.runs) {
      never.push_back(absl::StrFormat("%s (%d/%d, best %.2f%%)", CellLabel(c.cell), c.runs - c.reached, c.runs,
                                      100 * c.best_accuracy.max));
    }
  }
  absl::StrAppendFormat(&out, "# failed runs: %d\n", failed);
  absl::StrAppendFormat(&out, "# runs that never reached %.1f%%: %s\n", 100 * target,
                        never.empty() ? "none" : absl::StrJoin(never, "; "));
  return out;
}

std::string ToJson(const TtaOptions& o, const std::vector<TtaRun>& runs, const std::vector<TtaCell>& cells) {
  std::string out = absl::StrFormat(
      R"({"target":%.6g,"eval_every":%d,"eval_samples":%d,"max_steps":%d,"reps":%d,"seed":%d,"batch_size":%d,)"
      R"("hidden":%s,"dataset":%s,"cells":[)",
      o.target, o.eval_every, o.eval_samples, o.max_steps, o.reps, o.seed, o.base.batch_size, Quoted(o.base.hidden),
      Quoted(o.base.dataset));
  for (size_t i = 0; i < cells.size(); ++i) {
    const TtaCell& c = cells[i];
    absl::StrAppendFormat(
        &out,
        R"(%s{"exchange":%s,"nodes":%d,"factor":%g,"runs":%d,"failed":%d,"reached":%d,"wall_to_target_s":%s,)"
        R"("steps_to_target":%s,"final_accuracy":%s,"best_accuracy":%s,"step_s":%s,"straggler_named":%d,)"
        R"("median_rep":%d})",
        i > 0 ? "," : "", Quoted(c.cell.variant.name), c.cell.nodes, c.cell.factor, c.runs, c.failed, c.reached,
        StatJson(c.wall_to_target_s), StatJson(c.steps_to_target), StatJson(c.final_accuracy),
        StatJson(c.best_accuracy), StatJson(c.step_s), c.straggler_named, c.median_rep);
  }
  out += R"(],"runs":[)";
  for (size_t i = 0; i < runs.size(); ++i) {
    const TtaRun& r = runs[i];
    absl::StrAppendFormat(&out, R"(%s{"exchange":%s,"nodes":%d,"factor":%g,"rep":%d,"error":%s,)", i > 0 ? "," : "",
                          Quoted(r.cell.variant.name), r.cell.nodes, r.cell.factor, r.rep, Quoted(r.error));
    // A run that did not reach the target has no time: null, never a number.
    absl::StrAppendFormat(
        &out,
        R"("reached":%s,"steps_to_target":%s,"wall_to_target_s":%s,"best_accuracy":%.6f,"final_accuracy":%.6f,)"
        R"("steps":%d,"step_s":%.6f,"straggler_rank":%d,"job_s":%.3f,"curve":[)",
        r.reached ? "true" : "false", r.reached ? absl::StrCat(r.steps_to_target) : "null",
        r.reached ? absl::StrFormat("%.6f", r.wall_to_target_s) : "null", r.best_accuracy, r.final_accuracy,
        r.steps, r.step_s, r.straggler_rank, r.job_s);
    for (size_t k = 0; k < r.curve.size(); ++k) {
      absl::StrAppendFormat(&out, R"(%s{"step":%d,"wall_s":%.6f,"accuracy":%.6f})", k > 0 ? "," : "",
                            r.curve[k].step, r.curve[k].wall_s, r.curve[k].accuracy);
    }
    out += "]}";
  }
  return out + "]}\n";
}

std::string CurvesCsv(const std::vector<TtaRun>& runs) {
  std::string out = "exchange,nodes,factor,rep,step,wall_s,accuracy\n";
  for (const TtaRun& r : runs) {
    for (const RunRecord::Evaluation& e : r.curve) {
      absl::StrAppendFormat(&out, "%s,%d,%g,%d,%d,%.6f,%.6f\n", r.cell.variant.name, r.cell.nodes, r.cell.factor,
                            r.rep, e.step, e.wall_s, e.accuracy);
    }
  }
  return out;
}

std::string RenderCurves(const std::vector<TtaRun>& runs, const std::vector<TtaCell>& cells, double target,
                         const std::string& title) {
  Figure figure;
  figure.title = title;
  figure.subtitle = absl::StrFormat(
      "held-out test accuracy against wall time (evaluation pauses left out); each line the median run of its "
      "cell; dashed: the target %.1f%%",
      100 * target);
  figure.panel_width = 380;
  figure.panel_height = 340;
  // Colours by exchange, in the order exchanges first appear.
  std::map<std::string, int> colour;
  for (const TtaCell& c : cells) colour.try_emplace(c.cell.variant.name, static_cast<int>(colour.size()));
  std::map<std::pair<int, double>, size_t> panel_of;
  for (const TtaCell& c : cells) {
    const auto key = std::make_pair(c.cell.nodes, c.cell.factor);
    auto [it, inserted] = panel_of.try_emplace(key, figure.panels.size());
    if (inserted) {
      Panel& panel = figure.panels.emplace_back();
      panel.title = c.cell.factor > 1 ? absl::StrFormat("N = %d, straggler x%g", c.cell.nodes, c.cell.factor)
                                      : absl::StrFormat("N = %d, no straggler", c.cell.nodes);
      panel.x_label = "wall time (s)";
      panel.y_label = "test accuracy (%)";
    }
    Panel& panel = figure.panels[it->second];
    for (const TtaRun& r : runs) {
      if (r.cell.variant.name != c.cell.variant.name || r.cell.nodes != c.cell.nodes ||
          r.cell.factor != c.cell.factor || r.rep != c.median_rep || !r.ok()) {
        continue;
      }
      Series series{c.cell.variant.name, PaletteColor(colour[c.cell.variant.name]), {}, Style::kLine};
      for (const RunRecord::Evaluation& e : r.curve) series.points.emplace_back(e.wall_s, 100 * e.accuracy);
      panel.series.push_back(std::move(series));
    }
  }
  for (Panel& panel : figure.panels) {
    double x_max = 0;
    for (const Series& s : panel.series) {
      for (const auto& p : s.points) x_max = std::max(x_max, p.first);
    }
    panel.series.push_back(
        {absl::StrFormat("target %.1f%%", 100 * target), "#777777", {{0, 100 * target}, {x_max, 100 * target}},
         Style::kDashedLine});
  }
  return RenderSvg(figure);
}

absl::Status WriteReportFiles(const std::string& stem, const TtaOptions& options, const std::string& setting,
                              const std::vector<TtaRun>& runs, const std::vector<TtaCell>& cells) {
  const size_t slash = stem.rfind('/');
  if (slash != std::string::npos && slash > 0) RETURN_IF_ERROR(MakeDirectories(stem.substr(0, slash)));
  RETURN_IF_ERROR(WriteFileAtomically(stem + ".txt",
                                      ReportHeader(options, setting) + FormatTable(cells, options.target)));
  RETURN_IF_ERROR(WriteFileAtomically(stem + ".json", ToJson(options, runs, cells)));
  RETURN_IF_ERROR(WriteFileAtomically(stem + ".csv", CurvesCsv(runs)));
  return WriteFileAtomically(
      stem + ".svg",
      RenderCurves(runs, cells, options.target,
                   absl::StrFormat("Time to %.1f%% test accuracy, MLP on %s", 100 * options.target,
                                   options.base.dataset)));
}

}  // namespace psring::bench::tta
