#include "tests/testing/fake_cuda.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

// The opaque handle types of the real headers, given a body here.
struct CUstream_st {};
struct CUevent_st {
  cudaStream_t stream = nullptr;
  int polls_left = 0;  // cudaEventQuery answers "not ready" this often after the record
  bool recorded = false;
};
struct ncclComm {};

namespace psring::testing::fake_cuda {
namespace {

struct State {
  Config config;
  std::vector<std::string> log;
  std::set<const void*> pinned;
  int pending_polls = 0;               // -1: the stream never finishes
  cudaStream_t busy_stream = nullptr;  // the stream pending_polls is about; nullptr: every stream
  int comm_polls = 0;
  ncclResult_t comm_state = ncclSuccess;
  int blocking_copies = 0;
  int launches = 0;
  int spinning_syncs = 0;
  std::vector<StreamOp> stream_log;
  std::vector<cudaStream_t> streams;
};

State& S() {
  static State* state = new State();
  return *state;
}

thread_local cudaError_t last_error = cudaSuccess;

}  // namespace

// Every fake call holds it: the engine's thread and an exchange's communication thread use the fake at once.
std::recursive_mutex& Mu() {
  static std::recursive_mutex* mu = new std::recursive_mutex();
  return *mu;
}

namespace {

cudaError_t Record(cudaError_t err) {
  if (err != cudaSuccess) last_error = err;
  return err;
}

bool StreamBusy(cudaStream_t stream) {
  return S().pending_polls != 0 && (S().busy_stream == nullptr || S().busy_stream == stream);
}

// A call that waits for the whole device (cudaFree, cudaFreeHost, cublasDestroy): it would wait forever for
// a collective that never finishes.
void DeviceWideSync(const char* what) {
  S().stream_log.push_back({what, nullptr});
  if (S().pending_polls < 0) ++S().spinning_syncs;
}

}  // namespace

void Reset(const Config& config) {
  S() = State();
  S().config = config;
  last_error = cudaSuccess;
}

Config& MutableConfig() { return S().config; }
const std::vector<StreamOp>& StreamLog() { return S().stream_log; }
const std::vector<cudaStream_t>& CreatedStreams() { return S().streams; }

void MakeStreamBusy(int polls) {
  S().pending_polls = polls;
  S().busy_stream = nullptr;
}

const std::vector<std::string>& CommLog() { return S().log; }
int BlockingPageableCopies() { return S().blocking_copies; }
int Launches() { return S().launches; }
int DeviceSyncsWhileACollectiveSpins() { return S().spinning_syncs; }

}  // namespace psring::testing::fake_cuda

using psring::testing::fake_cuda::DeviceWideSync;
using psring::testing::fake_cuda::Record;
using psring::testing::fake_cuda::S;
using psring::testing::fake_cuda::StreamBusy;

// CUDA runtime ---------------------------------------------------------------------------------------------

cudaError_t cudaGetLastError() {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  const cudaError_t err = psring::testing::fake_cuda::last_error;
  psring::testing::fake_cuda::last_error = cudaSuccess;
  return err;
}

cudaError_t cudaPeekAtLastError() { return psring::testing::fake_cuda::last_error; }

const char* cudaGetErrorString(cudaError_t) { return "fake CUDA error"; }
const char* cudaGetErrorName(cudaError_t) { return "cudaErrorFake"; }

cudaError_t cudaGetDeviceCount(int* count) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int) { return cudaSuccess; }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  *stream = new CUstream_st();
  S().streams.push_back(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  S().stream_log.push_back({"sync", stream});
  if (!StreamBusy(stream)) return cudaSuccess;
  if (S().pending_polls < 0) return Record(cudaErrorLaunchTimeout);  // a hang, as far as a test can tell
  S().pending_polls = 0;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  if (!StreamBusy(stream)) return cudaSuccess;
  if (S().pending_polls > 0) --S().pending_polls;
  return Record(cudaErrorNotReady);
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  if (S().config.malloc_result != cudaSuccess) return Record(S().config.malloc_result);
  *ptr = std::malloc(bytes > 0 ? bytes : 1);
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  if (ptr != nullptr) DeviceWideSync("device sync: cudaFree");  // cudaFree(nullptr) only makes the context
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  *ptr = std::malloc(bytes > 0 ? bytes : 1);
  S().pinned.insert(*ptr);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  DeviceWideSync("device sync: cudaFreeHost");
  S().pinned.erase(ptr);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  S().stream_log.push_back({"memset", stream});
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  S().stream_log.push_back({"copy", stream});
  const void* host = kind == cudaMemcpyHostToDevice ? src : kind == cudaMemcpyDeviceToHost ? dst : nullptr;
  if (host != nullptr && S().pinned.count(host) == 0 && StreamBusy(stream)) ++S().blocking_copies;
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  *event = new CUevent_st();
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  S().stream_log.push_back({"event", stream});
  event->stream = stream;
  event->polls_left = S().config.event_polls_until_done;
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  if (!event->recorded || event->polls_left == 0) {
    S().stream_log.push_back({"event done", event->stream});
    return cudaSuccess;
  }
  S().stream_log.push_back({"event query", event->stream});
  --event->polls_left;
  return Record(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  S().stream_log.push_back({"event done", event->stream});
  event->polls_left = 0;
  return cudaSuccess;
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t*, const void*, void**) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  ++S().launches;
  return Record(S().config.launch_result);
}

// nvcc's module registration (a .cu object calls these at load time) --------------------------------------

// Declared in crt/host_runtime.h, which only nvcc's generated code includes.
extern "C" {

void** __cudaRegisterFatBinary(void*) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  static void* handle = nullptr;
  return &handle;
}
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
void __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*, dim3*,
                            int*) {}

// Reached only through a triple-chevron launch, which psring does not use (LaunchKernel instead).
cudaError_t __cudaPopCallConfiguration(dim3*, dim3*, size_t*, void*) { return Record(cudaErrorNotSupported); }
cudaError_t __cudaGetKernel(cudaKernel_t*, const void*) { return Record(cudaErrorNotSupported); }
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  return Record(cudaErrorNotSupported);
}

}  // extern "C"

// cuBLAS: handles and streams are tracked, the arithmetic is not done -----------------------------------

struct cublasContext {
  cudaStream_t stream = nullptr;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  DeviceWideSync("device sync: cublasDestroy");
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  handle->stream = stream;
  S().stream_log.push_back({"cublas", stream});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
const char* cublasGetStatusString(cublasStatus_t) { return "fake cuBLAS status"; }

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t, cublasOperation_t, int, int, int,
                              const float*, const float*, int, const float*, int, const float*, float*, int) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  S().stream_log.push_back({"gemm", handle->stream});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemv_v2(cublasHandle_t handle, cublasOperation_t, int, int, const float*, const float*,
                              int, const float*, int, const float*, float*, int) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  S().stream_log.push_back({"gemv", handle->stream});
  return CUBLAS_STATUS_SUCCESS;
}

// NCCL -----------------------------------------------------------------------------------------------------

const char* ncclGetErrorString(ncclResult_t) { return "fake NCCL error"; }
const char* ncclGetLastError(ncclComm_t) { return "fake NCCL detail"; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  std::memset(id, 0, sizeof(*id));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int, ncclUniqueId, int, ncclConfig_t* config) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  *comm = new ncclComm();
  S().log.push_back("init");
  S().comm_polls = S().config.comm_polls_until_ready;
  S().comm_state = S().config.init_async_result;
  return config->blocking == 0 ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* state) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  if (S().comm_polls > 0) {
    --S().comm_polls;
    *state = ncclInProgress;
  } else {
    *state = S().comm_state;
  }
  return ncclSuccess;
}

namespace {

ncclResult_t FakeCollective(cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  if (S().config.collective_result != ncclSuccess) return S().config.collective_result;
  S().pending_polls = S().config.collectives_hang ? -1 : S().config.stream_polls_until_done;
  S().busy_stream = stream;
  S().comm_state = S().config.async_result_after_collective;
  return ncclSuccess;
}

}  // namespace

ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                           cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  return FakeCollective(stream);
}

ncclResult_t ncclBroadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t stream) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  return FakeCollective(stream);
}

ncclResult_t ncclCommFinalize(ncclComm_t) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  S().log.push_back("finalize");
  S().comm_polls = S().config.comm_polls_until_ready;
  return ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  S().log.push_back("destroy");
  delete comm;
  return ncclSuccess;
}

// The abort flag stops the communicator's kernels: a collective that would never finish ends here.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  const std::lock_guard<std::recursive_mutex> lock(psring::testing::fake_cuda::Mu());
  S().log.push_back("abort");
  if (S().pending_polls < 0) S().pending_polls = 0;
  delete comm;
  return ncclSuccess;
}
