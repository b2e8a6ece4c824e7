#include "bench/cluster_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, link, psring::bench::ClusterOptions().link,
          "Bandwidth of every emulated host link, each direction, as a tc rate (e.g. 100mbit, 1gbit). Empty: "
          "unlimited.");
ABSL_FLAG(std::string, delay, psring::bench::ClusterOptions().delay,
          "One-way latency added at each end of every host link with netem (e.g. 1ms). Empty: none. Needs the "
          "kernel's sch_netem.");
ABSL_FLAG(std::string, queue, psring::bench::ClusterOptions().queue,
          "Queue of every emulated link end (tc tbf latency): how long the bytes waiting for the link may take "
          "to drain, e.g. 5ms for a shallow-buffered switch port, 50ms for a deep one.");
ABSL_FLAG(bool, loopback, psring::bench::ClusterOptions().force_loopback,
          "Run every host on 127.0.0.1 without namespaces or link limits, even as root (the automatic "
          "fallback without CAP_NET_ADMIN).");

namespace psring::bench {

ClusterOptions ClusterOptionsFromFlags() {
  ClusterOptions options;
  options.link = absl::GetFlag(FLAGS_link);
  options.delay = absl::GetFlag(FLAGS_delay);
  options.queue = absl::GetFlag(FLAGS_queue);
  options.force_loopback = absl::GetFlag(FLAGS_loopback);
  return options;
}

}  // namespace psring::bench
