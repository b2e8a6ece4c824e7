#include "ring/process_group.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#ifdef PSRING_WITH_NCCL
#include <cuda_runtime.h>

#include "ring/nccl_process_group.h"
#endif

namespace psring::ring {
namespace {

// The TCP ring on host memory.
class TcpProcessGroup final : public ProcessGroup {
 public:
  TcpProcessGroup(std::unique_ptr<TcpRingPeer> peer, const RingOptions& options)
      : peer_(std::move(peer)), ring_(peer_.get(), options) {}

  std::string backend() const override { return "tcp"; }
  int rank() const override { return peer_->rank(); }
  int world_size() const override { return peer_->world_size(); }
  bool AcceptsDeviceMemory() const override { return false; }

  absl::Status AllReduce(float* data, size_t count, ReduceOp op, bool on_device) override {
    RETURN_IF_ERROR(HostOnly(on_device));
    return ring_.AllReduce(data, count, DataType::kFloat32, op);
  }
  absl::Status AllReduceHost(double* data, size_t count, ReduceOp op) override {
    return ring_.AllReduce(data, count, DataType::kFloat64, op);
  }
  absl::Status Broadcast(float* data, size_t count, int root, bool on_device) override {
    RETURN_IF_ERROR(HostOnly(on_device));
    return ring_.Broadcast(data, count, DataType::kFloat32, root);
  }
  // An allreduce cannot finish on any rank before every rank has contributed.
  absl::Status Barrier() override {
    float token = 0;
    return ring_.AllReduce(&token, 1, DataType::kFloat32, ReduceOp::kSum);
  }
  uint64_t bytes_sent() const override { return peer_->bytes_sent(); }
  uint64_t bytes_received() const override { return peer_->bytes_received(); }
  PhaseTimes last_phase_times() const override { return ring_.last_phase_times(); }

 private:
  static absl::Status HostOnly(bool on_device) {
    if (!on_device) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "the TCP ring works on host memory; copy the buffer to the host or use --ring_transport=nccl");
  }

  std::unique_ptr<TcpRingPeer> peer_;
  RingCollectives ring_;
};

}  // namespace

absl::StatusOr<Transport> ParseTransport(const std::string& name) {
  if (name == "tcp") return Transport::kTcp;
  if (name == "nccl") return Transport::kNccl;
  return absl::InvalidArgumentError(absl::StrCat("unknown ring transport '", name, "'; use tcp or nccl"));
}

bool NcclCompiledIn() {
#ifdef PSRING_WITH_NCCL
  return true;
#else
  return false;
#endif
}

bool GpuUsable() {
#ifdef PSRING_WITH_NCCL
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> CreateProcessGroup(Store* store, int rank, int world_size,
                                                                 const ProcessGroupOptions& options) {
  if (options.transport == Transport::kNccl) {
#ifdef PSRING_WITH_NCCL
    return CreateNcclProcessGroup(store, rank, world_size, options);
#else
    return absl::FailedPreconditionError(
        "this build has no NCCL (no CUDA toolkit at build time); use --ring_transport=tcp");
#endif
  }
  ASSIGN_OR_RETURN(std::unique_ptr<TcpRingPeer> peer, ConnectTcpRing(store, rank, world_size, options.tcp));
  return std::unique_ptr<ProcessGroup>(new TcpProcessGroup(std::move(peer), options.ring));
}

}  // namespace psring::ring
