#include "ring/process_group.h"

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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
  if (name.empty() || name == "auto") return Transport::kAuto;
  if (name == "tcp") return Transport::kTcp;
  if (name == "nccl") return Transport::kNccl;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ring transport '", name, "'; use auto, tcp or nccl"));
}

const char* TransportName(Transport transport) {
  switch (transport) {
    case Transport::kAuto:
      return "auto";
    case Transport::kTcp:
      return "tcp";
    case Transport::kNccl:
      return "nccl";
  }
  return "?";
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
  if (cudaGetDeviceCount(&devices) != cudaSuccess) {
    (void)cudaGetLastError();  // "no GPU" is the answer here, not an error for the next launch check
    return false;
  }
  return devices > 0;
#else
  return false;
#endif
}

namespace {

// Rank 0's rule over every rank's request ("<transport>|<gpu>"): the decision, or the error every rank gets.
// `*why` says why kAuto chose TCP although ranks have GPUs (empty otherwise).
absl::StatusOr<Transport> Decide(const std::vector<std::string>& requests, std::string* why) {
  std::vector<std::pair<int, Transport>> explicit_requests;
  std::map<std::string, int> first_rank_on;  // GPU identity -> the first rank that drives it
  std::string collision;
  int gpu_ranks = 0;
  bool every_rank_has_a_gpu = true;
  for (int r = 0; r < static_cast<int>(requests.size()); ++r) {
    const std::vector<std::string> parts = absl::StrSplit(requests[r], absl::MaxSplits('|', 1));
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("malformed transport request of rank ", r));
    }
    ASSIGN_OR_RETURN(Transport t, ParseTransport(parts[0]));
    if (t != Transport::kAuto) explicit_requests.emplace_back(r, t);
    if (parts[1].empty()) {
      every_rank_has_a_gpu = false;
      continue;
    }
    ++gpu_ranks;
    const auto [it, first] = first_rank_on.emplace(parts[1], r);
    if (!first && collision.empty()) {
      collision = absl::StrCat("ranks ", it->second, " and ", r, " share GPU ", parts[1],
                               " (give each rank its own: --local_rank, or a launcher that sets "
                               "OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or LOCAL_RANK)");
    }
  }
  for (const auto& [r, t] : explicit_requests) {
    if (t != explicit_requests.front().second) {
      return absl::FailedPreconditionError(
          absl::StrCat("ranks disagree on the ring transport: rank ", explicit_requests.front().first,
                       " asked for ", TransportName(explicit_requests.front().second), ", rank ", r, " for ",
                       TransportName(t), "; pass the same --ring_transport to every rank (or none)"));
    }
  }
  if (!explicit_requests.empty()) return explicit_requests.front().second;
  const bool own_gpus = every_rank_has_a_gpu && collision.empty();
  if (NcclCompiledIn() && own_gpus) return Transport::kNccl;
  if (gpu_ranks > 0) {
    *why = !collision.empty() ? collision
           : !every_rank_has_a_gpu
               ? absl::StrCat("only ", gpu_ranks, " of ", requests.size(), " ranks have a GPU")
               : "this build has no NCCL";
  }
  return Transport::kTcp;
}

}  // namespace

absl::StatusOr<Transport> AgreeOnTransport(Store* store, int rank, int world_size, Transport requested,
                                           const std::string& gpu, const std::string& prefix,
                                           absl::Duration timeout, std::string* why) {
  const std::string base = absl::StrCat(prefix, "/transport/");
  RETURN_IF_ERROR(
      store->Set(absl::StrCat(base, "request/", rank), absl::StrCat(TransportName(requested), "|", gpu)));
  if (rank == 0) {
    std::vector<std::string> requests;
    for (int r = 0; r < world_size; ++r) {
      ASSIGN_OR_RETURN(std::string request, store->Get(absl::StrCat(base, "request/", r), timeout));
      requests.push_back(std::move(request));
    }
    std::string reason;
    absl::StatusOr<Transport> decision = Decide(requests, &reason);
    RETURN_IF_ERROR(store->Set(absl::StrCat(base, "why"), reason));
    RETURN_IF_ERROR(store->Set(
        absl::StrCat(base, "decision"),
        decision.ok() ? TransportName(*decision) : absl::StrCat("error:", decision.status().message())));
  }
  ASSIGN_OR_RETURN(std::string decision, store->Get(absl::StrCat(base, "decision"), timeout));
  if (absl::StartsWith(decision, "error:")) {
    return absl::FailedPreconditionError(decision.substr(6));
  }
  // Rank 0 wrote the reason before the decision.
  if (why != nullptr) {
    ASSIGN_OR_RETURN(*why, store->Get(absl::StrCat(base, "why"), timeout));
  }
  return ParseTransport(decision);
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> CreateProcessGroup(Store* store, int rank, int world_size,
                                                                 const ProcessGroupOptions& options) {
  if (world_size > 1) {
    RETURN_IF_ERROR(AgreeOnFingerprint(store, rank, world_size, options.fingerprint, options.tcp.store_prefix,
                                       options.tcp.timeout));
  }
  std::string why;
  ASSIGN_OR_RETURN(const Transport transport,
                   AgreeOnTransport(store, rank, world_size, options.transport, options.gpu,
                                    options.tcp.store_prefix, options.tcp.timeout, &why));
  if (rank == 0 && !why.empty()) {
    std::fprintf(stderr, "psring: ring transport: tcp with host staging, not NCCL: %s\n", why.c_str());
  }
  if (transport == Transport::kNccl) {
#ifdef PSRING_WITH_NCCL
    return CreateNcclProcessGroup(store, rank, world_size, options);
#else
    return absl::FailedPreconditionError(
        "this build has no NCCL (none found at build time); use --ring_transport=tcp");
#endif
  }
  ASSIGN_OR_RETURN(std::unique_ptr<TcpRingPeer> peer, ConnectTcpRing(store, rank, world_size, options.tcp));
  return std::unique_ptr<ProcessGroup>(new TcpProcessGroup(std::move(peer), options.ring));
}

}  // namespace psring::ring
