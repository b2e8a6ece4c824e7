// CPU building blocks of the MLP: one function per layer direction (the optimizer is trainer/optimizer.h),
// GEMMs through OpenBLAS (cblas_sgemm).
//
// All tensors are row-major float32 host arrays the caller owns; batch-major activations [batch, features],
// torch.nn.Linear weights [out, in]. Functions are pure (no hidden state) and thread-compatible; BLAS
// threading is whatever the process set (the trainer sets OpenBLAS to one thread, see SetBlasThreads()).
#ifndef PSRING_TRAINER_CPU_KERNELS_H_
#define PSRING_TRAINER_CPU_KERNELS_H_

#include <cstddef>
#include <cstdint>

namespace psring::trainer::cpu {

// Limits OpenBLAS to `threads` threads for the whole process.
void SetBlasThreads(int threads);

// y[b, o] = sum_i x[b, i] * w[o, i] + bias[o]
void LinearForward(const float* x, const float* w, const float* bias, int batch, int in, int out, float* y);

// Given dy = dL/dy: dw = dy^T x, dbias = column sums of dy, and dx = dy w when dx is not null.
// dw and dbias are overwritten (not accumulated).
void LinearBackward(const float* x, const float* w, const float* dy, int batch, int in, int out, float* dx,
                    float* dw, float* dbias);

// In place: y = max(y, 0).
void ReluForward(float* y, size_t n);

// In place: dy = 0 where the ReLU output y was not positive.
void ReluBackward(const float* y, float* dy, size_t n);

// Softmax cross-entropy over `classes` logits per row with a numerically stable log-sum-exp.
// Returns the SUM of the per-row losses; counts rows whose arg-max equals the label into *correct when not
// null (adding to it). When dlogits is not null it receives the gradient of the MEAN loss: (softmax - onehot)
// / batch. Labels must be in [0, classes).
double SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int batch, int classes, float* dlogits,
                           int64_t* correct);

}  // namespace psring::trainer::cpu

#endif  // PSRING_TRAINER_CPU_KERNELS_H_
