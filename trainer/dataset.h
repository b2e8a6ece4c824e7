// Data sets for the trainer: Fashion-MNIST from IDX files (gzip or plain) and a synthetic stand-in.
//
//   ASSIGN_OR_RETURN(Dataset train, LoadFashionMnist("/usr/share/datasets/fashion-mnist", Split::kTrain));
//   const float* x = train.image(17);   // 784 floats, normalised
//   int32_t y = train.labels[17];       // in [0, 10)
//
// Loading blocks and reads the whole split into memory (60k images: 188 MB as float). The functions are
// thread-safe; a Dataset is immutable after loading and may be shared read-only across threads.
#ifndef PSRING_TRAINER_DATASET_H_
#define PSRING_TRAINER_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psring::trainer {

// Fashion-MNIST pixel statistics of the training split (as torchvision's Normalize uses them):
// pixels are mapped to (p / 255 - kPixelMean) / kPixelStd.
inline constexpr float kPixelMean = 0.2860f;
inline constexpr float kPixelStd = 0.3530f;

struct Dataset {
  int64_t size = 0;  // number of samples
  int dim = 0;       // features per sample
  int num_classes = 0;
  std::vector<float> images;    // size * dim, row-major
  std::vector<int32_t> labels;  // size, each in [0, num_classes)

  const float* image(int64_t i) const { return images.data() + i * dim; }
};

// The raw content of one IDX file: unsigned bytes with their dimensions.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // product(dims) bytes
};

// Reads an IDX file of unsigned bytes (type 0x08), gzip-compressed or plain. Errors name the file and say
// what is wrong: kNotFound (cannot open), kDataLoss (bad gzip stream, truncated, trailing bytes),
// kInvalidArgument (bad magic, unsupported type, zero dimensions).
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

// Reads an image file (N x rows x cols) and a label file (N) and checks that they fit together: same N,
// labels below `num_classes`, and rows x cols == `expected_dim` when expected_dim > 0.
absl::StatusOr<Dataset> LoadIdxDataset(const std::string& images_path, const std::string& labels_path,
                                       int num_classes, int expected_dim);

enum class Split { kTrain, kTest };

// Fashion-MNIST from `dir`: {train,t10k}-{images-idx3,labels-idx1}-ubyte, with ".gz" or without.
absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, Split split);

// A learnable synthetic classification set with Fashion-MNIST's shape (784 features, 10 classes): each class
// is a fixed random centre plus Gaussian noise. Deterministic in (seed, split): the train and test splits
// share the class centres but not the samples.
Dataset MakeSyntheticDataset(int64_t size, uint64_t seed, Split split);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_DATASET_H_
