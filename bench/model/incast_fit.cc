#include "bench/model/incast_fit.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/core/links.h"
#include "bench/model/model_file.h"
#include "bench/model/validate.h"
#include "common/read_file.h"
#include "common/status_macros.h"

namespace psring::bench::model {
namespace {

absl::Status BadRow(absl::string_view origin, absl::string_view line, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(origin, ": a report row ", why, " (not a //bench:validate report?): '", line, "'"));
}

bool ParseNumber(absl::string_view text, double* out) {
  return absl::SimpleAtod(text, out) && std::isfinite(*out);
}

// "+0.412 s" after "INCAST xR " in a row's note: the cost the report's model included.
double IncastCostIn(absl::string_view note) {
  const size_t at = note.find("INCAST x");
  if (at == absl::string_view::npos) return 0;
  const std::vector<absl::string_view> words = absl::StrSplit(note.substr(at), ' ', absl::SkipEmpty());
  if (words.size() < 4 || !absl::StartsWith(words[2], "+") || !absl::StartsWith(words[3], "s")) return 0;
  double cost = 0;
  return ParseNumber(words[2].substr(1), &cost) ? cost : 0;
}

// Size of a condition name's last word: "1MiB", "512KiB", "1.5MiB".
bool ParseSizeName(absl::string_view word, double* bytes) {
  double unit = 0;
  if (absl::ConsumeSuffix(&word, "MiB")) {
    unit = 1 << 20;
  } else if (absl::ConsumeSuffix(&word, "KiB")) {
    unit = 1 << 10;
  } else {
    return false;
  }
  double value = 0;
  if (!ParseNumber(word, &value) || value <= 0) return false;
  *bytes = value * unit;
  return true;
}

}  // namespace

absl::StatusOr<std::vector<ReportRow>> ParseValidationReport(absl::string_view text,
                                                             absl::string_view origin) {
  std::vector<ReportRow> rows;
  std::string model_date;
  constexpr absl::string_view kHeader = "# VALIDATION on held-out conditions (model of ";
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, kHeader)) {  // "(model of HOST, DATE, frozen; ..."
      const std::vector<absl::string_view> parts = absl::StrSplit(line.substr(kHeader.size()), ", ");
      if (parts.size() >= 2) model_date = std::string(parts[1]);
      continue;
    }
    if (!absl::StartsWith(line, "  ")) continue;
    const std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t at = 0;
    absl::StatusOr<Topology> topology = absl::InvalidArgumentError("");
    for (; at < words.size(); ++at) {
      topology = ParseTopology(std::string(words[at]));
      if (topology.ok()) break;
    }
    if (!topology.ok() || at == 0) continue;  // not a table row
    // exchange, pred_s, "[lo,", "hi]", meas_s, err, pred_exp, meas_exp, err, bound, note...
    if (words.size() < at + 10) return BadRow(origin, line, "has too few columns");
    ReportRow row;
    row.origin = std::string(origin);
    row.topology = *topology;
    row.condition = absl::StrJoin(words.begin(), words.begin() + at, " ");
    if (!ParseNumber(words[at + 1], &row.predicted_s) || row.predicted_s <= 0) {
      return BadRow(origin, line, "has no prediction");
    }
    if (words[at + 4] != "-" && (!ParseNumber(words[at + 4], &row.measured_s) || row.measured_s <= 0)) {
      return BadRow(origin, line, "has a measured time that is not a number");
    }
    absl::string_view note;
    if (words.size() > at + 10) {
      note = line.substr(static_cast<size_t>(words[at + 10].data() - line.data()));
    }
    const bool wrong = words.size() > at + 11 && words[at + 11] == "wrong";
    row.excluded = row.measured_s <= 0 || absl::StartsWith(note, "EMULATOR-BOUND") ||
                   absl::StartsWith(note, "failed") || wrong;
    row.incast_s = IncastCostIn(note);
    row.model_date = model_date;
    rows.push_back(row);
  }
  if (rows.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": no rows of a validation report (//bench:validate's table) in it"));
  }
  return rows;
}

absl::StatusOr<std::vector<ReportRow>> ReadValidationReport(const std::string& path,
                                                            absl::string_view origin) {
  ASSIGN_OR_RETURN(
      const std::string text,
      ReadFileToString(path, absl::StrCat("cannot read report ", origin, " (", path, "): check the path")));
  return ParseValidationReport(text, origin);
}

absl::StatusOr<std::vector<IncastPoint>> IncastPointsOf(const proto::CostModelFile& model,
                                                        const std::vector<ReportRow>& rows,
                                                        const ReportDefaults& defaults,
                                                        const proto::CostModelFile* reports_model) {
  const proto::CostModelFile& predicted_by = reports_model != nullptr ? *reports_model : model;
  std::vector<IncastPoint> points;
  for (const ReportRow& row : rows) {
    if (row.topology == Topology::kRing || row.excluded) continue;
    if (!row.model_date.empty() && row.model_date != predicted_by.date()) {
      return absl::InvalidArgumentError(absl::StrCat(
          row.origin, " was predicted by the model file of ", row.model_date, ", not by ",
          reports_model != nullptr ? "the reports' model given" : "this one", " (", predicted_by.date(),
          "): its predictions are that model's; fit with that file (or name it as the reports' model), or "
          "validate this model on the plan again"));
    }
    // "70mbit 40ms [queue 10ms] N=8 1MiB"; a replayed workload ends otherwise.
    const std::vector<std::string> words = absl::StrSplit(row.condition, ' ', absl::SkipEmpty());
    const bool queued = words.size() == 6 && words[2] == "queue";
    if (words.size() != 4 && !queued) continue;
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(row.origin, ": condition '", row.condition, "' ", why));
    };
    absl::StatusOr<double> bits = ParseLinkRate(words[0]);
    if (!bits.ok() || *bits <= 0) return bad("has no link rate");
    absl::StatusOr<double> latency = ParseLatency(words[1]);
    if (!latency.ok()) return bad("has no latency");
    double queue_s = defaults.queue_s;
    if (queued) {
      absl::StatusOr<double> q = ParseQueue(words[3]);
      if (!q.ok()) return bad("has a queue that is not a duration");
      queue_s = *q;
    }
    const std::string& n_word = words[words.size() - 2];
    int nodes = 0;
    if (!absl::StartsWith(n_word, "N=") || !absl::SimpleAtoi(n_word.substr(2), &nodes) || nodes < 1) {
      return bad("has no N=");
    }
    double bytes = 0;
    if (!ParseSizeName(words.back(), &bytes)) continue;  // a replayed workload ("... flat")

    IncastPoint p;
    p.row = row;
    Conditions& c = p.conditions;
    c.nodes = nodes;
    c.servers = defaults.ps_servers;
    c.bytes = bytes;
    c.link_bytes_per_second = *bits / 8;
    c.latency_s = *latency;
    c.link_burst_bytes = static_cast<double>(TbfBurstBytes(c.link_bytes_per_second, defaults.burst_s));
    c.port_buffer_bytes = c.link_bytes_per_second * queue_s + c.link_burst_bytes;
    ASSIGN_OR_RETURN(ExchangeParams params, ParamsOf(model, row.topology));
    params.incast_round_trips = 1;
    params.incast_onset_ratio = 1;  // the point's x is the term from the buffer on; the fit moves R0
    p.ratio = IncastOf(row.topology, params, c).ratio();
    p.round_trip_s = IncastRoundTripS(c);
    p.x = IncastCostOf(row.topology, params, c);
    if (!(p.x > 0)) continue;  // R <= 1, or a round trip below the term's floor
    p.lossless_s = row.lossless_s();
    if (reports_model != nullptr) {
      ASSIGN_OR_RETURN(ExchangeParams then, ParamsOf(*reports_model, row.topology));
      ExchangeParams now = params;
      now.incast_round_trips = then.incast_round_trips = 0;
      p.lossless_s += PredictCollectiveUnchecked(row.topology, now, c).seconds -
                      PredictCollectiveUnchecked(row.topology, then, c).seconds;
    }
    p.excess_s = row.measured_s - p.lossless_s;
    points.push_back(p);
  }
  return points;
}

double IncastTermAt(const IncastPoint& p, double onset) {
  return IncastCutsTime(p.ratio, onset, p.round_trip_s);
}

namespace {

// A point's weight in the fit: the validation judges relative step error, so 1 / the lossless step^2.
double WeightOf(const IncastPoint& p) { return 1 / (p.lossless_s * p.lossless_s); }

// The weighted least-squares slope through the origin at `onset` and its weighted residual sum of squares;
// slope 0 where no point's term is above 0 there.
struct Slope {
  double c = 0;
  double sse = 0;
  double xx = 0;  // sum of w x^2
};
Slope SlopeAt(const std::vector<const IncastPoint*>& points, double onset) {
  double xy = 0, xx = 0;
  for (const IncastPoint* p : points) {
    const double w = WeightOf(*p);
    const double x = IncastTermAt(*p, onset);
    xy += w * x * p->excess_s;
    xx += w * x * x;
  }
  Slope s;
  s.xx = xx;
  s.c = xx > 0 ? xy / xx : 0;
  // The residuals in a second pass (not yy - 2 c xy + c^2 xx, which cancels near a close fit).
  for (const IncastPoint* p : points) {
    const double r = p->excess_s - s.c * IncastTermAt(*p, onset);
    s.sse += WeightOf(*p) * r * r;
  }
  return s;
}

// The onset on the grid (from 1 in kIncastOnsetStep steps up to the options' largest) whose slope leaves the
// least weighted residual, and that slope; the grid's first (1) where `fit_onset` is false. The smaller onset
// wins a tie.
std::pair<double, Slope> BestOnset(const std::vector<const IncastPoint*>& points,
                                   const IncastFitOptions& options) {
  double best_onset = 1;
  Slope best = SlopeAt(points, 1);
  if (!options.fit_onset) return {best_onset, best};
  const int steps = static_cast<int>(std::lround((options.max_onset - 1) / kIncastOnsetStep));
  for (int i = 1; i <= steps; ++i) {
    const double onset = 1 + i * kIncastOnsetStep;
    const Slope s = SlopeAt(points, onset);
    if (s.c > 0 && s.sse < best.sse) {
      best = s;
      best_onset = onset;
    }
  }
  return {best_onset, best};
}

double StdDev(const std::vector<double>& v) {
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / static_cast<double>(v.size() - 1));
}

}  // namespace

absl::StatusOr<proto::IncastCost> FitIncast(const std::vector<IncastPoint>& points,
                                            const IncastFitOptions& options, IncastFitReport* report) {
  const int n = static_cast<int>(points.size());
  if (n < 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        n,
        " usable PS runs whose window burst exceeds their port's buffer: the term needs at least 3 (give "
        "reports of held-out runs with shallow queues, e.g. a plan whose sweeps set \"queue\": \"5ms\")"));
  }
  if (!(options.max_onset >= 1) || options.bootstrap_resamples < 0) {
    return absl::InvalidArgumentError("the fit's options need max_onset >= 1 and bootstrap_resamples >= 0");
  }
  std::vector<const IncastPoint*> all;
  for (const IncastPoint& p : points) {
    if (!(p.lossless_s > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(p.row.origin, ": ", p.row.condition, " ",
                                                     TopologyName(p.row.topology),
                                                     " has no positive predicted step: not a report row"));
    }
    all.push_back(&p);
  }
  auto [onset, slope] = BestOnset(all, options);
  if (!(slope.c > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the runs' excess over the lossless model does not grow with the incast term (slope ",
                     slope.c, "): nothing to fit; keep the model without the term"));
  }

  // The bootstrap: the same fit on resamples of the runs (drawn with replacement, a fixed seed, so a refit of
  // the same reports gives the same file). Its spread is the standard error of c and of the onset together.
  IncastFitReport local;
  IncastFitReport& r = report != nullptr ? *report : local;
  r = IncastFitReport();
  r.onset_fitted = onset;
  const auto resample_spread = [&](bool fit_onset, std::vector<double>* cs, std::vector<double>* onsets) {
    IncastFitOptions o = options;
    o.fit_onset = fit_onset;
    std::mt19937_64 draw(kIncastBootstrapSeed);
    std::vector<const IncastPoint*> sample(all.size());
    for (int b = 0; b < options.bootstrap_resamples; ++b) {
      for (auto& p : sample) p = all[draw() % all.size()];
      const auto [o_b, s_b] = BestOnset(sample, o);
      if (!(s_b.c > 0)) continue;
      cs->push_back(s_b.c);
      onsets->push_back(o_b);
    }
  };
  std::vector<double> cs, onsets;
  if (options.bootstrap_resamples >= 20) resample_spread(options.fit_onset, &cs, &onsets);
  if (options.fit_onset && onsets.size() >= 20) {
    r.onset_std_error = StdDev(onsets);
    r.onset_low = *Quantile(onsets, 0.05);  // finite, and at least 20 of them
    r.onset_high = *Quantile(onsets, 0.95);
    r.onset_identified = r.onset_std_error <= kIdentifiedRelativeError * onset;
  }
  if (options.fit_onset && !r.onset_identified) {
    // Not pinned down by these runs: dropped, and the term starts at the buffer (R0 = 1).
    onset = 1;
    slope = SlopeAt(all, 1);
    cs.clear();
    onsets.clear();
    if (options.bootstrap_resamples >= 20) resample_spread(false, &cs, &onsets);
  }

  double residual = 0, term = 0, lo = points[0].round_trip_s, hi = lo;
  for (const IncastPoint* p : all) {
    const double w = WeightOf(*p);
    const double fitted = slope.c * IncastTermAt(*p, onset);
    residual += w * (p->excess_s - fitted) * (p->excess_s - fitted);
    term += w * fitted * fitted;
    lo = std::min(lo, p->round_trip_s);
    hi = std::max(hi, p->round_trip_s);
  }
  const double residual_var = residual / (n - 1);
  proto::IncastCost out;
  out.mutable_round_trips_per_cut()->set_value(slope.c);
  // The bootstrap's spread where it ran; else the slope's own from the residuals (onset held fixed).
  out.mutable_round_trips_per_cut()->set_std_error(cs.size() >= 20 ? StdDev(cs)
                                                                   : std::sqrt(residual_var / slope.xx));
  if (onset > 1) {
    out.mutable_onset_ratio()->set_value(onset);
    out.mutable_onset_ratio()->set_std_error(r.onset_std_error);
  }
  out.set_multiplicative_decrease(kCubicMultiplicativeDecrease);
  out.set_residual_rel_sd(term > 0 ? std::sqrt(residual_var / (term / n)) : 0);
  out.set_runs(n);
  out.set_min_round_trip_s(lo);
  out.set_max_round_trip_s(hi);
  return out;
}

}  // namespace psring::bench::model
