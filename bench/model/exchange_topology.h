// The model's name for each exchange's placement (bench/core/exchange.h -> bench/model/collective.h): the one
// place where the harness's exchanges and the model's topologies meet.
#ifndef PSRING_BENCH_MODEL_EXCHANGE_TOPOLOGY_H_
#define PSRING_BENCH_MODEL_EXCHANGE_TOPOLOGY_H_

#include "bench/core/exchange.h"
#include "bench/model/collective.h"

namespace psring::bench {

model::Topology TopologyOf(Exchange exchange);

}  // namespace psring::bench

#endif  // PSRING_BENCH_MODEL_EXCHANGE_TOPOLOGY_H_
