#include "trainer/dataset.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "trainer/random.h"

namespace psring::trainer {
namespace {

constexpr int kFashionDim = 28 * 28;
constexpr int kFashionClasses = 10;
// Spread of the synthetic class centres relative to the unit noise: centres lie ~0.15 * sqrt(2 * 784) = 5.9
// noise standard deviations apart, so the classes are separable but a model still needs a few epochs.
constexpr float kCentreScale = 0.15f;
// Largest decompressed IDX file accepted; Fashion-MNIST's biggest is 47 MB.
constexpr size_t kMaxIdxBytes = size_t{1} << 32;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

absl::Status GzipError(const std::string& path, gzFile_s* file) {
  int code = 0;
  // zlib's message starts with the path it was opened with; it is said once here.
  absl::string_view message = gzerror(file, &code);
  absl::ConsumePrefix(&message, path + ": ");
  return absl::DataLossError(absl::StrCat("cannot decompress IDX file ", path, ": ", message,
                                          " (corrupt or truncated gzip stream)"));
}

// Reads the whole (possibly gzip-compressed) file; zlib reads plain files transparently.
absl::StatusOr<std::vector<uint8_t>> ReadMaybeGzipped(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    const int err = errno;
    return absl::NotFoundError(
        absl::StrCat("cannot open IDX file ", path, ": ", std::strerror(err),
                     "; check --data_dir (Debian: apt-get install dataset-fashion-mnist)"));
  }
  std::vector<uint8_t> bytes;
  constexpr size_t kChunk = 1 << 20;
  while (true) {
    const size_t old_size = bytes.size();
    bytes.resize(old_size + kChunk);
    const int got = gzread(file.get(), bytes.data() + old_size, kChunk);
    if (got < 0) {
      return GzipError(path, file.get());
    }
    bytes.resize(old_size + got);
    if (got == 0) break;
    if (bytes.size() > kMaxIdxBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("IDX file ", path, " is larger than 4 GiB; not an IDX file?"));
    }
  }
  // gzread returns 0 both at a clean end and when the gzip stream stops early; gzerror tells them apart.
  int code = 0;
  gzerror(file.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END) return GzipError(path, file.get());
  return bytes;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string FileName(const std::string& dir, const char* stem) {
  const std::string base = absl::StrCat(dir, "/", stem);
  struct stat st;
  if (stat(base.c_str(), &st) == 0) return base;
  return base + ".gz";
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  std::vector<uint8_t> bytes;
  {
    absl::StatusOr<std::vector<uint8_t>> read = ReadMaybeGzipped(path);
    if (!read.ok()) return read.status();
    bytes = std::move(read).value();
  }
  if (bytes.size() < 4) {
    return absl::DataLossError(absl::StrCat("IDX file ", path, " is truncated: ", bytes.size(),
                                            " bytes, shorter than the 4-byte magic"));
  }
  if (bytes[0] != 0 || bytes[1] != 0) {
    return absl::InvalidArgumentError(absl::StrCat("IDX file ", path, " has a bad magic number 0x",
                                                   absl::Hex(BigEndian32(bytes.data()), absl::kZeroPad8),
                                                   "; expected 0x000008NN (not an IDX file?)"));
  }
  if (bytes[2] != 0x08) {
    return absl::InvalidArgumentError(absl::StrCat("IDX file ", path, " has element type 0x",
                                                   absl::Hex(bytes[2], absl::kZeroPad2),
                                                   "; only unsigned bytes (0x08) are supported"));
  }
  const int ndims = bytes[3];
  if (ndims < 1 || ndims > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("IDX file ", path, " declares ", ndims, " dimensions; expected 1 to 4"));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (bytes.size() < header) {
    return absl::DataLossError(absl::StrCat("IDX file ", path, " is truncated inside its header (",
                                            bytes.size(), " bytes, header needs ", header, ")"));
  }
  IdxArray array;
  uint64_t elements = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint32_t dim = BigEndian32(bytes.data() + 4 + 4 * d);
    if (dim == 0) {
      return absl::InvalidArgumentError(absl::StrCat("IDX file ", path, " has dimension ", d, " of size 0"));
    }
    array.dims.push_back(dim);
    elements *= dim;
    if (elements > kMaxIdxBytes) {
      return absl::InvalidArgumentError(absl::StrCat("IDX file ", path, " declares dimensions ",
                                                     absl::StrJoin(array.dims, " x "),
                                                     " (over 4 GiB of data); the header is corrupt"));
    }
  }
  const uint64_t available = bytes.size() - header;
  if (available < elements) {
    return absl::DataLossError(absl::StrCat("IDX file ", path, " is truncated: dimensions ",
                                            absl::StrJoin(array.dims, " x "), " need ", elements,
                                            " data bytes but only ", available, " follow the header"));
  }
  if (available > elements) {
    return absl::DataLossError(absl::StrCat("IDX file ", path, " has ", available - elements,
                                            " unexpected bytes after the data of dimensions ",
                                            absl::StrJoin(array.dims, " x ")));
  }
  array.data.assign(bytes.begin() + header, bytes.end());
  return array;
}

absl::StatusOr<Dataset> LoadIdxDataset(const std::string& images_path, const std::string& labels_path,
                                       int num_classes, int expected_dim) {
  absl::StatusOr<IdxArray> images = ReadIdxFile(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<IdxArray> labels = ReadIdxFile(labels_path);
  if (!labels.ok()) return labels.status();
  if (images->dims.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("image file ", images_path, " has ", images->dims.size(),
                                                   " dimensions; expected 3 (count x rows x cols)"));
  }
  if (labels->dims.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("label file ", labels_path, " has ", labels->dims.size(),
                                                   " dimensions; expected 1 (count)"));
  }
  const int64_t count = images->dims[0];
  const int64_t dim = images->dims[1] * images->dims[2];
  if (expected_dim > 0 && dim != expected_dim) {
    return absl::InvalidArgumentError(absl::StrCat("image file ", images_path, " has images of ",
                                                   images->dims[1], " x ", images->dims[2], " = ", dim,
                                                   " pixels; expected ", expected_dim));
  }
  if (labels->dims[0] != count) {
    return absl::InvalidArgumentError(absl::StrCat("image file ", images_path, " holds ", count,
                                                   " images but label file ", labels_path, " holds ",
                                                   labels->dims[0], " labels; they must match"));
  }
  Dataset ds;
  ds.size = count;
  ds.dim = static_cast<int>(dim);
  ds.num_classes = num_classes;
  ds.labels.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    const int label = labels->data[i];
    if (label >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat("label file ", labels_path, " has label ", label,
                                                     " at index ", i, "; labels must be below ",
                                                     num_classes));
    }
    ds.labels[i] = label;
  }
  ds.images.resize(images->data.size());
  const float scale = 1.0f / (255.0f * kPixelStd);
  const float shift = kPixelMean / kPixelStd;
  for (size_t i = 0; i < images->data.size(); ++i) ds.images[i] = images->data[i] * scale - shift;
  return ds;
}

absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, Split split) {
  const bool train = split == Split::kTrain;
  return LoadIdxDataset(FileName(dir, train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte"),
                        FileName(dir, train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte"),
                        kFashionClasses, kFashionDim);
}

Dataset MakeSyntheticDataset(int64_t size, uint64_t seed, Split split) {
  Dataset ds;
  ds.size = size;
  ds.dim = kFashionDim;
  ds.num_classes = kFashionClasses;
  ds.images.resize(static_cast<size_t>(size) * ds.dim);
  ds.labels.resize(size);
  std::vector<float> centres(static_cast<size_t>(ds.num_classes) * ds.dim);
  Rng centre_rng(seed, /*stream=*/1000);
  for (float& c : centres) c = centre_rng.Normal() * kCentreScale;
  Rng rng(seed, split == Split::kTrain ? 1001 : 1002);
  for (int64_t i = 0; i < size; ++i) {
    const int label = static_cast<int>(rng.Below(ds.num_classes));
    ds.labels[i] = label;
    const float* centre = centres.data() + static_cast<size_t>(label) * ds.dim;
    float* x = ds.images.data() + i * ds.dim;
    for (int j = 0; j < ds.dim; ++j) x[j] = centre[j] + rng.Normal();
  }
  return ds;
}

}  // namespace psring::trainer
