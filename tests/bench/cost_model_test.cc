#include "bench/cost_model.h"

#include <vector>

#include "bench/exchanges.h"
#include "gtest/gtest.h"

namespace psring::bench {
namespace {

constexpr double kMiB = 1 << 20;

CostTerms TermsOf(Exchange exchange, int nodes, int dedicated, double bytes) {
  const ExchangePlugin& plugin = PluginFor(exchange);
  return plugin.Terms(nodes, plugin.Servers(nodes, dedicated), bytes);
}

// Synthetic measurements from the model itself, with a known alpha and beta.
std::vector<Measurement> Synthesize(Exchange exchange, double alpha, double beta, int dedicated,
                                    const std::vector<int>& nodes, const std::vector<double>& sizes) {
  std::vector<Measurement> points;
  for (int n : nodes) {
    for (double s : sizes) {
      Measurement m;
      m.terms = TermsOf(exchange, n, dedicated, s);
      m.seconds = alpha * m.terms.messages + beta * m.terms.link_bytes;
      if (m.seconds > 0) points.push_back(m);
    }
  }
  return points;
}

// A point of ps-1 (2N messages, N*S bytes) or of a co-located PS with K = N (2(N-1), 2(N-1)/N * S).
Measurement PsOne(int n, double bytes, double seconds) { return {{2.0 * n, n * bytes}, seconds}; }
Measurement PsColocated(int n, double bytes, double seconds) {
  return {{2.0 * (n - 1), 2.0 * (n - 1) / n * bytes}, seconds};
}

TEST(CostModelTest, RecoversKnownAlphaBetaForEveryExchange) {
  const double alpha = 250e-6;        // 250 us per message
  const double beta = 1.0 / 11.9e6;   // ~100 Mbit/s goodput
  for (Exchange e : AllExchanges()) {
    auto points = Synthesize(e, alpha, beta, 2, {1, 2, 3, 4, 8}, {64 * 1024, 1 * kMiB, 4 * kMiB, 16 * kMiB});
    auto fit = FitAlphaBeta(points);
    ASSERT_TRUE(fit.ok()) << ExchangeName(e) << ": " << fit.status();
    EXPECT_NEAR(fit->alpha, alpha, alpha * 1e-6) << ExchangeName(e);
    EXPECT_NEAR(fit->beta, beta, beta * 1e-6) << ExchangeName(e);
    EXPECT_LT(fit->max_relative_error, 1e-6);
    const CostTerms far = TermsOf(e, 1024, 2, 16 * kMiB);
    EXPECT_NEAR(PredictSeconds(*fit, far), alpha * far.messages + beta * far.link_bytes, 1e-9);
  }
}

TEST(CostModelTest, NoisyPointsFitWithinTheNoise) {
  const double alpha = 1e-3, beta = 1e-7;
  auto points = Synthesize(Exchange::kRing, alpha, beta, 0, {2, 4, 8}, {1 * kMiB, 4 * kMiB, 16 * kMiB});
  // +-5 % alternating noise.
  for (size_t i = 0; i < points.size(); ++i) points[i].seconds *= (i % 2 ? 1.05 : 0.95);
  auto fit = FitAlphaBeta(points);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->beta, beta, 0.05 * beta);
  EXPECT_LT(fit->max_relative_error, 0.12);
}

TEST(CostModelTest, SingleShapeFitsBetaOnly) {
  // ps-1 at one size: latency terms (2N) and bytes (N*S) are proportional, so alpha and beta cannot both be
  // identified; the fit takes beta alone.
  // Times not exactly proportional to N (as measured ones never are): still beta alone, never alpha alone.
  auto fit = FitAlphaBeta({PsOne(2, 4 * kMiB, 2 * 4 * kMiB * 1e-7 * 0.9), PsOne(4, 4 * kMiB, 4 * 4 * kMiB * 1e-7),
                           PsOne(8, 4 * kMiB, 8 * 4 * kMiB * 1e-7 * 1.1)});
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->alpha, 0);
  EXPECT_NEAR(fit->beta, 1e-7, 0.1e-7);
}

TEST(CostModelTest, NegativeInterceptIsClampedToZero) {
  // Times growing faster than the bandwidth term would fit a negative alpha; the constrained fit keeps
  // alpha >= 0 and beta >= 0.
  auto fit = FitAlphaBeta({PsOne(2, 1 * kMiB, 0.05), PsOne(4, 1 * kMiB, 0.5), PsOne(8, 1 * kMiB, 1.2)});
  ASSERT_TRUE(fit.ok());
  EXPECT_GE(fit->alpha, 0);
  EXPECT_GT(fit->beta, 0);
}

TEST(CostModelTest, RejectsUnusablePoints) {
  EXPECT_FALSE(FitAlphaBeta({}).ok());
  // One node moves nothing over a link: outside the model.
  EXPECT_FALSE(FitAlphaBeta({PsColocated(1, kMiB, 0.1)}).ok());
  // ...and does not disturb the fit of the others.
  auto fit = FitAlphaBeta({PsColocated(1, 16 * kMiB, 0.05), PsColocated(2, kMiB, 2e-3 + kMiB * 1e-7),
                           PsColocated(4, kMiB, 6e-3 + 1.5 * kMiB * 1e-7)});
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->points, 2);
  EXPECT_NEAR(fit->alpha, 1e-3, 1e-9);
}

}  // namespace
}  // namespace psring::bench
