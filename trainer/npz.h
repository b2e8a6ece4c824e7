// NumPy .npy arrays inside a .npz archive (a zip of .npy files), written and read without NumPy.
//
// Written archives use stored (uncompressed) zip entries with CRC-32, so `numpy.load("x.npz")` reads them;
// the reader also accepts deflate-compressed entries (numpy.savez_compressed). Arrays are little-endian,
// C order. No zip64: each archive stays below 4 GiB.
//
//   NpzWriter w;
//   w.AddFloat32("params", params, {params.size()});
//   w.AddInt64Scalar("step", 42);
//   RETURN_IF_ERROR(w.WriteAtomically("/ckpt/latest.npz"));   // temp file + rename
//
//   ASSIGN_OR_RETURN(NpzReader r, NpzReader::Open("/ckpt/latest.npz"));
//   ASSIGN_OR_RETURN(std::vector<float> p, r.Float32("params"));
#ifndef PSRING_TRAINER_NPZ_H_
#define PSRING_TRAINER_NPZ_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace psring::trainer {

// One array: NumPy dtype string ("<f4", "<i8", "|S7", ...), shape, and raw little-endian bytes.
struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;  // empty: a scalar (0-d array)
  std::string data;
};

// Serialises one array as a version 1.0 .npy file.
std::string EncodeNpy(const NpyArray& array);
// Parses a .npy file; kDataLoss naming `name` when malformed.
absl::StatusOr<NpyArray> DecodeNpy(const std::string& bytes, const std::string& name);

// Collects arrays and writes them as one archive. Not thread-safe.
class NpzWriter {
 public:
  void Add(const std::string& name, NpyArray array);
  void AddFloat32(const std::string& name, absl::Span<const float> values, std::vector<int64_t> shape);
  void AddInt64(const std::string& name, absl::Span<const int64_t> values);  // 1-d
  void AddInt64Scalar(const std::string& name, int64_t value);
  void AddFloat32Scalar(const std::string& name, float value);
  void AddString(const std::string& name, const std::string& value);  // 0-d byte string "|S<n>"

  // Writes `path` with WriteFileAtomically (common/atomic_file.h): `path` is either the old file or the
  // complete new one. Creates the folder when missing.
  absl::Status WriteAtomically(const std::string& path) const;

  // The archive's bytes.
  absl::StatusOr<std::string> Serialize() const;

 private:
  std::vector<std::pair<std::string, NpyArray>> arrays_;
};

// The most array bytes an archive's entries may declare together (NpzReader refuses more, and entries
// whose data overlap, before inflating anything).
inline constexpr uint64_t kMaxNpzUncompressedBytes = uint64_t{4} << 30;

// Reads a whole archive into memory. Typed getters check dtype and shape and say what they found.
class NpzReader {
 public:
  static absl::StatusOr<NpzReader> Open(const std::string& path);
  static absl::StatusOr<NpzReader> Parse(const std::string& bytes, const std::string& path);

  bool Has(const std::string& name) const { return arrays_.count(name) > 0; }
  absl::StatusOr<NpyArray> Get(const std::string& name) const;
  absl::StatusOr<std::vector<float>> Float32(const std::string& name) const;  // any shape, flattened
  absl::StatusOr<std::vector<int64_t>> Int64(const std::string& name) const;  // 1-d
  absl::StatusOr<int64_t> Int64Scalar(const std::string& name) const;
  absl::StatusOr<float> Float32Scalar(const std::string& name) const;
  absl::StatusOr<std::string> String(const std::string& name) const;

 private:
  std::string path_;
  std::map<std::string, NpyArray> arrays_;  // keyed without the ".npy" suffix
};

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_NPZ_H_
