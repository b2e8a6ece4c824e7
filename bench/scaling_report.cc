// Reporting half of the scaling harness: model fits, tables, verdict, CSV/JSON/SVG (see scaling.h).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/report.h"
#include "bench/scaling.h"

namespace psring::bench {
namespace {

constexpr double kMiB = 1 << 20;
// Acceptance thresholds of issue 6 (bench/PERFORMANCE.md).
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

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// JSON has no inf/nan.
std::string JsonNumber(double v) { return std::isfinite(v) ? absl::StrFormat("%.9g", v) : "null"; }

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

}  // namespace

void FitModels(ScalingResult* result) {
  result->fits.clear();
  for (Exchange e : ExchangesRun(*result)) {
    std::vector<Measurement> points;
    for (const auto& r : result->records) {
      if (r.ok() && r.exchange == e) points.push_back({r.nodes, r.servers, static_cast<double>(r.bytes), r.exchange_s});
    }
    absl::StatusOr<ModelFit> fit = FitAlphaBeta(e, points);
    if (fit.ok()) result->fits[e] = *fit;
  }
}

double ModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, double bytes) {
  auto it = result.fits.find(exchange);
  if (it == result.fits.end()) return -1;
  return PredictSeconds(exchange, it->second, nodes, ServerCount(exchange, nodes, result.options.ps_servers), bytes);
}

void PrintReport(const ScalingResult& result, std::ostream& out) {
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
                                  o.link.empty() ? "unlimited" : o.link, link / 1e6, o.queue,
                                  o.delay.empty() ? "" : ", delay " + o.delay));
    if (result.stream_bytes_per_second > 0) {
      intro.Comment(absl::StrFormat("link check: one TCP stream between two hosts carried %.2f MB/s (%.1f%% of the link)",
                                    result.stream_bytes_per_second / 1e6,
                                    100 * result.stream_bytes_per_second / std::max(link, 1.0)));
    }
  } else {
    intro.Comment("LOOPBACK (" + result.fallback_reason + "): no link limits, figures are not network figures");
  }
  intro.Comment("time = exchange time per step; algbw = S/time; busbw = algbw*2(N-1)/N (nccl-tests); "
                "model = fitted alpha-beta; sent_MB = payload a worker sent per measured step (max over ranks); "
                "link_MB = busiest host link direction over the whole job (frames, set-up and warm-up included) "
                "per step");
  out << "#\n";

  for (Exchange e : ExchangesRun(result)) {
    Table table(&out, {"N", "K", "step_ms", "comp_ms", "model_ms", "err%", "sent_MB", "link_MB", "samples/s"});
    table.Comment(absl::StrFormat("exchange %s", ExchangeName(e)));
    table.Header();
    for (const auto& r : result.records) {
      if (r.exchange != e) continue;
      if (!r.ok()) {
        table.Comment(absl::StrFormat("N=%d S=%s FAILED: %s", r.nodes, Size(r.bytes),
                                      r.error.substr(0, r.error.find('\n'))));
        continue;
      }
      Row row = MakeRow(r.bytes, r.bytes / 4, r.exchange_s, AllReduceBusFactor(r.nodes), r.wrong);
      const double model = ModelSeconds(result, e, r.nodes, r.bytes);
      // No error where the model has nothing to say (one node moves no bytes over a link).
      const bool modelled = BusiestLinkBytes(e, r.nodes, r.servers, r.bytes) > 0;
      const double err = modelled && r.exchange_s > 0 ? 100 * (model - r.exchange_s) / r.exchange_s : 0;
      row.extra = {static_cast<double>(r.nodes), static_cast<double>(r.servers), r.step_s * 1e3,
                   r.compute_s * 1e3, model * 1e3, err, r.bytes_sent_per_step / 1e6, r.link_bytes_per_step / 1e6,
                   r.samples_per_s};
      table.Add(row);
    }
    table.Footer();
    auto fit = result.fits.find(e);
    if (fit != result.fits.end()) {
      const ModelFit& f = fit->second;
      table.Comment(absl::StrFormat(
          "model %s: alpha = %.1f us, beta = %.3f ns/B (1/beta = %.2f MB/s%s), max |error| %.1f%% over %d "
          "points",
          ExchangeName(e), f.alpha * 1e6, f.beta * 1e9, f.beta > 0 ? 1e-6 / f.beta : 0,
          link > 0 ? absl::StrFormat("; link %.2f MB/s", link / 1e6) : "", 100 * f.max_relative_error, f.points));
    }
    out << "#\n";
  }

  // Extrapolation.
  const std::vector<size_t> sizes = Sizes(result);
  if (!sizes.empty() && !result.fits.empty()) {
    const double s = sizes.back();
    std::string header = absl::StrFormat("# MODEL %8s", "N");
    for (Exchange e : ExchangesRun(result)) absl::StrAppendFormat(&header, " %14s", ExchangeName(e) + "_s");
    for (Exchange e : ExchangesRun(result)) absl::StrAppendFormat(&header, " %14s", ExchangeName(e) + "_busMB");
    out << absl::StrFormat("# MODEL extrapolation (NOT measured): exchange time per step (s) and busbw (MB/s) at "
                           "S = %s from the fitted alpha-beta model\n",
                           Size(s))
        << header << "\n";
    for (int n : o.extrapolate_nodes) {
      std::string line = absl::StrFormat("# MODEL %8d", n);
      for (Exchange e : ExchangesRun(result)) {
        const double t = ModelSeconds(result, e, n, s);
        absl::StrAppendFormat(&line, " %14.3f", t);
      }
      for (Exchange e : ExchangesRun(result)) {
        const double t = ModelSeconds(result, e, n, s);
        absl::StrAppendFormat(&line, " %14.3f", t > 0 ? s / t * AllReduceBusFactor(n) / 1e6 : 0);
      }
      out << line << "\n";
    }
    out << "#\n";
  }

  // Acceptance checks (issue 6), only meaningful on shaped links.
  if (link <= 0) return;
  out << "# Acceptance checks (bench/PERFORMANCE.md)\n";
  for (const auto& r : result.records) {
    if (!r.ok() || r.exchange != Exchange::kRing || r.nodes < 2 || r.bytes < kRingCheckBytes) continue;
    const double fraction = r.busbw / link;
    out << absl::StrFormat("# check ring busbw N=%d S=%s: %.2f MB/s = %.1f%% of link (>= %.0f%%): %s\n", r.nodes,
                           Size(r.bytes), r.busbw / 1e6, 100 * fraction, 100 * kRingBusbwFraction,
                           fraction >= kRingBusbwFraction ? "PASS" : "FAIL");
  }
  for (const auto& r : result.records) {
    if (!r.ok() || r.exchange != Exchange::kPsOne || r.bytes < kRingCheckBytes) continue;
    const double ideal = r.nodes * static_cast<double>(r.bytes) / link;
    const double ratio = r.exchange_s / ideal;
    out << absl::StrFormat("# check ps-1 linear N=%d S=%s: %.3f s vs N*S/B = %.3f s, ratio %.3f (within %.0f%%): %s\n",
                           r.nodes, Size(r.bytes), r.exchange_s, ideal, ratio, 100 * kPsOneLinearTolerance,
                           std::abs(ratio - 1) <= kPsOneLinearTolerance ? "PASS" : "FAIL");
  }
  // Linearity of ps-1 on its own terms: T(N) against N * T(1) at the same S.
  for (const auto& r : result.records) {
    if (!r.ok() || r.exchange != Exchange::kPsOne || r.nodes < 2 || r.bytes < kRingCheckBytes) continue;
    const RunRecord* one = Find(result, Exchange::kPsOne, 1, r.bytes);
    if (one == nullptr || one->exchange_s <= 0) continue;
    const double ratio = r.exchange_s / (r.nodes * one->exchange_s);
    out << absl::StrFormat("# info ps-1 growth N=%d S=%s: T(N) / (N * T(1)) = %.3f (1 = exactly linear)\n", r.nodes,
                           Size(r.bytes), ratio);
  }
  for (Exchange e : ExchangesRun(result)) {
    double worst = 0;
    int points = 0;
    for (const auto& r : result.records) {
      if (!r.ok() || r.exchange != e || r.bytes < kCheckMinBytes || r.exchange_s <= 0) continue;
      if (BusiestLinkBytes(e, r.nodes, r.servers, r.bytes) == 0) continue;  // no link traffic: outside the model
      const double model = ModelSeconds(result, e, r.nodes, r.bytes);
      if (model <= 0) continue;
      worst = std::max(worst, std::abs(model - r.exchange_s) / r.exchange_s);
      ++points;
    }
    if (points == 0) continue;
    out << absl::StrFormat("# check model fit %s S>=4 MiB: max |error| %.1f%% over %d points (<= %.0f%%): %s\n",
                           ExchangeName(e), 100 * worst, points, 100 * kModelTolerance,
                           worst <= kModelTolerance ? "PASS" : "FAIL");
  }
  out << "#\n";
}

void PrintVerdict(const ScalingResult& result, std::ostream& out) {
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
         "samples_per_s,algbw_Bps,busbw_Bps,link_bytes_per_step,sent_bytes_per_step,wrong,test_accuracy,error\n";
  for (const auto& r : result.records) {
    const double model = r.ok() ? ModelSeconds(result, r.exchange, r.nodes, r.bytes) : -1;
    const bool modelled = r.ok() && BusiestLinkBytes(r.exchange, r.nodes, r.servers, r.bytes) > 0;
    const double err = modelled && r.exchange_s > 0 ? (model - r.exchange_s) / r.exchange_s : 0;
    std::string error = r.error.substr(0, r.error.find('\n'));
    std::replace(error.begin(), error.end(), '"', '\'');
    csv << absl::StrFormat(
        "measured,%s,%s,%d,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.4f,%.6g,%.6g,%.6g,%.6g,%d,%d,%.4f,\"%s\"\n",
        result.options.mode, ExchangeName(r.exchange), r.nodes, r.servers, r.bytes, r.steps, r.step_s, r.compute_s,
        r.exchange_s, model, err, r.samples_per_s, r.algbw, r.busbw, r.link_bytes_per_step, r.bytes_sent_per_step,
        r.wrong, r.test_accuracy, error);
  }
  for (size_t bytes : Sizes(result)) {
    for (Exchange e : ExchangesRun(result)) {
      for (int n : result.options.extrapolate_nodes) {
        const double t = ModelSeconds(result, e, n, bytes);
        if (t < 0) continue;
        const double algbw = t > 0 ? bytes / t : 0;
        csv << absl::StrFormat("model,%s,%s,%d,%d,%d,0,,,,%.6g,,,%.6g,%.6g,,,,,\n", result.options.mode,
                               ExchangeName(e), n, ServerCount(e, n, result.options.ps_servers), bytes, t, algbw,
                               algbw * AllReduceBusFactor(n));
      }
    }
  }
  return csv.str();
}

absl::StatusOr<std::vector<RunRecord>> RecordsFromCsv(const std::string& csv) {
  // Splits one line on commas outside double quotes.
  auto split = [](absl::string_view line) {
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
  };
  std::vector<absl::string_view> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  if (lines.empty()) return absl::InvalidArgumentError("empty CSV");
  const std::vector<std::string> header = split(lines[0]);
  auto column = [&](const std::string& name) -> int {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  for (const char* required : {"source", "exchange", "nodes", "servers", "bytes", "step_s", "exchange_s"}) {
    if (column(required) < 0) {
      return absl::InvalidArgumentError(absl::StrCat("CSV has no column '", required, "': not a scaling.csv"));
    }
  }
  std::vector<RunRecord> records;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> f = split(lines[i]);
    if (f.size() != header.size()) {
      return absl::InvalidArgumentError(absl::StrCat("CSV line ", i + 1, " has ", f.size(), " fields, not ",
                                                     header.size()));
    }
    if (f[column("source")] != "measured") continue;
    auto number = [&](const std::string& name) {
      const int c = column(name);
      return c < 0 || f[c].empty() ? 0.0 : std::strtod(f[c].c_str(), nullptr);
    };
    RunRecord r;
    absl::StatusOr<Exchange> e = ParseExchange(f[column("exchange")]);
    if (!e.ok()) return e.status();
    r.exchange = *e;
    r.nodes = static_cast<int>(number("nodes"));
    r.servers = static_cast<int>(number("servers"));
    r.bytes = static_cast<size_t>(number("bytes"));
    r.steps = static_cast<int>(number("steps"));
    r.step_s = number("step_s");
    r.compute_s = number("compute_s");
    r.exchange_s = number("exchange_s");
    r.samples_per_s = number("samples_per_s");
    r.algbw = number("algbw_Bps");
    r.busbw = number("busbw_Bps");
    r.link_bytes_per_step = number("link_bytes_per_step");
    r.bytes_sent_per_step = static_cast<int64_t>(number("sent_bytes_per_step"));
    r.wrong = static_cast<int64_t>(number("wrong"));
    r.test_accuracy = number("test_accuracy");
    if (column("error") >= 0) r.error = f[column("error")];
    records.push_back(r);
  }
  return records;
}

std::string ToJson(const ScalingResult& result) {
  const ScalingOptions& o = result.options;
  std::ostringstream js;
  js << "{\n\"config\":{\"mode\":" << JsonString(o.mode) << ",\"nodes\":[" << absl::StrJoin(o.nodes, ",")
     << "],\"model_bytes\":[" << absl::StrJoin(o.model_bytes, ",") << "],\"steps\":" << o.steps
     << ",\"warmup_steps\":" << o.warmup_steps << ",\"ps_servers\":" << o.ps_servers
     << ",\"ps_mode\":" << JsonString(o.ps_mode) << ",\"link\":" << JsonString(o.link)
     << ",\"delay\":" << JsonString(o.delay) << ",\"queue\":" << JsonString(o.queue) << ",\"compute_ms\":" << JsonNumber(o.compute_ms) << "},\n";
  js << "\"cluster\":{\"emulated\":" << (result.emulated ? "true" : "false")
     << ",\"fallback_reason\":" << JsonString(result.fallback_reason)
     << ",\"link_bytes_per_second\":" << JsonNumber(result.link_bytes_per_second)
     << ",\"stream_bytes_per_second\":" << JsonNumber(result.stream_bytes_per_second) << "},\n";
  js << "\"fits\":{";
  bool first = true;
  for (const auto& [e, f] : result.fits) {
    js << (first ? "" : ",") << JsonString(ExchangeName(e)) << ":{\"alpha_s\":" << JsonNumber(f.alpha)
       << ",\"beta_s_per_byte\":" << JsonNumber(f.beta) << ",\"points\":" << f.points
       << ",\"max_relative_error\":" << JsonNumber(f.max_relative_error) << "}";
    first = false;
  }
  js << "},\n\"runs\":[\n";
  for (size_t i = 0; i < result.records.size(); ++i) {
    const RunRecord& r = result.records[i];
    js << (i ? ",\n" : "") << "{\"exchange\":" << JsonString(ExchangeName(r.exchange)) << ",\"nodes\":" << r.nodes
       << ",\"servers\":" << r.servers << ",\"bytes\":" << r.bytes << ",\"steps\":" << r.steps
       << ",\"ok\":" << (r.ok() ? "true" : "false") << ",\"step_s\":" << JsonNumber(r.step_s)
       << ",\"compute_s\":" << JsonNumber(r.compute_s) << ",\"exchange_s\":" << JsonNumber(r.exchange_s)
       << ",\"model_s\":" << JsonNumber(r.ok() ? ModelSeconds(result, r.exchange, r.nodes, r.bytes) : -1)
       << ",\"samples_per_s\":" << JsonNumber(r.samples_per_s) << ",\"algbw_Bps\":" << JsonNumber(r.algbw)
       << ",\"busbw_Bps\":" << JsonNumber(r.busbw) << ",\"link_bytes_per_step\":" << JsonNumber(r.link_bytes_per_step)
       << ",\"bytes_sent_per_step\":" << r.bytes_sent_per_step << ",\"wrong\":" << r.wrong
       << ",\"test_accuracy\":" << JsonNumber(r.test_accuracy) << ",\"wall_s\":" << JsonNumber(r.wall_s)
       << ",\"error\":" << JsonString(r.error) << "}";
  }
  js << "\n],\n\"model\":[\n";
  first = true;
  for (size_t bytes : Sizes(result)) {
    for (Exchange e : ExchangesRun(result)) {
      for (int n : o.extrapolate_nodes) {
        const double t = ModelSeconds(result, e, n, bytes);
        if (t < 0) continue;
        js << (first ? "" : ",\n") << "{\"exchange\":" << JsonString(ExchangeName(e)) << ",\"nodes\":" << n
           << ",\"bytes\":" << bytes << ",\"seconds\":" << JsonNumber(t) << "}";
        first = false;
      }
    }
  }
  js << "\n]\n}\n";
  return js.str();
}

Figure MakeFigure(const ScalingResult& result, size_t bytes) {
  const ScalingOptions& o = result.options;
  const double link = result.link_bytes_per_second;
  const bool compute_based = o.mode == "train" || o.compute_ms > 0;
  const int max_model_nodes =
      std::max(MaxMeasuredNodes(result),
               o.extrapolate_nodes.empty() ? 1 : *std::max_element(o.extrapolate_nodes.begin(),
                                                                   o.extrapolate_nodes.end()));
  Figure figure;
  figure.title = absl::StrFormat(
      "PS vs ring allreduce: %s, S = %s, B = %s per link%s",
      o.mode == "train" ? "training the MLP" : "gradient exchange", Size(bytes),
      link > 0 ? absl::StrFormat("%s (%.1f MB/s)", LinkText(result), link / 1e6) : "unlimited",
      result.emulated ? " (emulated cluster)" : " (LOOPBACK, not a network)");
  figure.subtitle = absl::StrFormat(
      "dots: measured (N = %s); dashed: fitted alpha-beta model, extrapolated to N = %d; ps-dedicated K = %d",
      absl::StrJoin(o.nodes, ","), max_model_nodes, o.ps_servers);

  Panel time;
  time.title = "Step time vs nodes";
  time.x_label = "nodes N (workers)";
  time.y_label = "time per step (s)";
  time.x_scale = Scale::kLog2;
  time.y_scale = Scale::kLog10;
  Panel eff;
  eff.title = compute_based ? "Scaling efficiency vs nodes" : "Bandwidth efficiency vs nodes";
  eff.x_label = "nodes N (workers)";
  eff.x_scale = Scale::kLog2;
  if (compute_based) {
    eff.y_label = "efficiency = T1 / step time (%)";
  } else if (link > 0) {
    eff.y_label = "busbw / link bandwidth B (%)";
  } else {
    eff.y_label = "bus bandwidth (MB/s)";
  }
  if (compute_based || link > 0) {
    eff.y_min = 0;
    eff.y_max = 100;
  }

  const double compute = SingleWorkerStepSeconds(result);
  const std::vector<Exchange> exchanges = ExchangesRun(result);
  for (size_t i = 0; i < exchanges.size(); ++i) {
    const Exchange e = exchanges[i];
    // One fixed colour per exchange, so every plot reads the same.
    const std::vector<Exchange> all = AllExchanges();
    const std::string color =
        PaletteColor(static_cast<int>(std::find(all.begin(), all.end(), e) - all.begin()));
    const std::string name = ExchangeName(e);
    // Weak scaling: efficiency = T1 / step time, T1 one worker's step without exchange.
    auto efficiency = [&](double exchange_s, double step_s, int n) {
      if (compute_based) {
        const double total = o.mode == "train" ? step_s : compute + exchange_s;
        return total > 0 ? std::min(100.0, 100 * compute / total) : 0;
      }
      const double busbw = exchange_s > 0 ? bytes / exchange_s * AllReduceBusFactor(n) : 0;
      return link > 0 ? 100 * busbw / link : busbw / 1e6;
    };
    Series measured_time{name + " measured", color, {}, Style::kMarkers};
    Series measured_eff{name + " measured", color, {}, Style::kMarkers};
    for (const auto& r : result.records) {
      if (!r.ok() || r.exchange != e || r.bytes != bytes) continue;
      // Without compute, a step that crosses no link (one node, ring or co-located) is a memory copy: no
      // point on a network plot.
      const bool crosses_link = BusiestLinkBytes(e, r.nodes, r.servers, r.bytes) > 0;
      if (!compute_based && !crosses_link) continue;
      measured_time.points.push_back({static_cast<double>(r.nodes), r.step_s});
      // busbw is not defined for one node (nothing crosses a link in an allreduce of one).
      if (r.nodes >= 2 || compute_based) {
        measured_eff.points.push_back({static_cast<double>(r.nodes), efficiency(r.exchange_s, r.step_s, r.nodes)});
      }
    }
    Series model_time{name + " model", color, {}, Style::kDashedLine};
    Series model_eff{name + " model", color, {}, Style::kDashedLine};
    if (result.fits.count(e)) {
      for (int nodes : ModelNodes(max_model_nodes)) {
        const int servers = ServerCount(e, nodes, o.ps_servers);
        if (BusiestLinkBytes(e, nodes, servers, bytes) == 0) continue;  // nothing on a link: outside the model
        const double t = PredictSeconds(e, result.fits.at(e), nodes, servers, bytes);
        const double step = (compute_based ? compute : 0) + t;
        if (step > 0) model_time.points.push_back({static_cast<double>(nodes), step});
        if (nodes >= 2 || compute_based) {
          model_eff.points.push_back({static_cast<double>(nodes), efficiency(t, step, nodes)});
        }
      }
    }
    time.series.push_back(measured_time);
    time.series.push_back(model_time);
    eff.series.push_back(measured_eff);
    eff.series.push_back(model_eff);
  }
  figure.panels = {time, eff};
  return figure;
}

absl::Status WriteOutputs(const ScalingResult& result, const std::string& dir, std::vector<std::string>* written) {
  std::string path;
  for (absl::string_view part : absl::StrSplit(dir, '/')) {
    path += std::string(part) + "/";
    if (part.empty()) continue;
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create output directory ", path, ": ", std::strerror(errno), "; pass --out_dir"));
    }
  }
  const std::vector<size_t> sizes = Sizes(result);
  std::vector<std::pair<std::string, std::string>> files = {{"scaling.csv", ToCsv(result)},
                                                            {"scaling.json", ToJson(result)}};
  if (!sizes.empty()) files.push_back({"scaling.svg", RenderSvg(MakeFigure(result, sizes.back()))});
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
