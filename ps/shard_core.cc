#include "ps/shard_core.h"

#include <openssl/rand.h>

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/base/macros.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "trainer/limits.h"

namespace psring::ps {
namespace {

bool SameHyperparameters(const trainer::SgdOptions& a, const trainer::SgdOptions& b) {
  return a.lr == b.lr && a.momentum == b.momentum && a.weight_decay == b.weight_decay;
}

std::string Describe(const trainer::SgdOptions& h) {
  return absl::StrCat("lr=", h.lr, " momentum=", h.momentum, " weight_decay=", h.weight_decay);
}

// "flat (--bucket_mb=0)", "5 buckets (--bucket_mb=25)".
std::string DescribeLayout(const ShardLayout& layout, const std::string& settings) {
  return settings.empty() ? layout.Describe() : absl::StrCat(layout.Describe(), " (", settings, ")");
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

// What an old checkpoint without layout fields holds (ps/checkpoint.h).
constexpr char kLegacyCheckpointSettings[] = "a checkpoint written before checkpoints recorded the layout";

}  // namespace

absl::StatusOr<std::unique_ptr<ShardCore>> ShardCore::Create(const ShardOptions& options) {
  if (options.num_shards < 1 || options.shard < 0 || options.shard >= options.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard=", options.shard, " must be in [0, --num_shards=", options.num_shards, ")"));
  }
  if (options.workers < 1 || options.workers > kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers=", options.workers, " must be in [1, ", kMaxWorkers, "]"));
  }
  if (options.max_params < 1) return absl::InvalidArgumentError("--max_params must be at least 1");
  if (options.staleness < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--staleness=", options.staleness, " must be >= 0"));
  }
  if (options.step_timeout <= absl::ZeroDuration() || options.step_timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("--step_timeout must be positive and finite");
  }
  if (options.chunk_bytes < sizeof(float) || options.chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk size ", options.chunk_bytes, " must be in [4, ", kMaxChunkBytes, "] bytes"));
  }
  std::unique_ptr<ShardCore> core(new ShardCore(options));
  if (options.checkpoint_dir.empty()) return core;
  // Created now (like mkdir -p), so a bad folder fails at start rather than at the first checkpoint.
  std::error_code error;
  std::filesystem::create_directories(options.checkpoint_dir, error);
  if (error) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create --checkpoint_dir=", options.checkpoint_dir,
                                                      ": ", error.message(), "; give a writable folder"));
  }
  const std::string path = ShardCheckpointPath(options.checkpoint_dir, options.shard, options.num_shards);
  // Temporary files of a server killed while it wrote its checkpoint (nothing else removes them).
  ASSIGN_OR_RETURN(const int stale, RemoveStaleTemporaries(path));
  if (stale > 0) std::fprintf(stderr, "ps shard %d: removed %d stale temporary checkpoint file(s) of %s\n",
                              options.shard, stale, path.c_str());
  absl::StatusOr<ShardCheckpoint> checkpoint = ReadShardCheckpoint(path);
  if (absl::IsNotFound(checkpoint.status())) return core;
  if (!checkpoint.ok()) return checkpoint.status();
  absl::StatusOr<ShardLayout> layout =
      ShardLayout::Create(checkpoint->total_params, checkpoint->layout_buckets, options.num_shards);
  if (!layout.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " holds an invalid element layout (",
                                            layout.status().message(), "); remove the file to start afresh"));
  }
  const ShardRange expected = layout->WireRange(options.shard);
  if (checkpoint->shard != options.shard || checkpoint->num_shards != options.num_shards ||
      checkpoint->begin != expected.begin || checkpoint->end != expected.end) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " holds shard ", checkpoint->shard, " of ", checkpoint->num_shards, ", not shard ",
        options.shard, " of ", options.num_shards, "; use another --checkpoint_dir"));
  }
  ShardCore* c = core.get();
  absl::MutexLock lock(&c->mu_);
  absl::WriterMutexLock tensors_lock(&c->tensors_mu_);
  c->initialized_ = true;
  c->total_params_ = checkpoint->total_params;
  c->layout_ = *layout;
  c->layout_settings_ = checkpoint->layout_buckets.empty() ? kLegacyCheckpointSettings
                                                          : std::move(checkpoint->layout_settings);
  c->layout_checkpoint_ = path;
  c->range_ = expected;
  c->sync_.set_size(expected.size());
  c->hyperparameters_ = checkpoint->hyperparameters;
  c->version_ = checkpoint->version;
  c->staleness_.RestoreClocks(checkpoint->clocks);
  c->tensors_.params = std::move(checkpoint->params);
  c->tensors_.momentum = std::move(checkpoint->momentum);
  return core;
}

ShardCore::ShardCore(const ShardOptions& options)
    : options_(options),
      aggregating_(options.mode == Mode::kSync || options.staleness == 0),
      chunk_elements_(options.chunk_bytes / sizeof(float)),
      sessions_(options.workers, 0),
      sync_(options.workers, &tensors_, &pending_, &tensors_mu_),
      staleness_(options.workers, options.staleness),
      metrics_(options.workers) {}

absl::Status ShardCore::CheckServingLocked() const {
  if (shutting_down_) return absl::UnavailableError("parameter server is shutting down");
  return absl::OkStatus();
}

absl::Status ShardCore::CheckSessionLocked(int rank, absl::uint128 session) const {
  if (rank < 0 || rank >= options_.workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown worker rank ", rank, ": this server expects ranks 0..", options_.workers - 1));
  }
  const absl::uint128 current = sessions_[rank];
  if (current == session && session != 0) return absl::OkStatus();
  if (current == 0) {
    return absl::NotFoundError(absl::StrCat("rank ", rank, " is not registered with shard ", options_.shard,
                                            " (never registered, or the server restarted); call Register"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "session of rank ", rank, " was replaced by a newer registration of that rank (a replacement worker, or "
      "two workers started with the same --rank); this worker is stale: give every worker its own rank"));
}

std::vector<float> ShardCore::TakeBufferLocked() {
  if (!buffer_pool_.empty()) {
    std::vector<float> buffer = std::move(buffer_pool_.back());
    buffer_pool_.pop_back();
    return buffer;
  }
  return std::vector<float>(range_.size());
}

void ShardCore::ReturnBufferLocked(std::vector<float> buffer) {
  if (buffer.size() == range_.size()) buffer_pool_.push_back(std::move(buffer));
}

// ---- Registration ----------------------------------------------------------------------------------------

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

// ---- Pushes -----------------------------------------------------------------------------------------------

absl::Status ShardCore::ValidatePushLocked(const PushInfo& info) {
  RETURN_IF_ERROR(CheckServingLocked());
  RETURN_IF_ERROR(CheckSessionLocked(info.rank, info.session));
  const int r = info.rank;
  if (info.num_elements != range_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("gradient of ", info.num_elements, " elements for shard ",
                                                   options_.shard, " which holds ", range_.size(), " (range [",
                                                   range_.begin, ", ", range_.end, "))"));
  }
  const int64_t expected = aggregating_ ? static_cast<int64_t>(version_) : staleness_.next_step(r);
  const bool receiving = aggregating_ ? sync_.Receiving(r) : staleness_.receiving(r) == info.session;
  if (receiving || (info.step == expected && aggregating_ && sync_.HasPush(r))) {
    return absl::AlreadyExistsError(
        absl::StrCat("rank ", r, " already pushed step ", info.step, " to shard ", options_.shard));
  }
  if (info.step < expected) {
    return absl::FailedPreconditionError(absl::StrCat("step ", info.step, " of rank ", r,
                                                      " is in the past: shard ", options_.shard, " expects step ",
                                                      expected, " (version ", version_, ")"));
  }
  if (info.step > expected) {
    return absl::OutOfRangeError(absl::StrCat("step ", info.step, " of rank ", r, " is in the future: shard ",
                                              options_.shard, " expects step ", expected, " (version ", version_,
                                              ")"));
  }
  if (aggregating_) {
    const uint64_t generation = sync_.generation();
    absl::Status aligned = sync_.AlignTrainerStep(r, info.trainer_step);
    if (sync_.generation() != generation) cv_.SignalAll();  // the pending step was dropped
    RETURN_IF_ERROR(aligned);
  }
  return absl::OkStatus();
}

absl::StatusOr<SyncPush> ShardCore::StartSyncPush(const PushInfo& info) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(ValidatePushLocked(info));
  SyncPush push;
  push.session = info.session;
  push.step = info.step;
  push.gradient = TakeBufferLocked();
  push.ticket = sync_.Enter(info.rank, push.gradient.data(), info.trainer_step);
  return push;
}

absl::Status ShardCore::DroppedStatusLocked(const SyncPush& push) const {
  RETURN_IF_ERROR(CheckServingLocked());
  RETURN_IF_ERROR(CheckSessionLocked(push.ticket.rank, push.session));
  return sync_.LeftStatus(push.ticket, push.step, options_.shard);
}

void ShardCore::DropStepLocked(absl::StatusCode code, std::string reason) {
  sync_.Drop(code, std::move(reason));
  cv_.SignalAll();
}

void ShardCore::WithdrawLocked(int rank, absl::string_view reason) {
  sync_.Withdraw(rank, reason, version_);
  cv_.SignalAll();
}

absl::Status ShardCore::Delivered(SyncPush* push_ptr, uint64_t filled, absl::FunctionRef<bool()> cancelled) {
  SyncPush& push = *push_ptr;
  // Only the new part is checked (cheap: once per received chunk), without the lock: the buffer is ours.
  if (filled > push.checked) {
    const uint64_t bad = push.checked + trainer::FirstNonFinite(push.gradient.data() + push.checked, filled - push.checked);
    if (bad < filled) {
      return absl::InvalidArgumentError(absl::StrCat("gradient element ", bad, " of rank ", push.ticket.rank,
                                                     " at step ", push.step, " is ", push.gradient[bad],
                                                     "; the step was refused (non-finite gradients)"));
    }
    push.checked = filled;
  }
  bool checkpoint_due = false;
  {
    absl::MutexLock lock(&mu_);
    if (!sync_.Owns(push.ticket)) return DroppedStatusLocked(push);
    absl::StatusOr<bool> completed = sync_.Deliver(push.ticket, filled, hyperparameters_);
    cv_.SignalAll();
    if (!completed.ok()) return completed.status();
    if (*completed) checkpoint_due = BumpVersionLocked();
    // Fair share: hold this push while it is too far ahead of the slowest one (see max_lead_bytes). The
    // wait ends when the others catch up, the step is dropped (AwaitApplied's step_timeout does that) or
    // the client cancels, which is polled.
    const uint64_t lead = options_.max_lead_bytes / sizeof(float);
    while (lead > 0 && filled < range_.size() && filled > sync_.applied() + lead && sync_.Owns(push.ticket) &&
           !shutting_down_ && !cancelled()) {
      cv_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
    }
  }
  if (checkpoint_due) WritePendingCheckpoint();
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ShardCore::AwaitApplied(const SyncPush& push, uint64_t want) {
  absl::MutexLock lock(&mu_);
  absl::Time deadline = absl::Now() + options_.step_timeout;
  uint64_t progress = sync_.applied();
  while (true) {
    if (version_ > static_cast<uint64_t>(push.step)) return range_.size();
    if (!sync_.Owns(push.ticket)) return DroppedStatusLocked(push);
    RETURN_IF_ERROR(CheckServingLocked());
    RETURN_IF_ERROR(CheckSessionLocked(push.ticket.rank, push.session));
    if (sync_.applied() >= want) return sync_.applied();
    if (sync_.applied() > progress) {  // the step moves: the timeout counts from its last progress
      progress = sync_.applied();
      deadline = absl::Now() + options_.step_timeout;
    }
    if (cv_.WaitWithDeadline(&mu_, deadline) && absl::Now() >= deadline && sync_.applied() == progress &&
        sync_.Owns(push.ticket) && !shutting_down_) {
      const std::string reason =
          absl::StrCat("ranks ", absl::StrJoin(sync_.MissingRanks(), ","), " did not push step ", push.step,
                       " within --step_timeout=", absl::FormatDuration(options_.step_timeout));
      DropStepLocked(absl::StatusCode::kDeadlineExceeded, reason);
      return absl::DeadlineExceededError(absl::StrCat(
          "synchronous step ", push.step, " of shard ", options_.shard, " timed out: ", reason,
          " (dead or stuck worker?); the step was rolled back, the server keeps serving"));
    }
  }
}

void ShardCore::ReadParameters(uint64_t offset, uint64_t count, absl::FunctionRef<void(const float*)> read) {
  absl::ReaderMutexLock lock(&tensors_mu_);
  ABSL_ASSERT(offset + count <= tensors_.params.size());
  read(NewestParameters(tensors_, pending_, offset + count) + offset);
}

void ShardCore::AbandonSyncPush(const SyncPush& push, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (sync_.Owns(push.ticket)) {
    WithdrawLocked(push.ticket.rank, absl::StrCat("the push of rank ", push.ticket.rank, " of step ", push.step,
                                                  " failed (", why.ToString(), ")"));
  }
}

void ShardCore::FinishSyncPush(SyncPush push, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (sync_.Owns(push.ticket)) {
    WithdrawLocked(push.ticket.rank,
                   absl::StrCat("the push of rank ", push.ticket.rank, " ended early (", why.ToString(), ")"));
  }
  ReturnBufferLocked(std::move(push.gradient));
}

absl::StatusOr<AsyncPush> ShardCore::StartAsyncPush(const PushInfo& info) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(ValidatePushLocked(info));
  staleness_.set_receiving(info.rank, info.session);
  AsyncPush push;
  push.rank = info.rank;
  push.session = info.session;
  push.step = info.step;
  push.gradient = TakeBufferLocked();
  return push;
}

absl::StatusOr<uint64_t> ShardCore::FinishAsyncPush(AsyncPush push, const absl::Status& received) {
  bool checkpoint_due = false;
  {
    const uint64_t bad = trainer::FirstNonFinite(push.gradient.data(), push.gradient.size());  // before the lock
    absl::MutexLock lock(&mu_);
    if (staleness_.receiving(push.rank) == push.session) staleness_.set_receiving(push.rank, 0);
    absl::Status status = received;
    if (status.ok() && bad < push.gradient.size()) {
      status = absl::InvalidArgumentError(absl::StrCat("gradient element ", bad, " of rank ", push.rank,
                                                       " at step ", push.step, " is ", push.gradient[bad],
                                                       "; the push was refused (non-finite gradients)"));
    }
    if (status.ok()) status = CheckServingLocked();
    if (status.ok()) status = CheckSessionLocked(push.rank, push.session);
    if (status.ok()) {
      absl::WriterMutexLock tensors_lock(&tensors_mu_);
      const uint64_t bad_update =
          ApplyAsyncStep(hyperparameters_, options_.workers, absl::MakeSpan(push.gradient), &tensors_);
      if (bad_update < push.gradient.size()) {
        status = absl::InvalidArgumentError(absl::StrCat(
            "the update of element ", bad_update, " by the push of rank ", push.rank, " at step ", push.step,
            " is not finite (gradient ", push.gradient[bad_update], " after the division by ", options_.workers,
            ", lr=", hyperparameters_.lr, "); the push was refused: lower --lr or clip the gradients"));
      }
    }
    ReturnBufferLocked(std::move(push.gradient));
    if (!status.ok()) return status;
    // The clock moves before a checkpoint can copy it: a restarted shard must not take this push again.
    staleness_.Advance(push.rank);
    checkpoint_due = BumpVersionLocked();
  }
  if (checkpoint_due) WritePendingCheckpoint();
  absl::MutexLock lock(&mu_);
  return AwaitStalenessLocked(push.rank, push.session, push.step);
}

absl::StatusOr<uint64_t> ShardCore::AwaitStalenessLocked(int rank, absl::uint128 session, int64_t step) {
  const absl::Time deadline = absl::Now() + options_.step_timeout;
  const auto waiting = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !staleness_.MayProceed(step) && !shutting_down_ && sessions_[rank] == session;
  };
  while (waiting()) {
    if (cv_.WaitWithDeadline(&mu_, deadline) && waiting()) {
      return staleness_.TimeoutError(rank, step, options_.step_timeout);
    }
  }
  RETURN_IF_ERROR(CheckServingLocked());
  RETURN_IF_ERROR(CheckSessionLocked(rank, session));
  return version_;
}

// ---- Pull, metrics, stats ---------------------------------------------------------------------------------

absl::StatusOr<ParameterSnapshot> ShardCore::Pull(int rank, absl::uint128 session) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckServingLocked());
  RETURN_IF_ERROR(CheckSessionLocked(rank, session));
  // Never half a step: wait until the pending synchronous step is not partly applied (it completes or is
  // dropped, which step_timeout bounds).
  const absl::Time deadline = absl::Now() + options_.step_timeout;
  while (sync_.applied() > 0) {
    if (cv_.WaitWithDeadline(&mu_, deadline) && sync_.applied() > 0) {
      return absl::DeadlineExceededError(absl::StrCat("Pull from shard ", options_.shard,
                                                      ": a synchronous step stayed half-applied for "
                                                      "--step_timeout; try again"));
    }
  }
  ParameterSnapshot snapshot;
  snapshot.version = version_;
  absl::ReaderMutexLock tensors_lock(&tensors_mu_);
  snapshot.params = tensors_.params;
  return snapshot;
}

absl::StatusOr<std::vector<double>> ShardCore::AverageMetrics(int rank, absl::uint128 session,
                                                              std::vector<double> values) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckServingLocked());
  RETURN_IF_ERROR(CheckSessionLocked(rank, session));
  ASSIGN_OR_RETURN(const uint64_t round, metrics_.Arrive(rank, std::move(values)));
  if (metrics_.Ended(round)) {  // this rank completed the round
    cv_.SignalAll();
    return *metrics_.Result(round);
  }
  const absl::Time deadline = absl::Now() + options_.step_timeout;
  // Ends early when this session is replaced (its values were withdrawn by the new registration).
  const auto waiting = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !metrics_.Ended(round) && !shutting_down_ && sessions_[rank] == session;
  };
  while (waiting()) {
    if (cv_.WaitWithDeadline(&mu_, deadline) && waiting()) {
      const std::vector<int> missing = metrics_.Abandon();
      cv_.SignalAll();
      return absl::DeadlineExceededError(absl::StrCat("AverageMetrics/Barrier timed out after --step_timeout=",
                                                      absl::FormatDuration(options_.step_timeout),
                                                      " waiting for ranks ", absl::StrJoin(missing, ",")));
    }
  }
  RETURN_IF_ERROR(CheckServingLocked());
  if (const std::vector<double>* result = metrics_.Result(round); result != nullptr) return *result;
  RETURN_IF_ERROR(CheckSessionLocked(rank, session));
  return absl::DeadlineExceededError("AverageMetrics/Barrier round timed out waiting for other ranks");
}

ShardStats ShardCore::Stats() {
  absl::MutexLock lock(&mu_);
  ShardStats stats;
  for (absl::uint128 session : sessions_) stats.registered_workers += session != 0;
  stats.version = version_;
  stats.total_params = total_params_;
  stats.range = range_;
  if (initialized_) {
    stats.layout = DescribeLayout(layout_, layout_settings_);
  }
  stats.checkpoints_written = checkpoints_written_;
  return stats;
}

std::vector<float> ShardCore::CopyParameters() {
  absl::ReaderMutexLock lock(&tensors_mu_);
  return tensors_.params;
}

uint64_t ShardCore::version() {
  absl::MutexLock lock(&mu_);
  return version_;
}

// ---- Shutdown and checkpoints -----------------------------------------------------------------------------

void ShardCore::RequestShutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_requested_ = true;
  cv_.SignalAll();
}

bool ShardCore::WaitForShutdownRequest(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + timeout;
  while (!shutdown_requested_ && !cv_.WaitWithDeadline(&mu_, deadline)) {
  }
  return shutdown_requested_;
}

void ShardCore::BeginShutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  cv_.SignalAll();
}

bool ShardCore::BumpVersionLocked() {
  ++version_;
  cv_.SignalAll();
  if (options_.checkpoint_dir.empty() || options_.checkpoint_every <= 0 ||
      version_ % options_.checkpoint_every != 0) {
    return false;
  }
  // A newer snapshot replaces one nobody has written yet: only the latest state matters.
  pending_checkpoint_ = SnapshotLocked();
  return true;
}

std::unique_ptr<ShardCheckpoint> ShardCore::SnapshotLocked() {
  auto snapshot = std::make_unique<ShardCheckpoint>();
  snapshot->shard = options_.shard;
  snapshot->num_shards = options_.num_shards;
  snapshot->total_params = total_params_;
  snapshot->begin = range_.begin;
  snapshot->end = range_.end;
  snapshot->layout_buckets = layout_.buckets();
  snapshot->layout_settings = layout_settings_;
  snapshot->version = version_;
  snapshot->hyperparameters = hyperparameters_;
  snapshot->clocks = staleness_.clocks();
  absl::ReaderMutexLock tensors_lock(&tensors_mu_);
  snapshot->params = tensors_.params;
  snapshot->momentum = tensors_.momentum;
  return snapshot;
}

absl::Status ShardCore::WriteSnapshot(const ShardCheckpoint& snapshot) {
  RETURN_IF_ERROR(WriteShardCheckpoint(
      ShardCheckpointPath(options_.checkpoint_dir, options_.shard, options_.num_shards), snapshot,
      snapshot.params, snapshot.momentum));
  absl::MutexLock lock(&mu_);
  ++checkpoints_written_;
  return absl::OkStatus();
}

void ShardCore::WritePendingCheckpoint() {
  absl::MutexLock checkpoint_lock(&checkpoint_mu_);
  std::unique_ptr<ShardCheckpoint> snapshot;
  {
    absl::MutexLock lock(&mu_);
    snapshot = std::move(pending_checkpoint_);
  }
  if (snapshot == nullptr) return;  // a later call took it, or WriteCheckpoint() wrote a newer state
  absl::Status status = WriteSnapshot(*snapshot);
  if (!status.ok()) {
    // Training goes on; the next checkpoint may succeed (e.g. after the disk got space back).
    std::fprintf(stderr, "ps shard %d: checkpoint at version %lu failed: %s\n", options_.shard,
                 static_cast<unsigned long>(snapshot->version), status.ToString().c_str());
  }
}

absl::Status ShardCore::WriteCheckpoint() {
  absl::MutexLock checkpoint_lock(&checkpoint_mu_);
  std::unique_ptr<ShardCheckpoint> snapshot;
  {
    absl::MutexLock lock(&mu_);
    if (options_.checkpoint_dir.empty() || !initialized_) return absl::OkStatus();
    if (sync_.applied() > 0) {  // never save half a step
      DropStepLocked(absl::StatusCode::kUnavailable,
                     "the server saved its checkpoint mid-step; re-register and push the step again");
    }
    pending_checkpoint_.reset();
    snapshot = SnapshotLocked();
  }
  return WriteSnapshot(*snapshot);
}

}  // namespace psring::ps
