#include "bench/model/exchange_topology.h"

namespace psring::bench {

model::Topology TopologyOf(Exchange exchange) {
  switch (exchange) {
    case Exchange::kRing: return model::Topology::kRing;
    case Exchange::kPsOne: return model::Topology::kPsOne;
    case Exchange::kPsColocated: return model::Topology::kPsColocated;
    case Exchange::kPsDedicated: return model::Topology::kPsDedicated;
  }
  return model::Topology::kRing;
}

}  // namespace psring::bench
