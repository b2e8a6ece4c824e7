#include "bench/cost_model.h"

#include <vector>

#include "gtest/gtest.h"

namespace psring::bench {
namespace {

constexpr double kMiB = 1 << 20;

// Synthetic measurements from the model itself, with a known alpha and beta.
std::vector<Measurement> Synthesize(Exchange exchange, double alpha, double beta, int dedicated,
                                    const std::vector<int>& nodes, const std::vector<double>& sizes) {
  std::vector<Measurement> points;
  for (int n : nodes) {
    for (double s : sizes) {
      Measurement m;
      m.nodes = n;
      m.servers = ServerCount(exchange, n, dedicated);
      m.bytes = s;
      m.seconds = alpha * LatencyTerms(exchange, n, m.servers) + beta * BusiestLinkBytes(exchange, n, m.servers, s);
      if (m.seconds > 0) points.push_back(m);
    }
  }
  return points;
}

TEST(CostModelTest, FormulasMatchDesign) {
  const double s = 16 * kMiB;
  EXPECT_DOUBLE_EQ(LatencyTerms(Exchange::kRing, 4, 0), 6);
  // The PS: messages through the busiest server per step, N pushes in and N replies out (a co-located shard's
  // own worker is local).
  EXPECT_DOUBLE_EQ(LatencyTerms(Exchange::kPsOne, 8, 1), 16);
  EXPECT_DOUBLE_EQ(LatencyTerms(Exchange::kPsColocated, 8, 8), 14);
  EXPECT_DOUBLE_EQ(LatencyTerms(Exchange::kPsDedicated, 8, 2), 16);
  EXPECT_DOUBLE_EQ(BusiestLinkBytes(Exchange::kRing, 4, 0, s), 1.5 * s);
  EXPECT_DOUBLE_EQ(BusiestLinkBytes(Exchange::kRing, 1, 0, s), 0);
  EXPECT_DOUBLE_EQ(BusiestLinkBytes(Exchange::kPsOne, 8, 1, s), 8 * s);
  EXPECT_DOUBLE_EQ(BusiestLinkBytes(Exchange::kPsColocated, 8, 8, s), 1.75 * s);
  EXPECT_DOUBLE_EQ(BusiestLinkBytes(Exchange::kPsDedicated, 8, 2, s), 4 * s);
  EXPECT_DOUBLE_EQ(BusiestLinkBytes(Exchange::kPsDedicated, 1, 2, s), s);
  EXPECT_EQ(ServerCount(Exchange::kPsColocated, 5, 2), 5);
  EXPECT_EQ(ServerCount(Exchange::kPsDedicated, 5, 3), 3);
}

TEST(CostModelTest, NamesRoundTrip) {
  for (Exchange e : AllExchanges()) {
    auto parsed = ParseExchange(ExchangeName(e));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, e);
  }
  EXPECT_FALSE(ParseExchange("mesh").ok());
}

TEST(CostModelTest, RecoversKnownAlphaBetaForEveryExchange) {
  const double alpha = 250e-6;        // 250 us per message
  const double beta = 1.0 / 11.9e6;   // ~100 Mbit/s goodput
  for (Exchange e : AllExchanges()) {
    auto points = Synthesize(e, alpha, beta, 2, {1, 2, 3, 4, 8}, {64 * 1024, 1 * kMiB, 4 * kMiB, 16 * kMiB});
    auto fit = FitAlphaBeta(e, points);
    ASSERT_TRUE(fit.ok()) << ExchangeName(e) << ": " << fit.status();
    EXPECT_NEAR(fit->alpha, alpha, alpha * 1e-6) << ExchangeName(e);
    EXPECT_NEAR(fit->beta, beta, beta * 1e-6) << ExchangeName(e);
    EXPECT_LT(fit->max_relative_error, 1e-6);
    EXPECT_NEAR(PredictSeconds(e, *fit, 1024, ServerCount(e, 1024, 2), 16 * kMiB),
                alpha * LatencyTerms(e, 1024, ServerCount(e, 1024, 2)) +
                    beta * BusiestLinkBytes(e, 1024, ServerCount(e, 1024, 2), 16 * kMiB),
                1e-9);
  }
}

TEST(CostModelTest, NoisyPointsFitWithinTheNoise) {
  const double alpha = 1e-3, beta = 1e-7;
  auto points = Synthesize(Exchange::kRing, alpha, beta, 0, {2, 4, 8}, {1 * kMiB, 4 * kMiB, 16 * kMiB});
  // +-5 % alternating noise.
  for (size_t i = 0; i < points.size(); ++i) points[i].seconds *= (i % 2 ? 1.05 : 0.95);
  auto fit = FitAlphaBeta(Exchange::kRing, points);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->beta, beta, 0.05 * beta);
  EXPECT_LT(fit->max_relative_error, 0.12);
}

TEST(CostModelTest, SingleShapeFitsBetaOnly) {
  // ps-1 at one size: latency terms (2N) and bytes (N*S) are proportional, so alpha and beta cannot both be
  // identified; the fit takes beta alone.
  // Times not exactly proportional to N (as measured ones never are): still beta alone, never alpha alone.
  std::vector<Measurement> points = {{2, 1, 4 * kMiB, 2 * 4 * kMiB * 1e-7 * 0.9},
                                     {4, 1, 4 * kMiB, 4 * 4 * kMiB * 1e-7},
                                     {8, 1, 4 * kMiB, 8 * 4 * kMiB * 1e-7 * 1.1}};
  auto fit = FitAlphaBeta(Exchange::kPsOne, points);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->alpha, 0);
  EXPECT_NEAR(fit->beta, 1e-7, 0.1e-7);
}

TEST(CostModelTest, NegativeInterceptIsClampedToZero) {
  // Times growing faster than the bandwidth term would fit a negative alpha; the constrained fit keeps
  // alpha >= 0 and beta >= 0.
  std::vector<Measurement> points = {{2, 1, 1 * kMiB, 0.05}, {4, 1, 1 * kMiB, 0.5}, {8, 1, 1 * kMiB, 1.2}};
  auto fit = FitAlphaBeta(Exchange::kPsOne, points);
  ASSERT_TRUE(fit.ok());
  EXPECT_GE(fit->alpha, 0);
  EXPECT_GT(fit->beta, 0);
}

TEST(CostModelTest, RejectsUnusablePoints) {
  EXPECT_FALSE(FitAlphaBeta(Exchange::kRing, {}).ok());
  // One node moves nothing over a link: outside the model.
  EXPECT_FALSE(FitAlphaBeta(Exchange::kRing, {{1, 0, kMiB, 0.1}}).ok());
  EXPECT_FALSE(FitAlphaBeta(Exchange::kPsColocated, {{1, 1, kMiB, 0.01}}).ok());
  // ...and does not disturb the fit of the others.
  auto fit = FitAlphaBeta(Exchange::kPsColocated, {{1, 1, 16 * kMiB, 0.05}, {2, 2, kMiB, 2e-3 + kMiB * 1e-7},
                                                   {4, 4, kMiB, 6e-3 + 1.5 * kMiB * 1e-7}});
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->points, 2);
  EXPECT_NEAR(fit->alpha, 1e-3, 1e-9);
}

}  // namespace
}  // namespace psring::bench
