// The CUDA engine's step as data: every cuBLAS call (its operations, shapes, leading dimensions and operand
// offsets) and every own kernel between them, in order, for one forward or backward pass. CudaEngine executes
// these steps on the GPU; //tests/trainer:cuda_plan_test executes the very same steps on the CPU (OpenBLAS's
// column-major cblas_sgemm/sgemv and the kernel bodies of cuda_kernel_bodies.h) and compares them with the
// CPU engine, so the GEMM arguments — the part a GPU-less machine could otherwise never check — are proved.
//
// Memory is row-major as everywhere in the trainer; cuBLAS is column-major and sees each row-major matrix as
// its transpose (a row-major [rows, cols] array is a column-major [cols, rows] one with leading dimension
// cols). Pure functions of the layout and the batch size; no CUDA here.
//
//   for (const PlanStep& step : ForwardPlan(layout, batch)) { /* cublasSgemm / a kernel, per step.kind */ }
#ifndef PSRING_TRAINER_CUDA_PLAN_H_
#define PSRING_TRAINER_CUDA_PLAN_H_

#include <cstddef>
#include <vector>

#include "trainer/mlp.h"

namespace psring::trainer {

// The engine buffers a step names. Sizes for a batch B: params/grads num_params(); input [B, input_dim];
// activation l [B, layers[l].out]; delta0/delta1 [B, max_width] (the gradient of one layer's output, the two
// alternating down the layers); ones [B].
enum class PlanBuffer { kParams, kGrads, kInput, kActivation, kDelta0, kDelta1, kOnes };

struct PlanOperand {
  PlanBuffer buffer = PlanBuffer::kParams;
  int layer = 0;      // kActivation only: whose output
  size_t offset = 0;  // floats from the buffer's start
};

struct PlanStep {
  enum class Kind {
    kGemm,          // column-major c[m, n] = op(a)[m, k] * op(b)[k, n] (alpha 1, beta 0)
    kGemv,          // column-major c[m] = a[m, n] * b[n] (a not transposed; alpha 1, beta 0)
    kBiasAddRelu,   // c[row, j] += a[j] for n rows of m columns, then max(., 0) when `relu`
    kReluBackward,  // c[i] = 0 where a[i] (the ReLU's output) is not positive, i < m * n
  };
  Kind kind = Kind::kGemm;
  bool transpose_a = false;
  bool transpose_b = false;
  int m = 0;
  int n = 0;
  int k = 0;
  PlanOperand a;
  int lda = 0;
  PlanOperand b;
  int ldb = 0;
  PlanOperand c;
  int ldc = 0;
  bool relu = false;
  int layer = -1;  // BackwardPlan: the layer whose backward this step belongs to (its steps are contiguous)
};

// Logits = activation of the last layer, from input: per layer one GEMM and one bias-add(+ReLU).
std::vector<PlanStep> ForwardPlan(const MlpLayout& layout, int batch);

// Gradients into grads from the gradient of the batch-mean loss w.r.t. the logits, which the loss kernel must
// have written into LogitsGradBuffer(layout). Needs the activations of ForwardPlan for the same batch.
std::vector<PlanStep> BackwardPlan(const MlpLayout& layout, int batch);

// The delta buffer that holds the gradient w.r.t. layer `layer`'s output during BackwardPlan.
PlanBuffer DeltaBufferOf(const MlpLayout& layout, int layer);
inline PlanBuffer LogitsGradBuffer(const MlpLayout& layout) {
  return DeltaBufferOf(layout, static_cast<int>(layout.layers().size()) - 1);
}

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_CUDA_PLAN_H_
