#include "ps/checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "trainer/limits.h"

namespace psring::ps {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'R', 'C', 'K', 'P', 'T', '2'};
// Before checkpoints recorded the element layout: no layout fields, always the flat layout.
constexpr char kMagicWithoutLayout[8] = {'P', 'S', 'R', 'C', 'K', 'P', 'T', '1'};

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// Reads fixed-size fields from a byte string, failing with kDataLoss past its end.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  absl::Status Get(void* out, size_t n) {
    if (bytes_.size() - pos_ < n) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path_, " is truncated at byte ", pos_));
    }
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status GetValue(T* value) {
    return Get(value, sizeof(T));
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

std::string ShardCheckpointPath(const std::string& dir, int shard, int num_shards) {
  return absl::StrCat(dir, "/ps-shard-", shard, "-of-", num_shards, ".ckpt");
}

absl::Status WriteShardCheckpoint(const std::string& path, const ShardCheckpoint& h,
                                  absl::Span<const float> params, absl::Span<const float> momentum) {
  if (params.size() != h.end - h.begin || momentum.size() != params.size()) {
    return absl::InternalError(absl::StrCat("checkpoint ", path, ": tensor sizes ", params.size(), "/",
                                            momentum.size(), " do not match the range [", h.begin, ", ",
                                            h.end, ")"));
  }
  // The file at `path` is the last good state: a non-finite one (which the server would refuse to resume)
  // must never replace it.
  for (const auto& [name, values] : {std::pair{"parameter", params}, std::pair{"momentum", momentum}}) {
    if (const size_t bad = trainer::FirstNonFinite(values.data(), values.size()); bad < values.size()) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint ", path, " not written: ", name, " ",
                                                        h.begin + bad, " is ", values[bad],
                                                        "; the previous checkpoint is kept"));
    }
  }
  ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Create(path));
  const auto put = [&w](const auto& value) { return w.Append(&value, sizeof(value)); };
  RETURN_IF_ERROR(w.Append(kMagic, sizeof(kMagic)));
  RETURN_IF_ERROR(put(h.shard));
  RETURN_IF_ERROR(put(h.num_shards));
  RETURN_IF_ERROR(put(h.total_params));
  RETURN_IF_ERROR(put(h.begin));
  RETURN_IF_ERROR(put(h.end));
  RETURN_IF_ERROR(put(h.version));
  RETURN_IF_ERROR(put(h.hyperparameters.lr));
  RETURN_IF_ERROR(put(h.hyperparameters.momentum));
  RETURN_IF_ERROR(put(h.hyperparameters.weight_decay));
  RETURN_IF_ERROR(put(static_cast<uint32_t>(h.layout_buckets.size())));
  RETURN_IF_ERROR(w.Append(h.layout_buckets.data(), h.layout_buckets.size() * sizeof(uint64_t)));
  RETURN_IF_ERROR(put(static_cast<uint32_t>(h.layout_settings.size())));
  RETURN_IF_ERROR(w.Append(h.layout_settings.data(), h.layout_settings.size()));
  RETURN_IF_ERROR(put(static_cast<uint32_t>(h.clocks.size())));
  RETURN_IF_ERROR(w.Append(h.clocks.data(), h.clocks.size() * sizeof(int64_t)));
  RETURN_IF_ERROR(w.Append(params.data(), params.size() * sizeof(float)));
  RETURN_IF_ERROR(w.Append(momentum.data(), momentum.size() * sizeof(float)));
  RETURN_IF_ERROR(put(w.crc()));
  return w.Commit();
}

absl::StatusOr<ShardCheckpoint> ReadShardCheckpoint(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no checkpoint at ", path));
    return ErrnoError("cannot open checkpoint", path);
  }
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) return ErrnoError("cannot read checkpoint", path);

  ShardCheckpoint c;
  Reader r(bytes, path);
  char magic[sizeof(kMagic)];
  RETURN_IF_ERROR(r.Get(magic, sizeof(magic)));
  const bool has_layout = std::memcmp(magic, kMagic, sizeof(kMagic)) == 0;
  if (!has_layout && std::memcmp(magic, kMagicWithoutLayout, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(path, " is not a psring shard checkpoint"));
  }
  uint32_t num_clocks = 0;
  RETURN_IF_ERROR(r.GetValue(&c.shard));
  RETURN_IF_ERROR(r.GetValue(&c.num_shards));
  RETURN_IF_ERROR(r.GetValue(&c.total_params));
  RETURN_IF_ERROR(r.GetValue(&c.begin));
  RETURN_IF_ERROR(r.GetValue(&c.end));
  RETURN_IF_ERROR(r.GetValue(&c.version));
  RETURN_IF_ERROR(r.GetValue(&c.hyperparameters.lr));
  RETURN_IF_ERROR(r.GetValue(&c.hyperparameters.momentum));
  RETURN_IF_ERROR(r.GetValue(&c.hyperparameters.weight_decay));
  if (has_layout) {
    uint32_t num_buckets = 0;
    RETURN_IF_ERROR(r.GetValue(&num_buckets));
    if (num_buckets > bytes.size() / sizeof(uint64_t)) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, " has an inconsistent layout"));
    }
    c.layout_buckets.resize(num_buckets);
    RETURN_IF_ERROR(r.Get(c.layout_buckets.data(), num_buckets * sizeof(uint64_t)));
    uint32_t settings_bytes = 0;
    RETURN_IF_ERROR(r.GetValue(&settings_bytes));
    if (settings_bytes > bytes.size()) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, " has an inconsistent layout"));
    }
    c.layout_settings.resize(settings_bytes);
    RETURN_IF_ERROR(r.Get(c.layout_settings.data(), settings_bytes));
  }
  RETURN_IF_ERROR(r.GetValue(&num_clocks));
  // Divisions, not products: sizes from the file must not overflow into a small number and an allocation.
  if (c.end < c.begin || c.end > c.total_params || c.end - c.begin > bytes.size() / (2 * sizeof(float)) ||
      num_clocks > bytes.size() / sizeof(int64_t) ||
      (c.end - c.begin) * 2 * sizeof(float) + num_clocks * sizeof(int64_t) > bytes.size()) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " has an inconsistent header"));
  }
  c.clocks.resize(num_clocks);
  RETURN_IF_ERROR(r.Get(c.clocks.data(), num_clocks * sizeof(int64_t)));
  c.params.resize(c.end - c.begin);
  c.momentum.resize(c.end - c.begin);
  RETURN_IF_ERROR(r.Get(c.params.data(), c.params.size() * sizeof(float)));
  RETURN_IF_ERROR(r.Get(c.momentum.data(), c.momentum.size() * sizeof(float)));
  const size_t body = r.pos();
  uint32_t stored_crc = 0;
  RETURN_IF_ERROR(r.GetValue(&stored_crc));
  if (Crc32(absl::string_view(bytes).substr(0, body)) != stored_crc || r.pos() != bytes.size()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is corrupt (CRC mismatch or trailing bytes)"));
  }
  // Clocks count each rank's applied pushes and the version all of them (sync: steps, clocks stay 0), so
  // none can be negative or pass the version; the version is cast to a step (int64) by the server.
  if (c.version > kMaxCheckpointVersion) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " has version ", c.version,
                                            ", beyond any run; remove the file to start afresh"));
  }
  uint64_t pushes = 0;
  for (size_t r = 0; r < c.clocks.size(); ++r) {
    if (c.clocks[r] < 0 || static_cast<uint64_t>(c.clocks[r]) > c.version - pushes) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, ": the clock of rank ", r, " (", c.clocks[r],
                                              ") does not fit version ", c.version,
                                              " (inconsistent or edited file); remove it to start afresh"));
    }
    pushes += static_cast<uint64_t>(c.clocks[r]);
  }
  // A valid file of a diverged run (or a hand-edited one) must not be resumed silently.
  RETURN_IF_ERROR(Annotate(trainer::ValidateSgdOptions(c.hyperparameters), absl::StrCat("checkpoint ", path)));
  for (const auto& [name, values] : {std::pair{"parameter", &c.params}, std::pair{"momentum", &c.momentum}}) {
    if (const size_t bad = trainer::FirstNonFinite(values->data(), values->size()); bad < values->size()) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", name, " ", c.begin + bad, " is ",
                                              (*values)[bad], "; remove the file to start afresh"));
    }
  }
  return c;
}

}  // namespace psring::ps
