#include "bench/model/alpha_beta.h"

#include <vector>

#include "bench/core/exchange.h"
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

// One bucket's exchange time: 1 ms per message-free start-up plus 1 s per 100 MB.
double Linear(double bytes) { return 1e-3 + bytes * 1e-8; }

TEST(OverlapStepTest, FlatExchangeAddsToCompute) {
  // --bucket_mb=0: forward + backward + the whole exchange.
  const StepEstimate e = OverlapStep(FlatShape(0.1, 0.2, 30e6), Linear);
  EXPECT_NEAR(e.exchange_s, 0.301, 1e-12);
  EXPECT_NEAR(e.step_s, 0.1 + 0.2 + 0.301, 1e-12);
  EXPECT_NEAR(e.exposed_s, 0.301, 1e-12);
}

TEST(OverlapStepTest, BackwardLongerThanExchangeHidesAllButTheLastBucket) {
  // Three 10 MB buckets ready at 1/3, 2/3 and the end of a 0.6 s backward; each takes 0.101 s: the first two
  // finish while backward runs, the last (ready at 0.6 s) is exposed whole.
  StepShape shape{0.1, 0.6, {{0.2, 10e6}, {0.4, 10e6}, {0.6, 10e6}}};
  const StepEstimate e = OverlapStep(shape, Linear);
  EXPECT_NEAR(e.step_s, 0.1 + 0.6 + 0.101, 1e-12);
  EXPECT_NEAR(e.exposed_s, 0.101, 1e-12);
  EXPECT_NEAR(e.exchange_s, 0.303, 1e-12);
}

TEST(OverlapStepTest, ExchangeLongerThanBackwardRunsBackToBackFromTheFirstBucket) {
  // Buckets of 0.501 s each, the first ready at 0.05 s: the stream never idles after it, so
  // step = forward + first ready + whole exchange.
  StepShape shape{0.1, 0.3, {{0.05, 50e6}, {0.15, 50e6}, {0.3, 50e6}}};
  const StepEstimate e = OverlapStep(shape, Linear);
  EXPECT_NEAR(e.step_s, 0.1 + 0.05 + 3 * 0.501, 1e-12);
  EXPECT_NEAR(e.exposed_s, e.step_s - 0.4, 1e-12);
}

TEST(OverlapStepTest, ComputeEqualToExchangeGainsThePaperRatio) {
  // The acceptance case: forward = 1/3 of compute, compute = exchange, many small buckets: the overlapped step
  // tends to forward + max(backward, exchange) = 2/3 of the flat one (the 1.5x of the issue).
  const double forward = 0.1, backward = 0.2, total = 30e6;  // exchange = 0.3 s at 1e-8 s/B without start-up
  StepShape shape{forward, backward, {}};
  const int buckets = 100;
  for (int i = 1; i <= buckets; ++i) shape.buckets.push_back({backward * i / buckets, total / buckets});
  auto per_byte = [](double bytes) { return bytes * 1e-8; };
  const double overlapped = OverlapStep(shape, per_byte).step_s;
  const double flat = OverlapStep(FlatShape(forward, backward, total), per_byte).step_s;
  EXPECT_NEAR(flat, 0.6, 1e-12);
  // forward + max(backward, exchange) + the first bucket's ready time (0.002 s) = 0.402 s.
  EXPECT_NEAR(overlapped, 0.402, 1e-9);
}

TEST(OverlapStepTest, ShapeOfReadiesBucketsInBackwardOrder) {
  // Three layers (forward order) of 4, 8 and 2 MB; buckets: the last layer alone, then the first two.
  const std::vector<LayerCost> layers = {{4e6, 0.01, 0.02}, {8e6, 0.02, 0.04}, {2e6, 0.005, 0.01}};
  const StepShape shape = ShapeOf(layers, {{12e6, 2e6}, {0, 12e6}});
  EXPECT_NEAR(shape.forward_s, 0.035, 1e-12);
  EXPECT_NEAR(shape.backward_s, 0.07, 1e-12);
  ASSERT_EQ(shape.buckets.size(), 2u);
  EXPECT_NEAR(shape.buckets[0].ready_s, 0.01, 1e-12);  // after the last layer's backward
  EXPECT_DOUBLE_EQ(shape.buckets[0].bytes, 2e6);
  EXPECT_NEAR(shape.buckets[1].ready_s, 0.07, 1e-12);  // after the first layer's, i.e. the end of backward
  // One bucket over everything is the flat shape.
  const StepShape flat = ShapeOf(layers, {{0, 14e6}});
  EXPECT_NEAR(OverlapStep(flat, Linear).step_s, OverlapStep(FlatShape(0.035, 0.07, 14e6), Linear).step_s, 1e-12);
}

TEST(OverlapStepTest, NoBucketsIsComputeOnly) {
  EXPECT_NEAR(OverlapStep({0.1, 0.2, {}}, Linear).step_s, 0.3, 1e-12);
}

TEST(ProjectionTest, KeepsTheLinkEfficiencyAndTakesTheTargetLatency) {
  ModelFit fit;
  fit.alpha = 300e-6;
  fit.beta = 1.1 / 12.5e6;  // 10 % slower than a 100 Mbit/s link
  auto projected = ProjectFit(fit, 12.5e6, {25e9 / 8, 5e-6});
  ASSERT_TRUE(projected.ok());
  EXPECT_DOUBLE_EQ(projected->alpha, 5e-6);
  EXPECT_NEAR(projected->beta, 1.1 / (25e9 / 8), 1e-20);
  // A ring step of 100 MB at N = 8 on the target: 14 messages * 5 us + 1.75 * 100 MB * 1.1 / 3.125 GB/s.
  const CostTerms terms = TermsOf(Exchange::kRing, 8, 0, 100e6);
  EXPECT_NEAR(PredictSeconds(*projected, terms), 14 * 5e-6 + 1.75 * 100e6 * 1.1 / 3.125e9, 1e-9);
}

TEST(ProjectionTest, RejectsUnusableRates) {
  ModelFit fit;
  fit.beta = 1e-7;
  EXPECT_FALSE(ProjectFit(fit, 0, {3e9, 5e-6}).ok());  // loopback fit: no link to scale from
  auto bad_link = ProjectFit(fit, 12.5e6, {0, 5e-6});
  ASSERT_FALSE(bad_link.ok());
  EXPECT_NE(bad_link.status().message().find("--project_link"), std::string::npos);
  EXPECT_FALSE(ProjectFit(fit, 12.5e6, {3e9, -1}).ok());
}

}  // namespace
}  // namespace psring::bench
