// The server's side of the parameter server's call authentication (ps/call_auth.h has the protocol): the
// channels opened by Authenticate, the check of every call's MAC and counter, and the per-rank credentials:
//   - a channel acts as the one rank it authenticated as (or as an operator: Stats, Shutdown of an idle
//     server);
//   - the channel that registered a rank's current session owns the rank: only it may call with that
//     session (Push, Pull, metrics) and only it may register the rank again while the rank is live, i.e. the
//     owner has a call in flight or ended one less than `lease` ago (the server's --step_timeout). A rank whose
//     worker crashed falls silent, and after the lease any channel of that rank may register it (a restarted
//     or replacement worker): the same rule the synchronous step applies to a dead worker;
//   - Shutdown comes from rank 0's owner, or from any channel once no rank is live (an operator stopping a
//     server whose job ended).
// Without a token every check passes (no authentication, as before).
//
//   AuthChannels channels(PsKeyFromToken(token), workers, step_timeout);
//   ASSIGN_OR_RETURN(CallGrant call, channels.Verify(*context, "Pull"));   // before reading the request
//   RETURN_IF_ERROR(call.CheckFields(PullFields(request)));                  // after reading it
//   RETURN_IF_ERROR(channels.CheckOwner(call, request.rank()));
//
// Thread-safety: thread-safe. A CallGrant (one call in flight) must not outlive its AuthChannels.
#ifndef PSRING_PS_AUTH_CHANNELS_H_
#define PSRING_PS_AUTH_CHANNELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "ps/call_auth.h"

namespace psring::ps {

class AuthChannels;

// One authenticated call in flight: its channel counts as active until the grant goes. Move-only.
class CallGrant {
 public:
  CallGrant(CallGrant&& other) noexcept;
  CallGrant& operator=(CallGrant&&) = delete;
  CallGrant(const CallGrant&) = delete;
  ~CallGrant();
  // The rank the channel authenticated as (kOperatorRank for an operator; kOperatorRank without a token).
  int rank() const { return rank_; }
  // OK when `fields` (computed from the request read) are the ones the MAC covers (always without a token);
  // kUnauthenticated otherwise.
  absl::Status CheckFields(const std::string& fields) const;
  // OK when the channel acts as `rank` (always without a token); kPermissionDenied otherwise.
  absl::Status CheckRank(int rank) const;

 private:
  friend class AuthChannels;
  CallGrant(AuthChannels* channels, std::string channel, int rank, std::string fields)
      : channels_(channels), channel_(std::move(channel)), rank_(rank), fields_(std::move(fields)) {}
  AuthChannels* channels_;  // null: no token
  std::string channel_;
  int rank_;
  std::string fields_;
};

class AuthChannels {
 public:
  // `ps_key` empty: no token, every check passes. At most `4 * workers + 64` channels are kept; beyond that
  // the least recently used one that owns no rank is forgotten (its client authenticates again).
  AuthChannels(std::string ps_key, int workers, absl::Duration lease);
  ~AuthChannels();
  bool enabled() const { return !ps_key_.empty(); }
  const std::string& ps_key() const { return ps_key_; }

  // Checks the call's x-psring-auth metadata for `method`: a known channel, an unseen counter in its window
  // and the right MAC. kUnauthenticated (no or bad proof), kNotFound (a channel this server does not know:
  // it restarted; authenticate and register again). Reads nothing of the call but its metadata.
  absl::StatusOr<CallGrant> Verify(const grpc::ServerContext& context, absl::string_view method);
  // Adds a channel that completed Authenticate as `rank`; returns its id.
  std::string Add(int rank, std::string key);

  // Register: claims `rank` for the call's channel when the rank has no live owner, or the caller is it.
  // kUnavailable naming the rank otherwise (the live owner keeps it; a worker retrying gets it once the
  // owner has been silent for the lease). Returns the previous owner, which ReleaseClaim() restores when the
  // registration then fails.
  absl::StatusOr<std::string> ClaimRank(const CallGrant& call, int rank);
  // ClaimRank's check without the claim (before a registration reads its offer).
  absl::Status MayClaimRank(const CallGrant& call, int rank);
  void ReleaseClaim(const CallGrant& call, int rank, std::string previous);
  // Calls with a session: OK when the call's channel owns `rank` (kPermissionDenied otherwise).
  absl::Status CheckOwner(const CallGrant& call, int rank);
  // Shutdown: rank 0's owner, or anyone once no rank is live. kPermissionDenied otherwise.
  absl::Status CheckShutdown(const CallGrant& call);

 private:
  friend class CallGrant;
  struct Channel {
    int rank = kOperatorRank;
    std::string key;
    ReplayWindow window;
    int in_flight = 0;
    absl::Time last_active;
  };
  void EndCall(const std::string& channel);
  bool LiveLocked(int rank, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckClaimLocked(const CallGrant& call, int rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string ps_key_;
  const absl::Duration lease_;
  const size_t max_channels_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Channel> channels_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> owners_ ABSL_GUARDED_BY(mu_);  // per rank: the owning channel ("" none)
};

}  // namespace psring::ps

#endif  // PSRING_PS_AUTH_CHANNELS_H_
