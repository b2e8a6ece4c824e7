// Finite-difference checks of every CPU layer's backward pass, the loss, the whole engine, and the optimizer.
#include <cmath>
#include <functional>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/cpu_engine.h"
#include "trainer/cpu_kernels.h"
#include "trainer/mlp.h"
#include "trainer/optimizer.h"
#include "trainer/random.h"

namespace psring::trainer {
namespace {

std::vector<float> RandomVector(size_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.Uniform(-scale, scale);
  return v;
}

// Checks d(loss)/d(values[i]) against `analytic` by central differences (in double around float math).
void ExpectGradientMatches(std::vector<float>* values, const std::vector<float>& analytic,
                           const std::function<double()>& loss, const char* what) {
  ASSERT_EQ(values->size(), analytic.size());
  const float eps = 1e-2f;
  for (size_t i = 0; i < values->size(); ++i) {
    const float saved = (*values)[i];
    (*values)[i] = saved + eps;
    const double up = loss();
    (*values)[i] = saved - eps;
    const double down = loss();
    (*values)[i] = saved;
    const double numeric = (up - down) / (2.0 * eps);
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << what << "[" << i << "]";
  }
}

// A fixed random linear functional of the output, L = sum(y * r), so dL/dy = r.
double Project(const std::vector<float>& y, const std::vector<float>& r) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

TEST(GradientCheckTest, LinearLayerInputsWeightsAndBias) {
  const int batch = 3, in = 5, out = 4;
  std::vector<float> x = RandomVector(batch * in, 1);
  std::vector<float> w = RandomVector(out * in, 2);
  std::vector<float> b = RandomVector(out, 3);
  const std::vector<float> r = RandomVector(batch * out, 4);
  std::vector<float> y(batch * out);
  auto loss = [&] {
    cpu::LinearForward(x.data(), w.data(), b.data(), batch, in, out, y.data());
    return Project(y, r);
  };
  std::vector<float> dx(batch * in), dw(out * in), db(out);
  cpu::LinearBackward(x.data(), w.data(), r.data(), batch, in, out, dx.data(), dw.data(), db.data());
  ExpectGradientMatches(&x, dx, loss, "dx");
  ExpectGradientMatches(&w, dw, loss, "dw");
  ExpectGradientMatches(&b, db, loss, "db");
}

TEST(GradientCheckTest, LinearForwardMatchesClosedForm) {
  // x = [[1, 2]], w = [[3, 4], [5, 6], [7, 8]], b = [0.5, -1, 2] -> y = [11.5, 16, 25]
  const std::vector<float> x = {1, 2}, w = {3, 4, 5, 6, 7, 8}, b = {0.5f, -1, 2};
  std::vector<float> y(3);
  cpu::LinearForward(x.data(), w.data(), b.data(), 1, 2, 3, y.data());
  EXPECT_EQ(y, (std::vector<float>{11.5f, 16.0f, 25.0f}));
}

TEST(GradientCheckTest, Relu) {
  // Values kept away from the kink at 0, where the derivative is undefined.
  std::vector<float> x = {-1.5f, -0.3f, 0.4f, 2.0f, -0.7f, 0.9f};
  const std::vector<float> r = RandomVector(x.size(), 5);
  auto loss = [&] {
    std::vector<float> y = x;
    cpu::ReluForward(y.data(), y.size());
    return Project(y, r);
  };
  std::vector<float> y = x;
  cpu::ReluForward(y.data(), y.size());
  EXPECT_EQ(y, (std::vector<float>{0, 0, 0.4f, 2.0f, 0, 0.9f}));
  std::vector<float> dx = r;
  cpu::ReluBackward(y.data(), dx.data(), dx.size());
  ExpectGradientMatches(&x, dx, loss, "relu dx");
}

TEST(GradientCheckTest, SoftmaxCrossEntropy) {
  const int batch = 4, classes = 5;
  std::vector<float> z = RandomVector(batch * classes, 6, 3.0f);
  const std::vector<int32_t> labels = {0, 3, 4, 1};
  auto loss = [&] {
    return cpu::SoftmaxCrossEntropy(z.data(), labels.data(), batch, classes, nullptr, nullptr) / batch;
  };
  std::vector<float> dz(batch * classes);
  int64_t correct = 0;
  cpu::SoftmaxCrossEntropy(z.data(), labels.data(), batch, classes, dz.data(), &correct);
  ExpectGradientMatches(&z, dz, loss, "dlogits");
}

TEST(GradientCheckTest, SoftmaxCrossEntropyClosedFormAndStability) {
  // Uniform logits: loss = log(classes) per row. Huge logits must not overflow (log-sum-exp).
  const std::vector<float> z = {0, 0, 0, 0, 1e4f, 0, -1e4f, 1e4f};
  const std::vector<int32_t> labels = {2, 3};
  std::vector<float> dz(8);
  int64_t correct = 0;
  const double sum = cpu::SoftmaxCrossEntropy(z.data(), labels.data(), 2, 4, dz.data(), &correct);
  // Row 1: logits (1e4, 0, -1e4, 1e4), label 3: loss = log(2); arg-max is the first maximum (0), so wrong.
  EXPECT_NEAR(sum, std::log(4.0) + std::log(2.0), 1e-6);
  EXPECT_EQ(correct, 0);
  for (float d : dz) EXPECT_TRUE(std::isfinite(d));
  EXPECT_NEAR(dz[0], (0.25 - 0.0) / 2, 1e-7);
  EXPECT_NEAR(dz[2], (0.25 - 1.0) / 2, 1e-7);
  EXPECT_NEAR(dz[7], (0.5 - 1.0) / 2, 1e-7);
}

TEST(GradientCheckTest, WholeEngineMatchesFiniteDifferences) {
  absl::StatusOr<MlpLayout> layout = MlpLayout::Create(6, {5, 4}, 3);
  ASSERT_TRUE(layout.ok()) << layout.status();
  const int batch = 4;
  absl::StatusOr<std::unique_ptr<Engine>> engine = CreateCpuEngine(*layout, batch);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<float> params(layout->num_params());
  InitParameters(*layout, 3, absl::MakeSpan(params));
  const std::vector<float> x = RandomVector(batch * 6, 7, 2.0f);
  const std::vector<int32_t> labels = {0, 2, 1, 2};
  auto loss = [&] {
    EXPECT_TRUE((*engine)->SetParams(params).ok());
    absl::StatusOr<BatchStats> s = (*engine)->Evaluate(x.data(), labels.data(), batch);
    EXPECT_TRUE(s.ok());
    return s->loss_sum / batch;
  };
  ASSERT_TRUE((*engine)->SetParams(params).ok());
  absl::StatusOr<BatchStats> stats = (*engine)->ForwardBackward(x.data(), labels.data(), batch);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->count, batch);
  EXPECT_NEAR(stats->loss_sum / batch, loss(), 1e-6);
  std::vector<float> grads(layout->num_params());
  ASSERT_TRUE((*engine)->GetGrads(absl::MakeSpan(grads)).ok());
  ExpectGradientMatches(&params, grads, loss, "engine grad");
}

TEST(GradientCheckTest, EngineRejectsBadBatchAndSizes) {
  absl::StatusOr<MlpLayout> layout = MlpLayout::Create(4, {3}, 2);
  ASSERT_TRUE(layout.ok());
  absl::StatusOr<std::unique_ptr<Engine>> engine = CreateCpuEngine(*layout, 2);
  ASSERT_TRUE(engine.ok());
  const std::vector<float> x(12);
  const std::vector<int32_t> y(3);
  EXPECT_EQ((*engine)->ForwardBackward(x.data(), y.data(), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*engine)->SetParams(std::vector<float>(5)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(MlpLayout::Create(784, {0}, 10).ok());
  EXPECT_FALSE(CreateCpuEngine(*layout, 0).ok());
}

TEST(SgdTest, MatchesPyTorchSemanticsOverTwoSteps) {
  // p0 = 1, g = 0.5 both steps, lr 0.1, momentum 0.9, wd 0.01.
  // step 1: g' = 0.5 + 0.01 = 0.51; v = 0.51; p = 1 - 0.051 = 0.949
  // step 2: g' = 0.5 + 0.00949 = 0.50949; v = 0.9 * 0.51 + 0.50949 = 0.96849; p = 0.949 - 0.096849 = 0.852151
  float p = 1.0f, v = 0.0f;
  const float g = 0.5f;
  const SgdOptions o{0.1f, 0.9f, 0.01f};
  SgdMomentumStep(o, &g, &p, &v, 1);
  EXPECT_NEAR(v, 0.51f, 1e-6);
  EXPECT_NEAR(p, 0.949f, 1e-6);
  SgdMomentumStep(o, &g, &p, &v, 1);
  EXPECT_NEAR(v, 0.96849f, 1e-6);
  EXPECT_NEAR(p, 0.852151f, 1e-6);
}

TEST(InitTest, DeterministicAndWithinTorchBounds) {
  absl::StatusOr<MlpLayout> layout = MlpLayout::Create(784, {256, 256}, 10);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->num_params(), 784u * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
  std::vector<float> a(layout->num_params()), b(layout->num_params()), c(layout->num_params());
  InitParameters(*layout, 1, absl::MakeSpan(a));
  InitParameters(*layout, 1, absl::MakeSpan(b));
  InitParameters(*layout, 2, absl::MakeSpan(c));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (const LinearSlice& s : layout->layers()) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(s.in));
    double sum_sq = 0;
    const size_t n = static_cast<size_t>(s.in) * s.out + s.out;
    for (size_t i = 0; i < n; ++i) {
      const float v = a[s.weight_offset + i];
      ASSERT_LE(std::abs(v), bound);
      sum_sq += static_cast<double>(v) * v;
    }
    // Uniform(-b, b) has variance b^2 / 3.
    EXPECT_NEAR(sum_sq / n, bound * bound / 3.0, 0.1 * bound * bound / 3.0);
  }
}

}  // namespace
}  // namespace psring::trainer
