#include "bench/report/crossover_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/model/crossover.h"
#include "bench/model/data_path.h"
#include "bench/model/model_file.h"
#include "bench/model/project.h"
#include "bench/model/workload_step.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "trainer/workload.h"

namespace psring::bench::model {

absl::StatusOr<CrossoverReport> WriteCrossoverReport(const proto::CostModelFile& model,
                                                     const CrossoverReportOptions& options,
                                                     const std::vector<MeasuredPoint>& measured) {
  ASSIGN_OR_RETURN(const proto::Workload workload, trainer::LoadWorkload(options.workload));
  ASSIGN_OR_RETURN(const StepShape shape, WorkloadStep(workload, options.bucket_mb, options.first_bucket_mb));
  const std::string what = absl::StrCat(
      workload.name(), options.bucket_mb > 0 ? absl::StrFormat(", %g MiB buckets", options.bucket_mb) : ", flat");
  CrossoverReport report;
  ASSIGN_OR_RETURN(const Projection projection, Project(model, options.target, shape));
  report.text = absl::StrCat("# ", CompareDataPath(model).Describe(), "\n",
                             FormatProjection(model, options.target, projection, what, options.cpu_source));

  const std::string subtitle =
      absl::StrFormat("%s; model calibrated on %s (%s); CPU ceilings %s x %g", what, model.host(), model.date(),
                      options.cpu_source.empty() ? "of the calibration host" : "from " + options.cpu_source,
                      options.target.cpu_speedup);
  ASSIGN_OR_RETURN(const std::vector<double> links, LogSpaced(1e9 / 8, 400e9 / 8, 25));
  ASSIGN_OR_RETURN(const std::vector<double> latencies, LogSpaced(1e-6, 1e-2, 21));
  ASSIGN_OR_RETURN(const CrossoverMap link_latency, LinkLatencyMap(model, shape, options.target, links, latencies));
  std::vector<double> nodes;
  for (int n = 2; n <= 1024; n *= 2) nodes.push_back(n);
  Conditions at_latency = options.target;
  at_latency.latency_s = options.map_latency_s;
  ASSIGN_OR_RETURN(const CrossoverMap nodes_link, NodesLinkMap(model, shape, at_latency, nodes, links));

  report.link_latency_svg = absl::StrCat(options.out_dir, "/crossover-", workload.name(), "-link-latency.svg");
  report.nodes_link_svg = absl::StrCat(options.out_dir, "/crossover-", workload.name(), "-nodes-link.svg");
  RETURN_IF_ERROR(WriteFileAtomically(
      report.link_latency_svg,
      RenderCrossoverSvg(link_latency, absl::StrCat("fastest exchange, N = ", options.target.nodes), subtitle,
                         measured)));
  RETURN_IF_ERROR(WriteFileAtomically(
      report.nodes_link_svg,
      RenderCrossoverSvg(nodes_link, absl::StrCat("fastest exchange, latency ", FormatLatency(at_latency.latency_s)),
                         subtitle, {})));
  absl::StrAppend(&report.text, "# crossover maps (model, not measured): ", report.link_latency_svg, ", ",
                  report.nodes_link_svg, "\n");
  // How much of each map the model can decide at all (its 90 % intervals clear), and how much is extrapolated.
  for (const auto& [name, map] : {std::pair<const char*, const CrossoverMap*>{"link x latency", &link_latency},
                                  {"N x link", &nodes_link}}) {
    int undetermined = 0, extrapolated = 0, incast = 0, round = 0;
    for (const CrossoverCell& cell : map->cells) {
      undetermined += !cell.determined;
      extrapolated += cell.extrapolation > kExtrapolationMarkFactor;
      incast += cell.incast;
      round += cell.round_decides;
    }
    absl::StrAppendFormat(
        &report.text,
        "#   %s map: %d of %d cells UNDETERMINED (the winner's 90 %% interval overlaps another's; "
        "grey), %d EXTRAPOLATED > %.0fx (hatched)%s%s\n",
        name, undetermined, map->cells.size(), extrapolated, kExtrapolationMarkFactor,
        DescribeWindowRound(model).empty()  // a file without the term: nothing for it to decide
            ? ""
            : absl::StrFormat(", %d whose fastest the PS window round decides (dotted: with d = 0 another is "
                              "fastest)",
                              round),
        options.target.port_buffer_bytes > 0
            ? absl::StrFormat(", %d whose fastest (point prediction) is a PS marked INCAST (outlined red)",
                              incast)
            : "");
  }
  return report;
}

}  // namespace psring::bench::model
