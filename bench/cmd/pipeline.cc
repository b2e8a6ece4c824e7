#include "bench/cmd/pipeline.h"

#include <algorithm>
#include <iostream>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/harness/sweep.h"
#include "bench/model/link_share.h"
#include "bench/model/model_file.h"
#include "bench/model/sweep_model.h"
#include "bench/report/scaling_report.h"
#include "common/read_file.h"
#include "common/status_macros.h"

namespace psring::bench {
namespace {

// Prints the report and the verdict, writes the files; non-OK when a run failed or had wrong elements.
absl::Status Report(const ScalingResult& result, const std::string& out_dir) {
  PrintReport(result, std::cout);
  PrintVerdict(result, std::cout);
  std::vector<std::string> written;
  RETURN_IF_ERROR(WriteOutputs(result, out_dir, &written));
  for (const auto& file : written) std::cout << "# wrote " << file << "\n";
  std::cout << std::flush;
  int failed = 0;
  int64_t wrong = 0;
  for (const auto& r : result.records) {
    failed += r.ok() ? 0 : 1;
    wrong += r.wrong;
  }
  if (failed > 0 || wrong > 0) {
    return absl::InternalError(absl::StrCat(failed, " of ", result.records.size(), " runs failed and ", wrong,
                                            " wrong elements; see the report above"));
  }
  return absl::OkStatus();
}

// What was run is what the CSV holds.
void OptionsFromRecords(ScalingOptions* options, const std::vector<RunRecord>& records) {
  std::set<Exchange> exchanges;
  std::set<int> nodes;
  std::set<size_t> sizes;
  for (const RunRecord& r : records) {
    exchanges.insert(r.exchange);
    nodes.insert(r.nodes);
    sizes.insert(r.bytes);
  }
  options->exchanges.clear();
  for (Exchange e : AllExchanges()) {
    if (exchanges.count(e)) options->exchanges.push_back(e);
  }
  options->nodes.assign(nodes.begin(), nodes.end());
  options->model_bytes.assign(sizes.begin(), sizes.end());
  std::set<double> bucket_mbs;
  options->workloads.clear();
  for (const RunRecord& r : records) {
    if (r.bucket_mb >= 0) bucket_mbs.insert(r.bucket_mb);
    if (!r.workload.empty() && std::find(options->workloads.begin(), options->workloads.end(), r.workload) ==
                                   options->workloads.end()) {
      options->workloads.push_back(r.workload);
    }
  }
  options->bucket_mbs.assign(bucket_mbs.begin(), bucket_mbs.end());
  if (!options->workloads.empty()) options->mode = "replay";
  // A sweep run with --ps_chunks=bdp or capped, or with transport flags in --worker_args/--server_args, says
  // so in its rows: its re-rendered report marks the model as it did.
  const auto restore = [](const std::string& joined, std::vector<std::string>* args) {
    if (args->empty()) *args = absl::StrSplit(joined, ' ', absl::SkipEmpty());
  };
  for (const RunRecord& r : records) {
    if (r.ps_chunk_bytes > 0 && options->ps_chunks != PsChunks::kCapped) {
      options->ps_chunks =
          r.ps_chunk_rule == PsChunksName(PsChunks::kCapped) ? PsChunks::kCapped : PsChunks::kBdp;
    }
    if (r.source != "measured") continue;
    restore(r.worker_args, &options->worker_args);
    restore(r.server_args, &options->server_args);
  }
}

}  // namespace

absl::Status RunAndReport(const ScalingOptions& options, const std::string& out_dir) {
  ScalingOptions o = options;
  if (!o.model_path.empty() && !o.network_link_share) {
    ASSIGN_OR_RETURN(const proto::CostModelFile model, model::ReadModelFile(o.model_path));
    o.network_link_share = model::NetworkLinkShareOf(model, o.ps_servers);
  }
  ASSIGN_OR_RETURN(SweepResult sweep, RunScaling(o, &std::cerr));
  ASSIGN_OR_RETURN(const ScalingResult result, AnalyzeSweep(std::move(sweep)));
  return Report(result, out_dir);
}

absl::Status ReportFromCsv(const ScalingOptions& options, const std::string& csv_path, const std::string& out_dir) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadFileToString(csv_path, absl::StrCat("cannot read ", csv_path,
                                                           ": pass a scaling.csv written by a run")));
  SweepResult result;
  result.options = options;
  ASSIGN_OR_RETURN(result.records, RecordsFromCsv(text));
  OptionsFromRecords(&result.options, result.records);
  const ClusterOptions& cluster = options.cluster;
  result.emulated = !cluster.force_loopback;
  if (cluster.force_loopback) result.fallback_reason = "re-rendered with --loopback";
  if (result.emulated && !cluster.link.empty()) {
    ASSIGN_OR_RETURN(const double bits, ParseLinkRate(cluster.link));
    result.link_bytes_per_second = bits / 8;
  }
  ASSIGN_OR_RETURN(const ScalingResult analyzed, AnalyzeSweep(std::move(result)));
  return Report(analyzed, out_dir);
}

}  // namespace psring::bench
