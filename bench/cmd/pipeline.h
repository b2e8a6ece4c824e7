// The main jobs' pipeline: the harness measures (bench/harness/sweep.h), the model fits (bench/model/
// sweep_fit.h), the reports print and write (bench/report/scaling_report.h). Only bench/cmd/ joins the three.
//
//   RETURN_IF_ERROR(RunAndReport(options, "/tmp/psring-scaling"));   // //bench:scaling's whole job
//
// Blocking: RunAndReport blocks for the whole sweep (minutes).
#ifndef PSRING_BENCH_CMD_PIPELINE_H_
#define PSRING_BENCH_CMD_PIPELINE_H_

#include <string>

#include "absl/status/status.h"
#include "bench/core/run_record.h"

namespace psring::bench {

// The driver's end: runs the sweep (progress on stderr), prints the report and the verdict on stdout and
// writes the files into `out_dir`. Non-OK when a run failed or a result had wrong elements, so scripts see it.
absl::Status RunAndReport(const ScalingOptions& options, const std::string& out_dir);

// The same report and files from the measured rows of an earlier run's scaling.csv (nothing is launched); the
// options give the mode, link, K and extrapolation the figures are computed with.
absl::Status ReportFromCsv(const ScalingOptions& options, const std::string& csv_path, const std::string& out_dir);

}  // namespace psring::bench

#endif  // PSRING_BENCH_CMD_PIPELINE_H_
