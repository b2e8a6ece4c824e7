// The scaling report's text (scaling_report.h): the intro, one nccl-tests table per exchange, the model's
// extrapolation, the acceptance checks and the verdict.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/report/scaling_common.h"
#include "bench/report/scaling_report.h"
#include "bench/report/table.h"
#include "bench/model/data_path.h"
#include "bench/model/exchange_topology.h"
#include "bench/model/model_file.h"

namespace psring::bench {
namespace {

// Acceptance thresholds (bench/PERFORMANCE.md 5).
constexpr double kRingBusbwFraction = 0.90;
constexpr double kPsOneLinearTolerance = 0.15;
constexpr double kModelTolerance = 0.20;
constexpr double kCheckMinBytes = 4 * kMiB;
constexpr double kRingCheckBytes = 16 * kMiB;

void PrintIntro(const ScalingResult& result, std::ostream& out) {
  const ScalingOptions& o = result.options;
  const double link = result.link_bytes_per_second;
  Table intro(&out);
  intro.Comment(absl::StrFormat(
      "psring scaling: mode %s, %d measured steps per run%s, PS mode %s, ps-dedicated K = %d", o.mode,
      o.steps, o.mode == "gradient" ? absl::StrFormat(" (+%d warm-up)", o.warmup_steps) : "", o.ps_mode,
      o.ps_servers));
  if (!result.hosts_description.empty()) {
    intro.Comment("hosts: " + result.hosts_description);
    out << result.link_matrix;
    if (result.stream_bytes_per_second > 0) {
      intro.Comment(absl::StrFormat("link check: one TCP stream host 0 -> host 1 carried %.2f MB/s; TCP round trip "
                                    "%.3f ms; the model is evaluated at the slowest pair's %.2f MB/s and one-way %.3f "
                                    "ms (%s)",
                                    result.stream_bytes_per_second / 1e6, result.rtt_s * 1e3, link / 1e6,
                                    result.latency_s * 1e3,
                                    result.latency_method == "measured" ? "measured, not shaped" : "emulated"));
    }
  } else if (result.emulated) {
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
                "model = the calibrated model's prediction at this sweep's links, latency and cores (not fitted to "
                "these runs); sent_MB = payload a worker sent per measured step (max over ranks); "
                "link_MB = busiest host link direction over the whole job (frames, set-up and warm-up included) "
                "per step");
  intro.Comment(result.model.has_value() ? "model: " + ModelSource(result)
                                         : "model: none (--model=none): no model columns, lines or curves");
  if (result.model.has_value()) {
    intro.Comment(model::CompareDataPath(*result.model).Describe());
    const std::string flags =
        model::DescribeDataPathFlags(o.worker_args, o.server_args, PsChunksName(o.ps_chunks));
    if (!flags.empty()) intro.Comment(flags);
  }
  if (const std::string tcp = HostsTcpNote(result); !tcp.empty()) intro.Comment(tcp);
  out << "#\n";
}

// Why the calibrated model's figures are not of run `r` ("": they are). The model was calibrated with the
// harness's transport (model/data_path.h): a transport flag in --worker_args or --server_args changes every
// run, --ps_chunks=bdp or capped only the PS runs it gave a chunk of their own (RunRecord::ps_chunk_bytes).
std::string ModelNotComparable(const ScalingResult& result, const RunRecord& r) {
  if (!model::DataPathFlagsIn(result.options.worker_args).empty() ||
      !model::DataPathFlagsIn(result.options.server_args).empty()) {
    return "MODEL NOT COMPARABLE (transport flags)";
  }
  if (r.ps_chunk_bytes > 0) {
    return absl::StrFormat("MODEL NOT COMPARABLE (chunk %d KiB by --ps_chunks=%s)", r.ps_chunk_bytes >> 10,
                           r.ps_chunk_rule);
  }
  return "";
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
  row.note = ModelNotComparable(result, r);
  return row;
}

// The model's parameters of `e`: what its model_ms column comes from.
std::string ModelLine(const ScalingResult& result, Exchange e) {
  if (!result.model.has_value()) return "";
  absl::StatusOr<model::ExchangeParams> p = model::ParamsOf(*result.model, TopologyOf(e));
  if (!p.ok()) return absl::StrCat("model ", ExchangeName(e), ": none in the model file (", p.status().message(), ")");
  return absl::StrFormat(
      "model %s (calibrated, not fitted here): software %.1f us/message, link efficiency %.3f, window %s, "
      "CPU ceiling %s, burst share %.2f (emulated links only), window queueing %.2f, stream contention %.3f, "
      "window update share %.2f, window round %.2f ms, drain %.2f windows",
      ExchangeName(e), p->software_s * 1e6, p->efficiency,
      p->window_bytes > 0 ? Size(p->window_bytes) : "none",
      p->cpu_bytes_per_second > 0 ? absl::StrFormat("%.2f GB/s", p->cpu_bytes_per_second / 1e9) : "none",
      p->burst_share, p->window_queueing, p->stream_contention, p->window_update_share,
      p->window_round_s * 1e3, p->drain_windows);
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
  const std::string model = ModelLine(result, e);
  if (!model.empty()) table.Comment(model);
  out << "#\n";
}

// The model at N that were not measured, at the largest S.
void PrintExtrapolation(const ScalingResult& result, std::ostream& out) {
  const std::vector<size_t> sizes = Sizes(result);
  if (sizes.empty() || !result.model.has_value()) return;
  const double s = sizes.back();
  const std::vector<Exchange> exchanges = ExchangesRun(result);
  std::string header = absl::StrFormat("# MODEL %8s", "N");
  for (Exchange e : exchanges) absl::StrAppendFormat(&header, " %14s", ExchangeName(e) + "_s");
  for (Exchange e : exchanges) absl::StrAppendFormat(&header, " %14s", ExchangeName(e) + "_busMB");
  out << absl::StrFormat("# MODEL extrapolation (NOT measured): exchange time per step (s) and busbw (MB/s) at "
                         "S = %s from the calibrated model on these links, every host with cores of its own\n",
                         Size(s))
      << header << "\n";
  for (int n : result.options.extrapolate_nodes) {
    std::string line = absl::StrFormat("# MODEL %8d", n);
    for (Exchange e : exchanges) absl::StrAppendFormat(&line, " %14.3f", ExtrapolatedSeconds(result, e, n, s));
    for (Exchange e : exchanges) {
      const double t = ExtrapolatedSeconds(result, e, n, s);
      absl::StrAppendFormat(&line, " %14.3f", t > 0 ? s / t * PluginFor(e).BusFactor(n) / 1e6 : 0);
    }
    const std::string mark = ExtrapolationMarkAt(result, SweepConditions(result, n, /*on_this_box=*/false), {s});
    if (!mark.empty()) absl::StrAppend(&line, "  ", mark);
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

// Information: every exchange's runs with S >= 4 MiB against the calibrated model's prediction.
void PrintModelChecks(const ScalingResult& result, std::ostream& out) {
  for (Exchange e : ExchangesRun(result)) {
    double worst = 0;
    int points = 0;
    int not_comparable = 0;  // runs whose transport the model does not know (ModelNotComparable)
    double worst_not_comparable = 0;
    for (const auto& r : result.records) {
      if (!r.usable() || r.exchange != e || r.bytes < kCheckMinBytes || r.exchange_s <= 0 || !CrossesLink(r)) continue;
      if (ModelSeconds(result, e, r.nodes, r.bytes) <= 0) continue;
      if (!ModelNotComparable(result, r).empty()) {
        worst_not_comparable = std::max(worst_not_comparable, std::abs(ModelRelativeError(result, r)));
        ++not_comparable;
        continue;
      }
      worst = std::max(worst, std::abs(ModelRelativeError(result, r)));
      ++points;
    }
    if (points == 0 && not_comparable == 0) continue;
    // Information, not a check: a model's accuracy is reported, not asserted (the code is not wrong when the
    // model misses); its held-out accuracy with targets fixed before the runs is //bench:validate's, and
    // compare's part 4.
    const std::string left_out =
        not_comparable == 0 ? ""
                            : absl::StrFormat(
                                  "; %d runs left out (MODEL NOT COMPARABLE: these runs change the "
                                  "transport, see above; the model's |error| on them up to %.1f%%, for a "
                                  "transport it was not calibrated with)",
                                  not_comparable, 100 * worst_not_comparable);
    if (points == 0) {
      out << absl::StrFormat(
          "# info model %s S>=4 MiB (the calibrated model's prediction, not fitted on these runs): "
          "no comparable run%s\n",
          ExchangeName(e), left_out);
      continue;
    }
    out << absl::StrFormat(
        "# info model %s S>=4 MiB (the calibrated model's prediction, not fitted on these runs): max |error| "
        "%.1f%% over %d runs%s%s\n",
        ExchangeName(e), 100 * worst, points, left_out,
        worst <= kModelTolerance ? "" : " (over 20 %: //bench:validate measures how far to trust it)");
  }
}

}  // namespace

void PrintReport(const ScalingResult& result, std::ostream& out) {
  PrintIntro(result, out);
  if (result.options.mode == "replay") {
    for (Exchange e : ExchangesRun(result)) {
      const std::string model = ModelLine(result, e);
      if (!model.empty()) out << "# " << model << "\n";
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
  PrintModelChecks(result, checks);
  out << "# Acceptance checks (bench/PERFORMANCE.md)";
  if (checks.str().empty()) {
    // No bare heading: say which sizes the checks need, so the user knows how to get them.
    size_t largest = 0;
    for (const RunRecord& r : result.records) largest = std::max(largest, r.bytes);
    out << absl::StrFormat(
        ": none applies to this sweep. The ring busbw and ps-1 checks need S >= %s, the model line S >= %s "
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
    bool marked = false;
    for (int n : result.options.nodes) {
      // Only a run the network bound can be the fastest; an EMULATOR-BOUND one is shown, marked, and judged
      // against the fastest usable run.
      const RunRecord* best = nullptr;
      for (Exchange e : exchanges) {
        const RunRecord* r = Find(result, e, n, bytes);
        if (r != nullptr && r->usable() && (best == nullptr || r->step_s < best->step_s)) best = r;
      }
      std::string line = absl::StrFormat(" %5d  %-13s", n, best ? ExchangeName(best->exchange) : "-");
      for (Exchange e : exchanges) {
        const RunRecord* r = Find(result, e, n, bytes);
        if (r == nullptr) {
          absl::StrAppendFormat(&line, " %18s", "failed/not run");
        } else {
          // The ring on one node exchanges nothing, so its step is ~0 s: no meaningful ratio there.
          const bool nothing_exchanged = best != nullptr && n == 1 && best->exchange == Exchange::kRing;
          const double ratio =
              best != nullptr && best->step_s > 0 && !nothing_exchanged ? r->step_s / best->step_s : 0;
          const std::string times = ratio <= 0 ? "-" : ratio < 1000 ? absl::StrFormat("%.1fx", ratio) : ">999x";
          marked |= r->emulator_bound;
          absl::StrAppendFormat(&line, " %18s",
                                absl::StrFormat("%.3f (%s)%s", r->step_s, times, r->emulator_bound ? "*" : ""));
        }
      }
      out << line << "\n";
    }
    if (marked) out << kEmulatorBoundFootnote;
  }
}

}  // namespace psring::bench
