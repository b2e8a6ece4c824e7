// The CUDA Engine (cuBLAS GEMMs plus this project's kernels in cuda_kernels.cu). Built only when the CUDA
// toolkit is present (CUDA_ENABLED); otherwise cuda_engine_stub.cc provides these functions and reports that
// CUDA is not compiled in. The free functions are thread-safe; an engine itself is driven by one thread
// (engine.h).
#ifndef PSRING_TRAINER_CUDA_ENGINE_H_
#define PSRING_TRAINER_CUDA_ENGINE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/engine.h"
#include "trainer/mlp.h"

namespace psring::trainer {

// True when this binary was built with the CUDA backend.
bool CudaCompiledIn();

// OK when a CUDA device is usable. kNotFound when this host has no GPU at all (no driver: the runtime's
// cudaErrorInsufficientDriver, error 35, is what a CPU-only host answers; cudaErrorNoDevice; no device
// counted): the normal case for --device=auto on a CPU host. kUnavailable with the runtime's reason when a
// device exists but cannot be used, or CUDA is not compiled in.
absl::Status ProbeCuda();

// Makes the device of `local_rank` (DeviceForLocalRank in common/cluster_env.h: the local rank itself, or
// device 0 when the launcher bound one GPU per rank) current on the calling thread, so ranks sharing a host
// use one GPU each; call it before anything else touches CUDA. `local_rank_source` (ClusterEnv) only names
// the origin in errors. OK and a no-op without a usable device or without CUDA compiled in (ProbeCuda()
// then says why); kFailedPrecondition naming the local rank and the device count when the local rank has no
// GPU of its own; an error when cudaSetDevice itself fails.
absl::Status SelectCudaDevice(int local_rank, const std::string& local_rank_source);

// The calling thread's current CUDA device as "<hostname>:<PCI bus id>", unique across a job (the ring's
// transport agreement uses it to see whether ranks share a GPU); "" without a usable device or without CUDA
// compiled in.
std::string CudaDeviceIdentity();

// Device memory outside an engine (gradient-only mode's buffers, trainer/gradient_only.h): `count` floats on
// the calling thread's current device, freed with the last copy of the pointer. kUnavailable without CUDA,
// kResourceExhausted when device memory runs out. Thread-safe.
absl::StatusOr<std::shared_ptr<float>> AllocateCudaFloats(size_t count);
// Blocking copies between host memory and such device memory.
absl::Status CopyFloatsToCuda(float* device, const float* host, size_t count);
absl::Status CopyFloatsFromCuda(float* host, const float* device, size_t count);

// An engine on the calling thread's current CUDA device (select one with cudaSetDevice first on machines with
// several). kUnavailable without a usable GPU; kResourceExhausted when device memory runs out.
absl::StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(const MlpLayout& layout, int max_batch);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_CUDA_ENGINE_H_
