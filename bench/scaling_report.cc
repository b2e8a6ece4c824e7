// Reporting half of the scaling harness: model fits, tables, checks, verdict, CSV/JSON/SVG (see scaling.h).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/report.h"
#include "bench/scaling.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "proto/bench_report.pb.h"

namespace psring::bench {
namespace {

constexpr double kMiB = 1 << 20;
// Acceptance thresholds (bench/PERFORMANCE.md 5).
constexpr double kRingBusbwFraction = 0.90;
constexpr double kPsOneLinearTolerance = 0.15;
constexpr double kModelTolerance = 0.20;
constexpr double kCheckMinBytes = 4 * kMiB;
constexpr double kRingCheckBytes = 16 * kMiB;

std::string Size(double bytes) {
  if (bytes >= kMiB) return absl::StrFormat("%.3g MiB", bytes / kMiB);
  if (bytes >= 1024) return absl::StrFormat("%.3g KiB", bytes / 1024);
  return absl::StrFormat("%g B", bytes);
}

std::vector<size_t> Sizes(const ScalingResult& result) {
  std::set<size_t> sizes;
  for (const auto& r : result.records) {
    if (r.ok()) sizes.insert(r.bytes);
  }
  return {sizes.begin(), sizes.end()};
}

std::vector<Exchange> ExchangesRun(const ScalingResult& result) {
  std::vector<Exchange> out;
  for (Exchange e : result.options.exchanges) {
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  }
  return out;
}

int MaxMeasuredNodes(const ScalingResult& result) {
  int n = 1;
  for (int v : result.options.nodes) n = std::max(n, v);
  return n;
}

// T1, one worker's step without any exchange (compute, data, optimizer), the baseline of the scaling
// efficiency: in train mode the smallest step - exchange among the runs at the smallest N (one worker alone,
// least CPU contention); in gradient mode the assumed --compute_ms (0 = none).
double SingleWorkerStepSeconds(const ScalingResult& result) {
  if (result.options.mode != "train") return result.options.compute_ms / 1e3;
  int smallest = std::numeric_limits<int>::max();
  for (const auto& r : result.records) {
    if (r.ok()) smallest = std::min(smallest, r.nodes);
  }
  double best = std::numeric_limits<double>::infinity();
  for (const auto& r : result.records) {
    if (r.ok() && r.nodes == smallest) best = std::min(best, std::max(0.0, r.step_s - r.exchange_s));
  }
  return std::isfinite(best) ? best : 0;
}

const RunRecord* Find(const ScalingResult& result, Exchange e, int nodes, size_t bytes) {
  for (const auto& r : result.records) {
    if (r.ok() && r.exchange == e && r.nodes == nodes && r.bytes == bytes) return &r;
  }
  return nullptr;
}

// Integer node counts for model curves: every N up to 16, then quarter octaves (smooth on a log2 axis).
std::vector<int> ModelNodes(int max_nodes) {
  std::set<int> nodes;
  for (int n = 1; n <= std::min(16, max_nodes); ++n) nodes.insert(n);
  for (double k = 4; k <= std::log2(max_nodes) + 1e-9; k += 0.25) nodes.insert(static_cast<int>(std::lround(std::exp2(k))));
  return {nodes.begin(), nodes.end()};
}

std::string LinkText(const ScalingResult& result) {
  if (result.link_bytes_per_second <= 0) return "unlimited";
  const double bits = result.link_bytes_per_second * 8;
  return bits >= 1e9 ? absl::StrFormat("%g Gbit/s", bits / 1e9) : absl::StrFormat("%g Mbit/s", bits / 1e6);
}

// The model's features of a record's run (with the K it ran with).
CostTerms RecordTerms(const RunRecord& r) {
  return PluginFor(r.exchange).Terms(r.nodes, r.servers, static_cast<double>(r.bytes));
}

// One node with the ring or co-located shards only copies memory: nothing crosses a link, nothing for a
// network model to describe.
bool CrossesLink(const RunRecord& r) { return RecordTerms(r).link_bytes > 0; }

// (model - measured) / measured for a successful run the model describes, else 0.
double ModelRelativeError(const ScalingResult& result, const RunRecord& r) {
  if (!r.ok() || !CrossesLink(r) || r.exchange_s <= 0) return 0;
  const double model = ModelSeconds(result, r.exchange, r.nodes, r.bytes);
  return model > 0 ? (model - r.exchange_s) / r.exchange_s : 0;  // no fit: no error to show
}

// The model's time for a record's run; -1 for a failed run or without a fit.
double RecordModelSeconds(const ScalingResult& result, const RunRecord& r) {
  return r.ok() ? ModelSeconds(result, r.exchange, r.nodes, r.bytes) : -1;
}

// The fitted model at the extrapolation's N (not measured), for every size and exchange with a fit.
struct ModelPoint {
  Exchange exchange;
  int nodes;
  int servers;
  size_t bytes;
  double seconds;
};

std::vector<ModelPoint> Extrapolation(const ScalingResult& result) {
  std::vector<ModelPoint> points;
  if (result.options.mode == "replay") return points;  // replay_report.cc prints its own (whole steps)
  for (size_t bytes : Sizes(result)) {
    for (Exchange e : ExchangesRun(result)) {
      for (int n : result.options.extrapolate_nodes) {
        const double t = ModelSeconds(result, e, n, bytes);
        if (t >= 0) points.push_back({e, n, PluginFor(e).Servers(n, result.options.ps_servers), bytes, t});
      }
    }
  }
  return points;
}

}  // namespace

void FitModels(ScalingResult* result) {
  result->fits.clear();
  for (Exchange e : ExchangesRun(*result)) {
    std::vector<Measurement> points;
    for (const auto& r : result->records) {
      // A bucketed run's exchange is several collectives, each with its own latency terms: the fit is of one
      // flat exchange per step, and the bucketed steps are its predictions (replay_report.cc).
      if (r.usable() && r.exchange == e && r.bucket_mb <= 0) points.push_back({RecordTerms(r), r.exchange_s});
    }
    absl::StatusOr<ModelFit> fit = FitAlphaBeta(points);
    if (fit.ok()) result->fits[e] = *fit;
  }
}

double ModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, double bytes) {
  auto it = result.fits.find(exchange);
  if (it == result.fits.end()) return -1;
  const ExchangePlugin& plugin = PluginFor(exchange);
  return PredictSeconds(it->second, plugin.Terms(nodes, plugin.Servers(nodes, result.options.ps_servers), bytes));
}

namespace {

void PrintIntro(const ScalingResult& result, std::ostream& out) {
  const ScalingOptions& o = result.options;
  const double link = result.link_bytes_per_second;
  Table intro(&out);
  intro.Comment(absl::StrFormat(
      "psring scaling: mode %s, %d measured steps per run%s, PS mode %s, ps-dedicated K = %d", o.mode,
      o.steps, o.mode == "gradient" ? absl::StrFormat(" (+%d warm-up)", o.warmup_steps) : "", o.ps_mode,
      o.ps_servers));
  if (result.emulated) {
    intro.Comment(absl::StrFormat("emulated cluster: one network namespace per host, link %s = %.2f MB/s per "
                                  "host and direction, queue %s%s",
                                  o.cluster.link.empty() ? "unlimited" : o.cluster.link, link / 1e6,
                                  o.cluster.queue,
                                  o.cluster.latency.empty() ? "" : ", one-way latency " + o.cluster.latency));
    if (result.stream_bytes_per_second > 0) {
      intro.Comment(absl::StrFormat("link check: one TCP stream between two hosts carried %.2f MB/s (%.1f%% of the "
                                    "link); TCP round trip %.3f ms%s",
                                    result.stream_bytes_per_second / 1e6,
                                    100 * result.stream_bytes_per_second / std::max(link, 1.0), result.rtt_s * 1e3,
                                    result.latency_s > 0 ? absl::StrFormat(" (configured one-way latency %.3g ms, %s)",
                                                                           result.latency_s * 1e3,
                                                                           result.latency_method)
                                                         : ""));
    }
  } else {
    intro.Comment("LOOPBACK (" + result.fallback_reason + "): no link limits, figures are not network figures");
  }
  intro.Comment("time = exchange time per step; algbw = S/time; busbw = algbw*2(N-1)/N (nccl-tests); "
                "model = fitted alpha-beta; sent_MB = payload a worker sent per measured step (max over ranks); "
                "link_MB = busiest host link direction over the whole job (frames, set-up and warm-up included) "
                "per step");
  out << "#\n";
}

Row TableRow(const ScalingResult& result, const RunRecord& r) {
  Row row = MakeRow(r.bytes, r.bytes / 4, r.exchange_s, PluginFor(r.exchange).BusFactor(r.nodes), r.wrong);
  row.extra = {static_cast<double>(r.nodes),
               static_cast<double>(r.servers),
               r.step_s * 1e3,
               r.compute_s * 1e3,
               ModelSeconds(result, r.exchange, r.nodes, r.bytes) * 1e3,
               100 * ModelRelativeError(result, r),
               r.bytes_sent_per_step / 1e6,
               r.link_bytes_per_step / 1e6,
               r.samples_per_s};
  if (!result.options.bucket_mbs.empty()) row.extra.push_back(r.bucket_mb);
  row.extra.push_back(r.box_cpu >= 0 ? 100 * r.box_cpu : -1);
  row.extra.push_back(r.link_util >= 0 ? 100 * r.link_util : -1);
  row.extra.push_back(r.cpu_stall >= 0 ? 100 * r.cpu_stall : -1);
  row.emulator_bound = r.emulator_bound;
  return row;
}

std::string FitLine(const ScalingResult& result, Exchange e, const ModelFit& f) {
  const double link = result.link_bytes_per_second;
  return absl::StrFormat(
      "model %s: alpha = %.1f us, beta = %.3f ns/B (1/beta = %.2f MB/s%s), max |error| %.1f%% over %d points",
      ExchangeName(e), f.alpha * 1e6, f.beta * 1e9, f.beta > 0 ? 1e-6 / f.beta : 0,
      link > 0 ? absl::StrFormat("; link %.2f MB/s", link / 1e6) : "", 100 * f.max_relative_error, f.points);
}

// One nccl-tests table per exchange: every run (failed ones as comments), the footer, the fitted model.
void PrintExchangeTable(const ScalingResult& result, Exchange e, std::ostream& out) {
  std::vector<std::string> columns = {"N", "K", "step_ms", "comp_ms", "model_ms", "err%", "sent_MB", "link_MB",
                                      "samples/s"};
  if (!result.options.bucket_mbs.empty()) columns.push_back("bucket_MB");  // train mode: 0 = flat
  columns.push_back("cpu%");
  columns.push_back("link%");
  columns.push_back("stall%");
  Table table(&out, columns);
  table.Comment(absl::StrFormat("exchange %s", ExchangeName(e)));
  table.Header();
  for (const auto& r : result.records) {
    if (r.exchange != e) continue;
    if (r.ok()) {
      table.Add(TableRow(result, r));
    } else {
      table.Comment(absl::StrFormat("N=%d S=%s FAILED: %s", r.nodes, Size(r.bytes),
                                    r.error.substr(0, r.error.find('\n'))));
    }
  }
  table.Footer();
  auto fit = result.fits.find(e);
  if (fit != result.fits.end()) table.Comment(FitLine(result, e, fit->second));
  out << "#\n";
}

// The model at N that were not measured, at the largest S.
void PrintExtrapolation(const ScalingResult& result, std::ostream& out) {
  const std::vector<size_t> sizes = Sizes(result);
  if (sizes.empty() || result.fits.empty()) return;
  const double s = sizes.back();
  const std::vector<Exchange> exchanges = ExchangesRun(result);
  std::string header = absl::StrFormat("# MODEL %8s", "N");
  for (Exchange e : exchanges) absl::StrAppendFormat(&header, " %14s", ExchangeName(e) + "_s");
  for (Exchange e : exchanges) absl::StrAppendFormat(&header, " %14s", ExchangeName(e) + "_busMB");
  out << absl::StrFormat("# MODEL extrapolation (NOT measured): exchange time per step (s) and busbw (MB/s) at "
                         "S = %s from the fitted alpha-beta model\n",
                         Size(s))
      << header << "\n";
  for (int n : result.options.extrapolate_nodes) {
    std::string line = absl::StrFormat("# MODEL %8d", n);
    for (Exchange e : exchanges) absl::StrAppendFormat(&line, " %14.3f", ModelSeconds(result, e, n, s));
    for (Exchange e : exchanges) {
      const double t = ModelSeconds(result, e, n, s);
      absl::StrAppendFormat(&line, " %14.3f", t > 0 ? s / t * PluginFor(e).BusFactor(n) / 1e6 : 0);
    }
    out << line << "\n";
  }
  out << "#\n";
}

// Check 1: the ring's busbw against the link.
void PrintRingBusbwChecks(const ScalingResult& result, std::ostream& out) {
  const double link = result.link_bytes_per_second;
  for (const auto& r : result.records) {
    if (!r.usable() || r.exchange != Exchange::kRing || r.nodes < 2 || r.bytes < kRingCheckBytes) continue;
    const double fraction = r.busbw / link;
    out << CheckLine(absl::StrFormat("ring busbw N=%d S=%s: %.2f MB/s = %.1f%% of link (>= %.0f%%)", r.nodes,
                                     Size(r.bytes), r.busbw / 1e6, 100 * fraction, 100 * kRingBusbwFraction),
                     JudgeCheck(fraction, kRingBusbwFraction, /*at_most=*/false, r.step_spread), r.step_spread);
  }
}

// Check 2: one PS shard against N*S/B, then (for information) against its own N = 1 step.
void PrintPsOneChecks(const ScalingResult& result, std::ostream& out) {
  for (const auto& r : result.records) {
    if (!r.usable() || r.exchange != Exchange::kPsOne || r.bytes < kRingCheckBytes) continue;
    const double ideal = r.nodes * static_cast<double>(r.bytes) / result.link_bytes_per_second;
    const double ratio = r.exchange_s / ideal;
    out << CheckLine(absl::StrFormat("ps-1 linear N=%d S=%s: %.3f s vs N*S/B = %.3f s, ratio %.3f (within %.0f%%)",
                                     r.nodes, Size(r.bytes), r.exchange_s, ideal, ratio, 100 * kPsOneLinearTolerance),
                     Combine({JudgeCheck(ratio, 1 + kPsOneLinearTolerance, /*at_most=*/true, r.step_spread),
                              JudgeCheck(ratio, 1 - kPsOneLinearTolerance, /*at_most=*/false, r.step_spread)}),
                     r.step_spread);
  }
  for (const auto& r : result.records) {
    if (!r.usable() || r.exchange != Exchange::kPsOne || r.nodes < 2 || r.bytes < kRingCheckBytes) continue;
    const RunRecord* one = Find(result, Exchange::kPsOne, 1, r.bytes);
    if (one == nullptr || one->exchange_s <= 0) continue;
    const double ratio = r.exchange_s / (r.nodes * one->exchange_s);
    out << absl::StrFormat("# info ps-1 growth N=%d S=%s: T(N) / (N * T(1)) = %.3f (1 = exactly linear)\n", r.nodes,
                           Size(r.bytes), ratio);
  }
}

// Information: every exchange's points with S >= 4 MiB against its fitted model.
void PrintModelFitChecks(const ScalingResult& result, std::ostream& out) {
  for (Exchange e : ExchangesRun(result)) {
    double worst = 0;
    int points = 0;
    for (const auto& r : result.records) {
      if (!r.usable() || r.exchange != e || r.bytes < kCheckMinBytes || r.exchange_s <= 0 || !CrossesLink(r)) continue;
      if (ModelSeconds(result, e, r.nodes, r.bytes) <= 0) continue;
      worst = std::max(worst, std::abs(ModelRelativeError(result, r)));
      ++points;
    }
    if (points == 0) continue;
    // In-sample (the fit's own points): information, not a check (a fit scored on its own points cannot
    // show the model predicts anything). Held-out accuracy: //bench:validate, and compare's held-out part.
    out << absl::StrFormat(
        "# info model fit %s S>=4 MiB (in-sample: the points it was fitted on): max |error| %.1f%% over %d "
        "points%s\n",
        ExchangeName(e), 100 * worst, points, worst <= kModelTolerance ? "" : " (the alpha-beta form fits badly)");
  }
}

}  // namespace

void PrintReport(const ScalingResult& result, std::ostream& out) {
  PrintIntro(result, out);
  if (result.options.mode == "replay") {
    for (Exchange e : ExchangesRun(result)) {
      auto fit = result.fits.find(e);
      if (fit != result.fits.end()) out << "# " << FitLine(result, e, fit->second) << " (flat exchanges)\n";
    }
    out << "#\n";
    PrintReplayReport(result, out);
    return;
  }
  for (Exchange e : ExchangesRun(result)) PrintExchangeTable(result, e, out);
  PrintExtrapolation(result, out);
  // The acceptance checks mean something only on shaped links.
  if (result.link_bytes_per_second <= 0) return;
  std::ostringstream checks;
  PrintRingBusbwChecks(result, checks);
  PrintPsOneChecks(result, checks);
  PrintModelFitChecks(result, checks);
  out << "# Acceptance checks (bench/PERFORMANCE.md)";
  if (checks.str().empty()) {
    // No bare heading: say which sizes the checks need, so the user knows how to get them.
    size_t largest = 0;
    for (const RunRecord& r : result.records) largest = std::max(largest, r.bytes);
    out << absl::StrFormat(
        ": none applies to this sweep. The ring busbw and ps-1 checks need S >= %s, the model-fit check S >= %s "
        "with N >= 2; the largest S here is %s (gradient mode with --model_bytes=16M runs them all)\n",
        Size(kRingCheckBytes), Size(kCheckMinBytes), Size(largest));
  } else {
    out << "\n" << checks.str();
  }
  out << "#\n";
}

void PrintVerdict(const ScalingResult& result, std::ostream& out) {
  if (result.options.mode == "replay") return PrintReplayVerdict(result, out);
  if (result.options.bucket_mbs.size() > 1) {
    // Train mode with several bucket caps: one verdict per cap.
    for (double mb : result.options.bucket_mbs) {
      ScalingResult slice = result;
      slice.options.bucket_mbs = {mb};
      slice.records.clear();
      for (const RunRecord& r : result.records) {
        if (r.bucket_mb == mb) slice.records.push_back(r);
      }
      out << absl::StrFormat("# --bucket_mb=%g%s\n", mb, mb == 0 ? " (flat exchange after backward)" : "");
      PrintVerdict(slice, out);
    }
    return;
  }
  const std::vector<Exchange> exchanges = ExchangesRun(result);
  for (size_t bytes : Sizes(result)) {
    out << absl::StrFormat("# VERDICT %s, %s: seconds per step (x slower than the fastest)\n",
                           result.options.mode == "train" ? "training the MLP" : "gradient exchange",
                           "S = " + Size(bytes));
    std::string header = absl::StrFormat("#%5s  %-13s", "N", "fastest");
    for (Exchange e : exchanges) absl::StrAppendFormat(&header, " %18s", ExchangeName(e));
    out << header << "\n";
    for (int n : result.options.nodes) {
      const RunRecord* best = nullptr;
      for (Exchange e : exchanges) {
        const RunRecord* r = Find(result, e, n, bytes);
        if (r != nullptr && (best == nullptr || r->step_s < best->step_s)) best = r;
      }
      std::string line = absl::StrFormat(" %5d  %-13s", n, best ? ExchangeName(best->exchange) : "-");
      for (Exchange e : exchanges) {
        const RunRecord* r = Find(result, e, n, bytes);
        if (r == nullptr) {
          absl::StrAppendFormat(&line, " %18s", "failed/not run");
        } else {
          // The ring on one node exchanges nothing, so its step is ~0 s: no meaningful ratio there.
          const bool nothing_exchanged = n == 1 && best->exchange == Exchange::kRing;
          const double ratio = best->step_s > 0 && !nothing_exchanged ? r->step_s / best->step_s : 0;
          const std::string times = ratio <= 0 ? "-" : ratio < 1000 ? absl::StrFormat("%.1fx", ratio) : ">999x";
          absl::StrAppendFormat(&line, " %18s", absl::StrFormat("%.3f (%s)", r->step_s, times));
        }
      }
      out << line << "\n";
    }
  }
}

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

proto::ModelFitRecord FitMessage(const ModelFit& f) {
  proto::ModelFitRecord fit;
  SetFinite(&fit, &proto::ModelFitRecord::set_alpha_s, f.alpha);
  SetFinite(&fit, &proto::ModelFitRecord::set_beta_s_per_byte, f.beta);
  fit.set_points(f.points);
  SetFinite(&fit, &proto::ModelFitRecord::set_max_relative_error, f.max_relative_error);
  return fit;
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
  for (const auto& [e, fit] : result.fits) (*report.mutable_fits())[ExchangeName(e)] = FitMessage(fit);
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

namespace {

// One fixed colour per exchange, so every plot reads the same.
std::string ExchangeColor(Exchange e) {
  const std::vector<Exchange> all = AllExchanges();
  return PaletteColor(static_cast<int>(std::find(all.begin(), all.end(), e) - all.begin()));
}

// The two panels at one S: step time, and efficiency (bandwidth efficiency busbw / B without compute, weak
// scaling T1 / step time with it), each with a measured and a model series per exchange.
class FigureBuilder {
 public:
  FigureBuilder(const ScalingResult& result, size_t bytes)
      : result_(result),
        o_(result.options),
        bytes_(bytes),
        link_(result.link_bytes_per_second),
        compute_based_(o_.mode == "train" || o_.compute_ms > 0),
        compute_(SingleWorkerStepSeconds(result)) {
    max_model_nodes_ = MaxMeasuredNodes(result);
    for (int n : o_.extrapolate_nodes) max_model_nodes_ = std::max(max_model_nodes_, n);
  }

  Figure Build() const {
    Figure figure;
    figure.title = absl::StrFormat(
        "PS vs ring allreduce: %s, S = %s, B = %s per link%s",
        o_.mode == "train" ? "training the MLP" : "gradient exchange", Size(bytes_),
        link_ > 0 ? absl::StrFormat("%s (%.1f MB/s)", LinkText(result_), link_ / 1e6) : "unlimited",
        result_.emulated ? " (emulated cluster)" : " (LOOPBACK, not a network)");
    figure.subtitle = absl::StrFormat(
        "dots: measured (N = %s); dashed: fitted alpha-beta model, extrapolated to N = %d; ps-dedicated K = %d",
        absl::StrJoin(o_.nodes, ","), max_model_nodes_, o_.ps_servers);
    Panel time = TimePanel();
    Panel efficiency = EfficiencyPanel();
    for (Exchange e : ExchangesRun(result_)) {
      AddMeasured(e, &time, &efficiency);
      AddModel(e, &time, &efficiency);
    }
    figure.panels = {time, efficiency};
    return figure;
  }

 private:
  static Panel TimePanel() {
    Panel time;
    time.title = "Step time vs nodes";
    time.x_label = "nodes N (workers)";
    time.y_label = "time per step (s)";
    time.x_scale = Scale::kLog2;
    time.y_scale = Scale::kLog10;
    return time;
  }

  Panel EfficiencyPanel() const {
    Panel eff;
    eff.title = compute_based_ ? "Scaling efficiency vs nodes" : "Bandwidth efficiency vs nodes";
    eff.x_label = "nodes N (workers)";
    eff.x_scale = Scale::kLog2;
    if (compute_based_) {
      eff.y_label = "efficiency = T1 / step time (%)";
    } else if (link_ > 0) {
      eff.y_label = "busbw / link bandwidth B (%)";
    } else {
      eff.y_label = "bus bandwidth (MB/s)";
    }
    if (compute_based_ || link_ > 0) {
      eff.y_min = 0;
      eff.y_max = 100;
    }
    return eff;
  }

  // Weak scaling: efficiency = T1 / step time, T1 one worker's step without exchange; else busbw / B.
  double Efficiency(Exchange e, double exchange_s, double step_s, int n) const {
    if (compute_based_) {
      const double total = o_.mode == "train" ? step_s : compute_ + exchange_s;
      return total > 0 ? std::min(100.0, 100 * compute_ / total) : 0;
    }
    const double busbw = exchange_s > 0 ? bytes_ / exchange_s * PluginFor(e).BusFactor(n) : 0;
    return link_ > 0 ? 100 * busbw / link_ : busbw / 1e6;
  }

  // busbw is not defined for one node (nothing crosses a link in an allreduce of one).
  bool HasEfficiency(int nodes) const { return nodes >= 2 || compute_based_; }

  void AddMeasured(Exchange e, Panel* time, Panel* efficiency) const {
    Series step{ExchangeName(e) + " measured", ExchangeColor(e), {}, Style::kMarkers};
    Series eff = step;
    // EMULATOR-BOUND runs as hollow markers of their own legend entry (shown, not vouched for).
    Series bound_step{ExchangeName(e) + " EMULATOR-BOUND", ExchangeColor(e), {}, Style::kHollowMarkers};
    Series bound_eff = bound_step;
    for (const auto& r : result_.records) {
      if (!r.ok() || r.exchange != e || r.bytes != bytes_) continue;
      // Without compute, a step that crosses no link (one node, ring or co-located) is a memory copy: no
      // point on a network plot.
      if (!compute_based_ && !CrossesLink(r)) continue;
      Series& s = r.emulator_bound ? bound_step : step;
      Series& f = r.emulator_bound ? bound_eff : eff;
      s.points.push_back({static_cast<double>(r.nodes), r.step_s});
      if (HasEfficiency(r.nodes)) {
        f.points.push_back({static_cast<double>(r.nodes), Efficiency(e, r.exchange_s, r.step_s, r.nodes)});
      }
    }
    time->series.push_back(step);
    efficiency->series.push_back(eff);
    if (!bound_step.points.empty()) {
      time->series.push_back(bound_step);
      efficiency->series.push_back(bound_eff);
    }
  }

  void AddModel(Exchange e, Panel* time, Panel* efficiency) const {
    Series step{ExchangeName(e) + " model", ExchangeColor(e), {}, Style::kDashedLine};
    Series eff = step;
    auto fit = result_.fits.find(e);
    const ExchangePlugin& plugin = PluginFor(e);
    for (int nodes : fit == result_.fits.end() ? std::vector<int>() : ModelNodes(max_model_nodes_)) {
      const CostTerms terms = plugin.Terms(nodes, plugin.Servers(nodes, o_.ps_servers), bytes_);
      if (terms.link_bytes == 0) continue;  // nothing on a link: outside the model
      const double t = PredictSeconds(fit->second, terms);
      const double seconds = (compute_based_ ? compute_ : 0) + t;
      if (seconds > 0) step.points.push_back({static_cast<double>(nodes), seconds});
      if (HasEfficiency(nodes)) eff.points.push_back({static_cast<double>(nodes), Efficiency(e, t, seconds, nodes)});
    }
    time->series.push_back(step);
    efficiency->series.push_back(eff);
  }

  const ScalingResult& result_;
  const ScalingOptions& o_;
  const size_t bytes_;
  const double link_;
  const bool compute_based_;
  const double compute_;
  int max_model_nodes_ = 1;
};

}  // namespace

Figure MakeFigure(const ScalingResult& result, size_t bytes) { return FigureBuilder(result, bytes).Build(); }

absl::Status MakeDirectories(const std::string& dir) {
  std::string path;
  for (absl::string_view part : absl::StrSplit(dir, '/')) {
    path += std::string(part) + "/";
    if (part.empty()) continue;
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create output directory ", path, ": ", std::strerror(errno), "; pass --out_dir"));
    }
  }
  return absl::OkStatus();
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
}

}  // namespace

absl::Status RunAndReport(const ScalingOptions& options, const std::string& out_dir) {
  ASSIGN_OR_RETURN(ScalingResult result, RunScaling(options, &std::cerr));
  return Report(result, out_dir);
}

absl::Status ReportFromCsv(const ScalingOptions& options, const std::string& csv_path, const std::string& out_dir) {
  std::ifstream in(csv_path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", csv_path, ": pass a scaling.csv written by a run"));
  std::stringstream text;
  text << in.rdbuf();
  ScalingResult result;
  result.options = options;
  ASSIGN_OR_RETURN(result.records, RecordsFromCsv(text.str()));
  OptionsFromRecords(&result.options, result.records);
  RETURN_IF_ERROR(LoadWorkloadLayers(&result));
  const ClusterOptions& cluster = options.cluster;
  result.emulated = !cluster.force_loopback;
  if (cluster.force_loopback) result.fallback_reason = "re-rendered with --loopback";
  if (result.emulated && !cluster.link.empty()) {
    ASSIGN_OR_RETURN(const double bits, ParseLinkRate(cluster.link));
    result.link_bytes_per_second = bits / 8;
  }
  FitModels(&result);
  return Report(result, out_dir);
}

}  // namespace psring::bench
