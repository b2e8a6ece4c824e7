// The time-to-accuracy report: a plain-text table in nccl-tests' manner (comment lines start with '#', one row
// per cell: the median of its runs with the min .. max spread), the runs and their curves as JSON and CSV, and
// an SVG of held-out test accuracy against wall time (one panel per N and straggler factor, one line per
// exchange: the cell's median run).
//
//   #  exchange     N  factor  reached   time_s  [   min ..    max]  steps  [ min .. max]   s/step  final_acc  best_acc  straggler
//      ring         4       1      3/3    12.31  [  11.90 ..  12.80]    350  [ 350 .. 350]  0.03510     85.91%    86.10%  -
//      ps-async4    8       4      0/3    never  [      - ..      -]      -  [   - ..   -]  0.04210     83.02%    84.10%  named 3/3
//
// time_s and steps are over the runs that reached the target ("reached" of the successful runs); a cell none
// of whose runs reached it prints "never" and its best accuracy, never a time. best_acc: the best held-out
// evaluation; final_acc: the full test set after the last step. straggler: how many runs' arrival attribution
// (bench/core/attribution.h) named the injected slow rank.
//
// Thread-safety: pure functions apart from WriteReportFiles.
#ifndef PSRING_BENCH_TTA_REPORT_H_
#define PSRING_BENCH_TTA_REPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/tta/grid.h"

namespace psring::bench::tta {

// The '#' lines that say what was measured (target, subset, evaluation interval, seeds, straggler rule), then
// `setting` (e.g. the cluster) when not empty.
std::string ReportHeader(const TtaOptions& options, const std::string& setting);

// The table of the file comment, with its footer (failed runs, cells that never reached the target).
std::string FormatTable(const std::vector<TtaCell>& cells, double target);

// {"target":..,"cells":[...],"runs":[{...,"curve":[{"step":..,"wall_s":..,"accuracy":..}]}]}
std::string ToJson(const TtaOptions& options, const std::vector<TtaRun>& runs, const std::vector<TtaCell>& cells);

// One line per evaluation: exchange,nodes,factor,rep,step,wall_s,accuracy (with a header line).
std::string CurvesCsv(const std::vector<TtaRun>& runs);

// The SVG of the file comment; the target as a dashed line in every panel.
std::string RenderCurves(const std::vector<TtaRun>& runs, const std::vector<TtaCell>& cells, double target,
                         const std::string& title);

// Writes <stem>.txt (header + table), <stem>.json, <stem>.csv and <stem>.svg, each atomically, creating the
// folder. Errors name the file.
absl::Status WriteReportFiles(const std::string& stem, const TtaOptions& options, const std::string& setting,
                              const std::vector<TtaRun>& runs, const std::vector<TtaCell>& cells);

}  // namespace psring::bench::tta

#endif  // PSRING_BENCH_TTA_REPORT_H_
