// The ranks of one job as threads of the test process, for each GradientExchange psring has, behind one
// shape so a typed test (tests/exchange/conformance_test.cc) runs the same cases through all of them:
//
//   LocalRanks  LocalExchange; world size 1 only (kMaxWorldSize)
//   RingRanks   RingExchange over the TCP ring on loopback, joined through an InMemoryStore
//               (ring/thread_ranks.h), small segments so short buffers cross several
//   PsRanks     PsExchange against in-process parameter servers on 127.0.0.1 (tests/ps/ps_cluster.h),
//               synchronous, two shards (fewer when the model has fewer floats), small chunks
//   PsThreeShardRanks  the same with three shards: sizes and buckets not divisible by K, buckets smaller
//               than K (ps/shard_layout.h)
//
//   std::vector<absl::Status> s = RingRanks::Run(4, /*num_params=*/1001,
//       [](int rank, trainer::GradientExchange* exchange) -> absl::Status { ... });
//
// Run blocks until every rank's body returned and returns each rank's status (a setup failure is every
// rank's status). Each body runs on its own thread with its own exchange, owned by the runner.
#ifndef PSRING_TESTS_TESTING_EXCHANGE_RANKS_H_
#define PSRING_TESTS_TESTING_EXCHANGE_RANKS_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ps/client.h"
#include "ring/ring_exchange.h"
#include "ring/thread_ranks.h"
#include "tests/ps/ps_cluster.h"
#include "trainer/exchange.h"

namespace psring::testing {

using RankBody = std::function<absl::Status(int rank, trainer::GradientExchange* exchange)>;

struct LocalRanks {
  static constexpr int kMaxWorldSize = 1;
  static std::vector<absl::Status> Run(int world_size, size_t /*num_params*/, const RankBody& body) {
    if (world_size != 1) return {absl::InvalidArgumentError("LocalExchange has world size 1")};
    trainer::LocalExchange local;
    return {body(0, &local)};
  }
};

struct RingRanks {
  static constexpr int kMaxWorldSize = 8;
  static std::vector<absl::Status> Run(int world_size, size_t /*num_params*/, const RankBody& body) {
    return ring::RunRanksOwning(world_size, ring::LoopbackOptions(/*segment_bytes=*/64),
                                [&](int rank, std::unique_ptr<ring::ProcessGroup> group) {
                                  ring::RingExchange exchange(std::move(group));
                                  return body(rank, &exchange);
                                });
  }
};

template <int kShards>
struct BasicPsRanks {
  static constexpr int kMaxWorldSize = 8;
  static std::vector<absl::Status> Run(int world_size, size_t num_params, const RankBody& body) {
    ps::ServiceOptions service;
    service.workers = world_size;
    service.step_timeout = absl::Seconds(20);
    service.chunk_bytes = 256;
    const int shards = static_cast<int>(std::min<size_t>(kShards, std::max<size_t>(num_params, 1)));
    absl::StatusOr<ps::testing::LocalCluster> cluster = ps::testing::StartCluster(shards, service);
    if (!cluster.ok()) return std::vector<absl::Status>(world_size, cluster.status());
    return ps::testing::RunRanks(world_size, [&](int rank) -> absl::Status {
      ps::PsClientOptions options = ps::testing::ClientOptionsFor(*cluster, rank, world_size);
      options.chunk_bytes = 128;
      options.hyperparameters = {0.05f, 0.9f, 1e-3f};
      absl::StatusOr<std::unique_ptr<ps::PsExchange>> exchange = ps::PsExchange::Create(options);
      if (!exchange.ok()) return exchange.status();
      return body(rank, exchange->get());
    });
  }
};
using PsRanks = BasicPsRanks<2>;
using PsThreeShardRanks = BasicPsRanks<3>;

}  // namespace psring::testing

#endif  // PSRING_TESTS_TESTING_EXCHANGE_RANKS_H_
