// Checks for CUDA runtime and cuBLAS calls: on failure the enclosing function returns an absl::Status that
// names the call site (file:line), the expression and the library's own message.
//
//   CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
//   CUBLAS_RETURN_IF_ERROR(cublasSgemm(handle, ...));
//
// Every error these return has been taken off the thread's CUDA "last error" slot: the runtime records each
// failing call's error there as well, and a later cudaGetLastError() (someone's launch check) would report
// it a second time, against the wrong call. PollStream does the same for cudaStreamQuery's "not ready",
// which is an answer, not an error. A sticky error (a broken context) cannot be cleared; every later call
// reports it anyway.
//
// Usable from any target that links CUDA (header-only; //trainer:cuda_status).
#ifndef PSRING_TRAINER_CUDA_STATUS_H_
#define PSRING_TRAINER_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psring::trainer {

// kResourceExhausted for out-of-memory (the caller may shrink the batch), kUnavailable when there is no
// usable device or driver, kInternal otherwise.
inline absl::Status CudaStatus(cudaError_t err, const char* expr, const char* file, int line) {
  (void)cudaGetLastError();  // reported through the returned Status (see the top of this file)
  const std::string message = absl::StrCat(file, ":", line, ": ", expr, ": ", cudaGetErrorString(err), " (",
                                           cudaGetErrorName(err), ", error ", static_cast<int>(err), ")");
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

// cudaStreamQuery without a trace: cudaSuccess when the stream's work is done, cudaErrorNotReady while it
// runs (cleared from the last-error slot), anything else is a real error (also cleared; report it).
inline cudaError_t PollStream(cudaStream_t stream) {
  const cudaError_t result = cudaStreamQuery(stream);
  if (result != cudaSuccess) (void)cudaGetLastError();
  return result;
}

// cudaEventQuery without a trace, as PollStream: cudaSuccess once the work before the event is done.
inline cudaError_t PollEvent(cudaEvent_t event) {
  const cudaError_t result = cudaEventQuery(event);
  if (result != cudaSuccess) (void)cudaGetLastError();
  return result;
}

inline absl::Status CublasStatus(cublasStatus_t err, const char* expr, const char* file, int line) {
  const std::string message = absl::StrCat(file, ":", line, ": ", expr, ": ", cublasGetStatusString(err),
                                           " (cuBLAS status ", static_cast<int>(err), ")");
  if (err == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  if (err == CUBLAS_STATUS_NOT_INITIALIZED) return absl::UnavailableError(message);
  return absl::InternalError(message);
}

}  // namespace psring::trainer

#define CUDA_RETURN_IF_ERROR(expr)                                                       \
  do {                                                                                   \
    const cudaError_t psring_cuda_err_ = (expr);                                         \
    if (psring_cuda_err_ != cudaSuccess) {                                               \
      return ::psring::trainer::CudaStatus(psring_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                                    \
  } while (0)

#define CUBLAS_RETURN_IF_ERROR(expr)                                                         \
  do {                                                                                       \
    const cublasStatus_t psring_cublas_err_ = (expr);                                        \
    if (psring_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                                       \
      return ::psring::trainer::CublasStatus(psring_cublas_err_, #expr, __FILE__, __LINE__); \
    }                                                                                        \
  } while (0)

#endif  // PSRING_TRAINER_CUDA_STATUS_H_
