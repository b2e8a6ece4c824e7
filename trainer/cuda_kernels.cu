#include "trainer/cuda_kernel_bodies.h"
#include "trainer/cuda_kernels.h"
#include "trainer/cuda_launch.h"

namespace psring::trainer::cuda {
namespace {

constexpr int kThreads = 256;

// Enough blocks to cover n with grid-stride loops, capped so huge buffers do not launch millions of blocks.
unsigned int Blocks(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

__device__ size_t FirstIndex() { return blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; }
__device__ size_t Stride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

__global__ void BiasAddReluKernel(float* y, const float* bias, size_t n, int out, bool relu) {
  for (size_t i = FirstIndex(); i < n; i += Stride()) BiasAddReluAt(y, bias, i, out, relu);
}

__global__ void ReluBackwardKernel(const float* y, float* dy, size_t n) {
  for (size_t i = FirstIndex(); i < n; i += Stride()) ReluBackwardAt(y, dy, i);
}

__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels, int batch, int classes,
                                          float* dlogits, float* row_loss, float* row_hit) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < batch) SoftmaxCrossEntropyRow(logits, labels, b, batch, classes, dlogits, row_loss, row_hit);
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
  for (size_t i = FirstIndex(); i < n; i += Stride()) {
    SgdMomentumAt(params, grads, velocity, i, lr, momentum, weight_decay);
  }
}

}  // namespace

cudaError_t BiasAddRelu(float* y, const float* bias, int batch, int out, bool relu, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(batch) * out;
  return LaunchKernel(BiasAddReluKernel, Blocks(n), kThreads, stream, y, bias, n, out, relu);
}

cudaError_t ReluBackward(const float* y, float* dy, size_t n, cudaStream_t stream) {
  return LaunchKernel(ReluBackwardKernel, Blocks(n), kThreads, stream, y, dy, n);
}

cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int batch, int classes,
                                float* dlogits, float* row_loss, float* row_hit, cudaStream_t stream) {
  return LaunchKernel(SoftmaxCrossEntropyKernel, Blocks(batch), kThreads, stream, logits, labels, batch,
                      classes, dlogits, row_loss, row_hit);
}

cudaError_t SumRows(const float* row_loss, const float* row_hit, int batch, double* totals,
                    cudaStream_t stream) {
  return LaunchKernel(SumRowsKernel, 1, kThreads, stream, row_loss, row_hit, batch, totals);
}

cudaError_t SgdMomentumUpdate(float* params, const float* grads, float* velocity, size_t n, float lr,
                              float momentum, float weight_decay, cudaStream_t stream) {
  return LaunchKernel(SgdMomentumKernel, Blocks(n), kThreads, stream, params, grads, velocity, n, lr,
                      momentum, weight_decay);
}

}  // namespace psring::trainer::cuda
