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

}  // namespace psring::bench

#endif  // PSRING_BENCH_REPORT_CALIBRATION_REPORT_H_
