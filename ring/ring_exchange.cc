#include "ring/ring_exchange.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/tcp_store.h"

namespace psring::ring {

RingExchange::RingExchange(std::unique_ptr<ProcessGroup> group, std::unique_ptr<Store> store)
    : store_(std::move(store)), group_(std::move(group)) {}

RingExchange::~RingExchange() {
  group_.reset();
  if (failed_ && tcp_store_ != nullptr) tcp_store_->Abandon();
}

absl::Status RingExchange::Track(absl::Status status) {
  if (!status.ok()) failed_ = true;
  return status;
}

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
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group =
      CreateProcessGroup(store.get(), env.rank, env.world_size, group_options);
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

absl::Status RingExchange::AverageMetrics(absl::Span<double> values) {
  return Track(group_->AllReduceHost(values.data(), values.size(), ReduceOp::kAverage));
}

absl::Status RingExchange::Barrier() { return Track(group_->Barrier()); }

}  // namespace psring::ring
