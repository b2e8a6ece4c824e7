// The scaling figure (scaling_report.h): step time and efficiency against N, measured and modelled.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/report/scaling_common.h"
#include "bench/report/scaling_report.h"

namespace psring::bench {
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
        "dots: measured (N = %s); dashed: the calibrated model, on this box to N = %d, then every host with "
        "cores of its own to N = %d; ps-dedicated K = %d",
        absl::StrJoin(o_.nodes, ","), MaxMeasuredNodes(result_), max_model_nodes_, o_.ps_servers);
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
    const int measured = MaxMeasuredNodes(result_);
    for (int nodes : result_.model.has_value() ? ModelNodes(max_model_nodes_) : std::vector<int>()) {
      RunRecord shape;
      shape.exchange = e;
      shape.nodes = nodes;
      shape.servers = PluginFor(e).Servers(nodes, o_.ps_servers);
      shape.bytes = bytes_;
      if (!CrossesLink(shape)) continue;  // nothing on a link: outside the model
      // The measured range on this box (its cores shared), beyond it hosts of their own.
      const double t = nodes <= measured ? ModelSeconds(result_, e, nodes, bytes_)
                                         : ExtrapolatedSeconds(result_, e, nodes, bytes_);
      if (t < 0) continue;
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

}  // namespace psring::bench
