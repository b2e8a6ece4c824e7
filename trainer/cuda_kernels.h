// Launchers for the trainer's own CUDA kernels (cuda_kernels.cu). Plain C++ so nvcc compiles the .cu without
// Abseil; cuda_engine.cc turns the returned cudaError_t into absl::Status.
//
// All pointers are device pointers; row-major layouts as in cpu_kernels.h. Every launcher enqueues work on
// `stream` and returns that launch's own error (LaunchKernel, cuda_launch.h) without synchronising. The
// arithmetic lives in cuda_kernel_bodies.h, which CPU tests run.
#ifndef PSRING_TRAINER_CUDA_KERNELS_H_
#define PSRING_TRAINER_CUDA_KERNELS_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace psring::trainer::cuda {

// y[b, o] += bias[o], then y = max(y, 0) when `relu`.
cudaError_t BiasAddRelu(float* y, const float* bias, int batch, int out, bool relu, cudaStream_t stream);

// dy = 0 where the ReLU output y was not positive.
cudaError_t ReluBackward(const float* y, float* dy, size_t n, cudaStream_t stream);

// Fused softmax cross-entropy with a stable log-sum-exp, one row per thread. Writes each row's loss to
// row_loss[b] and 1/0 for arg-max == label to row_hit[b]; when dlogits is not null, also the gradient of the
// batch-mean loss, (softmax - onehot) / batch.
cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int batch, int classes,
                                float* dlogits, float* row_loss, float* row_hit, cudaStream_t stream);

// totals[0] = sum of row_loss, totals[1] = sum of row_hit, in double, in a fixed order (deterministic).
cudaError_t SumRows(const float* row_loss, const float* row_hit, int batch, double* totals,
                    cudaStream_t stream);

// SGD with momentum and weight decay, PyTorch semantics: bit-identical to SgdMomentumStep
// (trainer/optimizer.h), the same operations in the same order, none fused.
cudaError_t SgdMomentumUpdate(float* params, const float* grads, float* velocity, size_t n, float lr,
                              float momentum, float weight_decay, cudaStream_t stream);

}  // namespace psring::trainer::cuda

#endif  // PSRING_TRAINER_CUDA_KERNELS_H_
