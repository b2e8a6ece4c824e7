// The alpha-beta cost model of a gradient exchange (derived in bench/PERFORMANCE.md 3), its least-squares fit
// and its predictions.
//
// One exchange step of S bytes over N workers (K parameter-server shards) costs
//
//   T(N, S) = alpha * LatencyTerms(N, K) + beta * BusiestLinkBytes(N, K, S)
//
//   exchange       LatencyTerms   BusiestLinkBytes       (bytes through the busiest link direction)
//   ring           2(N-1)         2(N-1)/N * S           (reduce-scatter + allgather, one message per hop)
//   ps-1           2N             N * S                  (every worker pushes S to, and pulls S from, one host)
//   ps-colocated   2(N-1)         2(N-1)/N * S           (K = N shards, shard i on worker host i)
//   ps-dedicated   2N             max(S, N*S/K)          (K servers on hosts of their own)
//
// The PS latency terms count the messages the busiest server handles in a step, one after another on its link
// (a linear gather of N pushes plus a linear scatter of N replies; a co-located shard's own worker is local):
// the cost of starting and ending a step that every one of the N workers must reach before it completes.
// alpha is a per-message latency in seconds and beta the seconds per byte on the busiest link;
// with ideal links beta = 1/B. For the PS the push and the pull of a step may or may not overlap; beta absorbs
// that factor (up to 2/B), and the fitted 1/beta is reported as the exchange's effective bandwidth.
// bench/PERFORMANCE.md derives the formulas.
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_COST_MODEL_H_
#define PSRING_BENCH_COST_MODEL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psring::bench {

enum class Exchange { kRing, kPsOne, kPsColocated, kPsDedicated };

// "ring", "ps-1", "ps-colocated", "ps-dedicated".
std::string ExchangeName(Exchange exchange);
absl::StatusOr<Exchange> ParseExchange(const std::string& name);
std::vector<Exchange> AllExchanges();

// Servers (shards) an exchange uses with N workers: 0 for the ring, 1 for ps-1, N co-located,
// `dedicated_servers` for ps-dedicated.
int ServerCount(Exchange exchange, int nodes, int dedicated_servers);

double LatencyTerms(Exchange exchange, int nodes, int servers);
double BusiestLinkBytes(Exchange exchange, int nodes, int servers, double bytes);

struct Measurement {
  int nodes = 1;
  int servers = 0;
  double bytes = 0;    // S
  double seconds = 0;  // measured exchange time per step
};

struct ModelFit {
  double alpha = 0;  // seconds per latency term
  double beta = 0;   // seconds per byte on the busiest link
  int points = 0;    // measurements used (positive time, bytes over a link)
  double max_relative_error = 0;  // max |predicted - measured| / measured over those points
};

// Fits alpha >= 0 and beta >= 0 minimising the sum of squared *relative* errors ((T_model - T) / T)^2, so
// small and large steps count alike. Points that move no bytes over a link (ring or ps-colocated at N = 1:
// local copies only) are outside the model and ignored. With a single usable shape of point (all features proportional) alpha
// is set to 0 and beta alone is fitted. kInvalidArgument when no measurement is usable.
absl::StatusOr<ModelFit> FitAlphaBeta(Exchange exchange, const std::vector<Measurement>& points);

// T(N, S) of the model.
double PredictSeconds(Exchange exchange, const ModelFit& fit, int nodes, int servers, double bytes);

}  // namespace psring::bench

#endif  // PSRING_BENCH_COST_MODEL_H_
