// Stands in for cuda_engine.cc in builds without the CUDA toolkit.
#include "absl/status/status.h"
#include "trainer/cuda_engine.h"

namespace psring::trainer {
namespace {

absl::Status NotCompiledIn() {
  return absl::UnavailableError(
      "CUDA is not compiled into this binary (the build found no CUDA toolkit); rebuild on a machine with "
      "/usr/local/cuda or use --device=cpu");
}

}  // namespace

bool CudaCompiledIn() { return false; }

absl::Status ProbeCuda() { return NotCompiledIn(); }

absl::Status SelectCudaDevice(int, const std::string&) { return absl::OkStatus(); }

std::string CudaDeviceIdentity() { return ""; }

absl::StatusOr<std::shared_ptr<float>> AllocateCudaFloats(size_t) { return NotCompiledIn(); }
absl::Status CopyFloatsToCuda(float*, const float*, size_t) { return NotCompiledIn(); }
absl::Status CopyFloatsFromCuda(float*, const float*, size_t) { return NotCompiledIn(); }

absl::StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(const MlpLayout&, int) { return NotCompiledIn(); }

}  // namespace psring::trainer
