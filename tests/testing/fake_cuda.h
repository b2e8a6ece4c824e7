// A fake CUDA runtime and NCCL for tests on machines without a GPU: link //tests/testing:fake_cuda instead of
// the real libraries and the code under test (compiled against the real headers) calls these definitions.
// They model what the GPU code's error handling depends on and nothing else:
//   - a per-thread "last error" slot that every failing call fills (cudaStreamQuery's cudaErrorNotReady
//     too), read by cudaGetLastError (which clears it) and cudaPeekAtLastError;
//   - one busy stream (the last collective's) whose collectives finish after a set number of
//     cudaStreamQuery polls, or never (a dead peer) until ncclCommAbort stops them; a copy between that
//     busy stream and pageable host memory (not from cudaMallocHost) is counted, because the real runtime
//     blocks the host there until the stream is done; so is a device-wide synchronisation (cudaFree of a
//     pointer, cudaFreeHost, cublasDestroy) while a collective spins, which would block forever;
//   - events that complete after a set number of cudaEventQuery polls;
//   - NCCL calls that return, or report asynchronously, a chosen result, with a log of the communicator's
//     lifecycle calls (init, finalize, destroy, abort);
//   - a log of the streams that memsets, copies, synchronisations, events and cuBLAS work were put on, and
//     of device-wide synchronisations; cuBLAS calls and kernel launches are recorded, not computed; nvcc's
//     module registration hooks do nothing.
// Data moves as in a world of one rank: collectives leave their buffers as they are. Every fake call holds
// one lock, so an engine's thread and an exchange's communication thread may call at once; the accessors
// below are for the test's thread once the others are done (or joined).
#ifndef PSRING_TESTS_TESTING_FAKE_CUDA_H_
#define PSRING_TESTS_TESTING_FAKE_CUDA_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <vector>

namespace psring::testing::fake_cuda {

struct Config {
  int stream_polls_until_done = 0;  // cudaStreamQuery answers "not ready" this often after each collective
  bool collectives_hang = false;    // ... or forever
  int comm_polls_until_ready = 0;  // ncclCommGetAsyncError says ncclInProgress this often after init/finalize
  ncclResult_t init_async_result = ncclSuccess;  // the communicator's state once its set-up is done
  ncclResult_t collective_result = ncclSuccess;  // returned by ncclAllReduce / ncclBroadcast
  ncclResult_t async_result_after_collective = ncclSuccess;  // reported by ncclCommGetAsyncError afterwards
  cudaError_t malloc_result = cudaSuccess;                   // returned by cudaMalloc
  cudaError_t launch_result = cudaSuccess;                   // returned by cudaLaunchKernelExC
  int event_polls_until_done = 0;  // cudaEventQuery answers "not ready" this often after each record
};

// Starts afresh with `config`: clears the log, the counters and the calling thread's error slot.
void Reset(const Config& config);

// The configuration in force; tests may change it between calls.
Config& MutableConfig();

// Gives every stream work that takes `polls` cudaStreamQuery calls to finish.
void MakeStreamBusy(int polls);

// "init", "finalize", "destroy", "abort" in call order.
const std::vector<std::string>& CommLog();

// Copies between pageable host memory and the stream while it still had work (each would have blocked).
int BlockingPageableCopies();

// Kernel launches seen by cudaLaunchKernelExC.
int Launches();

// Device-wide synchronisations (cudaFree, cudaFreeHost, cublasDestroy) issued while a collective that never
// finishes was still running, i.e. before ncclCommAbort stopped it: each would have hung the process.
int DeviceSyncsWhileACollectiveSpins();

// "memset", "copy", "sync", "cublas" (a stream bound to a cuBLAS handle), "gemm", "gemv" (on the handle's
// stream), "event" (a record), "event query" (answered not ready), "event done" (a query answered done, or
// cudaEventSynchronize; the event's stream), with the stream each used, and "device sync: <call>" (stream
// nullptr), in order.
struct StreamOp {
  std::string op;
  cudaStream_t stream;
};
const std::vector<StreamOp>& StreamLog();
// Streams made by cudaStreamCreateWithFlags, in order.
const std::vector<cudaStream_t>& CreatedStreams();

}  // namespace psring::testing::fake_cuda

#endif  // PSRING_TESTS_TESTING_FAKE_CUDA_H_
