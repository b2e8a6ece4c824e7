// The MLP classifier's shape and its flat parameter layout.
//
// Every parameter lives in ONE contiguous float buffer (and every gradient in one buffer of the same layout),
// so an exchange moves a single buffer per step. Layer l is a torch.nn.Linear: weight [out, in] row-major
// followed by bias [out]; ReLU follows every layer except the last, which produces the class logits.
//
//   params = [ W0 (h0 x 784) | b0 (h0) | W1 (h1 x h0) | b1 (h1) | ... | WL (10 x hL) | bL (10) ]
//
//   ASSIGN_OR_RETURN(MlpLayout layout, MlpLayout::Create(784, {256, 256}, 10));
//   std::vector<float> params(layout.num_params());
//   InitParameters(layout, /*seed=*/1, absl::MakeSpan(params));
#ifndef PSRING_TRAINER_MLP_H_
#define PSRING_TRAINER_MLP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace psring::trainer {

struct LinearSlice {
  int in = 0;
  int out = 0;
  size_t weight_offset = 0;  // into the flat buffer; out * in floats
  size_t bias_offset = 0;    // out floats
};

// Immutable description of the network; cheap to copy, thread-compatible.
class MlpLayout {
 public:
  // kInvalidArgument when a width is not positive or the buffer would not fit in memory sensibly.
  static absl::StatusOr<MlpLayout> Create(int input_dim, const std::vector<int>& hidden, int num_classes);

  int input_dim() const { return input_dim_; }
  int num_classes() const { return num_classes_; }
  const std::vector<int>& hidden() const { return hidden_; }
  const std::vector<LinearSlice>& layers() const { return layers_; }
  size_t num_params() const { return num_params_; }
  // Elements of each layer (weight then bias, contiguous), in forward order: what BucketPlan::Create takes.
  std::vector<size_t> layer_sizes() const;
  // Widest layer output (hidden or classes): sizes scratch buffers.
  int max_width() const { return max_width_; }

 private:
  MlpLayout() = default;

  int input_dim_ = 0;
  int num_classes_ = 0;
  std::vector<int> hidden_;
  std::vector<LinearSlice> layers_;
  size_t num_params_ = 0;
  int max_width_ = 0;
};

// Fills `params` (layout.num_params() floats) like torch.nn.Linear's default initialisation: weight and bias
// uniform in [-1/sqrt(in), 1/sqrt(in)] (Kaiming-uniform with a = sqrt(5)), deterministic in `seed`.
void InitParameters(const MlpLayout& layout, uint64_t seed, absl::Span<float> params);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_MLP_H_
