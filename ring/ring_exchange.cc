#include "ring/ring_exchange.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tcp_store.h"

namespace psring::ring {

RingExchange::RingExchange(std::unique_ptr<ProcessGroup> group, std::unique_ptr<Store> store)
    : store_(std::move(store)), group_(std::move(group)) {}

RingExchange::~RingExchange() { group_.reset(); }

absl::StatusOr<std::unique_ptr<RingExchange>> RingExchange::Connect(const ClusterEnv& env,
                                                                    const RingExchangeOptions& options) {
  std::unique_ptr<Store> store;
  if (env.world_size > 1) {
    TcpStoreOptions so;
    so.master_addr = env.master_addr;
    so.master_port = env.master_port;
    so.is_server = env.rank == 0;
    so.bind_addr = options.store_bind_addr;
    so.timeout = options.group.tcp.timeout;
    ASSIGN_OR_RETURN(store, TcpStore::Create(so));
  } else {
    store = std::make_unique<InMemoryStore>();  // one rank: nobody to meet
  }
  ProcessGroupOptions group_options = options.group;
  group_options.tcp.master_addr = env.master_addr;
  group_options.tcp.master_port = env.master_port;
  group_options.cuda_device = env.local_rank;
  ASSIGN_OR_RETURN(std::unique_ptr<ProcessGroup> group,
                   CreateProcessGroup(store.get(), env.rank, env.world_size, group_options));
  return std::make_unique<RingExchange>(std::move(group), std::move(store));
}

absl::Status RingExchange::SyncInitialParameters(trainer::FloatBuffer params) {
  return group_->Broadcast(params.data, params.count, /*root=*/0,
                           params.memory == trainer::MemoryKind::kCuda);
}

absl::StatusOr<trainer::ExchangeOutcome> RingExchange::Exchange(int64_t step, trainer::FloatBuffer grads,
                                                                trainer::FloatBuffer params) {
  absl::Status s = group_->AllReduce(grads.data, grads.count, ReduceOp::kAverage,
                                     grads.memory == trainer::MemoryKind::kCuda);
  if (!s.ok())
    return absl::Status(s.code(), absl::StrCat("gradient exchange at step ", step, ": ", s.message()));
  return trainer::ExchangeOutcome::kGradientsAveraged;
}

absl::Status RingExchange::AverageMetrics(absl::Span<double> values) {
  return group_->AllReduceHost(values.data(), values.size(), ReduceOp::kAverage);
}

absl::Status RingExchange::Barrier() { return group_->Barrier(); }

}  // namespace psring::ring
