// Held-out validation's report (bench/model/held_out.h's rows and summary, bench/PERFORMANCE.md 9.4): the
// prediction line printed before each sweep runs, the per-run table with the statistics, the tie band and the
// winner per condition, the main job's check lines against the targets, and the predicted-vs-measured scatter
// plot.
//
//   *out << FormatPrediction(predicted_rows);                  // before the condition runs
//   std::cout << FormatValidationReport(v) << FormatHeldOutChecks(v.summary);
//   RETURN_IF_ERROR(WriteValidationFiles(dir, FormatValidationReport(v), v.rows, title, &std::cout));
//
// Pure functions except WriteValidationFiles (writes two files); thread-safe.
#ifndef PSRING_BENCH_REPORT_VALIDATION_REPORT_H_
#define PSRING_BENCH_REPORT_VALIDATION_REPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/model/held_out.h"

namespace psring::bench {

// "# PREDICTED before running <condition>: ring 0.412 s (link), ps-1 ..." (one line).
std::string FormatPrediction(const std::vector<ValidationRow>& rows);

// The per-run table (predicted vs measured, step and exposed, error, bound, exclusions), the statistics, the
// tie band and winner per condition. Lines start with "# " except the table rows. Pure.
std::string FormatValidationReport(const Validation& validation);

// Writes <dir>/validation.txt (`report`, FormatValidationReport's) and <dir>/validation.svg
// (ValidationScatterSvg of `rows` under `subtitle`), then "# wrote <txt>, <svg>" on `out`. The writes' errors.
absl::Status WriteValidationFiles(const std::string& dir, const std::string& report,
                                  const std::vector<ValidationRow>& rows, const std::string& subtitle,
                                  std::ostream* out);

// The main job's lines on a held-out summary: "# check held-out winner ...: PASS|FAIL" (every condition
// outside the tie band named right; "info" when none is outside it) and "# info held-out error ..." with the
// targets (kTarget*, bench/model/held_out.h), met or missed (the accuracy of a model is reported, not
// checked: the code is not wrong when the model misses by 12 %, the user is told how far to trust it). Pure.
std::string FormatHeldOutChecks(const ValidationSummary& summary);

// Predicted (x) vs measured (y) step time and exposed exchange time, log-log, one colour per exchange, the
// line y = x. Usable rows only.
std::string ValidationScatterSvg(const std::vector<ValidationRow>& rows, const std::string& subtitle);

}  // namespace psring::bench

#endif  // PSRING_BENCH_REPORT_VALIDATION_REPORT_H_
