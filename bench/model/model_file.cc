#include "bench/model/model_file.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/proto_json.h"
#include "common/read_file.h"
#include "google/protobuf/util/json_util.h"

namespace psring::bench::model {
namespace {

constexpr char kRecalibrate[] = "recalibrate (//bench:calibrate) or fix the file";

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("model file: ", where, ": ", what, "; ", kRecalibrate));
}

// How a parameter's value is bounded beyond >= 0.
enum class Range { kNonNegative, kEfficiency /* (0, 1] */, kShare /* [0, 1] */ };

// A parameter: present, with a finite value >= 0 in `range`.
absl::Status CheckParameter(const std::string& exchange, const char* name, bool present,
                            const proto::ModelParameter& p, Range range) {
  const bool fraction = range == Range::kEfficiency;
  const std::string where = absl::StrCat(exchange, ".", name);
  if (!present || !p.has_value()) return Invalid(where, "missing");
  if (!std::isfinite(p.value()) || p.value() < 0) {
    return Invalid(where, absl::StrCat("= ", p.value(), ": must be finite and >= 0"));
  }
  if (fraction && !(p.value() > 0 && p.value() <= 1)) {
    return Invalid(where, absl::StrCat("= ", p.value(), ": must be in (0, 1] (no exchange beats its link)"));
  }
  if (range == Range::kShare && p.value() > 1) {
    return Invalid(where, absl::StrCat("= ", p.value(), ": must be in [0, 1] (a share of the link's burst)"));
  }
  if (p.has_std_error() && !(std::isfinite(p.std_error()) && p.std_error() >= 0)) {
    return Invalid(where, absl::StrCat("std_error = ", p.std_error(), ": must be finite and >= 0"));
  }
  if (p.dropped() && !(p.at_bound() && (p.value() == 0 || fraction))) {
    return Invalid(where, "dropped, but not held off (a dropped term has value 0 and at_bound)");
  }
  return absl::OkStatus();
}

// The covariance block: known, distinct term names, terms^2 finite entries with a non-negative diagonal.
absl::Status CheckCovariance(const proto::ExchangeModel& e) {
  const int n = e.covariance_terms_size();
  std::set<std::string> terms;
  for (const std::string& t : e.covariance_terms()) {
    if (ParamMember(t) == nullptr) {
      return Invalid(e.exchange(), absl::StrCat("covariance_terms: unknown term '", t, "'"));
    }
    if (!terms.insert(t).second) return Invalid(e.exchange(), absl::StrCat("covariance_terms: '", t, "' twice"));
  }
  if (e.log_covariance_size() != n * n) {
    return Invalid(e.exchange(), absl::StrCat("log_covariance has ", e.log_covariance_size(), " entries for ", n,
                                              " terms (needs ", n * n, ")"));
  }
  for (int i = 0; i < e.log_covariance_size(); ++i) {
    const double v = e.log_covariance(i);
    if (!std::isfinite(v) || (i % (n + 1) == 0 && v < 0)) {
      return Invalid(e.exchange(), absl::StrCat("log_covariance[", i, "] = ", v, " is not a covariance"));
    }
  }
  if (e.has_residual_rel_sd() && !(std::isfinite(e.residual_rel_sd()) && e.residual_rel_sd() >= 0)) {
    return Invalid(e.exchange(), absl::StrCat("residual_rel_sd = ", e.residual_rel_sd(), ": must be >= 0"));
  }
  if (e.has_loopback_residual_rel_sd() &&
      !(std::isfinite(e.loopback_residual_rel_sd()) && e.loopback_residual_rel_sd() >= 0)) {
    return Invalid(e.exchange(), absl::StrCat("loopback_residual_rel_sd = ", e.loopback_residual_rel_sd(),
                                              ": must be >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelFile(const proto::CostModelFile& file) {
  if (!file.has_version()) return Invalid("version", "missing");
  if (file.version() != kModelFileVersion) {
    return Invalid("version", absl::StrCat(file.version(), " is not the version this build reads (",
                                           kModelFileVersion, ")"));
  }
  if (file.host().empty()) return Invalid("host", "missing (the CPU ceilings hold for one host)");
  if (file.date().empty()) return Invalid("date", "missing");
  std::set<Topology> seen;
  for (const proto::ExchangeModel& e : file.exchanges()) {
    absl::StatusOr<Topology> topology = ParseTopology(e.exchange());
    if (!topology.ok()) return Invalid("exchanges", topology.status().message());
    if (!seen.insert(*topology).second) return Invalid(e.exchange(), "appears twice");
    if (auto s = CheckParameter(e.exchange(), "software_s", e.has_software_s(), e.software_s(),
                                Range::kNonNegative);
        !s.ok()) {
      return s;
    }
    if (auto s = CheckParameter(e.exchange(), "efficiency", e.has_efficiency(), e.efficiency(),
                                Range::kEfficiency);
        !s.ok()) {
      return s;
    }
    if (auto s = CheckParameter(e.exchange(), "window_bytes", e.has_window_bytes(), e.window_bytes(),
                                Range::kNonNegative);
        !s.ok()) {
      return s;
    }
    if (auto s = CheckParameter(e.exchange(), "cpu_bytes_per_second", e.has_cpu_bytes_per_second(),
                                e.cpu_bytes_per_second(), Range::kNonNegative);
        !s.ok()) {
      return s;
    }
    if (e.has_window_queueing()) {  // absent in files fitted before the term (ParamsOf: 0)
      if (auto s = CheckParameter(e.exchange(), "window_queueing", true, e.window_queueing(), Range::kShare);
          !s.ok()) {
        return s;
      }
    }
    if (e.has_stream_contention()) {  // absent in files fitted before the term (ParamsOf: 0)
      if (auto s =
              CheckParameter(e.exchange(), "stream_contention", true, e.stream_contention(), Range::kShare);
          !s.ok()) {
        return s;
      }
    }
    if (e.has_window_update_share() &&  // absent in files fitted before the term (ParamsOf: 0)
        !(std::isfinite(e.window_update_share()) && e.window_update_share() >= 0 &&
          e.window_update_share() <= 1)) {
      return Invalid(absl::StrCat(e.exchange(), ".window_update_share"),
                     absl::StrCat(e.window_update_share(), " is not in [0, 1] (a share of the window)"));
    }
    if (e.has_window_round_s()) {  // absent in files fitted before the term (ParamsOf: 0)
      if (auto s =
              CheckParameter(e.exchange(), "window_round_s", true, e.window_round_s(), Range::kNonNegative);
          !s.ok()) {
        return s;
      }
    }
    if (e.has_drain_windows()) {  // absent in files fitted before the term (ParamsOf: 0)
      if (auto s =
              CheckParameter(e.exchange(), "drain_windows", true, e.drain_windows(), Range::kNonNegative);
          !s.ok()) {
        return s;
      }
    }
    if (e.has_burst_share()) {  // absent in files fitted before the term (ParamsOf: 1)
      if (auto s = CheckParameter(e.exchange(), "burst_share", true, e.burst_share(), Range::kShare);
          !s.ok()) {
        return s;
      }
    }
    if (auto s = CheckCovariance(e); !s.ok()) return s;
    for (const proto::ExtrapolationScatter& x : e.extrapolation()) {
      const std::string& d = x.dimension();
      if (d != "N" && d != "latency" && d != "size" && d != "link") {
        return Invalid(e.exchange(),
                       absl::StrCat("extrapolation dimension '", d, "' is none of N, latency, size, link"));
      }
      if (!(x.log_sd_per_log_factor() >= 0 && std::isfinite(x.log_sd_per_log_factor()))) {
        return Invalid(e.exchange(), absl::StrCat("extrapolation ", d, " log_sd_per_log_factor ",
                                                  x.log_sd_per_log_factor(), " is not a finite value >= 0"));
      }
    }
  }
  for (Topology t : AllTopologies()) {
    if (!seen.count(t)) return Invalid(TopologyName(t), "missing (every exchange of the race is required)");
  }
  if (file.has_incast()) {
    const proto::IncastCost& incast = file.incast();
    const double c = incast.round_trips_per_cut().value();
    if (!(std::isfinite(c) && c > 0)) {
      return Invalid("incast.round_trips_per_cut",
                     absl::StrCat(c, " is not > 0 (refit: //bench:fit_incast)"));
    }
    const double beta = incast.multiplicative_decrease();
    if (!(std::abs(beta - kCubicMultiplicativeDecrease) <= 1e-9)) {
      return Invalid("incast.multiplicative_decrease",
                     absl::StrCat(beta, ": this build's term is cubic's ", kCubicMultiplicativeDecrease,
                                  " (the hosts' TCP); refit with //bench:fit_incast"));
    }
    if (!(std::isfinite(incast.residual_rel_sd()) && incast.residual_rel_sd() >= 0)) {
      return Invalid("incast.residual_rel_sd", absl::StrCat(incast.residual_rel_sd(), ": must be >= 0"));
    }
    if (incast.has_onset_ratio()) {
      const double r0 = incast.onset_ratio().value();
      if (!(std::isfinite(r0) && r0 >= 1)) {
        return Invalid("incast.onset_ratio", absl::StrCat(r0, " is not >= 1 (refit: //bench:fit_incast)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::CostModelFile> ParseModelFile(absl::string_view json, absl::string_view origin) {
  proto::CostModelFile file;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed = google::protobuf::util::JsonStringToMessage(std::string(json), &file, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": not a model file (bench/model/cost_model_file.proto): ", parsed.ToString()));
  }
  if (absl::Status s = ValidateModelFile(file); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", s.message()));
  }
  return file;
}

absl::StatusOr<std::string> ModelFileJson(const proto::CostModelFile& file) {
  if (absl::Status s = ValidateModelFile(file); !s.ok()) return s;
  return PrettyJson(file, "the model");
}

absl::StatusOr<proto::CostModelFile> ReadModelFile(const std::string& path) {
  absl::StatusOr<std::string> text =
      ReadFileToString(path, absl::StrCat(path, ": cannot open the model file; calibrate one with ",
                                          "//bench:calibrate or pass the path of an existing one"));
  if (!text.ok()) return text.status();
  return ParseModelFile(*text, path);
}

absl::Status WriteModelFile(const std::string& path, const proto::CostModelFile& file) {
  absl::StatusOr<std::string> json = ModelFileJson(file);
  if (!json.ok()) return json.status();
  return WriteFileAtomically(path, *json);
}

std::vector<std::pair<const char*, const proto::ModelParameter*>> NamedParameters(
    const proto::ExchangeModel& e) {
  return {{"software_s", &e.software_s()},
          {"efficiency", &e.efficiency()},
          {"window_bytes", &e.window_bytes()},
          {"cpu_bytes_per_second", &e.cpu_bytes_per_second()},
          {"burst_share", &e.burst_share()},
          {"window_queueing", &e.window_queueing()},
          {"stream_contention", &e.stream_contention()},
          {"window_round_s", &e.window_round_s()},
          {"drain_windows", &e.drain_windows()}};
}

absl::StatusOr<ExchangeParams> ParamsOf(const proto::CostModelFile& file, Topology topology) {
  for (const proto::ExchangeModel& e : file.exchanges()) {
    if (e.exchange() != TopologyName(topology)) continue;
    ExchangeParams p;
    p.software_s = e.software_s().value();
    p.efficiency = e.efficiency().value();
    p.window_bytes = e.window_bytes().value();
    p.cpu_bytes_per_second = e.cpu_bytes_per_second().value();
    p.burst_share = e.has_burst_share() ? e.burst_share().value() : 1;  // before the term: the whole credit
    p.window_queueing = e.has_window_queueing() ? e.window_queueing().value() : 0;  // before the term: none
    p.stream_contention = e.has_stream_contention() ? e.stream_contention().value() : 0;  // likewise
    p.window_update_share = e.window_update_share();  // absent: 0, likewise
    p.window_round_s = e.has_window_round_s() ? e.window_round_s().value() : 0;  // likewise
    p.drain_windows = e.has_drain_windows() ? e.drain_windows().value() : 0;     // likewise
    // The incast term is the file's, one for every PS exchange (absent: 0, no loss cost); the ring has none.
    if (topology != Topology::kRing && file.has_incast()) {
      p.incast_round_trips = file.incast().round_trips_per_cut().value();
      if (file.incast().has_onset_ratio()) p.incast_onset_ratio = file.incast().onset_ratio().value();
    }
    if (absl::Status s = ValidateParams(p); !s.ok()) return Invalid(e.exchange(), s.message());
    return p;
  }
  return absl::NotFoundError(
      absl::StrCat("model file has no ", TopologyName(topology), " exchange; ", kRecalibrate));
}

std::string DescribeIncastTerm(const proto::CostModelFile& file) {
  if (!file.has_incast()) {
    return "incast term: none (a PS marked INCAST is likely slower than predicted; //bench:fit_incast "
           "adds the term)";
  }
  const proto::IncastCost& incast = file.incast();
  const std::string onset =
      incast.has_onset_ratio()
          ? absl::StrFormat(" from a burst of R0 = %.2f +- %.2f times the port's buffer",
                            incast.onset_ratio().value(), incast.onset_ratio().std_error())
          : " from a burst over the port's buffer";
  return absl::StrFormat(
      "incast term: c = %.3f +- %.3f round trips per window cut%s, fitted on %d held-out runs (round trips "
      "%.0f-%.0f ms)",
      incast.round_trips_per_cut().value(), incast.round_trips_per_cut().std_error(), onset, incast.runs(),
      1e3 * incast.min_round_trip_s(), 1e3 * incast.max_round_trip_s());
}

namespace {

// `value`'s ratio outside [lo, hi] (1 inside; `value` and `lo` > 0).
double OutsideBy(double value, double lo, double hi) {
  if (value > hi) return value / hi;
  if (value < lo) return lo / value;
  return 1;
}

}  // namespace

std::vector<Extrapolation> ExtrapolationFactors(const proto::CostModelFile& file, Topology topology,
                                                const Conditions& at, double bytes) {
  std::vector<Extrapolation> out;
  for (const proto::ExchangeModel& e : file.exchanges()) {
    if (e.exchange() != TopologyName(topology) || !e.has_coverage()) continue;
    const proto::Coverage& c = e.coverage();
    auto consider = [&](double factor, const char* what) {
      if (factor > 1) out.push_back({factor, what});
    };
    if (c.nodes_size() > 0 && at.nodes > 0) {
      const auto [lo, hi] = std::minmax_element(c.nodes().begin(), c.nodes().end());
      consider(OutsideBy(at.nodes, *lo, *hi), "N");
    }
    std::vector<double> links;
    bool unlimited = false;
    for (double b : c.link_bytes_per_second()) (b > 0 ? links.push_back(b) : void(unlimited = true));
    if (at.link_bytes_per_second > 0 && !links.empty()) {
      const auto [lo, hi] = std::minmax_element(links.begin(), links.end());
      consider(OutsideBy(at.link_bytes_per_second, *lo, *hi), "link");
    } else if (at.link_bytes_per_second <= 0 && !unlimited && !links.empty()) {
      consider(INFINITY, "link");
    }
    if (c.latency_s_size() > 0 && at.latency_s > 0) {
      const double hi = *std::max_element(c.latency_s().begin(), c.latency_s().end());
      consider(hi > 0 ? std::max(1.0, at.latency_s / hi) : INFINITY, "latency");
    }
    if (c.bytes_size() > 0 && bytes > 0) {
      const auto [lo, hi] = std::minmax_element(c.bytes().begin(), c.bytes().end());
      consider(OutsideBy(bytes, *lo, *hi), "size");
    }
  }
  return out;
}

Extrapolation ExtrapolationOf(const proto::CostModelFile& file, Topology topology, const Conditions& at,
                              double bytes) {
  Extrapolation out;
  for (const proto::ExchangeModel& e : file.exchanges()) {
    if (e.exchange() == TopologyName(topology) && e.has_coverage()) out.factor = 1;  // inside, unless below
  }
  for (const Extrapolation& x : ExtrapolationFactors(file, topology, at, bytes)) {
    if (x.factor > out.factor) out = x;
  }
  return out;
}

std::string ExtrapolationMark(const Extrapolation& e) {
  if (!(e.factor > kExtrapolationMarkFactor)) return "";
  if (!std::isfinite(e.factor)) return absl::StrCat("EXTRAPOLATED (", e.what, " never calibrated)");
  return absl::StrFormat("EXTRAPOLATED x%.0f (%s)", e.factor, e.what);
}

absl::StatusOr<proto::CostModelFile> WithWindowRound(const proto::CostModelFile& model, double seconds,
                                                     const std::string& source) {
  if (!(std::isfinite(seconds) && seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a window round of ", seconds, " s: give the target host's as a finite value >= 0 (e.g. 50 us)"));
  }
  proto::CostModelFile out = model;
  int set = 0;
  for (proto::ExchangeModel& e : *out.mutable_exchanges()) {
    if (!e.has_window_round_s()) continue;
    proto::ModelParameter* round = e.mutable_window_round_s();
    round->Clear();
    round->set_value(seconds);
    round->set_at_bound(seconds == 0);
    ++set;
  }
  if (set == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model file of ", model.host(), " (", model.date(),
        ") has no window-round term (fitted before 2026-11-30, its PS window round is a share of "
        "the window at the link's rate): recalibrate (//bench:calibrate --refit=RUNS) to set the "
        "target's window round"));
  }
  out.set_window_round_source(source);
  return out;
}

absl::StatusOr<proto::CostModelFile> WithWindowRoundFlag(const proto::CostModelFile& model, double us) {
  if (us < 0) return model;
  return WithWindowRound(model, us * 1e-6, absl::StrCat("--window_round_us=", us));
}

std::string DescribeWindowRound(const proto::CostModelFile& model) {
  std::vector<std::string> rounds;
  double given = 0;
  for (const proto::ExchangeModel& e : model.exchanges()) {
    if (!e.has_window_round_s()) continue;
    const proto::ModelParameter& d = e.window_round_s();
    given = d.value();
    rounds.push_back(absl::StrCat(
        e.exchange(), " ",
        d.value() > 0 || !d.at_bound() ? absl::StrFormat("%.2f ms", 1e3 * d.value()) : "none (dropped)"));
  }
  if (rounds.empty()) return "";
  if (model.has_window_round_source()) {
    return absl::StrFormat("%.3g ms from %s", 1e3 * given, model.window_round_source());
  }
  return absl::StrFormat("as fitted on %s (%s): %s", model.host(), model.date(), absl::StrJoin(rounds, ", "));
}

}  // namespace psring::bench::model
