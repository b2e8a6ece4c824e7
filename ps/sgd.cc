#include "ps/sgd.h"

namespace psring::ps {

void SgdMomentumStep(const SgdHyperparameters& h, const float* grads, float* params, float* momentum, size_t n) {
  const float lr = h.lr, m = h.momentum, wd = h.weight_decay;
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i] + wd * params[i];
    const float v = m * momentum[i] + g;
    momentum[i] = v;
    params[i] -= lr * v;
  }
}

}  // namespace psring::ps
