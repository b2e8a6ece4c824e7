// The per-element and per-row arithmetic of the trainer's CUDA kernels (cuda_kernels.cu), compiled by nvcc
// for the device and by the host compiler for //tests/trainer:cuda_plan_test, which runs them on the CPU
// against the CPU engine and the host optimizer. The kernels add only the thread indexing around these.
//
// Pointers are plain float arrays (device memory in the kernels, host memory in tests); row-major as in
// cpu_kernels.h. Pure functions, no state.
#ifndef PSRING_TRAINER_CUDA_KERNEL_BODIES_H_
#define PSRING_TRAINER_CUDA_KERNEL_BODIES_H_

#include <math.h>

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define PSRING_HOST_DEVICE __host__ __device__
#else
#define PSRING_HOST_DEVICE
#endif

namespace psring::trainer::cuda {

// Rounded float multiply, add and subtract that are never fused into one FMA: on the device nvcc contracts a
// * b + c unless told per operation; on the host the optimizer's own flags forbid it (-ffp-contract=off, and
// x86-64-v2 has no FMA instruction), so plain operators give the same bits there.
PSRING_HOST_DEVICE inline float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

PSRING_HOST_DEVICE inline float AddRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

PSRING_HOST_DEVICE inline float SubRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// y[i] += bias[i % out], then max(y[i], 0) when `relu`; y is [rows, out].
PSRING_HOST_DEVICE inline void BiasAddReluAt(float* y, const float* bias, size_t i, int out, bool relu) {
  const float v = y[i] + bias[i % out];
  y[i] = relu && !(v > 0.0f) ? 0.0f : v;
}

// dy[i] = 0 where the ReLU's output y[i] was not positive.
PSRING_HOST_DEVICE inline void ReluBackwardAt(const float* y, float* dy, size_t i) {
  if (!(y[i] > 0.0f)) dy[i] = 0.0f;
}

// Row b of the fused softmax cross-entropy with a stable log-sum-exp: row_loss[b] and row_hit[b] (1 when the
// arg-max is the label) and, when dlogits is not null, row b of the gradient of the batch-mean loss,
// (softmax - onehot) / batch.
PSRING_HOST_DEVICE inline void SoftmaxCrossEntropyRow(const float* logits, const int32_t* labels, int b,
                                                      int batch, int classes, float* dlogits, float* row_loss,
                                                      float* row_hit) {
  const float* z = logits + static_cast<size_t>(b) * classes;
  int arg_max = 0;
  for (int c = 1; c < classes; ++c) {
    if (z[c] > z[arg_max]) arg_max = c;
  }
  const float max = z[arg_max];
  // The sum, its log and the probabilities in double, as cpu::SoftmaxCrossEntropy computes them: the two
  // engines then agree to the float rounding of the result (one class count of exps is cheap on any GPU).
  double sum = 0.0;
  for (int c = 0; c < classes; ++c) sum += exp(static_cast<double>(z[c] - max));
  const double log_sum = log(sum);
  const int label = labels[b];
  row_loss[b] = static_cast<float>(log_sum - static_cast<double>(z[label] - max));
  row_hit[b] = arg_max == label ? 1.0f : 0.0f;
  if (dlogits == nullptr) return;
  float* d = dlogits + static_cast<size_t>(b) * classes;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (int c = 0; c < classes; ++c) {
    const float p = static_cast<float>(exp(static_cast<double>(z[c] - max) - log_sum));
    d[c] = (p - (c == label ? 1.0f : 0.0f)) * inv_batch;
  }
}

// Element i of SGD with momentum and weight decay: the operations of SgdMomentumStep (trainer/optimizer.h)
// in the same order, each rounded on its own, so the device result is bit-identical to the host optimizer's.
PSRING_HOST_DEVICE inline void SgdMomentumAt(float* params, const float* grads, float* velocity, size_t i,
                                             float lr, float momentum, float weight_decay) {
  const float p = params[i];
  const float g = AddRn(grads[i], MulRn(weight_decay, p));
  const float v = AddRn(MulRn(momentum, velocity[i]), g);
  velocity[i] = v;
  params[i] = SubRn(p, MulRn(lr, v));
}

}  // namespace psring::trainer::cuda

#endif  // PSRING_TRAINER_CUDA_KERNEL_BODIES_H_
