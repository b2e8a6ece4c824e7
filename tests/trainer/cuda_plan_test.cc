// The CUDA engine's step, proved on the CPU: the plans CudaEngine executes with cuBLAS (trainer/cuda_plan.h)
// run here through OpenBLAS's column-major cblas_sgemm/sgemv, with the kernels' own bodies
// (trainer/cuda_kernel_bodies.h) between them, and must give the CPU engine's logits, loss and gradients;
// the SGD body must give the host optimizer's bits. Every operand a plan names is checked to lie inside its
// buffer before BLAS touches it.
#include "trainer/cuda_plan.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/cpu_engine.h"
#include "trainer/cpu_kernels.h"
#include "trainer/cuda_kernel_bodies.h"
#include "trainer/mlp.h"
#include "trainer/optimizer.h"
#include "trainer/random.h"

namespace psring::trainer {
namespace {

// The engine's buffers, on the host, sized as CudaEngine sizes them.
struct HostBuffers {
  HostBuffers(const MlpLayout& layout, int max_batch)
      : params(layout.num_params()),
        grads(layout.num_params()),
        input(static_cast<size_t>(max_batch) * layout.input_dim()),
        delta0(static_cast<size_t>(max_batch) * layout.max_width()),
        delta1(delta0.size()),
        ones(max_batch, 1.0f) {
    for (const LinearSlice& s : layout.layers())
      activations.emplace_back(static_cast<size_t>(max_batch) * s.out);
  }

  std::vector<float>& Of(const PlanOperand& o) {
    switch (o.buffer) {
      case PlanBuffer::kParams:
        return params;
      case PlanBuffer::kGrads:
        return grads;
      case PlanBuffer::kInput:
        return input;
      case PlanBuffer::kActivation:
        return activations.at(o.layer);
      case PlanBuffer::kDelta0:
        return delta0;
      case PlanBuffer::kDelta1:
        return delta1;
      case PlanBuffer::kOnes:
        return ones;
    }
    return params;
  }

  std::vector<float> params, grads, input, delta0, delta1, ones;
  std::vector<std::vector<float>> activations;
};

// Floats a column-major [rows, cols] matrix with leading dimension ld spans.
size_t Extent(int rows, int cols, int ld) {
  return rows == 0 || cols == 0 ? 0 : static_cast<size_t>(cols - 1) * ld + rows;
}

// The operand's first float, after checking that `count` floats from it fit in its buffer.
float* At(HostBuffers* b, const PlanOperand& o, size_t count) {
  std::vector<float>& buffer = b->Of(o);
  EXPECT_LE(o.offset + count, buffer.size()) << "operand out of bounds";
  return o.offset + count <= buffer.size() ? buffer.data() + o.offset : nullptr;
}

void RunOnCpu(const std::vector<PlanStep>& plan, HostBuffers* b) {
  for (const PlanStep& p : plan) {
    switch (p.kind) {
      case PlanStep::Kind::kGemm: {
        // Stored shapes: op(A) is [m, k], so A is [m, k] or (transposed) [k, m]; likewise B for [k, n].
        ASSERT_GE(p.lda, p.transpose_a ? p.k : p.m);
        ASSERT_GE(p.ldb, p.transpose_b ? p.n : p.k);
        ASSERT_GE(p.ldc, p.m);
        const float* a = At(b, p.a, p.transpose_a ? Extent(p.k, p.m, p.lda) : Extent(p.m, p.k, p.lda));
        const float* x = At(b, p.b, p.transpose_b ? Extent(p.n, p.k, p.ldb) : Extent(p.k, p.n, p.ldb));
        float* c = At(b, p.c, Extent(p.m, p.n, p.ldc));
        ASSERT_TRUE(a && x && c);
        cblas_sgemm(CblasColMajor, p.transpose_a ? CblasTrans : CblasNoTrans,
                    p.transpose_b ? CblasTrans : CblasNoTrans, p.m, p.n, p.k, 1.0f, a, p.lda, x, p.ldb, 0.0f,
                    c, p.ldc);
        break;
      }
      case PlanStep::Kind::kGemv: {
        ASSERT_GE(p.lda, p.m);
        const float* a = At(b, p.a, Extent(p.m, p.n, p.lda));
        const float* x = At(b, p.b, p.n);
        float* y = At(b, p.c, p.m);
        ASSERT_TRUE(a && x && y);
        cblas_sgemv(CblasColMajor, CblasNoTrans, p.m, p.n, 1.0f, a, p.lda, x, 1, 0.0f, y, 1);
        break;
      }
      case PlanStep::Kind::kBiasAddRelu: {
        const size_t n = static_cast<size_t>(p.m) * p.n;
        const float* bias = At(b, p.a, p.m);
        float* y = At(b, p.c, n);
        ASSERT_TRUE(bias && y);
        for (size_t i = 0; i < n; ++i) cuda::BiasAddReluAt(y, bias, i, p.m, p.relu);
        break;
      }
      case PlanStep::Kind::kReluBackward: {
        const size_t n = static_cast<size_t>(p.m) * p.n;
        const float* y = At(b, p.a, n);
        float* dy = At(b, p.c, n);
        ASSERT_TRUE(y && dy);
        for (size_t i = 0; i < n; ++i) cuda::ReluBackwardAt(y, dy, i);
        break;
      }
    }
  }
}

void ExpectNear(const std::vector<float>& want, const float* got, size_t n, double rel, const char* what) {
  ASSERT_LE(n, want.size());
  double scale = 1e-6;
  for (size_t i = 0; i < n; ++i) scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  int reported = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::fabs(want[i] - got[i]) > rel * scale && reported++ < 10) {
      ADD_FAILURE() << what << "[" << i << "]: cpu engine " << want[i] << ", plan " << got[i] << " (scale "
                    << scale << ")";
    }
  }
}

class CudaPlanTest : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(CudaPlanTest, PlansOnTheCpuMatchTheCpuEngine) {
  constexpr int kMaxBatch = 48;
  constexpr int kBatch = 37;  // fewer rows than the buffers hold, as in a last partial batch
  absl::StatusOr<MlpLayout> layout = MlpLayout::Create(784, GetParam(), 10);
  ASSERT_TRUE(layout.ok()) << layout.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine = CreateCpuEngine(*layout, kMaxBatch);
  ASSERT_TRUE(engine.ok()) << engine.status();
  HostBuffers b(*layout, kMaxBatch);
  InitParameters(*layout, 3, absl::MakeSpan(b.params));
  ASSERT_TRUE((*engine)->SetParams(b.params).ok());
  Rng rng(4);
  std::vector<int32_t> labels;
  for (int i = 0; i < kBatch * 784; ++i) b.input[i] = rng.Normal();
  for (int i = 0; i < kBatch; ++i) labels.push_back(static_cast<int32_t>(rng.Below(10)));

  std::vector<float> logits(kBatch * 10);
  ASSERT_TRUE((*engine)->Forward(b.input.data(), kBatch, absl::MakeSpan(logits)).ok());
  absl::StatusOr<BatchStats> stats = (*engine)->ForwardBackward(b.input.data(), labels.data(), kBatch);
  ASSERT_TRUE(stats.ok()) << stats.status();
  std::vector<float> grads(layout->num_params());
  ASSERT_TRUE((*engine)->GetGrads(absl::MakeSpan(grads)).ok());

  RunOnCpu(ForwardPlan(*layout, kBatch), &b);
  ExpectNear(logits, b.activations.back().data(), logits.size(), 1e-5, "logits");

  std::vector<float> row_loss(kBatch), row_hit(kBatch);
  float* dlogits = b.Of({LogitsGradBuffer(*layout)}).data();
  for (int r = 0; r < kBatch; ++r) {
    cuda::SoftmaxCrossEntropyRow(b.activations.back().data(), labels.data(), r, kBatch, 10, dlogits,
                                 row_loss.data(), row_hit.data());
  }
  double loss = 0, hits = 0;
  for (int r = 0; r < kBatch; ++r) loss += row_loss[r], hits += row_hit[r];
  EXPECT_NEAR(loss, stats->loss_sum, 1e-5 * stats->loss_sum);
  EXPECT_EQ(static_cast<int64_t>(hits), stats->correct);

  RunOnCpu(BackwardPlan(*layout, kBatch), &b);
  for (const LinearSlice& s : layout->layers()) {
    ExpectNear(std::vector<float>(grads.begin() + s.weight_offset, grads.begin() + s.bias_offset),
               b.grads.data() + s.weight_offset, static_cast<size_t>(s.out) * s.in, 1e-4, "weight grads");
    ExpectNear(std::vector<float>(grads.begin() + s.bias_offset, grads.begin() + s.bias_offset + s.out),
               b.grads.data() + s.bias_offset, s.out, 1e-4, "bias grads");
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, CudaPlanTest,
                         ::testing::Values(std::vector<int>{256, 128}, std::vector<int>{300},
                                           std::vector<int>{}, std::vector<int>{64, 32, 16}));

TEST(CudaKernelBodiesTest, SgdMatchesTheHostOptimizerBitForBit) {
  constexpr size_t kN = 10007;
  Rng rng(11);
  std::vector<float> params(kN), grads(kN), velocity(kN);
  for (size_t i = 0; i < kN; ++i) {
    params[i] = rng.Normal();
    grads[i] = 1e-3f * rng.Normal();
    velocity[i] = 1e-2f * rng.Normal();
  }
  const SgdOptions o{0.05f, 0.9f, 5e-4f};
  std::vector<float> host_params = params, host_velocity = velocity;
  for (int step = 0; step < 3; ++step) {
    SgdMomentumStep(o, grads.data(), host_params.data(), host_velocity.data(), kN);
    for (size_t i = 0; i < kN; ++i) {
      cuda::SgdMomentumAt(params.data(), grads.data(), velocity.data(), i, o.lr, o.momentum, o.weight_decay);
    }
  }
  EXPECT_EQ(params, host_params);
  EXPECT_EQ(velocity, host_velocity);
}

TEST(CudaKernelBodiesTest, ReluBodiesMatchTheCpuKernels) {
  constexpr int kRows = 7, kOut = 13;
  Rng rng(12);
  std::vector<float> y(kRows * kOut), bias(kOut), dy(kRows * kOut);
  for (float& v : y) v = rng.Normal();
  for (float& v : bias) v = rng.Normal();
  for (float& v : dy) v = rng.Normal();
  y[3] = 0.0f;
  y[4] = -0.0f;
  y[5] = std::nanf("");

  std::vector<float> cpu_y = y;
  for (int r = 0; r < kRows; ++r) {
    for (int o = 0; o < kOut; ++o) cpu_y[r * kOut + o] += bias[o];
  }
  cpu::ReluForward(cpu_y.data(), cpu_y.size());
  std::vector<float> body_y = y;
  for (size_t i = 0; i < body_y.size(); ++i) cuda::BiasAddReluAt(body_y.data(), bias.data(), i, kOut, true);
  EXPECT_EQ(body_y, cpu_y);

  std::vector<float> cpu_dy = dy, body_dy = dy;
  cpu::ReluBackward(y.data(), cpu_dy.data(), y.size());
  for (size_t i = 0; i < y.size(); ++i) cuda::ReluBackwardAt(y.data(), body_dy.data(), i);
  EXPECT_EQ(body_dy, cpu_dy);
}

// Issue 25: the GPU's softmax summed in float while the CPU's sums in double. Run on the host, the kernel's
// row body must now give the CPU's gradient bit for bit and each row's loss to float rounding.
TEST(CudaKernelBodiesTest, SoftmaxMatchesTheCpuInDouble) {
  constexpr int kRows = 64, kClasses = 10;
  std::vector<float> logits(kRows * kClasses);
  std::vector<int32_t> labels(kRows);
  for (int i = 0; i < kRows * kClasses; ++i) logits[i] = 0.37f * static_cast<float>((i * 7919) % 113) - 20.0f;
  for (int r = 0; r < kRows; ++r) labels[r] = (r * 3) % kClasses;
  std::vector<float> cpu_d(logits.size()), body_d(logits.size()), loss(kRows), hit(kRows);
  int64_t correct = 0;
  const double cpu_loss = cpu::SoftmaxCrossEntropy(logits.data(), labels.data(), kRows, kClasses, cpu_d.data(),
                                                   &correct);
  double body_loss = 0;
  for (int r = 0; r < kRows; ++r) {
    cuda::SoftmaxCrossEntropyRow(logits.data(), labels.data(), r, kRows, kClasses, body_d.data(), loss.data(),
                                 hit.data());
    body_loss += loss[r];
  }
  EXPECT_EQ(body_d, cpu_d);
  EXPECT_NEAR(body_loss, cpu_loss, 6e-8 * cpu_loss);  // each row rounded to float once
}

TEST(CudaKernelBodiesTest, SoftmaxIsStableForHugeLogits) {
  const std::vector<float> logits = {3000.0f, -3000.0f, 2990.0f, 0.0f};
  const std::vector<int32_t> labels = {1};
  std::vector<float> d(4), loss(1), hit(1);
  cuda::SoftmaxCrossEntropyRow(logits.data(), labels.data(), 0, 1, 4, d.data(), loss.data(), hit.data());
  EXPECT_FLOAT_EQ(loss[0], 6000.0f);
  EXPECT_EQ(hit[0], 0.0f);
  for (float g : d) EXPECT_TRUE(std::isfinite(g));
  EXPECT_FLOAT_EQ(d[1], -1.0f);
}

}  // namespace
}  // namespace psring::trainer
