#include "trainer/checkpoint.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/atomic_file.h"
#include "trainer/limits.h"
#include "trainer/npz.h"

namespace psring::trainer {

std::string LatestCheckpointPath(const std::string& dir) { return absl::StrCat(dir, "/latest.npz"); }

absl::Status PrepareCheckpointDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create checkpoint folder ", dir, ": ", ec.message(), "; check --checkpoint_dir"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write to checkpoint folder ", dir, ": ",
                                                    std::strerror(errno), "; check --checkpoint_dir"));
  }
  // Temporary files of a run killed while it saved (nothing else removes them).
  return RemoveStaleTemporaries(LatestCheckpointPath(dir)).status();
}

absl::Status SaveCheckpoint(const std::string& path, const CheckpointState& s) {
  if (s.params.size() != s.momentum_buffer.size()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint has ", s.params.size(), " parameters but ",
                                                   s.momentum_buffer.size(), " momentum values"));
  }
  // The file at `path` is the last good state: an update that overflowed (finite gradients, large lr) must
  // not replace it with one --resume refuses.
  for (const auto& [name, values] : {std::pair{"parameter", &s.params}, std::pair{"momentum", &s.momentum_buffer}}) {
    if (const size_t bad = FirstNonFinite(values->data(), values->size()); bad < values->size()) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint ", path, " not written: ", name, " ", bad,
                                                        " is ", (*values)[bad],
                                                        " (the run diverged); the previous checkpoint is kept"));
    }
  }
  NpzWriter w;
  const int64_t n = static_cast<int64_t>(s.params.size());
  w.AddFloat32("params", s.params, {n});
  w.AddFloat32("momentum_buffer", s.momentum_buffer, {n});
  w.AddInt64Scalar("step", s.step);
  w.AddInt64Scalar("epoch", s.epoch);
  w.AddInt64("hidden", std::vector<int64_t>(s.hidden.begin(), s.hidden.end()));
  w.AddInt64Scalar("batch_size", s.batch_size);
  w.AddInt64Scalar("world_size", s.world_size);
  // Seeds are unsigned 64-bit; stored as the same bits in int64 so every NumPy reads them.
  w.AddInt64Scalar("seed", static_cast<int64_t>(s.seed));
  w.AddString("dataset", s.dataset);
  w.AddFloat32Scalar("lr", s.lr);
  w.AddFloat32Scalar("momentum", s.momentum);
  w.AddFloat32Scalar("weight_decay", s.weight_decay);
  return w.WriteAtomically(path);
}

absl::StatusOr<CheckpointState> LoadCheckpoint(const std::string& path) {
  ASSIGN_OR_RETURN(NpzReader r, NpzReader::Open(path));
  CheckpointState s;
  ASSIGN_OR_RETURN(s.params, r.Float32("params"));
  ASSIGN_OR_RETURN(s.momentum_buffer, r.Float32("momentum_buffer"));
  if (s.params.size() != s.momentum_buffer.size()) {
    return absl::DataLossError(absl::StrCat(path, ": 'params' has ", s.params.size(),
                                            " values but 'momentum_buffer' has ", s.momentum_buffer.size()));
  }
  ASSIGN_OR_RETURN(s.step, r.Int64Scalar("step"));
  ASSIGN_OR_RETURN(s.epoch, r.Int64Scalar("epoch"));
  ASSIGN_OR_RETURN(std::vector<int64_t> hidden, r.Int64("hidden"));
  s.hidden.assign(hidden.begin(), hidden.end());
  ASSIGN_OR_RETURN(s.batch_size, r.Int64Scalar("batch_size"));
  ASSIGN_OR_RETURN(s.world_size, r.Int64Scalar("world_size"));
  ASSIGN_OR_RETURN(int64_t seed, r.Int64Scalar("seed"));
  s.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(s.dataset, r.String("dataset"));
  ASSIGN_OR_RETURN(s.lr, r.Float32Scalar("lr"));
  ASSIGN_OR_RETURN(s.momentum, r.Float32Scalar("momentum"));
  ASSIGN_OR_RETURN(s.weight_decay, r.Float32Scalar("weight_decay"));
  if (s.step < 0) return absl::DataLossError(absl::StrCat(path, ": negative step ", s.step));
  for (const auto& [name, values] : {std::pair{"params", &s.params}, std::pair{"momentum_buffer", &s.momentum_buffer}}) {
    if (const size_t bad = FirstNonFinite(values->data(), values->size()); bad < values->size()) {
      return absl::DataLossError(absl::StrCat(path, ": '", name, "'[", bad, "] is ", (*values)[bad],
                                              "; a checkpoint of a diverged run cannot be resumed"));
    }
  }
  return s;
}

}  // namespace psring::trainer
