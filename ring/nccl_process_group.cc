#include "ring/nccl_process_group.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/cluster_env.h"
#include "common/integrity.h"
#include "common/status_macros.h"
#include "trainer/cuda_status.h"

namespace psring::ring {
namespace {

using trainer::PollStream;

// ncclInProgress is not an error for a non-blocking communicator: WaitComm() polls it to completion.
#define PSRING_NCCL_RETURN_IF_ERROR(comm, expr)                                                     \
  do {                                                                                              \
    const ncclResult_t psring_nccl_res_ = (expr);                                                   \
    if (psring_nccl_res_ != ncclSuccess && psring_nccl_res_ != ncclInProgress) {                    \
      return NcclError(comm, psring_nccl_res_, absl::StrCat(__FILE__, ":", __LINE__, ": ", #expr)); \
    }                                                                                               \
  } while (0)

absl::Status NcclError(ncclComm_t comm, ncclResult_t res, const std::string& where) {
  const char* detail = comm != nullptr ? ncclGetLastError(comm) : "";
  const absl::StatusCode code = (res == ncclRemoteError || res == ncclSystemError)
                                    ? absl::StatusCode::kUnavailable
                                    : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(where, ": ", ncclGetErrorString(res),
                                         (detail && *detail) ? absl::StrCat(" (", detail, ")") : ""));
}

// The NCCL unique id as it goes into the store under `key`: sealed (common/integrity.h) under a key derived
// from the job's token for this use and bound to the job id and the store key; as is without a token.
absl::StatusOr<std::string> SealIdForStore(const AuthConfig& auth, const std::string& key,
                                           const std::string& id) {
  if (auth.token.empty()) return id;
  DirectionKey seal_key = DeriveProtocolKey(auth.token, kNcclIdKeyLabel);
  absl::StatusOr<std::string> sealed = SealValue(seal_key, absl::StrCat(auth.job_id, " ", key), id);
  WipeBytes(seal_key.data(), seal_key.size());
  return sealed;
}

absl::StatusOr<std::string> OpenIdFromStore(const AuthConfig& auth, const std::string& key,
                                            const std::string& value) {
  if (auth.token.empty()) return value;
  DirectionKey seal_key = DeriveProtocolKey(auth.token, kNcclIdKeyLabel);
  absl::StatusOr<std::string> id = OpenValue(seal_key, absl::StrCat(auth.job_id, " ", key), value);
  WipeBytes(seal_key.data(), seal_key.size());
  if (!id.ok()) {
    return absl::DataLossError(absl::StrCat("the NCCL unique id in the store (", key, ") ", id.status().message(),
                                            "; does rank 0 have the same --auth_token and --job_id?"));
  }
  return id;
}

// Every public call runs through Guard(): whatever fails — an NCCL call's own result, an asynchronous
// communicator error, a CUDA call, a timeout — aborts the communicator (ncclCommAbort) right there, before
// the error reaches a caller that might synchronise the device, and leaves the group failed, so later
// collectives refuse to run. The clean path finalises (flushing NCCL's outstanding work, bounded by the
// timeout) and then destroys.
class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(int rank, int world_size, absl::Duration timeout)
      : rank_(rank), world_size_(world_size), timeout_(timeout) {}

  ~NcclProcessGroup() override {
    // A failure has already aborted the communicator (Guard), so only a healthy one is left here. A
    // destructor cannot report; a finalisation that fails or times out falls back to the abort.
    if (comm_ != nullptr && !Finalize().ok()) Abort();
    if (comm_ != nullptr) (void)ncclCommDestroy(comm_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    if (device_staging_ != nullptr) (void)cudaFree(device_staging_);
    if (host_staging_ != nullptr) (void)cudaFreeHost(host_staging_);
    (void)cudaGetLastError();  // nothing above may leave an error for the thread's next launch check
  }

  absl::Status Init(Store* store, const ProcessGroupOptions& options) {
    return Guard(InitUnguarded(store, options));
  }

  std::string backend() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  bool AcceptsDeviceMemory() const override { return true; }

  absl::Status AllReduce(float* data, size_t count, ReduceOp op, bool on_device) override {
    return Collective(
        data, count, sizeof(float), on_device,
        [&](void* buf) { return ncclAllReduce(buf, buf, count, ncclFloat32, NcclOp(op), comm_, stream_); },
        /*allreduce=*/true);
  }

  absl::Status AllReduceHost(double* data, size_t count, ReduceOp op) override {
    return Collective(
        data, count, sizeof(double), false,
        [&](void* buf) { return ncclAllReduce(buf, buf, count, ncclFloat64, NcclOp(op), comm_, stream_); },
        /*allreduce=*/true);
  }

  absl::Status Broadcast(float* data, size_t count, int root, bool on_device) override {
    if (root < 0 || root >= world_size_) {
      return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank"));
    }
    return Collective(
        data, count, sizeof(float), on_device,
        [&](void* buf) { return ncclBroadcast(buf, buf, count, ncclFloat32, root, comm_, stream_); },
        /*allreduce=*/false);
  }

  absl::Status Barrier() override {
    float token = 0;
    return AllReduce(&token, 1, ReduceOp::kSum, false);
  }

  uint64_t bytes_sent() const override { return bytes_moved_; }
  uint64_t bytes_received() const override { return bytes_moved_; }

 private:
  static ncclRedOp_t NcclOp(ReduceOp op) { return op == ReduceOp::kAverage ? ncclAvg : ncclSum; }

  // Aborts at once: NCCL's kernels stop only when the abort flag is set, so a collective that failed or timed
  // out may still be spinning on stream_, and anything that synchronises the device — cudaFree,
  // cudaFreeHost, cublasDestroy in the engine's teardown, which the caller runs next — would wait for it
  // forever. After the abort nothing of this rank waits on its peers.
  absl::Status Guard(absl::Status status) {
    if (!status.ok()) {
      failed_ = true;
      Abort();
    }
    return status;
  }

  void Abort() {
    if (comm_ == nullptr) return;
    (void)ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  absl::Status InitUnguarded(Store* store, const ProcessGroupOptions& options) {
    int devices = 0;
    const cudaError_t probe = cudaGetDeviceCount(&devices);
    if (probe != cudaSuccess || devices == 0) {
      (void)cudaGetLastError();  // reported below
      return absl::FailedPreconditionError(absl::StrCat(
          "NCCL needs a usable GPU, but CUDA says: ",
          probe != cudaSuccess ? cudaGetErrorString(probe) : "no device", "; use --ring_transport=tcp"));
    }
    ASSIGN_OR_RETURN(device_, DeviceForLocalRank(options.cuda_device, "the ring's cuda_device", devices,
                                                 std::getenv("CUDA_VISIBLE_DEVICES")));
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));

    // NCCL's unique id is a capability: whoever holds it can reach the job's NCCL bootstrap. With a token
    // the store's messages already carry integrity tags (common/tcp_store.h, unless --data_integrity=off;
    // tests/common/store_auth_test.cc, StoreIntegrityTest.AChangedReplyFailsTheCall), and the id is also
    // sealed here (SealIdForStore; tests/ring/nccl_fake_test.cc), so that it is neither readable nor
    // replaceable on the way, whatever the integrity setting. Without a token the store serves loopback only
    // (or --insecure).
    ncclUniqueId id;
    const std::string key = absl::StrCat(options.tcp.store_prefix, "/nccl_id");
    if (rank_ == 0) {
      PSRING_NCCL_RETURN_IF_ERROR(nullptr, ncclGetUniqueId(&id));
      std::string bytes(reinterpret_cast<const char*>(&id), sizeof(id));
      absl::StatusOr<std::string> value = SealIdForStore(options.tcp.auth, key, bytes);
      WipeBytes(bytes.data(), bytes.size());
      RETURN_IF_ERROR(value.status());
      RETURN_IF_ERROR(store->Set(key, *value));
    } else {
      ASSIGN_OR_RETURN(std::string value, store->Get(key, options.tcp.timeout));
      ASSIGN_OR_RETURN(std::string bytes, OpenIdFromStore(options.tcp.auth, key, value));
      if (bytes.size() != sizeof(id)) {
        return absl::InvalidArgumentError(
            absl::StrCat("NCCL unique id in the store has ", bytes.size(), " bytes, expected ", sizeof(id)));
      }
      std::memcpy(&id, bytes.data(), sizeof(id));
      WipeBytes(bytes.data(), bytes.size());
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    PSRING_NCCL_RETURN_IF_ERROR(comm_, ncclCommInitRankConfig(&comm_, world_size_, id, rank_, &config));
    return WaitComm(absl::Now() + options.tcp.timeout, "NCCL communicator set-up");
  }

  template <typename Launch>
  absl::Status Collective(void* data, size_t count, size_t elem, bool on_device, Launch launch,
                          bool allreduce) {
    if (failed_) {
      return absl::FailedPreconditionError("an earlier NCCL call failed; the group is unusable");
    }
    return Guard(CollectiveUnguarded(data, count, elem, on_device, launch, allreduce));
  }

  // Host buffers travel through a pinned host buffer and a device buffer. Every copy is then truly
  // asynchronous, so the only waiting is WaitStream's, bounded by the deadline: a copy from or into pageable
  // memory would block the host until the stream reached it — behind a collective that a dead peer never
  // lets finish, i.e. forever.
  template <typename Launch>
  absl::Status CollectiveUnguarded(void* data, size_t count, size_t elem, bool on_device, Launch launch,
                                   bool allreduce) {
    const absl::Time deadline = absl::Now() + timeout_;
    // The current device is per thread, and a bucketed step enqueues from the exchange's communication
    // thread, not the thread that created the communicator.
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const size_t bytes = count * elem;
    const bool staged = !on_device && bytes > 0;
    void* buf = data;
    if (staged) {
      RETURN_IF_ERROR(ReserveStaging(bytes));
      std::memcpy(host_staging_, data, bytes);
      CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(device_staging_, host_staging_, bytes, cudaMemcpyHostToDevice, stream_));
      buf = device_staging_;
    }
    PSRING_NCCL_RETURN_IF_ERROR(comm_, launch(buf));
    RETURN_IF_ERROR(WaitComm(deadline, "NCCL collective launch"));
    if (staged) {
      CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(host_staging_, device_staging_, bytes, cudaMemcpyDeviceToHost, stream_));
    }
    RETURN_IF_ERROR(WaitStream(deadline));
    if (staged) std::memcpy(data, host_staging_, bytes);
    // What a ring moves per rank: 2(N-1)/N * S for allreduce, S for broadcast (nccl-tests' bus figures).
    bytes_moved_ += allreduce ? bytes * 2 * (world_size_ - 1) / world_size_ : bytes;
    return absl::OkStatus();
  }

  absl::Status ReserveStaging(size_t bytes) {
    if (staging_bytes_ >= bytes) return absl::OkStatus();
    if (device_staging_ != nullptr) CUDA_RETURN_IF_ERROR(cudaFree(device_staging_));
    device_staging_ = nullptr;
    if (host_staging_ != nullptr) CUDA_RETURN_IF_ERROR(cudaFreeHost(host_staging_));
    host_staging_ = nullptr;
    staging_bytes_ = 0;
    CUDA_RETURN_IF_ERROR(cudaMalloc(&device_staging_, bytes));
    CUDA_RETURN_IF_ERROR(cudaMallocHost(&host_staging_, bytes));
    staging_bytes_ = bytes;
    return absl::OkStatus();
  }

  // Polls the communicator until it leaves ncclInProgress (set-up, a launch, finalisation).
  absl::Status WaitComm(absl::Time deadline, const char* what) {
    while (true) {
      ncclResult_t state = ncclSuccess;
      PSRING_NCCL_RETURN_IF_ERROR(comm_, ncclCommGetAsyncError(comm_, &state));
      if (state == ncclSuccess) return absl::OkStatus();
      if (state != ncclInProgress) return NcclError(comm_, state, what);
      if (absl::Now() >= deadline) return TimedOut(what);
      absl::SleepFor(absl::Microseconds(50));
    }
  }

  // Waits for the stream while watching for asynchronous NCCL errors (a dead peer).
  absl::Status WaitStream(absl::Time deadline) {
    while (true) {
      const cudaError_t q = PollStream(stream_);
      if (q == cudaSuccess) return absl::OkStatus();
      if (q != cudaErrorNotReady) return trainer::CudaStatus(q, "cudaStreamQuery", __FILE__, __LINE__);
      ncclResult_t state = ncclSuccess;
      PSRING_NCCL_RETURN_IF_ERROR(comm_, ncclCommGetAsyncError(comm_, &state));
      if (state != ncclSuccess && state != ncclInProgress) return NcclError(comm_, state, "NCCL collective");
      if (absl::Now() >= deadline) return TimedOut("NCCL collective");
      absl::SleepFor(absl::Microseconds(20));
    }
  }

  // ncclCommFinalize flushes the communicator's outstanding operations; on a non-blocking communicator it
  // returns ncclInProgress and completes asynchronously.
  absl::Status Finalize() {
    PSRING_NCCL_RETURN_IF_ERROR(comm_, ncclCommFinalize(comm_));
    return WaitComm(absl::Now() + timeout_, "NCCL communicator finalisation");
  }

  absl::Status TimedOut(const char* what) {
    return absl::DeadlineExceededError(absl::StrCat(what, " on rank ", rank_, " did not finish within ",
                                                    absl::FormatDuration(timeout_),
                                                    "; a rank is stalled or dead (communicator aborted)"));
  }

  const int rank_;
  const int world_size_;
  const absl::Duration timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int device_ = 0;  // the GPU of the communicator and stream
  void* device_staging_ = nullptr;
  void* host_staging_ = nullptr;  // pinned (cudaMallocHost)
  size_t staging_bytes_ = 0;
  bool failed_ = false;
  uint64_t bytes_moved_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessGroup>> CreateNcclProcessGroup(Store* store, int rank, int world_size,
                                                                     const ProcessGroupOptions& options) {
  auto group = std::make_unique<NcclProcessGroup>(rank, world_size, options.ring.timeout);
  RETURN_IF_ERROR(group->Init(store, options));
  return std::unique_ptr<ProcessGroup>(std::move(group));
}

}  // namespace psring::ring
