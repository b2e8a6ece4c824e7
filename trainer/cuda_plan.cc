#include "trainer/cuda_plan.h"

namespace psring::trainer {
namespace {

PlanOperand Buffer(PlanBuffer buffer, size_t offset = 0) { return {buffer, 0, offset}; }

// The input of layer l: the images for the first layer, else the previous layer's (post-ReLU) output.
PlanOperand InputOf(int layer) {
  if (layer == 0) return Buffer(PlanBuffer::kInput);
  return {PlanBuffer::kActivation, layer - 1, 0};
}

}  // namespace

PlanBuffer DeltaBufferOf(const MlpLayout& layout, int layer) {
  const int from_last = static_cast<int>(layout.layers().size()) - 1 - layer;
  return from_last % 2 == 0 ? PlanBuffer::kDelta0 : PlanBuffer::kDelta1;
}

std::vector<PlanStep> ForwardPlan(const MlpLayout& layout, int batch) {
  const std::vector<LinearSlice>& layers = layout.layers();
  std::vector<PlanStep> plan;
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    const LinearSlice& s = layers[l];
    // Row-major Y[B, out] = X[B, in] W^T is column-major Y^T[out, B] = W[out, in] X^T[in, B]; W (row-major
    // [out, in]) reads as column-major W^T, hence transpose_a.
    PlanStep gemm;
    gemm.kind = PlanStep::Kind::kGemm;
    gemm.transpose_a = true;
    gemm.m = s.out;
    gemm.n = batch;
    gemm.k = s.in;
    gemm.a = Buffer(PlanBuffer::kParams, s.weight_offset);
    gemm.lda = s.in;
    gemm.b = InputOf(l);
    gemm.ldb = s.in;
    gemm.c = {PlanBuffer::kActivation, l, 0};
    gemm.ldc = s.out;
    plan.push_back(gemm);

    PlanStep bias;
    bias.kind = PlanStep::Kind::kBiasAddRelu;
    bias.m = s.out;
    bias.n = batch;
    bias.a = Buffer(PlanBuffer::kParams, s.bias_offset);
    bias.c = gemm.c;
    bias.relu = l + 1 < static_cast<int>(layers.size());
    plan.push_back(bias);
  }
  return plan;
}

std::vector<PlanStep> BackwardPlan(const MlpLayout& layout, int batch) {
  const std::vector<LinearSlice>& layers = layout.layers();
  std::vector<PlanStep> plan;
  for (int l = static_cast<int>(layers.size()) - 1; l >= 0; --l) {
    const LinearSlice& s = layers[l];
    const PlanOperand dy = Buffer(DeltaBufferOf(layout, l));
    // dW[out, in] = dY^T X, i.e. column-major dW^T[in, out] = X^T[in, B] * dY[B, out] (dY^T read transposed).
    PlanStep weight;
    weight.kind = PlanStep::Kind::kGemm;
    weight.transpose_b = true;
    weight.m = s.in;
    weight.n = s.out;
    weight.k = batch;
    weight.a = InputOf(l);
    weight.lda = s.in;
    weight.b = dy;
    weight.ldb = s.out;
    weight.c = Buffer(PlanBuffer::kGrads, s.weight_offset);
    weight.ldc = s.in;
    weight.layer = l;
    plan.push_back(weight);

    // db[out] = dY^T[out, B] * ones[B]: a GEMV keeps the whole GPU busy where one thread per column would
    // not.
    PlanStep bias;
    bias.kind = PlanStep::Kind::kGemv;
    bias.m = s.out;
    bias.n = batch;
    bias.a = dy;
    bias.lda = s.out;
    bias.b = Buffer(PlanBuffer::kOnes);
    bias.c = Buffer(PlanBuffer::kGrads, s.bias_offset);
    bias.layer = l;
    plan.push_back(bias);

    if (l == 0) break;  // nobody needs the gradient w.r.t. the images
    // dX[B, in] = dY W, i.e. column-major dX^T[in, B] = W^T[in, out] * dY^T[out, B].
    const PlanOperand dx = Buffer(DeltaBufferOf(layout, l - 1));
    PlanStep input;
    input.kind = PlanStep::Kind::kGemm;
    input.m = s.in;
    input.n = batch;
    input.k = s.out;
    input.a = Buffer(PlanBuffer::kParams, s.weight_offset);
    input.lda = s.in;
    input.b = dy;
    input.ldb = s.out;
    input.c = dx;
    input.ldc = s.in;
    input.layer = l;
    plan.push_back(input);

    PlanStep relu;
    relu.kind = PlanStep::Kind::kReluBackward;
    relu.m = s.in;
    relu.n = batch;
    relu.a = {PlanBuffer::kActivation, l - 1, 0};
    relu.c = dx;
    relu.layer = l;
    plan.push_back(relu);
  }
  return plan;
}

}  // namespace psring::trainer
