#include "bench/model/link_share.h"

#include <algorithm>

#include "bench/model/exchange_topology.h"
#include "bench/model/model_file.h"

namespace psring::bench::model {

double NetworkLinkShareAt(const proto::CostModelFile& model, Topology topology, const Conditions& at) {
  absl::StatusOr<ExchangeParams> fitted = ParamsOf(model, topology);
  if (!fitted.ok() || !(at.link_bytes_per_second > 0) || !(at.bytes > 0)) return 1;
  // The network's own bounds: the link at the fitted efficiency, the window, the latency; no CPU, no software
  // cost, no shared box.
  ExchangeParams network = *fitted;
  network.software_s = 0;
  network.cpu_bytes_per_second = 0;
  Conditions c = at;
  c.box_cores = 0;
  c.link_burst_bytes = 0;
  ExchangeParams wire = network;
  wire.window_bytes = 0;
  Conditions no_latency = c;
  no_latency.latency_s = 0;
  const double with_bounds = PredictCollectiveUnchecked(topology, network, c).seconds;
  const double on_the_wire = PredictCollectiveUnchecked(topology, wire, no_latency).seconds;
  if (!(with_bounds > 0) || !(on_the_wire > 0)) return 1;
  return std::clamp(on_the_wire / with_bounds, 0.01, 1.0);
}

NetworkLinkShare NetworkLinkShareOf(const proto::CostModelFile& model, int ps_servers) {
  return [model, ps_servers](const RunRecord& run, double link_bytes_per_second, double latency_s) {
    Conditions at;
    at.nodes = run.nodes;
    at.servers = ps_servers;
    at.bytes = static_cast<double>(run.bytes);
    at.link_bytes_per_second = link_bytes_per_second;
    at.latency_s = latency_s;
    return NetworkLinkShareAt(model, TopologyOf(run.exchange), at);
  };
}

}  // namespace psring::bench::model
