#include "trainer/engine.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "trainer/cpu_engine.h"
#include "trainer/cuda_engine.h"

namespace psring::trainer {

absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(const std::string& device, const MlpLayout& layout,
                                                     int max_batch) {
  if (device == "cpu") return CreateCpuEngine(layout, max_batch);
  if (device == "cuda") return CreateCudaEngine(layout, max_batch);
  return absl::InvalidArgumentError(absl::StrCat("unknown device '", device, "'; use cpu or cuda"));
}

absl::StatusOr<std::string> ResolveDevice(const std::string& requested, std::string* note) {
  if (requested == "cpu") return std::string("cpu");
  if (requested != "cuda" && requested != "auto") {
    return absl::InvalidArgumentError(absl::StrCat("--device=", requested, " is not one of auto, cpu, cuda"));
  }
  const absl::Status probe = ProbeCuda();
  if (probe.ok()) return std::string("cuda");
  if (requested == "cuda") {
    return absl::UnavailableError(
        absl::StrCat("--device=cuda but no usable GPU: ", probe.message(), "; use --device=cpu or auto"));
  }
  if (note != nullptr) {
    // A host without a GPU is the normal case for auto: no CUDA error text, which reads like a fault.
    *note = absl::IsNotFound(probe) ? std::string("no GPU on this host; training on CPU")
                                    : absl::StrCat("no usable GPU (", probe.message(), "); training on CPU");
  }
  return std::string("cpu");
}

}  // namespace psring::trainer
