// Calibration of the frozen cost model (bench/model/): a sweep of its own in gradient mode (one collective of
// S bytes per step, no compute) over sizes x N x link rates x latencies x the four exchanges, plus loopback
// runs with unlimited links that measure each exchange's CPU ceiling at real sizes; the usable runs become
// model::MeasuredRun, model::FitModel fits them once and the file is frozen (bench/PERFORMANCE.md 9.3).
//
//   CalibrationPlan plan = QuickCalibrationPlan();          // or DefaultCalibrationPlan(), or edit it
//   ScalingOptions base;                                    // binaries, queue, latency method (the flags)
//   ASSIGN_OR_RETURN(Calibration c, RunCalibration(plan, base, {"box", "2026-12-01", ""}, &std::cerr));
//   std::cout << FormatCalibration(c);
//   RETURN_IF_ERROR(model::WriteModelFile("model.json", c.file));
//
// Each condition (link rate, latency, or loopback) is one RunScaling call, so each gets a fresh emulated
// cluster. Runs that failed, had wrong elements or were EMULATOR-BOUND (bench/probes.h) are dropped, counted
// and named; the ring at N = 1 moves nothing and is skipped.
//
// Blocking: RunCalibration blocks for the whole sweep (minutes). The rest are pure functions.
#ifndef PSRING_BENCH_CALIBRATION_H_
#define PSRING_BENCH_CALIBRATION_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/core/exchange.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/model/fit.h"
#include "bench/harness/sweep.h"

namespace psring::bench {

// One cluster of the sweep: a link rate and latency (namespaces), or loopback (every host on 127.0.0.1,
// unlimited links, no latency: only the CPU binds).
struct CalibrationCondition {
  std::string link;     // tc rate, e.g. "100mbit" (ignored with loopback)
  std::string latency;  // one-way, e.g. "5ms" ("" or "0": none; ignored with loopback)
  bool loopback = false;
  std::vector<size_t> sizes;  // S values, bytes
  std::vector<int> nodes;
  std::string Name() const;   // "100mbit 5ms", "loopback"
};

struct CalibrationPlan {
  std::vector<CalibrationCondition> conditions;
  std::vector<Exchange> exchanges = AllExchanges();
  int steps = 3;         // measured steps per run
  int warmup_steps = 1;
  int ps_servers = 2;    // K of ps-dedicated
};

// ~10 minutes on the 2-core box: S = 1, 4 MiB x N = 2, 4, 8 x {100, 200} Mbit/s x {1, 5} ms, loopback
// S = 16, 64 MiB x N = 2, 4.
CalibrationPlan QuickCalibrationPlan();
// < 25 minutes: S = 1, 4, 16 MiB (16 MiB at N = 2, 4) x N = 2, 4, 8 x {100, 200} Mbit/s x {1, 5} ms, loopback
// S = 16, 64, 100 MiB x N = 2, 4, 8.
CalibrationPlan DefaultCalibrationPlan();

// kInvalidArgument naming the condition for an empty plan, an empty size or node list, N < 1, a link rate
// that does not parse or is 0 without loopback, a latency that does not parse, or no exchange.
absl::Status ValidatePlan(const CalibrationPlan& plan);

// A rough upper estimate of the sweep's wall time in seconds (steps at 85 % of the link rate, 0.3 GB/s on
// loopback, plus start-up per run and per cluster), printed before it starts.
double EstimateSeconds(const CalibrationPlan& plan);

// The runs of one condition as the model sees them, and what was left out.
struct ConvertedRuns {
  std::vector<model::MeasuredRun> runs;
  int failed = 0;          // error or wrong elements
  int emulator_bound = 0;  // EMULATOR-BOUND (bench/probes.h)
  int skipped = 0;         // nothing to model: the ring at N = 1, or a time not > 0
  std::vector<std::string> dropped;  // one line per dropped run, with the reason
};

// The cores this process may run on (sched_getaffinity; hardware_concurrency as a fallback): every rank and
// server of a calibration or validation run shares them.
double BoxCores();

// Usable records -> MeasuredRun{topology, {N, K, S, B, L}, seconds = the slowest rank's step time (the
// collective a synchronous step waits for)}. `link_bytes_per_second` and `latency_s` are the cluster's
// (ScalingResult's; 0 and 0 on loopback); `link_burst_bytes` the links' token bucket (TbfBurstBytes,
// bench/cluster.h), 0 on loopback; `box_cores` the cores every process of the runs shared (this machine's; 0:
// hosts of their own). Pure.
ConvertedRuns ConvertRecords(const std::vector<RunRecord>& records, double link_bytes_per_second,
                             double latency_s, double link_burst_bytes = 0, double box_cores = 0);

struct Calibration {
  proto::CostModelFile file;
  std::vector<model::MeasuredRun> runs;  // what was fitted
  int total_runs = 0;
  int failed = 0;
  int emulator_bound = 0;
  int skipped = 0;
  std::vector<std::string> dropped;
  double wall_s = 0;
};

// Runs the plan (one RunScaling per condition, progress on `progress`), converts and fits. `base` carries
// the programs and the link flags other than rate and latency (queue, latency method, delay program).
// kInvalidArgument from ValidatePlan; RunScaling's errors naming the condition; FitModel's (e.g. an exchange
// without any usable run over a rate-limited link: the message says which).
absl::StatusOr<Calibration> RunCalibration(const CalibrationPlan& plan, const ScalingOptions& base,
                                           const model::FileInfo& info, std::ostream* progress);

// The parameters per exchange (value +- error, at bound, coverage, fit error) and the dropped runs, lines
// starting with "# ". Pure.
std::string FormatCalibration(const Calibration& calibration);

}  // namespace psring::bench

#endif  // PSRING_BENCH_CALIBRATION_H_
