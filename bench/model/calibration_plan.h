// The calibration of the frozen cost model as plain data: what its sweep runs and what the model makes of the
// runs. The sweep is the model's own, in gradient mode (one collective of S bytes per step, no compute) over
// sizes x N x link rates x latencies x the four exchanges, plus loopback runs with unlimited links that
// measure each exchange's CPU ceiling at real sizes; the usable runs become model::MeasuredRun
// (ConvertRecords), model::FitModel fits them once and the file is frozen (bench/PERFORMANCE.md 9.3). Runs
// that failed, had wrong elements or were EMULATOR-BOUND (bench/emulator/probes.h) are dropped, counted and
// named; the ring at N = 1 moves nothing and is skipped.
//
//   CalibrationPlan plan = QuickCalibrationPlan();          // or DefaultCalibrationPlan(), or edit it
//   RETURN_IF_ERROR(ValidatePlan(plan));
//   std::cerr << EstimateSeconds(plan) << " s\n";
//   ConvertedRuns runs = ConvertRecords(sweep.records, sweep.link_bytes_per_second, sweep.latency_s);
//
// Running the plan is bench/cmd/calibration.h's RunCalibration; its report bench/report/calibration_report.h.
// Pure functions; thread-safe.
#ifndef PSRING_BENCH_MODEL_CALIBRATION_PLAN_H_
#define PSRING_BENCH_MODEL_CALIBRATION_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/core/exchange.h"
#include "bench/core/run_record.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/model/fit.h"

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

// Measured steps per run, of calibration and of validation alike (the model is judged on what it was fitted
// to). A run's time is the slowest rank's mean step, and a ring's ranks end each collective at times that
// differ by their chains' luck: over K steps the slowest rank's mean carries about that spread / K. With 3
// steps the ring at N = 16, 45 ms measured 4-11 % above its steady state (bench/PERFORMANCE.md 9.18); 8 keeps
// it near 2 %.
inline constexpr int kMeasuredSteps = 8;

struct CalibrationPlan {
  std::vector<CalibrationCondition> conditions;
  std::vector<Exchange> exchanges = AllExchanges();
  int steps = kMeasuredSteps;
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
// Whether the plan runs fewer than every exchange (a supplementary sweep: its runs are kept, not fitted).
bool IsSupplementary(const CalibrationPlan& plan);

// Start-up of one run (processes, rendezvous, gRPC channels) and of one cluster (namespaces, link check), as
// seen on the 2-core box; for the wall-time estimates only (EstimateSeconds, EstimateValidationSeconds).
inline constexpr double kRunStartupS = 3.0;
inline constexpr double kClusterStartupS = 15.0;

// A rough upper estimate of the sweep's wall time in seconds (steps at 85 % of the link rate, 0.3 GB/s on
// loopback, plus start-up per run and per cluster), printed before it starts.
double EstimateSeconds(const CalibrationPlan& plan);
// The same for one of its conditions (the plan's exchanges, steps and K): what calibrate's time limit weighs.
double EstimateConditionSeconds(const CalibrationPlan& plan, const CalibrationCondition& condition);

// The runs of one condition as the model sees them, and what was left out.
struct ConvertedRuns {
  std::vector<model::MeasuredRun> runs;
  int failed = 0;          // error or wrong elements
  int emulator_bound = 0;  // EMULATOR-BOUND (bench/emulator/probes.h)
  int lossy = 0;  // the links dropped >= kLossyDropShare of their packets: outside the lossless model
  int skipped = 0;         // nothing to model: the ring at N = 1, or a time not > 0
  std::vector<std::string> dropped;  // one line per dropped run, with the reason
};

// Usable records -> MeasuredRun{topology, {N, K, S, B, L}, seconds = the slowest rank's step time (the
// collective a synchronous step waits for)}. `link_bytes_per_second` and `latency_s` are the cluster's
// (ScalingResult's; 0 and 0 on loopback); `link_burst_bytes` the links' token bucket (TbfBurstBytes,
// bench/core/links.h), 0 on loopback; `box_cores` the cores every process of the runs shared (this machine's;
// 0: hosts of their own). Pure.
ConvertedRuns ConvertRecords(const std::vector<RunRecord>& records, double link_bytes_per_second,
                             double latency_s, double link_burst_bytes = 0, double box_cores = 0);

// A calibration's outcome: the frozen file, the runs it was fitted on, what was left out and why.
struct Calibration {
  // Whether `file` holds a fit. A supplementary sweep (a plan with fewer than every exchange) is not fitted:
  // a model file needs every exchange, so its runs are only kept, for a refit merged with a full
  // calibration's (calibrate --refit=FULL,THIS).
  bool fitted = true;
  proto::CostModelFile file;
  std::vector<model::MeasuredRun> runs;  // what was fitted
  int total_runs = 0;
  int failed = 0;
  int emulator_bound = 0;
  int lossy = 0;  // ConvertedRuns::lossy
  int skipped = 0;
  std::vector<std::string> dropped;
  // Conditions not run: they would have ended past calibrate's --time_limit (bench/cmd/time_limit.h), each
  // with why; the fit is over the others.
  std::vector<std::string> not_run;
  double wall_s = 0;
};

}  // namespace psring::bench

#endif  // PSRING_BENCH_MODEL_CALIBRATION_PLAN_H_
