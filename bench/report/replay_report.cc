// Replay mode's report (scaling_report.h): real model profiles with and without bucketed overlap. Per workload: the
// tables, the overlapped-step model and its check, the overlap figures against the ideal, the model's
// extrapolation, the projection onto a user's cluster, the verdict, and the figures (step time and speedup,
// projection, one step of each exchange as a Gantt chart). bench/PERFORMANCE.md 3.2 and 7.5 explain them.
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/core/trace_merge.h"
#include "bench/model/project.h"
#include "bench/model/sweep_model.h"
#include "bench/model/workload_step.h"
#include "bench/report/gantt.h"
#include "bench/report/scaling_common.h"
#include "bench/report/scaling_report.h"
#include "bench/report/table.h"
#include "common/read_file.h"
#include "trainer/exchange.h"

namespace psring::bench {
namespace {

constexpr double kIdealTolerance = 1.15;  // bucketed step <= 1.15 x forward + max(backward, exchange)
constexpr double kMinSpeedup = 1.3;       // flat step / bucketed step
// The overlap acceptance needs compute ~ exchange (issue 15): within this factor the lines are checks.
constexpr double kBalancedRatio = 1.5;

bool Bucketed(const RunRecord& r) { return r.bucket_mb > 0; }

std::string BucketText(double bucket_mb) {
  if (bucket_mb < 0) return "default";
  return bucket_mb == 0 ? "flat" : absl::StrFormat("%g MB", bucket_mb);
}

std::vector<double> BucketCaps(const ScalingResult& result) {
  std::vector<double> caps = result.options.bucket_mbs;
  if (caps.empty()) caps = {-1};
  return caps;
}

const RunRecord* FindRun(const ScalingResult& result, const std::string& workload, Exchange e, int nodes,
                         double bucket_mb) {
  for (const RunRecord& r : result.records) {
    if (r.ok() && r.workload == workload && r.exchange == e && r.nodes == nodes && r.bucket_mb == bucket_mb) {
      return &r;
    }
  }
  return nullptr;
}

// The flat run (--bucket_mb=0) beside a bucketed one.
const RunRecord* FlatTwin(const ScalingResult& result, const RunRecord& r) {
  return FindRun(result, r.workload, r.exchange, r.nodes, 0);
}

double RelativeError(double model, double measured) {
  return model > 0 && measured > 0 ? (model - measured) / measured : 0;
}

// forward + max(backward, the flat run's exchange alone): the best an overlapped step can do.
double IdealSeconds(const RunRecord& r, const RunRecord& flat) {
  return r.forward_s + std::max(r.backward_s, flat.exchange_s) + r.optimizer_s;
}

void PrintWorkloadTables(const ScalingResult& result, const std::string& workload, std::ostream& out) {
  for (Exchange e : result.options.exchanges) {
    Table table(&out, {"N", "K", "bucket", "nbkt", "step_ms", "fwd_ms", "bwd_ms", "expo_ms", "ideal_ms",
                       "model_ms", "err%", "speedup"});
    table.Comment(
        absl::StrFormat("workload %s, exchange %s (time: the exchange per step, flat: after backward, bucketed: "
                        "from the first bucket's release to the last reply, hidden or not; algbw/busbw from that "
                        "time; expo_ms: the part backward did not hide)",
                        workload, ExchangeName(e)));
    table.Header();
    for (const RunRecord& r : result.records) {
      if (r.workload != workload || r.exchange != e) continue;
      if (!r.ok()) {
        table.Comment(absl::StrFormat("N=%d bucket %s FAILED: %s", r.nodes, BucketText(r.bucket_mb),
                                      r.error.substr(0, r.error.find('\n'))));
        continue;
      }
      const RunRecord* flat = FlatTwin(result, r);
      const double model = ReplayModelSeconds(result, e, r.nodes, workload, r.bucket_mb);
      Row row = MakeRow(r.bytes, r.bytes / 4, r.exchange_s, PluginFor(e).BusFactor(r.nodes), r.wrong);
      row.extra = {static_cast<double>(r.nodes),
                   static_cast<double>(r.servers),
                   std::max(0.0, r.bucket_mb),
                   static_cast<double>(r.buckets),
                   r.step_s * 1e3,
                   r.forward_s * 1e3,
                   r.backward_s * 1e3,
                   r.exposed_s * 1e3,
                   flat != nullptr ? IdealSeconds(r, *flat) * 1e3 : 0,
                   model * 1e3,
                   100 * RelativeError(model, r.step_s),
                   flat != nullptr && r.step_s > 0 ? flat->step_s / r.step_s : 0};
      row.emulator_bound = r.emulator_bound;
      table.Add(row);
    }
    table.Footer();
    out << "#\n";
  }
}

// The model against every measured step that crosses a link (N >= 2), flat and bucketed.
void PrintModelCheck(const ScalingResult& result, const std::string& workload, std::ostream& out) {
  for (Exchange e : result.options.exchanges) {
    double worst = 0;
    int points = 0;
    for (const RunRecord& r : result.records) {
      if (!r.usable() || r.workload != workload || r.exchange != e || r.nodes < 2) continue;
      const double model = ReplayModelSeconds(result, e, r.nodes, workload, r.bucket_mb);
      if (model <= 0) continue;
      worst = std::max(worst, std::abs(RelativeError(model, r.step_s)));
      ++points;
    }
    if (points == 0) continue;
    // A prediction of the frozen model with the measured compute, not fitted on these runs: information
    // (its held-out accuracy with targets fixed before the runs is //bench:validate's, and compare's part 4).
    out << absl::StrFormat(
        "# info model %s %s step (the calibrated model with the measured compute, not fitted on these runs): "
        "max |error| %.1f%% over %d points\n",
        workload, ExchangeName(e), 100 * worst, points);
  }
}

// Each bucketed run against its flat twin and the ideal. A check where compute ~ exchange (the acceptance
// condition), information elsewhere.
void PrintOverlapLines(const ScalingResult& result, const std::string& workload, std::ostream& out) {
  for (const RunRecord& r : result.records) {
    if (!r.usable() || r.workload != workload || !Bucketed(r) || r.nodes < 2) continue;
    const RunRecord* flat = FlatTwin(result, r);
    if (flat == nullptr || flat->exchange_s <= 0 || r.step_s <= 0) continue;
    if (!flat->usable()) {
      // The ideal comes from the flat run's exchange: a run the box bound gives no ideal to judge against.
      out << absl::StrFormat("# skip overlap %s %s N=%d bucket %s: its flat run is EMULATOR-BOUND (%s)\n", workload,
                             ExchangeName(r.exchange), r.nodes, BucketText(r.bucket_mb), flat->bound_reason);
      continue;
    }
    const double compute = r.forward_s + r.backward_s;
    const double balance = compute / flat->exchange_s;
    const bool balanced = balance <= kBalancedRatio && balance >= 1 / kBalancedRatio;
    const double ideal = IdealSeconds(r, *flat);
    const double of_ideal = r.step_s / ideal;
    const double speedup = flat->step_s / r.step_s;
    const std::string what = absl::StrFormat(
        "overlap %s %s N=%d bucket %s: step %.3f s = %.2f x ideal %.3f s (<= %.2f), %.2fx faster than flat %.3f s "
        "(>= %.1fx); compute/exchange = %.2f",
        workload, ExchangeName(r.exchange), r.nodes, BucketText(r.bucket_mb), r.step_s, of_ideal, ideal,
        kIdealTolerance, speedup, flat->step_s, kMinSpeedup, balance);
    if (!balanced) {
      out << "# info " << what << " (not ~1: no acceptance check)\n";
      continue;
    }
    // Both runs' step-to-step spread: a ratio of two of their steps can move by either.
    const double noise = std::max(r.step_spread, flat->step_spread);
    out << CheckLine(what,
                     Combine({JudgeCheck(of_ideal, kIdealTolerance, /*at_most=*/true, noise),
                              JudgeCheck(speedup, kMinSpeedup, /*at_most=*/false, noise)}),
                     noise);
  }
}

std::vector<int> ModelNodeList(const ScalingResult& result) {
  std::set<int> nodes(result.options.nodes.begin(), result.options.nodes.end());
  nodes.insert(result.options.extrapolate_nodes.begin(), result.options.extrapolate_nodes.end());
  return {nodes.begin(), nodes.end()};
}

// The cap the projection and the model lines show for "with overlap": the largest swept, else DDP's 25.
double OverlapCap(const ScalingResult& result) {
  double cap = 0;
  for (double mb : result.options.bucket_mbs) cap = std::max(cap, mb);
  return cap > 0 ? cap : 25;
}

// `prefix` lines: per N of the model's list, each exchange's step time flat and with the overlap cap, then
// `mark(N)` (an EXTRAPOLATED mark or "").
void PrintStepTable(const ScalingResult& result, const std::string& prefix,
                    const std::function<double(Exchange, int, double)>& seconds,
                    const std::function<std::string(int)>& mark, std::ostream& out) {
  const double cap = OverlapCap(result);
  std::string header = absl::StrFormat("# %s %6s", prefix, "N");
  for (Exchange e : result.options.exchanges) {
    absl::StrAppendFormat(&header, " %16s %16s", ExchangeName(e) + "_flat_s",
                          ExchangeName(e) + absl::StrFormat("_%gMB_s", cap));
  }
  out << header << "\n";
  for (int n : ModelNodeList(result)) {
    std::string line = absl::StrFormat("# %s %6d", prefix, n);
    for (Exchange e : result.options.exchanges) {
      absl::StrAppendFormat(&line, " %16.4f %16.4f", seconds(e, n, 0), seconds(e, n, cap));
    }
    const std::string extrapolated = mark(n);
    if (!extrapolated.empty()) absl::StrAppend(&line, "  ", extrapolated);
    out << line << "\n";
  }
  out << "#\n";
}

void PrintExtrapolation(const ScalingResult& result, const std::string& workload, std::ostream& out) {
  if (!result.model.has_value()) return;
  out << absl::StrFormat(
      "# MODEL %s (NOT measured): step time (s) from the calibrated model with the measured compute, flat and "
      "bucketed, on these links with every host on cores of its own\n",
      workload);
  // The collectives the workers ran: the flat step's bytes and a bucket of the (scaled) cap.
  const std::vector<double> sizes = {MeasuredCompute(result, workload).bytes,
                                     WorkerBucketMb(result.options, OverlapCap(result)) * kMiB};
  PrintStepTable(
      result, "MODEL",
      [&](Exchange e, int n, double mb) {
        return ReplayModelSeconds(result, e, n, workload, mb, /*on_this_box=*/false);
      },
      [&](int n) { return ExtrapolationMarkAt(result, SweepConditions(result, n, /*on_this_box=*/false), sizes); },
      out);
}

std::string RateText(double bytes_per_second) {
  const double bits = bytes_per_second * 8;
  return bits >= 1e9 ? absl::StrFormat("%g Gbit/s", bits / 1e9) : absl::StrFormat("%g Mbit/s", bits / 1e6);
}

void PrintProjection(const ScalingResult& result, const std::string& workload, std::ostream& out) {
  const ProjectionTarget& target = result.options.projection;
  if (target.link_bytes_per_second <= 0) return;
  auto profile = result.workloads.find(workload);
  if (!result.model.has_value() || profile == result.workloads.end()) {
    out << "# PROJECTION skipped: " << (result.model.has_value() ? "no profile of " + workload : "no model (--model=none)")
        << "\n#\n";
    return;
  }
  const proto::CostModelFile& file = *ProjectionModel(result);
  out << absl::StrFormat(
      "# PROJECTION (model, NOT measured) of %s onto a cluster with %s links and %s one-way latency: %s, at the "
      "profile's real size and bucket caps, each exchange capped by its CPU ceiling %s; step time (s)\n",
      workload, RateText(target.link_bytes_per_second), model::FormatLatency(target.latency_s), ModelSource(result),
      result.cpu_source.empty() ? "measured there" : "from " + result.cpu_source);
  const std::vector<double> sizes = {model::WorkloadBytes(profile->second), OverlapCap(result) * kMiB};
  PrintStepTable(
      result, "PROJECTION",
      [&](Exchange e, int n, double mb) { return ProjectedSeconds(result, e, n, workload, mb); },
      [&](int n) { return ExtrapolationMarkAt(result, TargetAt(result, n), sizes); }, out);
  // Which bound binds, at the largest N of the table, bucketed as the run was.
  const std::vector<int> nodes = ModelNodeList(result);
  if (!nodes.empty()) {
    const model::Conditions at = TargetAt(result, nodes.back());
    absl::StatusOr<model::StepShape> shape =
        model::WorkloadStep(profile->second, OverlapCap(result), trainer::kDefaultFirstBucketMb);
    absl::StatusOr<model::Projection> p =
        shape.ok() ? model::Project(file, at, *shape) : absl::StatusOr<model::Projection>(shape.status());
    if (p.ok()) {
      out << model::FormatProjection(file, at, *p, absl::StrFormat("%s, %g MB buckets", workload, OverlapCap(result)),
                                     result.cpu_source);
    }
  }
  out << "#\n";
}

std::vector<std::string> Workloads(const ScalingResult& result) { return result.options.workloads; }

std::string ExchangeColor(Exchange e, bool bucketed) {
  const std::vector<Exchange> all = AllExchanges();
  const int index = static_cast<int>(std::find(all.begin(), all.end(), e) - all.begin());
  return PaletteColor(2 * index + (bucketed ? 1 : 0));
}

std::string SeriesName(Exchange e, double bucket_mb) {
  return absl::StrCat(ExchangeName(e), " ", BucketText(bucket_mb));
}

Panel StepPanel(const std::string& title) {
  Panel panel;
  panel.title = title;
  panel.x_label = "nodes N (workers)";
  panel.y_label = "time per step (s)";
  panel.x_scale = Scale::kLog2;
  panel.y_scale = Scale::kLog10;
  return panel;
}

// Step time (measured dots, model dashed) and the overlap speedup flat / bucketed.
Figure WorkloadFigure(const ScalingResult& result, const std::string& workload) {
  const double cap = OverlapCap(result);
  Figure figure;
  figure.title =
      absl::StrFormat("%s replayed: PS vs ring, flat vs bucketed (%g MB) exchange%s", workload, cap,
                      result.link_bytes_per_second > 0
                          ? absl::StrFormat(", B = %s (emulated)", RateText(result.link_bytes_per_second))
                          : " (LOOPBACK, not a network)");
  figure.subtitle =
      "dots: measured; dashed: the calibrated model (measured compute, buckets overlapped with backward), on "
      "this box to the largest N measured, beyond it every host with cores of its own";
  Panel step = StepPanel("Step time vs nodes");
  Panel speedup;
  speedup.title = "Overlap speedup: flat step / bucketed step";
  speedup.x_label = "nodes N (workers)";
  speedup.y_label = "speedup (x)";
  speedup.x_scale = Scale::kLog2;
  const std::vector<int> nodes = ModelNodeList(result);
  for (Exchange e : result.options.exchanges) {
    for (double mb : BucketCaps(result)) {
      Series measured{SeriesName(e, mb) + " measured", ExchangeColor(e, mb > 0), {}, Style::kMarkers};
      Series model{SeriesName(e, mb) + " model", ExchangeColor(e, mb > 0), {}, Style::kDashedLine};
      for (const RunRecord& r : result.records) {
        if (r.ok() && r.workload == workload && r.exchange == e && r.bucket_mb == mb) {
          measured.points.push_back({static_cast<double>(r.nodes), r.step_s});
        }
      }
      for (int n : nodes) {
        const double t = ReplayModelSeconds(result, e, n, workload, mb, /*on_this_box=*/n <= MaxMeasuredNodes(result));
        if (t > 0) model.points.push_back({static_cast<double>(n), t});
      }
      step.series.push_back(measured);
      step.series.push_back(model);
    }
    Series measured{ExchangeName(e) + " measured", ExchangeColor(e, true), {}, Style::kMarkers};
    Series model{ExchangeName(e) + " model", ExchangeColor(e, true), {}, Style::kDashedLine};
    for (const RunRecord& r : result.records) {
      const RunRecord* flat =
          r.ok() && r.workload == workload && r.exchange == e && Bucketed(r) ? FlatTwin(result, r) : nullptr;
      if (flat != nullptr && r.step_s > 0)
        measured.points.push_back({static_cast<double>(r.nodes), flat->step_s / r.step_s});
    }
    for (int n : nodes) {
      const bool on_this_box = n <= MaxMeasuredNodes(result);
      const double flat = ReplayModelSeconds(result, e, n, workload, 0, on_this_box);
      const double bucketed = ReplayModelSeconds(result, e, n, workload, cap, on_this_box);
      if (flat > 0 && bucketed > 0) model.points.push_back({static_cast<double>(n), flat / bucketed});
    }
    speedup.series.push_back(measured);
    speedup.series.push_back(model);
  }
  figure.panels = {step, speedup};
  return figure;
}

// The projection alone, dashed only, and titled as what it is.
Figure ProjectionFigure(const ScalingResult& result, const std::string& workload) {
  const ProjectionTarget& target = result.options.projection;
  const double cap = OverlapCap(result);
  Figure figure;
  figure.title = absl::StrFormat("PROJECTION (model, NOT measured): %s on %s links, %s one-way latency", workload,
                                 RateText(target.link_bytes_per_second), model::FormatLatency(target.latency_s));
  figure.subtitle = absl::StrFormat(
      "the profile's own compute and gradient size; %s%s; flat vs %g MB buckets", ModelSource(result),
      result.cpu_source.empty() ? "" : "; CPU ceilings from " + result.cpu_source, cap);
  Panel step = StepPanel("Projected step time vs nodes");
  for (Exchange e : result.options.exchanges) {
    for (double mb : {0.0, cap}) {
      Series s{SeriesName(e, mb) + " projection", ExchangeColor(e, mb > 0), {}, Style::kDashedLine};
      for (int n : ModelNodeList(result)) {
        const double t = ProjectedSeconds(result, e, n, workload, mb);
        if (t > 0) s.points.push_back({static_cast<double>(n), t});
      }
      step.series.push_back(s);
    }
  }
  figure.panels = {step};
  return figure;
}

// One step in the middle of the measured ones, of each exchange at the largest N measured, flat and bucketed.
absl::StatusOr<std::string> GanttFigure(const ScalingResult& result, const std::string& workload) {
  int largest = 0;
  for (const RunRecord& r : result.records) {
    if (r.ok() && r.workload == workload && !r.timeline.empty()) largest = std::max(largest, r.nodes);
  }
  std::vector<GanttSection> sections;
  for (Exchange e : result.options.exchanges) {
    for (double mb : BucketCaps(result)) {
      const RunRecord* r = FindRun(result, workload, e, largest, mb);
      if (r == nullptr || r->timeline.empty()) continue;
      absl::StatusOr<std::string> text = ReadFileToString(
          r->timeline, absl::StrCat("cannot read the timeline of ", ExchangeName(e), " N = ", largest, " (",
                                    r->timeline, "): rerun the sweep with its out_dir intact"));
      if (!text.ok()) return text.status();
      absl::StatusOr<std::vector<TraceSpan>> spans = ReadSpans(*text);
      if (!spans.ok()) return spans.status();
      sections.push_back({absl::StrFormat("%s, N = %d, bucket %s: step %.3f s (exposed exchange %.3f s)",
                                          ExchangeName(e), largest, BucketText(mb), r->step_s, r->exposed_s),
                          OneStep(*spans, (result.options.warmup_steps + r->steps) / 2)});
    }
  }
  if (sections.empty()) return std::string();
  return RenderGantt(
      absl::StrFormat("%s: one measured step per exchange (from the merged timelines)", workload), sections);
}

std::string FileSafe(std::string name) {
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

}  // namespace

void PrintReplayReport(const ScalingResult& result, std::ostream& out) {
  for (const std::string& workload : Workloads(result)) {
    const Compute compute = MeasuredCompute(result, workload);
    out << absl::StrFormat(
        "# workload %s: S = %.2f MB of gradients, compute per step forward %.1f ms + backward %.1f ms (timed "
        "waits, as the workers measured them), optimizer %.1f ms\n#\n",
        workload, compute.bytes / 1e6, compute.forward_s * 1e3, compute.backward_s * 1e3,
        compute.optimizer_s * 1e3);
    PrintWorkloadTables(result, workload, out);
    PrintExtrapolation(result, workload, out);
    PrintProjection(result, workload, out);
    out << "# Checks (bench/PERFORMANCE.md 5)\n";
    PrintModelCheck(result, workload, out);
    PrintOverlapLines(result, workload, out);
    out << "#\n";
  }
}

void PrintReplayVerdict(const ScalingResult& result, std::ostream& out) {
  for (const std::string& workload : Workloads(result)) {
    out << absl::StrFormat("# VERDICT %s: seconds per step (x slower than the fastest)\n", workload);
    std::string header = absl::StrFormat("#%5s  %-20s", "N", "fastest");
    for (Exchange e : result.options.exchanges) {
      for (double mb : BucketCaps(result)) absl::StrAppendFormat(&header, " %20s", SeriesName(e, mb));
    }
    out << header << "\n";
    bool marked = false;
    for (int n : result.options.nodes) {
      // Only a run the network bound can be the fastest (EMULATOR-BOUND cells are marked and judged against it).
      const RunRecord* best = nullptr;
      for (const RunRecord& r : result.records) {
        if (r.usable() && r.workload == workload && r.nodes == n && (best == nullptr || r.step_s < best->step_s))
          best = &r;
      }
      std::string line = absl::StrFormat(" %5d  %-20s", n,
                                         best != nullptr ? SeriesName(best->exchange, best->bucket_mb) : "-");
      for (Exchange e : result.options.exchanges) {
        for (double mb : BucketCaps(result)) {
          const RunRecord* r = FindRun(result, workload, e, n, mb);
          if (r == nullptr) {
            absl::StrAppendFormat(&line, " %20s", "failed/not run");
          } else {
            marked |= r->emulator_bound;
            const double ratio = best != nullptr && best->step_s > 0 ? r->step_s / best->step_s : 0;
            absl::StrAppendFormat(&line, " %20s",
                                  absl::StrFormat("%.3f (%.2fx)%s", r->step_s, ratio, r->emulator_bound ? "*" : ""));
          }
        }
      }
      out << line << "\n";
    }
    if (marked) out << kEmulatorBoundFootnote;
  }
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReplayFigures(const ScalingResult& result) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const std::string& workload : Workloads(result)) {
    const std::string name = FileSafe(workload);
    files.push_back({absl::StrCat("scaling-", name, ".svg"), RenderSvg(WorkloadFigure(result, workload))});
    if (result.options.projection.link_bytes_per_second > 0 && result.model.has_value()) {
      files.push_back(
          {absl::StrCat("projection-", name, ".svg"), RenderSvg(ProjectionFigure(result, workload))});
    }
    absl::StatusOr<std::string> gantt = GanttFigure(result, workload);
    if (!gantt.ok()) return gantt.status();
    if (!gantt->empty()) files.push_back({absl::StrCat("gantt-", name, ".svg"), *gantt});
  }
  return files;
}

}  // namespace psring::bench
