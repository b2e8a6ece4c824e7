// ProcessGroup: the c10d-style collectives a training job needs (allreduce, broadcast, barrier), over one of
// two transports — the TCP ring (CPU memory; ring/ring_allreduce.h over ring/tcp_transport.h) or NCCL (CUDA
// memory; ring/nccl_process_group.h, built only with CUDA). CreateProcessGroup is the one place that sees the
// store and a transport together.
//
//   InMemoryStore store;  // or a TcpStore
//   ProcessGroupOptions o;
//   ASSIGN_OR_RETURN(std::unique_ptr<ProcessGroup> pg, CreateProcessGroup(&store, rank, world_size, o));
//   RETURN_IF_ERROR(pg->AllReduce(grads.data(), grads.size(), ReduceOp::kAverage, /*on_device=*/false));
//
// Every call blocks until done or failed, with every rank calling the same sequence of collectives with the
// same sizes. Errors: kUnavailable (a rank died), kDeadlineExceeded (a rank stalled past the timeout),
// kInvalidArgument (ranks disagree on sizes). After an error the group is unusable. Not thread-safe: one
// thread per group. The caller owns all buffers; they are touched only during a call.
#ifndef PSRING_RING_PROCESS_GROUP_H_
#define PSRING_RING_PROCESS_GROUP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/store.h"
#include "ring/job_fingerprint.h"
#include "ring/ring_allreduce.h"
#include "ring/tcp_transport.h"

namespace psring::ring {

enum class Transport {
  kAuto,  // NCCL when every rank of the job has a GPU of its own (and NCCL is built in), else TCP
  kTcp,
  kNccl,
};

// "" or "auto" | "tcp" | "nccl"; kInvalidArgument otherwise.
absl::StatusOr<Transport> ParseTransport(const std::string& name);
// The flag's spelling: "auto", "tcp" or "nccl".
const char* TransportName(Transport transport);

// True when this binary was built with NCCL (CUDA and NCCL found at build time, tools/cuda_configure.bzl).
bool NcclCompiledIn();

// True when NCCL is compiled in and CUDA reports at least one usable GPU.
bool GpuUsable();

struct ProcessGroupOptions {
  // What this rank asks for. The job uses ONE transport, settled through the store by AgreeOnTransport.
  Transport transport = Transport::kTcp;
  // This rank's GPU, unique across the job ("<host>:<PCI bus id>", trainer::CudaDeviceIdentity()); "" when
  // the rank trains without one. kAuto picks NCCL only if all are set and distinct: NCCL refuses two ranks
  // on one GPU.
  std::string gpu;
  TcpRingOptions tcp;   // its timeout also bounds NCCL's set-up and the transport agreement
  RingOptions ring;     // its timeout bounds every collective (both transports)
  int cuda_device = 0;  // NCCL: the GPU this rank drives (usually the local rank)
  // What every rank must agree on (ring/job_fingerprint.h), checked before the transport is chosen; empty on
  // every rank: nothing to check.
  JobFingerprint fingerprint;
};

// One transport for the whole job. Every rank publishes its request and `gpu` under `prefix` in the store;
// rank 0 decides — the explicit requests ("tcp", "nccl") when they agree, otherwise kAuto's rule — and
// publishes the decision, which every rank reads. kFailedPrecondition on every rank when two ranks asked
// explicitly for different transports (the message names them). Blocks up to `timeout` for the other ranks.
// A rank that asked for kAuto follows the decision; an explicit request is always what it gets. `*why`
// (when not null) is set on every rank to why kAuto chose TCP although ranks have GPUs ("ranks 0 and 1
// share GPU <id> ..."), empty otherwise; CreateProcessGroup prints it on rank 0.
absl::StatusOr<Transport> AgreeOnTransport(Store* store, int rank, int world_size, Transport requested,
                                           const std::string& gpu, const std::string& prefix,
                                           absl::Duration timeout, std::string* why = nullptr);

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual std::string backend() const = 0;  // "tcp" | "nccl"
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // True when AllReduce/Broadcast take device pointers (NCCL).
  virtual bool AcceptsDeviceMemory() const = 0;

  // In place over `count` floats at `data` (device memory when on_device, which needs AcceptsDeviceMemory).
  virtual absl::Status AllReduce(float* data, size_t count, ReduceOp op, bool on_device) = 0;
  // Host doubles (metrics), any transport.
  virtual absl::Status AllReduceHost(double* data, size_t count, ReduceOp op) = 0;
  // Every rank's `data` becomes root's.
  virtual absl::Status Broadcast(float* data, size_t count, int root, bool on_device) = 0;
  virtual absl::Status Barrier() = 0;

  // Bytes this process moved over the network so far (NCCL: 2(N-1)/N * S per allreduce, as nccl-tests).
  virtual uint64_t bytes_sent() const = 0;
  virtual uint64_t bytes_received() const = 0;
  virtual PhaseTimes last_phase_times() const { return PhaseTimes{}; }
};

// Connects this rank into a group of `world_size` through `store` (used during the call: the fingerprint
// check, which fails every rank when their options.fingerprint differ, the transport agreement, the TCP addresses or NCCL's unique id). Blocks until every rank has joined or
// options.tcp.timeout passes.
absl::StatusOr<std::unique_ptr<ProcessGroup>> CreateProcessGroup(Store* store, int rank, int world_size,
                                                                 const ProcessGroupOptions& options);

}  // namespace psring::ring

#endif  // PSRING_RING_PROCESS_GROUP_H_
