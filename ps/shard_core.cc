// ShardCore (ps/shard_core.h): creation and resume, the checks every call shares, pull, metrics, stats,
// shutdown and checkpoints. Registration, the synchronous step and async pushes: shard_core_*.cc.
#include "ps/shard_core.h"

#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "ps/shard_core_internal.h"

namespace psring::ps {
namespace {

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
  if (!(options.max_grad_norm > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--max_grad_norm=", options.max_grad_norm,
                                                   " must be > 0 (inf: no bound)"));
  }
  if (options.staleness < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--staleness=", options.staleness, " must be >= 0"));
  }
  if (options.backup_workers < 0 || options.backup_workers >= options.workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backup_workers=", options.backup_workers, " must be in [0, --workers=", options.workers,
        "): a step averages the first N - B pushes, so at least one"));
  }
  if (options.backup_workers > 0 && options.mode != Mode::kSync) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backup_workers=", options.backup_workers, " needs --mode=sync: the asynchronous server bounds "
        "staleness instead (--staleness)"));
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
      sync_(options.workers, options.backup_workers, &tensors_, &pending_, &tensors_mu_),
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

absl::Status ShardCore::ValidatePushLocked(const PushInfo& info, bool* late) {
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
  if (late != nullptr && info.step <= expected && (info.step < expected || sync_.Late(info.trainer_step))) {
    *late = true;
    return absl::OkStatus();
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
  // A round that ended is answered even when a shutdown arrived meanwhile: the last barrier of a job ends
  // with rank 0 shutting the servers down, possibly before this waiter woke up to read the round's result.
  if (const std::vector<double>* result = metrics_.Result(round); result != nullptr) return *result;
  RETURN_IF_ERROR(CheckServingLocked());
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
  stats.dropped_by_rank = sync_.dropped_by_rank();
  for (uint64_t dropped : stats.dropped_by_rank) stats.dropped_pushes += dropped;
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
