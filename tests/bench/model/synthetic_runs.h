// Calibration runs generated from known parameters (the model's own predictions, optionally scaled), so a fit
// must give those parameters back.
#ifndef PSRING_TESTS_BENCH_MODEL_SYNTHETIC_RUNS_H_
#define PSRING_TESTS_BENCH_MODEL_SYNTHETIC_RUNS_H_

#include <cstdint>
#include <vector>

#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/model/fit.h"
#include "bench/model/model_file.h"

namespace psring::bench::model {

// Parameters where every limit binds somewhere in SyntheticRuns' grid; the PS's with a window round's cost
// away from 1 ms, where the fit starts it, so the fit must find it, and a window that binds at two latencies
// on either link (5 and 20 ms at 100 Mbit/s), so a fit without one link's runs can still tell the round's
// cost from the window.
inline ExchangeParams TruthFor(Topology topology) {
  // In Topology's order: ring, ps-1, ps-colocated, ps-dedicated.
  static const ExchangeParams kTruths[] = {{30e-6, 0.95, 256 << 10, 600e6},
                                           {80e-6, 0.9, 32 << 10, 700e6},
                                           {50e-6, 0.85, 32 << 10, 500e6},
                                           {60e-6, 0.88, 32 << 10, 650e6}};
  static const double kWindowRounds[] = {0, 2e-3, 1.5e-3, 3e-3};
  ExchangeParams p = kTruths[static_cast<int>(topology)];
  p.window_round_s = kWindowRounds[static_cast<int>(topology)];
  return p;
}

// N = 2, 4, 8 x S = 1, 4, 16 MB x 100 Mbit/s and 1 Gbit/s x latency 0, 1, 5, 20 ms, plus loopback runs
// (unlimited link, no latency) at N = 2, 4 and S = 16, 64 MB; ps-dedicated with K = 2. Times are the
// model's, times `scale`.
inline std::vector<MeasuredRun> SyntheticRuns(double scale = 1) {
  std::vector<MeasuredRun> runs;
  for (Topology topology : AllTopologies()) {
    const ExchangeParams truth = TruthFor(topology);
    auto add = [&](int nodes, double bytes, double link, double latency) {
      const Conditions c{nodes, 2, bytes, link, latency};
      runs.push_back({topology, c, scale * PredictCollectiveUnchecked(topology, truth, c).seconds});
    };
    for (int nodes : {2, 4, 8}) {
      for (double bytes : {1e6, 4e6, 16e6}) {
        for (double link : {12.5e6, 125e6}) {
          for (double latency : {0.0, 1e-3, 5e-3, 20e-3}) add(nodes, bytes, link, latency);
        }
      }
    }
    for (int nodes : {2, 4}) {
      for (double bytes : {16e6, 64e6}) add(nodes, bytes, 0, 0);
    }
  }
  return runs;
}

// SyntheticRuns with each time multiplied by a deterministic pseudo-random factor, uniform in
// [1 - spread, 1 + spread] (a fixed LCG seeded by `seed`): measurement scatter of known size.
inline std::vector<MeasuredRun> NoisyRuns(double spread, uint64_t seed) {
  std::vector<MeasuredRun> runs = SyntheticRuns();
  uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (MeasuredRun& run : runs) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(state >> 11) / 9007199254740992.0;  // [0, 1)
    run.seconds *= 1 + spread * (2 * u - 1);
  }
  return runs;
}

// A model file holding `params` for every exchange in AllTopologies() order.
inline proto::CostModelFile ModelFileOf(const std::vector<ExchangeParams>& params) {
  proto::CostModelFile file;
  file.set_version(kModelFileVersion);
  file.set_host("testhost");
  file.set_date("2026-12-01");
  for (size_t i = 0; i < params.size(); ++i) {
    proto::ExchangeModel* e = file.add_exchanges();
    e->set_exchange(TopologyName(AllTopologies()[i]));
    e->mutable_software_s()->set_value(params[i].software_s);
    e->mutable_efficiency()->set_value(params[i].efficiency);
    e->mutable_window_bytes()->set_value(params[i].window_bytes);
    e->mutable_cpu_bytes_per_second()->set_value(params[i].cpu_bytes_per_second);
  }
  return file;
}

}  // namespace psring::bench::model

#endif  // PSRING_TESTS_BENCH_MODEL_SYNTHETIC_RUNS_H_
