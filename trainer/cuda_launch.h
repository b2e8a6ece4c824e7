// LaunchKernel: a kernel launch whose result is that launch's own error, never an earlier call's.
//
// `kernel<<<...>>>(); return cudaGetLastError();` returns whatever error the thread recorded last — also one
// that an earlier, already handled call left behind (a polled cudaStreamQuery's cudaErrorNotReady, an
// allocation that failed and was reported). cudaLaunchKernelEx returns the launch's error directly; the copy
// the runtime also records is cleared because the caller receives it through the return value.
//
//   cudaError_t err = LaunchKernel(MyKernel, blocks, threads, stream, arg0, arg1);
//
// Plain C++ over the CUDA runtime (no Abseil), so .cu files can use it; host code only.
#ifndef PSRING_TRAINER_CUDA_LAUNCH_H_
#define PSRING_TRAINER_CUDA_LAUNCH_H_

#include <cuda_runtime.h>

#include <utility>

namespace psring::trainer::cuda {

template <typename... Params, typename... Args>
cudaError_t LaunchKernel(void (*kernel)(Params...), unsigned int blocks, unsigned int threads,
                         cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) (void)cudaGetLastError();
  return err;
}

}  // namespace psring::trainer::cuda

#endif  // PSRING_TRAINER_CUDA_LAUNCH_H_
