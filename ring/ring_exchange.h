// RingExchange: the trainer's GradientExchange over a ring ProcessGroup (TCP ring on CPU, NCCL on GPU).
// Exchange() averages the gradients in place (the trainer then applies its optimizer, as DDP does);
// SyncInitialParameters broadcasts rank 0's parameters; AverageMetrics allreduces host doubles.
//
// Bucketed steps (BeginStep/GradientReady/FinishStep, --bucket_mb): a communication thread started by
// BeginStep allreduces (averages) each bucket in place as soon as it and every bucket before it in the plan
// are ready, one collective per bucket in plan order on every rank, while backward goes on; FinishStep joins
// it, and the trainer then steps its optimizer on the averaged gradient. Each bucket is its own ring
// allreduce (its own block partition), so the sums run in another order than the flat exchange's: equal up
// to float rounding. The group is used by that thread only while the step is open (the training thread
// makes no other call in between). Spans: "reduce-scatter" and "allgather" (TCP; "allreduce" on NCCL) per
// bucket on CommTrack(0).
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
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/cluster_env.h"
#include "common/store.h"
#include "common/tcp_store.h"
#include "ring/process_group.h"
#include "trainer/bucket_tracker.h"
#include "trainer/exchange.h"

namespace psring::ring {

struct RingExchangeOptions {
  ProcessGroupOptions group;
  // Where rank 0's rendezvous store listens (the ring's --iface_addr). "": every interface when the master
  // is not on loopback; with a loopback master, every interface with a token and 127.0.0.1 without one
  // (common/tcp_store.h). The store's token and job id are group.tcp.auth's.
  std::string store_bind_addr;
  // Called once the local rank is known and before the transport is agreed (so before NCCL exists): makes
  // this rank's GPU current and returns its identity (ProcessGroupOptions::gpu). When the env gave no local
  // rank (ClusterEnv::local_rank_source empty), Connect derives it first from the ranks that share a host,
  // through the store (LocalRankFromStore). Null: group.gpu and env.local_rank as given.
  std::function<absl::StatusOr<std::string>(int local_rank, const std::string& local_rank_source)> select_gpu;
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

  bool SupportsBuckets() const override { return true; }
  absl::Status BeginStep(int64_t step, trainer::FloatBuffer grads, trainer::FloatBuffer params,
                         const trainer::BucketPlan& plan) override;
  void GradientReady(size_t offset, size_t count) override { tracker_.Ready(offset, count); }
  absl::StatusOr<trainer::ExchangeOutcome> FinishStep() override;

  ProcessGroup* group() { return group_.get(); }

 private:
  // The communication thread of a bucketed step: allreduces the buckets in plan order as they are ready.
  absl::Status AllReduceBuckets(int64_t step, trainer::FloatBuffer grads);

  // Records a failed collective, so that destruction does not wait for ranks that may be stalled.
  absl::Status Track(absl::Status status);

  std::unique_ptr<Store> store_;  // destroyed after the group
  std::unique_ptr<ProcessGroup> group_;
  TcpStore* tcp_store_ = nullptr;  // store_ when rank 0 serves it over TCP; not owned
  std::atomic<bool> failed_{false};

  // The open bucketed step (BeginStep to FinishStep). comm_status_ is written by comm_ and read after
  // joining it.
  trainer::BucketPlan plan_ = trainer::BucketPlan::Flat(0);
  trainer::BucketTracker tracker_;
  std::thread comm_;
  absl::Status comm_status_;
};

}  // namespace psring::ring

#endif  // PSRING_RING_RING_EXCHANGE_H_
