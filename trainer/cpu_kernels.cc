#include "trainer/cpu_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace psring::trainer::cpu {

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

void LinearForward(const float* x, const float* w, const float* bias, int batch, int in, int out, float* y) {
  // Start from the broadcast bias so the GEMM accumulates onto it (beta = 1) instead of a second pass.
  for (int b = 0; b < batch; ++b) std::copy(bias, bias + out, y + static_cast<size_t>(b) * out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, 1.0f, y, out);
}

void LinearBackward(const float* x, const float* w, const float* dy, int batch, int in, int out, float* dx,
                    float* dw, float* dbias) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy, out, x, in, 0.0f, dw, in);
  std::fill(dbias, dbias + out, 0.0f);
  for (int b = 0; b < batch; ++b) {
    const float* row = dy + static_cast<size_t>(b) * out;
    for (int o = 0; o < out; ++o) dbias[o] += row[o];
  }
  if (dx != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx,
                in);
  }
}

void ReluForward(float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

void ReluBackward(const float* y, float* dy, size_t n) {
  for (size_t i = 0; i < n; ++i) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

double SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int batch, int classes, float* dlogits,
                           int64_t* correct) {
  double loss_sum = 0.0;
  int64_t hits = 0;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (int b = 0; b < batch; ++b) {
    const float* z = logits + static_cast<size_t>(b) * classes;
    int arg_max = 0;
    for (int c = 1; c < classes; ++c) {
      if (z[c] > z[arg_max]) arg_max = c;
    }
    const float max = z[arg_max];
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c] - max));
    const double log_sum = std::log(sum);
    const int label = labels[b];
    loss_sum += log_sum - static_cast<double>(z[label] - max);
    hits += arg_max == label;
    if (dlogits != nullptr) {
      float* d = dlogits + static_cast<size_t>(b) * classes;
      for (int c = 0; c < classes; ++c) {
        const float p = static_cast<float>(std::exp(static_cast<double>(z[c] - max) - log_sum));
        d[c] = (p - (c == label ? 1.0f : 0.0f)) * inv_batch;
      }
    }
  }
  if (correct != nullptr) *correct += hits;
  return loss_sum;
}

}  // namespace psring::trainer::cpu
