#include "trainer/limits.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psring::trainer {

size_t FirstNonFinite(const float* values, size_t n) {
  // Block by block without an early exit, which GCC vectorises at -O3 (a float is not finite when its exponent
  // bits are all ones); only a block holding one is searched element by element. The early-exit loop was a
  // scalar pass over every gradient a server receives.
  constexpr size_t kBlock = 1024;
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t end = std::min(n, begin + kBlock);
    uint32_t any = 0;
    for (size_t i = begin; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, values + i, sizeof(bits));
      any |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
    if (any == 0) continue;
    for (size_t i = begin; i < end; ++i) {
      if (!std::isfinite(values[i])) return i;
    }
  }
  return n;
}

absl::Status ValidateSgdOptions(const SgdOptions& h) {
  if (!std::isfinite(h.lr) || h.lr <= 0 || h.lr > kMaxLearningRate) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lr=", h.lr, ": must be finite, > 0 and <= ", kMaxLearningRate));
  }
  if (!std::isfinite(h.momentum) || h.momentum < 0 || h.momentum >= 1) {
    return absl::InvalidArgumentError(absl::StrCat("--momentum=", h.momentum, ": must be in [0, 1)"));
  }
  if (!std::isfinite(h.weight_decay) || h.weight_decay < 0 || h.weight_decay > 1) {
    return absl::InvalidArgumentError(absl::StrCat("--weight_decay=", h.weight_decay, ": must be in [0, 1]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> TimeoutFromSeconds(absl::string_view flag, double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > kMaxTimeoutSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", seconds, ": must be a finite number of seconds in (0, ",
                                                   kMaxTimeoutSeconds, "]"));
  }
  return absl::Seconds(seconds);
}

namespace {

// This machine's physical memory in bytes, or 0 when the system does not say.
double PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<double>(pages) * static_cast<double>(page_size);
}

// Parameters of the MLP input-hidden...-classes, capped just past kMaxModelParams (each factor is below 2^31,
// so a product fits; the running sum stops before it could overflow).
uint64_t MlpParams(int input_dim, const std::vector<int>& hidden, int num_classes) {
  uint64_t params = 0;
  uint64_t in = static_cast<uint64_t>(input_dim);
  std::vector<int> widths = hidden;
  widths.push_back(num_classes);
  for (int w : widths) {
    const uint64_t out = static_cast<uint64_t>(w);
    params += in * out + out;
    if (params > kMaxModelParams) break;
    in = out;
  }
  return params;
}

}  // namespace

absl::Status CheckModelSize(absl::string_view what, uint64_t params, int buffers) {
  if (params > kMaxModelParams) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a model of ", params, " parameters is above the limit of ",
                                                   kMaxModelParams, " (4 GiB of float32); use a smaller model"));
  }
  const double need = static_cast<double>(params) * sizeof(float) * buffers;
  const double have = PhysicalMemoryBytes();
  if (have > 0 && need > have) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": a model of ", params, " parameters needs ", buffers, " buffers of ", params * sizeof(float),
        " bytes, more than this machine's ", static_cast<uint64_t>(have), " bytes of memory; use a smaller model"));
  }
  return absl::OkStatus();
}

absl::Status CheckMlpSize(int input_dim, const std::vector<int>& hidden, int num_classes) {
  return CheckModelSize(absl::StrCat("--hidden=", absl::StrJoin(hidden, ",")),
                        MlpParams(input_dim, hidden, num_classes), /*buffers=*/3);
}

double TrainingMemoryBytes(int input_dim, const std::vector<int>& hidden, int num_classes, int batch_size) {
  const double params = static_cast<double>(MlpParams(input_dim, hidden, num_classes));
  double outputs = num_classes;  // every layer's output, per sample
  double max_width = num_classes;
  for (int w : hidden) {
    outputs += w;
    max_width = std::max(max_width, static_cast<double>(w));
  }
  // Parameters, gradients and momentum; per sample: the input, every layer's activations and two deltas of
  // the widest layer (trainer/cpu_engine.cc; the CUDA engine keeps the same on the device).
  const double per_sample = input_dim + outputs + 2 * max_width;
  return sizeof(float) * (3 * params + static_cast<double>(batch_size) * per_sample);
}

absl::Status CheckTrainingMemory(int input_dim, const std::vector<int>& hidden, int num_classes,
                                 int batch_size) {
  const double need = TrainingMemoryBytes(input_dim, hidden, num_classes, batch_size);
  const double have = PhysicalMemoryBytes();
  if (have > 0 && need > have) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "--batch_size=", batch_size, " with --hidden=", absl::StrJoin(hidden, ","), " needs ",
        static_cast<uint64_t>(need), " bytes of parameters and batch buffers, more than this machine's ",
        static_cast<uint64_t>(have), " bytes of memory; lower --batch_size or the --hidden widths"));
  }
  return absl::OkStatus();
}

absl::Status CheckBatchFits(int64_t samples, int world_size, int batch_size) {
  const int64_t per_rank = world_size > 0 ? (samples + world_size - 1) / world_size : 0;
  if (per_rank < batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("each rank gets ", per_rank,
                                                   " training samples per epoch, fewer than one batch of ",
                                                   batch_size, "; lower --batch_size"));
  }
  return absl::OkStatus();
}

absl::Status CheckLoss(double loss_sum, int64_t step) {
  if (std::isfinite(loss_sum)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("the training loss became ", loss_sum, " at step ", step,
                                                    ": the run diverged; lower --lr (or check the data), or pass --allow_nonfinite_loss to "
                                                    "carry on"));
}

absl::Status CheckResumeStep(int64_t step, int64_t last_step) {
  if (step <= last_step) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--resume: the checkpoint is at step ", step,
                                                 ", beyond this run's last step ", last_step,
                                                 " (--epochs/--max_steps); nothing would be trained"));
}

}  // namespace psring::trainer
