// The scaling reports: what a sweep measured and what the model makes of it, printed and drawn. Measure
// first, report after (Google Benchmark's shape): every function here reads a ScalingResult (bench/model/
// sweep_fit.h) and prints, renders or writes; none launches a process or touches a cluster.
//
//   PrintReport(result, std::cout);      // nccl-tests-style tables, the model lines, the acceptance checks
//   PrintVerdict(result, std::cout);     // per N, the fastest exchange and how much slower each other is
//   RETURN_IF_ERROR(WriteOutputs(result, "/tmp/psring-scaling", &files));   // CSV, JSON, SVG
//
// bench/PERFORMANCE.md defines every figure. Thread-safety: pure functions (WriteOutputs writes files).
#ifndef PSRING_BENCH_REPORT_SCALING_REPORT_H_
#define PSRING_BENCH_REPORT_SCALING_REPORT_H_

#include <cstddef>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/model/sweep_model.h"
#include "bench/report/plot.h"

namespace psring::bench {

// The nccl-tests-style tables (one per exchange; measured vs model), the fitted parameters, the model's
// extrapolation (marked as such) and the acceptance checks (scaling_tables.cc).
void PrintReport(const ScalingResult& result, std::ostream& out);

// Per N, the fastest exchange and how much slower each other one is.
void PrintVerdict(const ScalingResult& result, std::ostream& out);

// Replay mode (replay_report.cc): per workload, tables, # MODEL, # PROJECTION, # check and overlap lines.
void PrintReplayReport(const ScalingResult& result, std::ostream& out);
// Per workload and N, the fastest exchange and bucket setting and how much slower the others are.
void PrintReplayVerdict(const ScalingResult& result, std::ostream& out);
// File name -> SVG: scaling-<workload>.svg, projection-<workload>.svg (with a projection target) and
// gantt-<workload>.svg (with timelines).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReplayFigures(const ScalingResult& result);

// scaling.csv: one row per measured run (source=measured) and per model point (source=model) (record_io.cc).
// Its columns, scaling.json's run fields and what RecordsFromCsv reads back come from one column table.
std::string ToCsv(const ScalingResult& result);
// The CSV's header, and the RunReport fields (proto/bench_report.proto) scaling.json's runs are filled from.
std::vector<std::string> CsvColumnNames();
std::vector<std::string> JsonRunFields();
// scaling.json: proto/bench_report.proto's ScalingReport in protobuf's JSON mapping.
absl::StatusOr<std::string> ToJson(const ScalingResult& result);
// The measured runs of a scaling.csv (columns found by name), to re-render a report without re-measuring.
absl::StatusOr<std::vector<RunRecord>> RecordsFromCsv(const std::string& csv);

// Step time vs N and efficiency vs N, measured points and model curves, at S = `bytes` (scaling_figure.cc).
Figure MakeFigure(const ScalingResult& result, size_t bytes);

// Writes scaling.csv, scaling.json and scaling.svg (at the largest S; replay mode: ReplayFigures) into `dir`
// (created if missing); appends the paths to `written`.
absl::Status WriteOutputs(const ScalingResult& result, const std::string& dir, std::vector<std::string>* written);

}  // namespace psring::bench

#endif  // PSRING_BENCH_REPORT_SCALING_REPORT_H_
