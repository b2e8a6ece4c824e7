// NCCL transport of the ProcessGroup (compiled only when NCCL was found at build time; see ring/BUILD.bazel).
//
// Rank 0 creates NCCL's unique id and publishes it through the rendezvous store; every rank initialises its
// communicator non-blocking and polls it, so set-up and every collective are bounded by the timeouts in
// ProcessGroupOptions. Collectives run on the group's own CUDA stream and return once it has finished;
// NCCL errors and ncclCommGetAsyncError come back as Status. Host buffers are staged through a pinned host
// buffer and a device buffer the group owns, so no copy can block past the timeout. Any failure aborts the
// communicator before the call returns (a timed-out NCCL kernel stops only then, and would otherwise block
// whatever synchronises the device next, e.g. the engine's cudaFree) and leaves the group failed: later
// collectives refuse to run. A healthy group's destructor finalises and destroys the communicator. Not thread-safe.
#ifndef PSRING_RING_NCCL_PROCESS_GROUP_H_
#define PSRING_RING_NCCL_PROCESS_GROUP_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/store.h"
#include "ring/process_group.h"

namespace psring::ring {

// kFailedPrecondition when no GPU is usable (the message carries CUDA's reason).
absl::StatusOr<std::unique_ptr<ProcessGroup>> CreateNcclProcessGroup(Store* store, int rank, int world_size,
                                                                     const ProcessGroupOptions& options);

}  // namespace psring::ring

#endif  // PSRING_RING_NCCL_PROCESS_GROUP_H_
