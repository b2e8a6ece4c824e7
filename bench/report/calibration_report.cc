// The calibration's report (calibration_report.h).
#include "bench/report/calibration_report.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/model/fit.h"
#include "bench/model/model_file.h"
#include "bench/model/validate.h"

namespace psring::bench {
namespace {

constexpr size_t kMiB = 1u << 20;

std::string FormatParameter(const proto::ModelParameter& p, double unit, const char* suffix) {
  if (p.dropped()) return "dropped (unidentified)";
  if (p.at_bound() && p.value() == 0) return "none (at bound)";
  std::string text = absl::StrFormat("%.4g%s", p.value() / unit, suffix);
  if (p.has_std_error()) absl::StrAppend(&text, absl::StrFormat(" +- %.2g", p.std_error() / unit));
  if (p.at_bound()) absl::StrAppend(&text, " (at bound)");
  return text;
}

template <typename T>
std::string JoinScaled(const google::protobuf::RepeatedField<T>& values, double unit, const char* suffix) {
  std::vector<std::string> parts;
  for (T v : values) parts.push_back(absl::StrFormat("%g%s", v / unit, suffix));
  return absl::StrJoin(parts, ",");
}

}  // namespace

std::string FormatCalibration(const Calibration& c) {
  std::string text = absl::StrFormat(
      "# CALIBRATION (frozen; host %s, %s): %d runs, %d fitted, %d failed, %d EMULATOR-BOUND (dropped), %d with "
      "nothing to model; %.0f s\n",
      c.file.host(), c.file.date(), c.total_runs, c.runs.size(), c.failed, c.emulator_bound, c.skipped, c.wall_s);
  for (const std::string& n : c.not_run)
    absl::StrAppend(&text, "# condition not run (time limit): ", n, "\n");
  if (c.lossy > 0) {
    absl::StrAppendFormat(
        &text,
        "# %d runs whose links dropped >= %.1f %% of their packets left out (loss: the model has "
        "no term for it; listed below)\n",
        c.lossy, 100 * kLossyDropShare);
  }
  absl::StrAppend(&text, absl::StrFormat("# %-13s %-22s %-16s %-24s %-22s %-16s %-16s %-18s %7s %7s %5s\n",
                                         "exchange", "software (us/msg)", "efficiency", "window (KiB)",
                                         "CPU ceiling (MB/s)", "burst share", "window queueing",
                                         "stream contention", "med|e|", "max|e|", "runs"));
  for (const proto::ExchangeModel& e : c.file.exchanges()) {
    // A file fitted before the term realized the whole credit (model_file.h ParamsOf).
    const std::string share =
        e.has_burst_share() ? FormatParameter(e.burst_share(), 1, "") : "1 (not fitted)";
    const std::string queueing =
        e.has_window_queueing() ? FormatParameter(e.window_queueing(), 1, "") : "0 (not fitted)";
    const std::string contention =
        e.has_stream_contention() ? FormatParameter(e.stream_contention(), 1, "") : "0 (not fitted)";
    absl::StrAppend(
        &text,
        absl::StrFormat("# %-13s %-22s %-16s %-24s %-22s %-16s %-16s %-18s %6.1f%% %6.1f%% %5d\n",
                        e.exchange(), FormatParameter(e.software_s(), 1e-6, ""),
                        FormatParameter(e.efficiency(), 1, ""), FormatParameter(e.window_bytes(), 1024, ""),
                        FormatParameter(e.cpu_bytes_per_second(), 1e6, ""), share, queueing, contention,
                        100 * e.median_abs_rel_error(), 100 * e.max_abs_rel_error(), e.coverage().runs()));
  }
  for (const proto::ExchangeModel& e : c.file.exchanges()) {
    const proto::Coverage& cov = e.coverage();
    absl::StrAppend(&text, absl::StrFormat("#   %s covers links %s MB/s, latencies %s ms, N %s, S %s MiB, K %s\n",
                                           e.exchange(), JoinScaled(cov.link_bytes_per_second(), 1e6, ""),
                                           JoinScaled(cov.latency_s(), 1e-3, ""), absl::StrJoin(cov.nodes(), ","),
                                           JoinScaled(cov.bytes(), kMiB, ""), absl::StrJoin(cov.servers(), ",")));
  }
  // What each PS window round costs beyond the round trip (collective.h window_round_s), where the file has
  // it.
  for (const proto::ExchangeModel& e : c.file.exchanges()) {
    if (!e.has_window_round_s()) continue;
    absl::StrAppend(
        &text, absl::StrFormat("#   %s window round beyond the round trip (the receiver's wake-up, read "
                               "and WINDOW_UPDATE, the sender's wake-up, the links' transit: this host's, "
                               "bench/PERFORMANCE.md 9.29; collective.h window_round_s): %s\n",
                               e.exchange(), FormatParameter(e.window_round_s(), 1e-3, " ms")));
  }
  // The windows per stream a link-bound PS step drains at its end (collective.h drain_windows), where the
  // file has it.
  for (const proto::ExchangeModel& e : c.file.exchanges()) {
    if (!e.has_drain_windows() || e.drain_windows().dropped()) continue;
    absl::StrAppend(&text,
                    absl::StrFormat("#   %s drain %s windows per stream into a server when its link binds "
                                    "(the last ranges' replies wait for each stream's last window; "
                                    "bench/PERFORMANCE.md 9.33; collective.h drain_windows)\n",
                                    e.exchange(), FormatParameter(e.drain_windows(), 1, "")));
  }
  // The fixed share of gRPC's flow control (collective.h window_update_share), where the file has it.
  for (const proto::ExchangeModel& e : c.file.exchanges()) {
    if (!e.has_window_update_share()) continue;
    absl::StrAppend(&text,
                    absl::StrFormat("#   %s window update share %.2f (gRPC's: credit returns once that share "
                                    "of the window is consumed; fixed, not fitted)\n",
                                    e.exchange(), e.window_update_share()));
  }
  // Terms the runs could not identify: what the fit gave them before they were dropped (bench/model/fit.h).
  for (const proto::ExchangeModel& e : c.file.exchanges()) {
    for (const auto& [name, p] : model::NamedParameters(e)) {
      if (!p->dropped()) continue;
      absl::StrAppend(&text, absl::StrFormat(
                                 "#   %s %s dropped: the runs do not identify it (fit %.4g +- %s, relative standard "
                                 "error above %.0f %%); refitted without it\n",
                                 e.exchange(), name, p->dropped_value(),
                                 p->has_dropped_std_error() ? absl::StrFormat("%.2g", p->dropped_std_error())
                                                            : std::string("undetermined"),
                                 100 * model::kMaxRelativeStdError));
    }
    if (e.has_loopback_residual_rel_sd()) {
      absl::StrAppend(
          &text,
          absl::StrFormat("#   %s residual scatter %.1f %% over shaped links, %.1f %% over loopback "
                          "(sd of relative residuals, each regime's; the fit weighs the runs by "
                          "it, and prediction intervals add it to the parameters' error)\n",
                          e.exchange(), 100 * e.residual_rel_sd(), 100 * e.loopback_residual_rel_sd()));
    } else {
      absl::StrAppend(&text, absl::StrFormat("#   %s residual scatter %.1f %% (sd of relative residuals; "
                                             "prediction intervals add it to the parameters' error)\n",
                                             e.exchange(), 100 * e.residual_rel_sd()));
    }
  }
  // The extrapolation error the calibration measured on itself (bench/model/fit.h MeasureExtrapolation).
  for (const proto::ExchangeModel& e : c.file.exchanges()) {
    std::vector<std::string> parts;
    for (const proto::ExtrapolationScatter& x : e.extrapolation()) {
      parts.push_back(
          absl::StrFormat("%s %.3f (up to x%.2g beyond, %d runs held out, rms %.1f %% vs %.1f %% inside)",
                          x.dimension(), x.log_sd_per_log_factor(), x.factor(), x.held_out_runs(),
                          100 * x.rms_log_error(), 100 * x.inner_scatter()));
    }
    if (parts.empty()) continue;
    absl::StrAppend(
        &text, "#   ", e.exchange(),
        " extrapolation error per unit of log(factor) (its largest values held out, the rest fitted): ",
        absl::StrJoin(parts, "; "), "\n");
  }
  for (const std::string& d : c.dropped) absl::StrAppend(&text, "# dropped: ", d, "\n");
  return text;
}

std::string FormatResiduals(const Calibration& c) {
  std::string text = absl::StrFormat(
      "# RESIDUALS: %d fitted runs against the model (err = (predicted - measured) / "
      "measured, as validation's; negative: the run was slower than the model)\n",
      c.runs.size());
  absl::StrAppend(&text,
                  absl::StrFormat("# %-13s %9s %8s %4s %3s %9s %10s %10s %8s  %s\n", "exchange", "link_MB/s",
                                  "lat_ms", "N", "K", "S_MiB", "meas_s", "pred_s", "err", "bound"));
  struct Signed {
    std::vector<double> errors;
    int slower = 0;
  };
  std::map<std::string, Signed> by_exchange;
  std::vector<std::string> order;
  for (const model::MeasuredRun& r : c.runs) {
    const std::string name = model::TopologyName(r.topology);
    const model::Conditions& k = r.conditions;
    std::string row = absl::StrFormat(
        "# %-13s %9.3g %8.3g %4d %3d %9.3g %10.4f", name, k.link_bytes_per_second / 1e6, k.latency_s * 1e3,
        k.nodes, model::ServersOf(r.topology, k.nodes, k.servers), k.bytes / kMiB, r.seconds);
    absl::StatusOr<model::ExchangeParams> params = model::ParamsOf(c.file, r.topology);
    absl::StatusOr<model::CollectiveTime> t = params.ok()
                                                  ? model::PredictCollective(r.topology, *params, k)
                                                  : absl::StatusOr<model::CollectiveTime>(params.status());
    if (!t.ok()) {
      absl::StrAppend(&text, row, "  not predicted: ", t.status().message(), "\n");
      continue;
    }
    if (t->seconds <= 0) {
      absl::StrAppend(&text, row,
                      absl::StrFormat(" %10.4f %8s  %s\n", t->seconds, "-", model::BoundName(t->bound)));
      continue;
    }
    const double err = model::RelativeError(t->seconds, r.seconds);
    absl::StrAppend(
        &text, row,
        absl::StrFormat(" %10.4f %+7.1f%%  %s\n", t->seconds, 100 * err, model::BoundName(t->bound)));
    if (!by_exchange.count(name)) order.push_back(name);
    Signed& s = by_exchange[name];
    s.errors.push_back(err);
    if (r.seconds > t->seconds) ++s.slower;
  }
  for (const std::string& name : order) {
    const Signed& s = by_exchange[name];
    const double median = *model::Quantile(s.errors, 0.5);  // not empty, finite: t->seconds, r.seconds > 0
    absl::StrAppend(
        &text, absl::StrFormat("#   %s: signed error median %+.1f %%, %d of %d runs slower than the model\n",
                               name, 100 * median, s.slower, s.errors.size()));
  }
  return text;
}

}  // namespace psring::bench
