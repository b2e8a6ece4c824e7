#include "trainer/mlp.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "trainer/random.h"

namespace psring::trainer {

absl::StatusOr<MlpLayout> MlpLayout::Create(int input_dim, const std::vector<int>& hidden, int num_classes) {
  if (input_dim <= 0 || num_classes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("MLP input_dim and num_classes must be positive, got ",
                                                   input_dim, " and ", num_classes));
  }
  MlpLayout layout;
  layout.input_dim_ = input_dim;
  layout.num_classes_ = num_classes;
  layout.hidden_ = hidden;
  std::vector<int> widths = hidden;
  widths.push_back(num_classes);
  int in = input_dim;
  size_t offset = 0;
  for (size_t i = 0; i < widths.size(); ++i) {
    const int out = widths[i];
    if (out <= 0 || out > (1 << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("hidden layer ", i, " has width ", out, "; use a width in [1, 1048576]"));
    }
    LinearSlice slice;
    slice.in = in;
    slice.out = out;
    slice.weight_offset = offset;
    offset += static_cast<size_t>(out) * in;
    slice.bias_offset = offset;
    offset += out;
    layout.layers_.push_back(slice);
    layout.max_width_ = std::max(layout.max_width_, out);
    in = out;
  }
  // 2^31 floats (8 GiB) is far past what this project trains; it also keeps every count inside int for BLAS.
  if (offset >= (size_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the MLP would have ", offset, " parameters (over 2^31); choose smaller --hidden widths"));
  }
  layout.num_params_ = offset;
  return layout;
}

std::vector<size_t> MlpLayout::layer_sizes() const {
  std::vector<size_t> sizes;
  for (const LinearSlice& s : layers_) sizes.push_back(static_cast<size_t>(s.out) * s.in + s.out);
  return sizes;
}

void InitParameters(const MlpLayout& layout, uint64_t seed, absl::Span<float> params) {
  for (size_t l = 0; l < layout.layers().size(); ++l) {
    const LinearSlice& s = layout.layers()[l];
    Rng rng(seed, /*stream=*/l + 1);
    const float bound = 1.0f / std::sqrt(static_cast<float>(s.in));
    const size_t weights = static_cast<size_t>(s.out) * s.in;
    for (size_t i = 0; i < weights; ++i) params[s.weight_offset + i] = rng.Uniform(-bound, bound);
    for (int i = 0; i < s.out; ++i) params[s.bias_offset + i] = rng.Uniform(-bound, bound);
  }
}

}  // namespace psring::trainer
