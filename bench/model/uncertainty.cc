#include "bench/model/uncertainty.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/model/model_file.h"
#include "bench/model/validate.h"
#include "common/status_macros.h"

namespace psring::bench::model {
namespace {

const proto::ExchangeModel* Find(const proto::CostModelFile& file, Topology topology) {
  for (const proto::ExchangeModel& e : file.exchanges()) {
    if (e.exchange() == TopologyName(topology)) return &e;
  }
  return nullptr;
}

// A median |relative residual| of a normal scatter is 0.6745 standard deviations.
constexpr double kMedianAbsToSd = 1 / 0.6744897501960817;

}  // namespace

double ExtrapolationLogVariance(const proto::CostModelFile& file, Topology topology, const Conditions& at,
                                double bytes) {
  const proto::ExchangeModel* e = Find(file, topology);
  if (e == nullptr) return 0;
  double var = 0;
  for (const Extrapolation& x : ExtrapolationFactors(file, topology, at, bytes)) {
    if (!std::isfinite(x.factor)) continue;
    for (const proto::ExtrapolationScatter& s : e->extrapolation()) {
      if (s.dimension() != x.what) continue;
      const double sd = s.log_sd_per_log_factor() * std::log(x.factor);
      var += sd * sd;
    }
  }
  return var;
}

absl::StatusOr<PredictionInterval> IntervalOf(const proto::CostModelFile& file, Topology topology,
                                              const Predictor& predict, const Conditions& at, double bytes) {
  const bool unlimited_link = !(at.link_bytes_per_second > 0);
  ASSIGN_OR_RETURN(const ExchangeParams params, ParamsOf(file, topology));
  const proto::ExchangeModel* e = Find(file, topology);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("model file has no ", TopologyName(topology)));
  ASSIGN_OR_RETURN(const double value, predict(params));
  if (!(std::isfinite(value) && value > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("prediction ", value, " s is not > 0"));
  }

  // The terms and the covariance of their logarithms: recorded, or (older files) the standard errors alone.
  std::vector<std::string> terms;
  std::vector<double> cov;
  if (e->covariance_terms_size() > 0) {
    terms.assign(e->covariance_terms().begin(), e->covariance_terms().end());
    cov.assign(e->log_covariance().begin(), e->log_covariance().end());
  } else {
    const auto all = NamedParameters(*e);
    for (const auto& [name, p] : all) {
      if (p->at_bound() || !p->has_std_error() || p->value() <= 0) continue;
      terms.push_back(name);
    }
    cov.assign(terms.size() * terms.size(), 0);
    size_t i = 0;
    for (const auto& [name, p] : all) {
      if (p->at_bound() || !p->has_std_error() || p->value() <= 0) continue;
      const double rel = p->std_error() / p->value();
      cov[i * terms.size() + i] = rel * rel;
      ++i;
    }
  }

  // d value / d log(theta_j) by central differences (one-sided where a term bounded by 1, the efficiency or a
  // share, would pass it).
  const size_t n = terms.size();
  std::vector<double> gradient(n, 0);
  constexpr double kH = 1e-3;
  for (size_t j = 0; j < n; ++j) {
    double ExchangeParams::*member = ParamMember(terms[j]);
    if (member == nullptr || params.*member <= 0) continue;
    ExchangeParams up = params, down = params;
    up.*member *= std::exp(kH);
    down.*member *= std::exp(-kH);
    double span = 2 * kH;
    double up_value = 0;
    if (ParamAtMostOne(member) && up.*member > 1) {
      up_value = value;
      span = kH;
    } else {
      ASSIGN_OR_RETURN(up_value, predict(up));
    }
    ASSIGN_OR_RETURN(const double down_value, predict(down));
    gradient[j] = (up_value - down_value) / span;
  }
  double parameter_var = 0;
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) parameter_var += gradient[a] * gradient[b] * cov[a * n + b];
  }
  parameter_var = std::max(0.0, parameter_var) / (value * value);
  const double scatter = unlimited_link && e->has_loopback_residual_rel_sd() ? e->loopback_residual_rel_sd()
                         : e->has_residual_rel_sd()                          ? e->residual_rel_sd()
                                                    : e->median_abs_rel_error() * kMedianAbsToSd;

  // The incast term (collective.h IncastCostOf), fitted apart: its share of the prediction times its own
  // scatter and its parameter's relative standard error.
  double incast_var = 0;
  if (params.incast_round_trips > 0 && file.has_incast()) {
    ExchangeParams lossless = params;
    lossless.incast_round_trips = 0;
    ASSIGN_OR_RETURN(const double without, predict(lossless));
    const double share = std::max(0.0, value - without) / value;
    const proto::ModelParameter& c = file.incast().round_trips_per_cut();
    const double c_rel = c.has_std_error() && c.value() > 0 ? c.std_error() / c.value() : 0;
    const double rel = file.incast().residual_rel_sd();
    incast_var = share * share * (rel * rel + c_rel * c_rel);
  }
  parameter_var += incast_var;

  PredictionInterval pi;
  pi.value = value;
  pi.parameter_rel_sd = std::sqrt(parameter_var);
  pi.extrapolation_rel_sd = std::sqrt(ExtrapolationLogVariance(file, topology, at, bytes));
  pi.rel_sd =
      std::sqrt(parameter_var + scatter * scatter + pi.extrapolation_rel_sd * pi.extrapolation_rel_sd);
  pi.lo = value * std::exp(-kIntervalZ * pi.rel_sd);
  pi.hi = value * std::exp(kIntervalZ * pi.rel_sd);
  return pi;
}

std::string FormatInterval(const PredictionInterval& pi, double unit, int decimals) {
  return absl::StrFormat("%.*f [%.*f, %.*f]", decimals, pi.value / unit, decimals, pi.lo / unit, decimals,
                         pi.hi / unit);
}

int ClearWinner(const std::vector<PredictionInterval>& candidates) {
  std::vector<WinnerCandidate> plain;
  for (const PredictionInterval& c : candidates) plain.push_back({c.value, c.lo, c.hi});
  const WinnerCall call = CallWinner(plain);
  return call.clear() ? call.fastest : -1;
}

}  // namespace psring::bench::model
