// RingExchange: the trainer's GradientExchange over a ring ProcessGroup (TCP ring on CPU, NCCL on GPU).
// Exchange() averages the gradients in place (the trainer then applies its optimizer, as DDP does);
// SyncInitialParameters broadcasts rank 0's parameters; AverageMetrics allreduces host doubles.
//
//   ASSIGN_OR_RETURN(ClusterEnv env, ClusterEnvFromFlags());
//   RingExchangeOptions o; o.group.transport = Transport::kTcp;
//   ASSIGN_OR_RETURN(std::unique_ptr<RingExchange> ring, RingExchange::Connect(env, o));
//   ASSIGN_OR_RETURN(trainer::TrainResult r, trainer::Train(train_options, ring.get()));
//
// Blocking and errors as in ProcessGroup (ring/process_group.h). Not thread-safe (one training thread).
#ifndef PSRING_RING_RING_EXCHANGE_H_
#define PSRING_RING_RING_EXCHANGE_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/cluster_env.h"
#include "common/store.h"
#include "common/tcp_store.h"
#include "ring/process_group.h"
#include "trainer/exchange.h"

namespace psring::ring {

struct RingExchangeOptions {
  ProcessGroupOptions group;
  // Where rank 0's rendezvous store listens (the ring's --iface_addr). "": every interface when the master
  // is not on loopback; with a loopback master, every interface with a token and 127.0.0.1 without one
  // (common/tcp_store.h). The store's token and job id are group.tcp.auth's.
  std::string store_bind_addr;
};

class RingExchange final : public trainer::GradientExchange {
 public:
  // Takes ownership of both; `store` (may be null) is kept alive as long as the group, which may use it.
  RingExchange(std::unique_ptr<ProcessGroup> group, std::unique_ptr<Store> store = nullptr);
  ~RingExchange() override;

  // Rank 0 serves the rendezvous store on env.master_addr:env.master_port; every rank proves the token
  // (options.group.tcp.auth) to it and joins the group.
  // Blocks until all env.world_size ranks are connected or the timeout passes.
  static absl::StatusOr<std::unique_ptr<RingExchange>> Connect(const ClusterEnv& env,
                                                               const RingExchangeOptions& options);

  std::string name() const override { return "ring-" + group_->backend(); }
  int rank() const override { return group_->rank(); }
  int world_size() const override { return group_->world_size(); }
  bool AcceptsDeviceMemory() const override { return group_->AcceptsDeviceMemory(); }
  trainer::OptimizerInfo optimizer() const override {
    return trainer::OptimizerInfo{trainer::OptimizerOwner::kTrainer};
  }
  uint64_t bytes_sent() const override { return group_->bytes_sent(); }
  uint64_t bytes_received() const override { return group_->bytes_received(); }
  absl::Status SyncInitialParameters(trainer::FloatBuffer params) override;
  absl::StatusOr<trainer::ExchangeOutcome> Exchange(int64_t step, trainer::FloatBuffer grads,
                                                    trainer::FloatBuffer params) override;
  absl::Status AverageMetrics(absl::Span<double> values) override;
  absl::Status Barrier() override;

  ProcessGroup* group() { return group_.get(); }

 private:
  // Records a failed collective, so that destruction does not wait for ranks that may be stalled.
  absl::Status Track(absl::Status status);

  std::unique_ptr<Store> store_;  // destroyed after the group
  std::unique_ptr<ProcessGroup> group_;
  TcpStore* tcp_store_ = nullptr;  // store_ when rank 0 serves it over TCP; not owned
  std::atomic<bool> failed_{false};
};

}  // namespace psring::ring

#endif  // PSRING_RING_RING_EXCHANGE_H_
