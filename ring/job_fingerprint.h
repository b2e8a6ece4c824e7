// The job fingerprint: the settings every rank of a data-parallel ring job must share (hyperparameters,
// model layout, workload, device kind), checked at rendezvous so that ranks started with different flags
// fail together instead of averaging gradients of different models or optimizers (wrong results, exit 0).
//
//   JobFingerprint f = {{"lr", "0.03"}, {"momentum", "0.9"}};
//   RETURN_IF_ERROR(AgreeOnFingerprint(store, rank, world_size, f, "ring", absl::Seconds(60)));
//
// Every rank publishes its fingerprint under `prefix` in the store; rank 0 compares each rank's with its own
// and publishes one verdict that every rank reads, so a mismatch fails every rank with the same message
// naming the flag and both values (rank 0's and rank r's). Blocks up to `timeout` for the other ranks; after
// a mismatch rank 0 (which serves the store) also waits for every rank to have read the verdict.
// Thread-safe as far as the store is.
#ifndef PSRING_RING_JOB_FINGERPRINT_H_
#define PSRING_RING_JOB_FINGERPRINT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/store.h"

namespace psring::ring {

// (flag name without the dashes, value as text) in a fixed order; names hold no '=', neither holds '\n'.
using JobFingerprint = std::vector<std::pair<std::string, std::string>>;

// The shortest text that reads back to the same float (0.9f is "0.9"; 0.03f and 0.030000001f differ).
std::string FingerprintValue(float value);

// kInvalidArgument on every rank when any rank's fingerprint differs from rank 0's: "ranks disagree on
// --<flag>: rank 0 has <a>, rank <r> has <b>; ...". kDeadlineExceeded when a rank does not publish in time.
absl::Status AgreeOnFingerprint(Store* store, int rank, int world_size, const JobFingerprint& mine,
                                const std::string& prefix, absl::Duration timeout);

}  // namespace psring::ring

#endif  // PSRING_RING_JOB_FINGERPRINT_H_
