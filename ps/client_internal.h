// What more than one of PsExchange's .cc files needs (ps/client*.cc); private to //ps:client.
#ifndef PSRING_PS_CLIENT_INTERNAL_H_
#define PSRING_PS_CLIENT_INTERNAL_H_

#include "absl/status/status.h"

namespace psring::ps {

// A shard that restarted or went away: re-register and carry on. CANCELLED counts too: this client never
// cancels its calls, so it comes from a server that stopped in the middle of one.
// RESOURCE_EXHAUSTED: the server had no thread for the call (its ResourceQuota, ps/server.h); nothing was
// done, so registering and pushing again is safe.
inline bool NeedsReregistration(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsNotFound(status) || absl::IsCancelled(status) ||
         absl::IsResourceExhausted(status);
}

}  // namespace psring::ps

#endif  // PSRING_PS_CLIENT_INTERNAL_H_
