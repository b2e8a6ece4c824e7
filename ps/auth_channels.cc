#include "ps/auth_channels.h"

#include <openssl/crypto.h>

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/status_macros.h"

namespace psring::ps {
namespace {

std::string RankName(int rank) { return rank == kOperatorRank ? "an operator" : absl::StrCat("rank ", rank); }

}  // namespace

CallGrant::CallGrant(CallGrant&& other) noexcept
    : channels_(other.channels_), channel_(std::move(other.channel_)), rank_(other.rank_),
      fields_(std::move(other.fields_)) {
  other.channels_ = nullptr;
}

CallGrant::~CallGrant() {
  if (channels_ != nullptr) channels_->EndCall(channel_);
}

absl::Status CallGrant::CheckFields(const std::string& fields) const {
  if (channels_ == nullptr || fields == fields_) return absl::OkStatus();
  return absl::UnauthenticatedError(absl::StrCat("the request (", fields, ") is not the call its MAC covers (",
                                                 fields_, "); refused"));
}

absl::Status CallGrant::CheckRank(int rank) const {
  if (channels_ == nullptr || rank == rank_) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("this caller authenticated as ", RankName(rank_),
                                                  " and cannot act as rank ", rank));
}

AuthChannels::AuthChannels(std::string ps_key, int workers, absl::Duration lease)
    : ps_key_(std::move(ps_key)), lease_(lease), max_channels_(4 * static_cast<size_t>(workers) + 64),
      owners_(workers) {}

AuthChannels::~AuthChannels() {
  absl::MutexLock lock(&mu_);
  for (auto& [id, channel] : channels_) OPENSSL_cleanse(channel.key.data(), channel.key.size());
}

absl::StatusOr<CallGrant> AuthChannels::Verify(const grpc::ServerContext& context, absl::string_view method) {
  if (!enabled()) return CallGrant(nullptr, "", kOperatorRank, "");
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kCallAuthMetadataKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "this server requires the job's token (--auth_token, --auth_token_file or ", kAuthTokenEnv,
        "): give the worker the same one"));
  }
  absl::StatusOr<CallAuth> auth = ParseCallAuth(absl::string_view(it->second.data(), it->second.size()));
  if (!auth.ok()) return auth.status();
  std::string fields;
  if (auto f = metadata.find(kCallFieldsMetadataKey); f != metadata.end()) fields.assign(f->second.data(), f->second.size());
  absl::MutexLock lock(&mu_);
  auto found = channels_.find(auth->channel);
  if (found == channels_.end()) {
    return absl::NotFoundError(
        "this server does not know the caller's authenticated channel (it restarted, or forgot an idle "
        "channel): authenticate and register again");
  }
  Channel& channel = found->second;
  if (!ConstantTimeEquals(auth->mac, CallMac(channel.key, method, auth->channel, auth->counter, fields))) {
    return absl::UnauthenticatedError(absl::StrCat(method, ": wrong call MAC; refused"));
  }
  if (!channel.window.Accept(auth->counter)) {
    return absl::UnauthenticatedError(absl::StrCat(method, ": call counter ", auth->counter,
                                                   " was used already (a replayed call); refused"));
  }
  ++channel.in_flight;
  channel.last_active = absl::Now();
  return CallGrant(this, auth->channel, channel.rank, std::move(fields));
}

void AuthChannels::EndCall(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = channels_.find(id);
  if (it == channels_.end()) return;
  --it->second.in_flight;
  it->second.last_active = absl::Now();
}

std::string AuthChannels::Add(int rank, std::string key) {
  absl::MutexLock lock(&mu_);
  if (channels_.size() >= max_channels_) EvictLocked();
  std::string id = RandomBytes(kChannelIdBytes);
  Channel& channel = channels_[id];
  channel.rank = rank;
  channel.key = std::move(key);
  channel.last_active = absl::Now();
  return id;
}

void AuthChannels::EvictLocked() {
  auto oldest = channels_.end();
  for (auto it = channels_.begin(); it != channels_.end(); ++it) {
    const bool owns = it->second.rank >= 0 && owners_[it->second.rank] == it->first;
    if (owns || it->second.in_flight > 0) continue;
    if (oldest == channels_.end() || it->second.last_active < oldest->second.last_active) oldest = it;
  }
  if (oldest == channels_.end()) return;  // every channel busy or owning: over the cap until one ends
  OPENSSL_cleanse(oldest->second.key.data(), oldest->second.key.size());
  channels_.erase(oldest);
}

bool AuthChannels::LiveLocked(int rank, absl::Time now) const {
  const std::string& owner = owners_[rank];
  if (owner.empty()) return false;
  auto it = channels_.find(owner);
  if (it == channels_.end()) return false;
  return it->second.in_flight > 0 || now - it->second.last_active < lease_;
}

absl::Status AuthChannels::CheckClaimLocked(const CallGrant& call, int rank) const {
  RETURN_IF_ERROR(call.CheckRank(rank));
  // The caller's own call is in flight: its channel counts as live, so only a live *other* owner refuses.
  if (owners_[rank] != call.channel_ && LiveLocked(rank, absl::Now())) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", rank, " is held by another worker's live session; a worker registers a live rank again only "
        "from the channel that registered it, or once that worker has been silent for --step_timeout=",
        absl::FormatDuration(lease_), " (a crashed worker): retrying"));
  }
  return absl::OkStatus();
}

absl::Status AuthChannels::MayClaimRank(const CallGrant& call, int rank) {
  if (!enabled()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return CheckClaimLocked(call, rank);
}

absl::StatusOr<std::string> AuthChannels::ClaimRank(const CallGrant& call, int rank) {
  if (!enabled()) return std::string();
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckClaimLocked(call, rank));
  return std::exchange(owners_[rank], call.channel_);
}

void AuthChannels::ReleaseClaim(const CallGrant& call, int rank, std::string previous) {
  if (!enabled()) return;
  absl::MutexLock lock(&mu_);
  if (owners_[rank] == call.channel_) owners_[rank] = std::move(previous);
}

absl::Status AuthChannels::CheckOwner(const CallGrant& call, int rank) {
  if (!enabled()) return absl::OkStatus();
  if (absl::Status status = call.CheckRank(rank); !status.ok()) return status;
  absl::MutexLock lock(&mu_);
  if (owners_[rank] == call.channel_) return absl::OkStatus();
  // The session is another channel's (or none: the core then answers NOT_FOUND, re-register).
  if (owners_[rank].empty()) return absl::NotFoundError(absl::StrCat("rank ", rank, " is not registered here; register again"));
  return absl::PermissionDeniedError(absl::StrCat(
      "rank ", rank, "'s session belongs to the worker that registered it; this caller cannot use it"));
}

absl::Status AuthChannels::CheckShutdown(const CallGrant& call) {
  if (!enabled()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (!owners_.empty() && owners_[0] == call.channel_) return absl::OkStatus();
  const absl::Time now = absl::Now();
  for (size_t rank = 0; rank < owners_.size(); ++rank) {
    if (LiveLocked(static_cast<int>(rank), now)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "Shutdown refused: only rank 0 of the running job may shut the server down while a worker holds a "
          "live session (rank ", rank, " does); an operator may once every worker has been silent for ",
          absl::FormatDuration(lease_), ", or stop the server with SIGTERM"));
    }
  }
  return absl::OkStatus();
}

}  // namespace psring::ps
