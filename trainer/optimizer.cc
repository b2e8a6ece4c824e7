#include "trainer/optimizer.h"

namespace psring::trainer {

void SgdMomentumStep(const SgdOptions& opt, const float* grads, float* params, float* momentum, size_t n) {
  const float lr = opt.lr, m = opt.momentum, wd = opt.weight_decay;
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i] + wd * params[i];
    const float v = m * momentum[i] + g;
    momentum[i] = v;
    params[i] -= lr * v;
  }
}

}  // namespace psring::trainer
