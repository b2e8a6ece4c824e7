#include "trainer/cuda_kernels.h"

namespace psring::trainer::cuda {
namespace {

constexpr int kThreads = 256;

// Enough blocks to cover n with grid-stride loops, capped so huge buffers do not launch millions of blocks.
unsigned int Blocks(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

__global__ void BiasAddReluKernel(float* y, const float* bias, size_t n, int out, bool relu) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float v = y[i] + bias[i % out];
    y[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

__global__ void ReluBackwardKernel(const float* y, float* dy, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if (!(y[i] > 0.0f)) dy[i] = 0.0f;
  }
}

__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels, int batch, int classes,
                                          float* dlogits, float* row_loss, float* row_hit) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  const float* z = logits + static_cast<size_t>(b) * classes;
  int arg_max = 0;
  for (int c = 1; c < classes; ++c) {
    if (z[c] > z[arg_max]) arg_max = c;
  }
  const float max = z[arg_max];
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) sum += expf(z[c] - max);
  const float log_sum = logf(sum);
  const int label = labels[b];
  row_loss[b] = log_sum - (z[label] - max);
  row_hit[b] = arg_max == label ? 1.0f : 0.0f;
  if (dlogits != nullptr) {
    float* d = dlogits + static_cast<size_t>(b) * classes;
    const float inv_batch = 1.0f / static_cast<float>(batch);
    for (int c = 0; c < classes; ++c) {
      const float p = expf(z[c] - max - log_sum);
      d[c] = (p - (c == label ? 1.0f : 0.0f)) * inv_batch;
    }
  }
}

// A single block: each thread sums a strided subset, then a fixed-shape tree; the order never changes.
__global__ void SumRowsKernel(const float* row_loss, const float* row_hit, int batch, double* totals) {
  __shared__ double loss[kThreads];
  __shared__ double hits[kThreads];
  double l = 0.0, h = 0.0;
  for (int b = threadIdx.x; b < batch; b += blockDim.x) {
    l += row_loss[b];
    h += row_hit[b];
  }
  loss[threadIdx.x] = l;
  hits[threadIdx.x] = h;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      loss[threadIdx.x] += loss[threadIdx.x + stride];
      hits[threadIdx.x] += hits[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    totals[0] = loss[0];
    totals[1] = hits[0];
  }
}

__global__ void SgdMomentumKernel(float* params, const float* grads, float* velocity, size_t n, float lr,
                                  float momentum, float weight_decay) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    // Explicitly rounded operations: nvcc would otherwise fuse multiply-adds, and the result would no longer
    // be bit-identical to the host optimizer (trainer/optimizer.cc, which the parameter server runs too).
    const float p = params[i];
    const float g = __fadd_rn(grads[i], __fmul_rn(weight_decay, p));
    const float v = __fadd_rn(__fmul_rn(momentum, velocity[i]), g);
    velocity[i] = v;
    params[i] = __fsub_rn(p, __fmul_rn(lr, v));
  }
}

}  // namespace

cudaError_t BiasAddRelu(float* y, const float* bias, int batch, int out, bool relu, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(batch) * out;
  BiasAddReluKernel<<<Blocks(n), kThreads, 0, stream>>>(y, bias, n, out, relu);
  return cudaGetLastError();
}

cudaError_t ReluBackward(const float* y, float* dy, size_t n, cudaStream_t stream) {
  ReluBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(y, dy, n);
  return cudaGetLastError();
}

cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int batch, int classes,
                                float* dlogits, float* row_loss, float* row_hit, cudaStream_t stream) {
  SoftmaxCrossEntropyKernel<<<Blocks(batch), kThreads, 0, stream>>>(logits, labels, batch, classes, dlogits,
                                                                    row_loss, row_hit);
  return cudaGetLastError();
}

cudaError_t SumRows(const float* row_loss, const float* row_hit, int batch, double* totals,
                    cudaStream_t stream) {
  SumRowsKernel<<<1, kThreads, 0, stream>>>(row_loss, row_hit, batch, totals);
  return cudaGetLastError();
}

cudaError_t SgdMomentumUpdate(float* params, const float* grads, float* velocity, size_t n, float lr,
                              float momentum, float weight_decay, cudaStream_t stream) {
  SgdMomentumKernel<<<Blocks(n), kThreads, 0, stream>>>(params, grads, velocity, n, lr, momentum,
                                                        weight_decay);
  return cudaGetLastError();
}

}  // namespace psring::trainer::cuda
