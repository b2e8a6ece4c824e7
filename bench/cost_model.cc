#include "bench/cost_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace psring::bench {

std::string ExchangeName(Exchange exchange) {
  switch (exchange) {
    case Exchange::kRing: return "ring";
    case Exchange::kPsOne: return "ps-1";
    case Exchange::kPsColocated: return "ps-colocated";
    case Exchange::kPsDedicated: return "ps-dedicated";
  }
  return "unknown";
}

std::vector<Exchange> AllExchanges() {
  return {Exchange::kRing, Exchange::kPsOne, Exchange::kPsColocated, Exchange::kPsDedicated};
}

absl::StatusOr<Exchange> ParseExchange(const std::string& name) {
  for (Exchange e : AllExchanges()) {
    if (ExchangeName(e) == name) return e;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown exchange '", name, "': use ring, ps-1, ps-colocated or ps-dedicated"));
}

int ServerCount(Exchange exchange, int nodes, int dedicated_servers) {
  switch (exchange) {
    case Exchange::kRing: return 0;
    case Exchange::kPsOne: return 1;
    case Exchange::kPsColocated: return nodes;
    case Exchange::kPsDedicated: return dedicated_servers;
  }
  return 0;
}

double LatencyTerms(Exchange exchange, int nodes, int servers) {
  switch (exchange) {
    case Exchange::kRing:
    case Exchange::kPsColocated:
      return 2.0 * (nodes - 1);
    case Exchange::kPsOne:
    case Exchange::kPsDedicated:
      return 2.0 * nodes;
  }
  return 0;
}

double BusiestLinkBytes(Exchange exchange, int nodes, int servers, double bytes) {
  const double n = nodes;
  switch (exchange) {
    case Exchange::kRing:
    case Exchange::kPsColocated:
      return 2.0 * (n - 1) / n * bytes;
    case Exchange::kPsOne:
      return n * bytes;
    case Exchange::kPsDedicated:
      return std::max(bytes, n * bytes / std::max(servers, 1));
  }
  return 0;
}

absl::StatusOr<ModelFit> FitAlphaBeta(Exchange exchange, const std::vector<Measurement>& points) {
  // Rows scaled by 1/T: minimise sum (alpha*a_i/T_i + beta*b_i/T_i - 1)^2.
  double saa = 0, sab = 0, sbb = 0, sa = 0, sb = 0;
  std::vector<const Measurement*> used;
  for (const Measurement& m : points) {
    const double a = LatencyTerms(exchange, m.nodes, m.servers);
    const double b = BusiestLinkBytes(exchange, m.nodes, m.servers, m.bytes);
    // No bytes on any link (the ring or co-located shards on one node): nothing the network model describes.
    if (m.seconds <= 0 || b == 0) continue;
    const double x = a / m.seconds, y = b / m.seconds;
    saa += x * x;
    sab += x * y;
    sbb += y * y;
    sa += x;
    sb += y;
    used.push_back(&m);
  }
  if (used.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no measurement to fit for ", ExchangeName(exchange),
        " (need at least one point with a positive time that moves bytes over a link, e.g. N > 1)"));
  }
  ModelFit fit;
  fit.points = static_cast<int>(used.size());
  const double det = saa * sbb - sab * sab;
  // Proportional features (one shape of point, e.g. ps-1 at a single size: 2N and N*S): alpha and beta are
  // not separable and either alone predicts the same; beta is the one reported as a bandwidth.
  const bool separable = det > 1e-9 * saa * sbb;
  bool solved = false;
  if (separable) {
    fit.alpha = (sa * sbb - sb * sab) / det;
    fit.beta = (saa * sb - sab * sa) / det;
    solved = fit.alpha >= 0 && fit.beta >= 0;
  }
  if (!solved && !separable && sbb > 0) {
    fit.alpha = 0;
    fit.beta = sb / sbb;
    solved = true;
  }
  if (!solved) {
    // Constrained optimum on an edge: the better of beta alone and alpha alone.
    ModelFit beta_only = fit, alpha_only = fit;
    beta_only.alpha = 0;
    beta_only.beta = sbb > 0 ? sb / sbb : 0;
    alpha_only.beta = 0;
    alpha_only.alpha = saa > 0 ? sa / saa : 0;
    auto cost = [&](const ModelFit& f) {
      return f.alpha * f.alpha * saa + 2 * f.alpha * f.beta * sab + f.beta * f.beta * sbb -
             2 * (f.alpha * sa + f.beta * sb);
    };
    fit = cost(beta_only) <= cost(alpha_only) ? beta_only : alpha_only;
  }
  for (const Measurement* m : used) {
    const double predicted = PredictSeconds(exchange, fit, m->nodes, m->servers, m->bytes);
    fit.max_relative_error = std::max(fit.max_relative_error, std::abs(predicted - m->seconds) / m->seconds);
  }
  return fit;
}

double PredictSeconds(Exchange exchange, const ModelFit& fit, int nodes, int servers, double bytes) {
  return fit.alpha * LatencyTerms(exchange, nodes, servers) +
         fit.beta * BusiestLinkBytes(exchange, nodes, servers, bytes);
}

}  // namespace psring::bench
