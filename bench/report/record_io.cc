// The scaling report's files (scaling_report.h): scaling.csv written and read back, scaling.json, and the
// files of one report written to its folder.
#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/report/scaling_report.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "proto/bench_report.pb.h"

namespace psring::bench {

std::string ToCsv(const ScalingResult& result) {
  std::ostringstream csv;
  csv << "source,mode,exchange,nodes,servers,bytes,steps,step_s,compute_s,exchange_s,model_s,model_rel_err,"
         "samples_per_s,algbw_Bps,busbw_Bps,link_bytes_per_step,sent_bytes_per_step,wrong,test_accuracy,error,"
         "workload,bucket_mb,buckets,forward_s,backward_s,optimizer_s,exposed_s,timeline,box_cpu,link_util,"
         "emulator_bound,bound_reason,cpu_stall\n";
  for (const auto& r : result.records) {
    std::string error = r.error.substr(0, r.error.find('\n'));
    std::replace(error.begin(), error.end(), '"', '\'');
    // Replay mode's model is of the whole step (compute and overlap); elsewhere of the exchange.
    const double model = result.options.mode == "replay"
                             ? ReplayModelSeconds(result, r.exchange, r.nodes, r.workload, r.bucket_mb)
                             : RecordModelSeconds(result, r);
    const double measured = result.options.mode == "replay" ? r.step_s : r.exchange_s;
    csv << absl::StrFormat(
        "measured,%s,%s,%d,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.4f,%.6g,%.6g,%.6g,%.6g,%d,%d,%.4f,\"%s\",\"%s\",%g,%d,%.6g,"
        "%.6g,%.6g,%.6g,\"%s\",%.4f,%.4f,%d,\"%s\",%.4f\n",
        result.options.mode, ExchangeName(r.exchange), r.nodes, r.servers, r.bytes, r.steps, r.step_s, r.compute_s,
        r.exchange_s, model, model > 0 && measured > 0 ? (model - measured) / measured : 0, r.samples_per_s, r.algbw,
        r.busbw, r.link_bytes_per_step, r.bytes_sent_per_step, r.wrong, r.test_accuracy, error, r.workload,
        r.bucket_mb, r.buckets, r.forward_s, r.backward_s, r.optimizer_s, r.exposed_s, r.timeline, r.box_cpu,
        r.link_util, r.emulator_bound ? 1 : 0, r.bound_reason, r.cpu_stall);
  }
  for (const ModelPoint& m : Extrapolation(result)) {
    const double algbw = m.seconds > 0 ? m.bytes / m.seconds : 0;
    csv << absl::StrFormat("model,%s,%s,%d,%d,%d,0,,,,%.6g,,,%.6g,%.6g,,,,,,,,,,,,,,,,,,\n", result.options.mode,
                           ExchangeName(m.exchange), m.nodes, m.servers, m.bytes, m.seconds, algbw,
                           algbw * PluginFor(m.exchange).BusFactor(m.nodes));
  }
  return csv.str();
}

namespace {

// Splits one CSV line on commas outside double quotes.
std::vector<std::string> SplitCsvLine(absl::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

// One data row of a scaling.csv, its columns found by name in the header.
class CsvRow {
 public:
  CsvRow(const std::vector<std::string>* header, std::vector<std::string> fields)
      : header_(header), fields_(std::move(fields)) {}

  static int Column(const std::vector<std::string>& header, const std::string& name) {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  }
  // "" when the column is absent.
  std::string Text(const std::string& name) const {
    const int c = Column(*header_, name);
    return c < 0 ? "" : fields_[c];
  }
  // 0 when the column is absent or empty.
  double Number(const std::string& name) const {
    const std::string text = Text(name);
    return text.empty() ? 0.0 : std::strtod(text.c_str(), nullptr);
  }

 private:
  const std::vector<std::string>* header_;
  std::vector<std::string> fields_;
};

absl::StatusOr<RunRecord> RecordFromRow(const CsvRow& row) {
  RunRecord r;
  ASSIGN_OR_RETURN(r.exchange, ParseExchange(row.Text("exchange")));
  r.nodes = static_cast<int>(row.Number("nodes"));
  r.servers = static_cast<int>(row.Number("servers"));
  r.bytes = static_cast<size_t>(row.Number("bytes"));
  r.steps = static_cast<int>(row.Number("steps"));
  r.step_s = row.Number("step_s");
  r.compute_s = row.Number("compute_s");
  r.exchange_s = row.Number("exchange_s");
  r.samples_per_s = row.Number("samples_per_s");
  r.algbw = row.Number("algbw_Bps");
  r.busbw = row.Number("busbw_Bps");
  r.link_bytes_per_step = row.Number("link_bytes_per_step");
  r.bytes_sent_per_step = static_cast<int64_t>(row.Number("sent_bytes_per_step"));
  r.wrong = static_cast<int64_t>(row.Number("wrong"));
  r.test_accuracy = row.Number("test_accuracy");
  r.error = row.Text("error");
  r.workload = row.Text("workload");
  r.bucket_mb = row.Text("bucket_mb").empty() ? -1 : row.Number("bucket_mb");
  r.buckets = static_cast<int>(row.Number("buckets"));
  r.forward_s = row.Number("forward_s");
  r.backward_s = row.Number("backward_s");
  r.optimizer_s = row.Number("optimizer_s");
  r.exposed_s = row.Number("exposed_s");
  r.timeline = row.Text("timeline");
  // Columns added with the saturation probes; older CSVs lack them (unknown, not bound).
  r.box_cpu = row.Text("box_cpu").empty() ? -1 : row.Number("box_cpu");
  r.link_util = row.Text("link_util").empty() ? -1 : row.Number("link_util");
  r.cpu_stall = row.Text("cpu_stall").empty() ? -1 : row.Number("cpu_stall");
  r.emulator_bound = row.Number("emulator_bound") != 0;
  r.bound_reason = row.Text("bound_reason");
  return r;
}

}  // namespace

absl::StatusOr<std::vector<RunRecord>> RecordsFromCsv(const std::string& csv) {
  std::vector<absl::string_view> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  if (lines.empty()) return absl::InvalidArgumentError("empty CSV: pass a scaling.csv written by a run");
  const std::vector<std::string> header = SplitCsvLine(lines[0]);
  for (const char* required : {"source", "exchange", "nodes", "servers", "bytes", "step_s", "exchange_s"}) {
    if (CsvRow::Column(header, required) < 0) {
      return absl::InvalidArgumentError(absl::StrCat("CSV has no column '", required, "': not a scaling.csv"));
    }
  }
  std::vector<RunRecord> records;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> fields = SplitCsvLine(lines[i]);
    if (fields.size() != header.size()) {
      return absl::InvalidArgumentError(absl::StrCat("CSV line ", i + 1, " has ", fields.size(), " fields, not ",
                                                     header.size()));
    }
    const CsvRow row(&header, std::move(fields));
    if (row.Text("source") != "measured") continue;  // the model's rows are recomputed
    ASSIGN_OR_RETURN(RunRecord record, RecordFromRow(row));
    records.push_back(std::move(record));
  }
  return records;
}

namespace {

// JSON has no inf or nan: such a value stays unset and its key is absent (proto/bench_report.proto).
template <typename Message, typename Setter>
void SetFinite(Message* message, Setter setter, double value) {
  if (std::isfinite(value)) (message->*setter)(value);
}

proto::ScalingConfig ConfigMessage(const ScalingOptions& o) {
  proto::ScalingConfig config;
  config.set_mode(o.mode);
  for (int n : o.nodes) config.add_nodes(n);
  for (size_t bytes : o.model_bytes) config.add_model_bytes(bytes);
  config.set_steps(o.steps);
  config.set_warmup_steps(o.warmup_steps);
  config.set_ps_servers(o.ps_servers);
  config.set_ps_mode(o.ps_mode);
  config.set_link(o.cluster.link);
  config.set_latency(o.cluster.latency);
  config.set_queue(o.cluster.queue);
  SetFinite(&config, &proto::ScalingConfig::set_compute_ms, o.compute_ms);
  for (const std::string& w : o.workloads) config.add_workloads(w);
  for (double mb : o.bucket_mbs) config.add_bucket_mbs(mb);
  config.set_bytes_scale(o.bytes_scale);
  config.set_first_bucket_mb(o.first_bucket_mb);
  if (o.projection.link_bytes_per_second > 0) {
    config.set_project_link_bytes_per_second(o.projection.link_bytes_per_second);
    config.set_project_latency_s(o.projection.latency_s);
  }
  return config;
}

proto::ClusterInfo ClusterMessage(const ScalingResult& result) {
  proto::ClusterInfo cluster;
  cluster.set_emulated(result.emulated);
  cluster.set_fallback_reason(result.fallback_reason);
  SetFinite(&cluster, &proto::ClusterInfo::set_link_bytes_per_second, result.link_bytes_per_second);
  SetFinite(&cluster, &proto::ClusterInfo::set_stream_bytes_per_second, result.stream_bytes_per_second);
  SetFinite(&cluster, &proto::ClusterInfo::set_latency_s, result.latency_s);
  cluster.set_latency_method(result.latency_method);
  SetFinite(&cluster, &proto::ClusterInfo::set_rtt_s, result.rtt_s);
  return cluster;
}

proto::RunReport RunMessage(const ScalingResult& result, const RunRecord& r) {
  using proto::RunReport;
  RunReport run;
  run.set_exchange(ExchangeName(r.exchange));
  run.set_nodes(r.nodes);
  run.set_servers(r.servers);
  run.set_bytes(r.bytes);
  run.set_steps(r.steps);
  run.set_ok(r.ok());
  SetFinite(&run, &RunReport::set_step_s, r.step_s);
  SetFinite(&run, &RunReport::set_compute_s, r.compute_s);
  SetFinite(&run, &RunReport::set_exchange_s, r.exchange_s);
  SetFinite(&run, &RunReport::set_model_s, RecordModelSeconds(result, r));
  SetFinite(&run, &RunReport::set_samples_per_s, r.samples_per_s);
  SetFinite(&run, &RunReport::set_algbw_bps, r.algbw);
  SetFinite(&run, &RunReport::set_busbw_bps, r.busbw);
  SetFinite(&run, &RunReport::set_link_bytes_per_step, r.link_bytes_per_step);
  run.set_bytes_sent_per_step(r.bytes_sent_per_step);
  run.set_wrong(r.wrong);
  SetFinite(&run, &RunReport::set_test_accuracy, r.test_accuracy);
  SetFinite(&run, &RunReport::set_wall_s, r.wall_s);
  run.set_error(r.error);
  SetFinite(&run, &RunReport::set_box_cpu, r.box_cpu);
  SetFinite(&run, &RunReport::set_link_util, r.link_util);
  SetFinite(&run, &RunReport::set_cpu_stall, r.cpu_stall);
  SetFinite(&run, &RunReport::set_step_spread, r.step_spread);
  run.set_emulator_bound(r.emulator_bound);
  run.set_bound_reason(r.bound_reason);
  if (result.options.mode != "gradient") {
    run.set_workload(r.workload);
    run.set_bucket_mb(r.bucket_mb);
    run.set_buckets(r.buckets);
    SetFinite(&run, &RunReport::set_forward_s, r.forward_s);
    SetFinite(&run, &RunReport::set_backward_s, r.backward_s);
    SetFinite(&run, &RunReport::set_optimizer_s, r.optimizer_s);
    SetFinite(&run, &RunReport::set_exposed_s, r.exposed_s);
    run.set_timeline(r.timeline);
  }
  if (result.options.mode == "replay") {
    SetFinite(&run, &RunReport::set_model_s, ReplayModelSeconds(result, r.exchange, r.nodes, r.workload, r.bucket_mb));
  }
  return run;
}

}  // namespace

absl::StatusOr<std::string> ToJson(const ScalingResult& result) {
  proto::ScalingReport report;
  *report.mutable_config() = ConfigMessage(result.options);
  *report.mutable_cluster() = ClusterMessage(result);
  if (result.model.has_value()) report.set_model_source(ModelSource(result));
  for (const RunRecord& r : result.records) *report.add_runs() = RunMessage(result, r);
  for (const ModelPoint& m : Extrapolation(result)) {
    proto::ModelPoint* point = report.add_model();
    point->set_exchange(ExchangeName(m.exchange));
    point->set_nodes(m.nodes);
    point->set_bytes(m.bytes);
    SetFinite(point, &proto::ModelPoint::set_seconds, m.seconds);
  }
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(report, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print scaling.json: ", status.ToString(),
                                            "; the CSV holds the same runs"));
  }
  return json;
}

absl::Status WriteOutputs(const ScalingResult& result, const std::string& dir, std::vector<std::string>* written) {
  RETURN_IF_ERROR(MakeDirectories(dir));
  const std::vector<size_t> sizes = Sizes(result);
  ASSIGN_OR_RETURN(std::string json, ToJson(result));
  std::vector<std::pair<std::string, std::string>> files = {{"scaling.csv", ToCsv(result)},
                                                            {"scaling.json", std::move(json)}};
  if (result.options.mode == "replay") {
    ASSIGN_OR_RETURN(auto figures, ReplayFigures(result));
    files.insert(files.end(), figures.begin(), figures.end());
  } else if (!sizes.empty()) {
    files.push_back({"scaling.svg", RenderSvg(MakeFigure(result, sizes.back()))});
  }
  for (const auto& [name, content] : files) {
    const std::string file = absl::StrCat(dir, "/", name);
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", file, ": ", std::strerror(errno)));
    written->push_back(file);
  }
  return absl::OkStatus();
}

}  // namespace psring::bench
