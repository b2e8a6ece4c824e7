// The model's answer for one workload on a target cluster, as the user reads it: the projection table at one
// (link rate, latency, N) with the bound that binds each exchange, and the two crossover maps (link rate x
// latency at N; N x link rate at one latency) as SVG files. Shared by //bench/model:crossover_maps and the
// main job (//bench:compare). A model, never a measurement: every output says so and names the model file.
//
//   CrossoverReportOptions o;
//   o.workload = "resnet50"; o.bucket_mb = 25; o.target.nodes = 8; o.out_dir = "/tmp/maps";
//   ASSIGN_OR_RETURN(CrossoverReport r, WriteCrossoverReport(model, o, measured_points));
//   std::cout << r.text;   // projection table + "# crossover maps ..." lines
//
// Blocking: writes two files. Thread-safety: no shared state.
#ifndef PSRING_BENCH_MODEL_CROSSOVER_REPORT_H_
#define PSRING_BENCH_MODEL_CROSSOVER_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/report/crossover_svg.h"

namespace psring::bench::model {

struct CrossoverReportOptions {
  std::string workload = "resnet50";  // a preset (resnet50, vgg16, bert_base, mlp) or a profile path
  double bucket_mb = 25;              // real MiB; 0: flat
  double first_bucket_mb = 1;
  // The projection's cluster (nodes, servers, link rate, latency, cpu_speedup); the link x latency map is
  // drawn at its N, the N x link map at map_latency_s.
  Conditions target;
  double map_latency_s = 5e-6;
  std::string out_dir = ".";
  // Where the model's CPU ceilings come from when a --cpu_model file replaced them (bench/model/cpu_model.h
  // CpuModelSource: "FILE (host, date)"); "": the calibration host's.
  std::string cpu_source;
};

struct CrossoverReport {
  std::string text;                 // the projection table and the maps' paths, lines starting with "# "
  std::string link_latency_svg;     // <out_dir>/crossover-<workload>-link-latency.svg
  std::string nodes_link_svg;       // <out_dir>/crossover-<workload>-nodes-link.svg
};

// `measured`: points to draw on the link x latency map (those outside its ranges are left out). Errors of
// LoadWorkload, WorkloadStep, Project, the map builders and the file writes.
absl::StatusOr<CrossoverReport> WriteCrossoverReport(const proto::CostModelFile& model,
                                                     const CrossoverReportOptions& options,
                                                     const std::vector<MeasuredPoint>& measured);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_CROSSOVER_REPORT_H_
