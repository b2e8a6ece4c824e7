#include "ring/ring_exchange.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/tcp_store.h"

namespace psring::ring {

RingExchange::RingExchange(std::unique_ptr<ProcessGroup> group, std::unique_ptr<Store> store)
    : store_(std::move(store)), group_(std::move(group)) {}

RingExchange::~RingExchange() {
  if (comm_.joinable()) {
    // A step left open (the trainer failed before FinishStep): stop waiting for its gradients.
    tracker_.Abort(absl::CancelledError("the exchange was destroyed during a bucketed step"));
    comm_.join();
  }
  group_.reset();
  if (failed_ && tcp_store_ != nullptr) tcp_store_->Abandon();
}

absl::Status RingExchange::Track(absl::Status status) {
  if (!status.ok()) failed_ = true;
  return status;
}

namespace {

// RingExchangeOptions::select_gpu, after deriving the local rank when nobody gave it. Every GPU rank of a
// multi-rank job publishes its host, whatever its own case, so that ranks without a local rank can count on
// every rank below them (select_gpu is set on all ranks or none: --device is in the job fingerprint).
absl::Status SelectGpu(const ClusterEnv& env, const RingExchangeOptions& options, Store* store,
                       ProcessGroupOptions* group_options) {
  if (!options.select_gpu) return absl::OkStatus();
  int local_rank = env.local_rank;
  std::string source = env.local_rank_source;
  if (env.world_size > 1) {
    ASSIGN_OR_RETURN(const int derived,
                     LocalRankFromStore(store, env.rank, env.world_size, ThisHostName(),
                                        options.group.tcp.store_prefix, options.group.tcp.timeout));
    if (source.empty()) {
      local_rank = derived;
      source = "ranks sharing this host, through the store";
    }
  }
  group_options->cuda_device = local_rank;
  ASSIGN_OR_RETURN(group_options->gpu, options.select_gpu(local_rank, source));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RingExchange>> RingExchange::Connect(const ClusterEnv& env,
                                                                    const RingExchangeOptions& options) {
  std::unique_ptr<Store> store;
  TcpStore* tcp_store = nullptr;
  if (env.world_size > 1) {
    TcpStoreOptions so;
    so.master_addr = env.master_addr;
    so.master_port = env.master_port;
    so.is_server = env.rank == 0;
    so.bind_addr = options.store_bind_addr;
    // A master that is not on loopback is an address given: ranks on other hosts must reach the store.
    if (so.bind_addr.empty() && !IsLoopbackHost(env.master_addr)) so.bind_addr = "0.0.0.0";
    so.timeout = options.group.tcp.timeout;
    so.auth = options.group.tcp.auth;
    so.rank = env.rank;
    so.world_size = env.world_size;
    ASSIGN_OR_RETURN(std::unique_ptr<TcpStore> created, TcpStore::Create(so));
    tcp_store = created.get();
    store = std::move(created);
  } else {
    store = std::make_unique<InMemoryStore>();  // one rank: nobody to meet
  }
  ProcessGroupOptions group_options = options.group;
  group_options.tcp.master_addr = env.master_addr;
  group_options.tcp.master_port = env.master_port;
  group_options.cuda_device = env.local_rank;
  const absl::Status selected = SelectGpu(env, options, store.get(), &group_options);
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group =
      selected.ok() ? CreateProcessGroup(store.get(), env.rank, env.world_size, group_options) : selected;
  if (!group.ok()) {
    if (tcp_store != nullptr) tcp_store->Abandon();
    return group.status();
  }
  auto exchange = std::make_unique<RingExchange>(std::move(*group), std::move(store));
  exchange->tcp_store_ = tcp_store;
  return exchange;
}

absl::Status RingExchange::SyncInitialParameters(trainer::FloatBuffer params) {
  return Track(group_->Broadcast(params.data, params.count, /*root=*/0,
                                 params.memory == trainer::MemoryKind::kCuda));
}

absl::StatusOr<trainer::ExchangeOutcome> RingExchange::Exchange(int64_t step, trainer::FloatBuffer grads,
                                                                trainer::FloatBuffer params) {
  // Train() names the exchange and the step in the error.
  RETURN_IF_ERROR(Track(group_->AllReduce(grads.data, grads.count, ReduceOp::kAverage,
                                          grads.memory == trainer::MemoryKind::kCuda)));
  return trainer::ExchangeOutcome::kGradientsAveraged;
}

absl::Status RingExchange::BeginStep(int64_t step, trainer::FloatBuffer grads, trainer::FloatBuffer params,
                                     const trainer::BucketPlan& plan) {
  if (comm_.joinable()) {
    return absl::FailedPreconditionError("BeginStep while a bucketed step is open; call FinishStep first");
  }
  if (plan.total() != grads.count) {
    return absl::InvalidArgumentError(absl::StrCat("bucket plan covers ", plan.total(),
                                                   " elements but the gradient has ", grads.count));
  }
  plan_ = plan;
  tracker_.Begin(plan_);
  comm_status_ = absl::OkStatus();
  comm_ = std::thread([this, step, grads] { comm_status_ = AllReduceBuckets(step, grads); });
  return absl::OkStatus();
}

absl::Status RingExchange::AllReduceBuckets(int64_t step, trainer::FloatBuffer grads) {
  trainer::Timeline* const timeline = this->timeline();
  const bool on_device = grads.memory == trainer::MemoryKind::kCuda;
  for (int i = 0; i < static_cast<int>(plan_.buckets().size()); ++i) {
    // A backward that failed or never reported a layer ends the step here: the other ranks' collective
    // then fails on the group's timeout or when this rank's process exits.
    RETURN_IF_ERROR(tracker_.WaitFor(i));
    const trainer::FloatRange& bucket = plan_.buckets()[i];
    const int64_t start = trainer::Timeline::NowMicros();
    RETURN_IF_ERROR(Track(group_->AllReduce(grads.data + bucket.offset, bucket.count, ReduceOp::kAverage,
                                            on_device)));
    if (timeline->enabled()) {
      const std::vector<trainer::SpanArg> args = {
          {"step", static_cast<double>(step)}, {"bucket", i}, {"bytes", static_cast<double>(bucket.count * 4)}};
      const PhaseTimes phases = group_->last_phase_times();
      const int64_t total = trainer::Timeline::NowMicros() - start;
      if (phases.reduce_scatter_s > 0) {
        const int64_t rs = std::min<int64_t>(total, static_cast<int64_t>(phases.reduce_scatter_s * 1e6));
        timeline->Record("reduce-scatter", trainer::CommTrack(0), start, rs, args);
        timeline->Record("allgather", trainer::CommTrack(0), start + rs, total - rs, args);
      } else {
        timeline->Record("allreduce", trainer::CommTrack(0), start, total, args);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<trainer::ExchangeOutcome> RingExchange::FinishStep() {
  if (!comm_.joinable()) return absl::FailedPreconditionError("FinishStep without BeginStep");
  const absl::Status closed = tracker_.Close();
  comm_.join();
  // The collective's own error says more than the tracker's (which only follows from it or from backward).
  RETURN_IF_ERROR(comm_status_);
  RETURN_IF_ERROR(closed);
  return trainer::ExchangeOutcome::kGradientsAveraged;
}

absl::Status RingExchange::AverageMetrics(absl::Span<double> values) {
  return Track(group_->AllReduceHost(values.data(), values.size(), ReduceOp::kAverage));
}

absl::Status RingExchange::Barrier() { return Track(group_->Barrier()); }

}  // namespace psring::ring
