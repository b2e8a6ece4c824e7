// The calibration's report (bench/model/calibration_plan.h's Calibration, bench/PERFORMANCE.md 9.6): one line
// per exchange with each fitted parameter, its standard error and bound, the fit error and the runs; what each
// exchange's runs covered; the dropped runs. Every line starts with "# ".
//
//   ASSIGN_OR_RETURN(Calibration c, RunCalibration(plan, base, info, &std::cerr));   // bench/cmd/calibration.h
//   std::cout << FormatCalibration(c);
//
// Pure; thread-safe.
#ifndef PSRING_BENCH_REPORT_CALIBRATION_REPORT_H_
#define PSRING_BENCH_REPORT_CALIBRATION_REPORT_H_

#include <string>

#include "bench/model/calibration_plan.h"

namespace psring::bench {

// The parameters per exchange (value +- error, at bound, coverage, fit error) and the dropped runs, lines
// starting with "# ". Pure.
std::string FormatCalibration(const Calibration& calibration);

// Each fitted run against the frozen model (calibrate --residuals): exchange, link, latency, N, K, S, the
// measured and predicted collective time, the relative error (predicted - measured) / measured (validation's
// sign: negative where the run was slower than the model) and the bound the model names, one line per run in
// the runs' order, then per exchange the signed errors' median and how many runs the model predicted too fast
// (measured slower), so a bias shows beside the scatter. Lines start with "# ". An exchange of a run missing
// from the file, or a run the model refuses, is named on its line. Pure.
std::string FormatResiduals(const Calibration& calibration);

}  // namespace psring::bench

#endif  // PSRING_BENCH_REPORT_CALIBRATION_REPORT_H_
