// ShardCore's registration (ps/shard_core.h): the checks of a worker's layout and hyperparameters, the
// first offer that fixes the shard's parameters, and the sessions.
#include <openssl/rand.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard_core.h"
#include "ps/shard_core_internal.h"
#include "trainer/limits.h"

namespace psring::ps {
namespace {

bool SameHyperparameters(const trainer::SgdOptions& a, const trainer::SgdOptions& b) {
  return a.lr == b.lr && a.momentum == b.momentum && a.weight_decay == b.weight_decay;
}

std::string Describe(const trainer::SgdOptions& h) {
  return absl::StrCat("lr=", h.lr, " momentum=", h.momentum, " weight_decay=", h.weight_decay);
}

// 128 bits from OpenSSL's CSPRNG, never 0 (which means "no session").
absl::uint128 NewSessionId() {
  uint64_t halves[2] = {0, 0};
  while (halves[0] == 0 && halves[1] == 0) {
    // RAND_bytes fails only when the CSPRNG cannot be seeded, which nothing here can fix.
    if (RAND_bytes(reinterpret_cast<unsigned char*>(halves), sizeof(halves)) != 1) std::abort();
  }
  return absl::MakeUint128(halves[1], halves[0]);
}
}  // namespace

absl::Status ShardCore::CheckMatchesLocked(const Registration& r, const ShardLayout& layout) const {
  if (!initialized_) return absl::OkStatus();
  if (r.total_params != total_params_) {
    return absl::InvalidArgumentError(absl::StrCat("worker model has ", r.total_params,
                                                   " parameters but this server holds a model of ", total_params_,
                                                   "; all workers must train the same model"));
  }
  if (layout != layout_) {
    // The order of the elements is part of the contract: another layout would read this shard's values as
    // other parameters.
    return absl::FailedPreconditionError(absl::StrCat(
        "server shard ", options_.shard, " holds element layout ", DescribeLayout(layout_, layout_settings_),
        layout_checkpoint_.empty() ? "" : absl::StrCat(" resumed from checkpoint ", layout_checkpoint_),
        " but this worker uses ", DescribeLayout(layout, r.layout_settings),
        ": start all workers with the same --bucket_mb/--first_bucket_mb",
        layout_checkpoint_.empty() ? " (restart the servers to change it)"
                                   : ", or delete the checkpoint to start afresh"));
  }
  if (!SameHyperparameters(r.hyperparameters, hyperparameters_)) {
    return absl::FailedPreconditionError(absl::StrCat("worker hyperparameters (", Describe(r.hyperparameters),
                                                      ") differ from the registered ones (",
                                                      Describe(hyperparameters_), "); use the same flags"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardLayout> ShardCore::CheckRegistration(const Registration& r) const {
  if (r.rank < 0 || r.rank >= options_.workers || r.world_size != options_.workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker rank ", r.rank, " of world size ", r.world_size,
                                                   " does not fit this server's --workers=", options_.workers));
  }
  if (r.total_params < static_cast<uint64_t>(options_.num_shards) || r.total_params > options_.max_params) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a model of ", r.total_params, " parameters does not fit this server: it must have at least one per "
        "shard (", options_.num_shards, ") and at most --max_params=", options_.max_params,
        " (raise --max_params on the servers for a larger model)"));
  }
  RETURN_IF_ERROR(trainer::ValidateSgdOptions(r.hyperparameters));
  return ShardLayout::Create(r.total_params, r.layout_buckets, options_.num_shards);
}

absl::StatusOr<ShardRange> ShardCore::BeginRegistration(const Registration& r) {
  ASSIGN_OR_RETURN(const ShardLayout layout, CheckRegistration(r));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckServingLocked());
  RETURN_IF_ERROR(CheckMatchesLocked(r, layout));
  return layout.WireRange(options_.shard);
}

absl::Status ShardCore::OfferInitialParameters(const Registration& r, std::vector<float> initial) {
  ASSIGN_OR_RETURN(const ShardLayout layout, CheckRegistration(r));
  const ShardRange range = layout.WireRange(options_.shard);
  if (initial.size() != range.size()) {
    return absl::InvalidArgumentError(absl::StrCat("initial parameters of ", initial.size(),
                                                   " elements for a shard of ", range.size()));
  }
  if (const uint64_t bad = trainer::FirstNonFinite(initial.data(), initial.size()); bad < initial.size()) {
    return absl::InvalidArgumentError(absl::StrCat("initial parameter ", bad, " of shard ", options_.shard,
                                                   " is ", initial[bad], "; offer finite parameters"));
  }
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckServingLocked());
  // Another offer may have won since the caller's BeginRegistration: then this one must agree with it.
  RETURN_IF_ERROR(CheckMatchesLocked(r, layout));
  if (initialized_) return absl::OkStatus();
  total_params_ = r.total_params;
  layout_ = layout;
  layout_settings_ = r.layout_settings.substr(0, kMaxLayoutSettingsBytes);
  range_ = range;
  sync_.set_size(range_.size());
  hyperparameters_ = r.hyperparameters;
  absl::WriterMutexLock tensors_lock(&tensors_mu_);
  tensors_.params = std::move(initial);
  tensors_.momentum.assign(tensors_.params.size(), 0.0f);
  initialized_ = true;
  return absl::OkStatus();
}

absl::StatusOr<RegisteredRank> ShardCore::CompleteRegistration(const Registration& r) {
  ASSIGN_OR_RETURN(const ShardLayout layout, CheckRegistration(r));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckServingLocked());
  if (!initialized_) {
    return absl::FailedPreconditionError(
        "this shard has no parameters yet; the first worker to register must offer its initial parameters");
  }
  RETURN_IF_ERROR(CheckMatchesLocked(r, layout));
  const int rank = r.rank;
  // A replacement starts clean: the part of the pending step its predecessor pushed is dropped (the whole
  // step is rolled back if some of it was applied already), it will push that step again. So no step is
  // partly applied below: one is applied only once every rank, this one included, delivered.
  if (aggregating_) WithdrawLocked(rank, absl::StrCat("rank ", rank, " registered again during step ", version_));
  sync_.ForgetClosedStep();
  metrics_.Withdraw(rank);
  sessions_[rank] = NewSessionId();
  cv_.SignalAll();
  RegisteredRank registered;
  registered.session = sessions_[rank];
  registered.total_params = total_params_;
  registered.range = range_;
  registered.version = version_;
  registered.next_step = aggregating_ ? static_cast<int64_t>(version_) : staleness_.next_step(rank);
  registered.aggregating = aggregating_;
  absl::ReaderMutexLock tensors_lock(&tensors_mu_);
  registered.params = tensors_.params;
  return registered;
}

bool ShardCore::has_parameters() {
  absl::MutexLock lock(&mu_);
  return initialized_;
}

}  // namespace psring::ps
