// Calibration: the parameters of bench/model/collective.h fitted to measured collectives (gradient mode, one
// collective of S bytes per step), per exchange, by least squares on relative errors
//
//   minimise  sum_i ((T_model(run_i) - T_i) / T_i)^2
//   over      software_s >= 0,  0 < efficiency <= 1,  window_bytes > 0 or none,
//             cpu_bytes_per_second > 0 or none,  0 <= burst_share <= 1 (searched only where a run has an
//             emulated link burst; none = 0 elsewhere),  0 <= window_queueing, stream_contention <= 1
//             and window_round_s >= 0 or none, drain_windows in [1e-3, 64] or none (both searched only for
//             the PS where a run has latency and a link rate)
//
// so small and large collectives count alike and no fit is faster than the wire. Loopback runs (link rate 0,
// latency 0) see only the software and CPU terms: they measure the CPU ceiling. A limit that binds in no run
// (e.g. the window without latency) is fitted as none (0 in the file, at_bound) rather than guessed.
//
// Method: software_s has a closed form given the others (the model is linear in it); efficiency, window, CPU
// ceiling, burst share, window queueing and stream contention are searched on a log grid (with "none" as a
// grid value), then refined by a pattern search started from the grid's best point for every value of the
// burst share, the window queueing, the stream contention and the drain (none or one window; a search started
// where a term is none never turns it on); the window round's cost starts at 1 ms and moves with the others;
// each success of the
// search's coordinate moves is followed by pattern moves (Hooke and Jeeves). Standard errors come from the
// residuals and the numeric Jacobian (linearised). A term the runs cannot identify (kMaxRelativeStdError) is
// dropped and the rest refitted; the file records it as dropped.
//
//   std::vector<MeasuredRun> runs = ...;   // from the calibration sweep's result lines
//   ASSIGN_OR_RETURN(proto::CostModelFile file, FitModel(runs, {"this-host", "2026-12-01", "sweep ..."}));
//   RETURN_IF_ERROR(WriteModelFile("model.json", file));
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_FIT_H_
#define PSRING_BENCH_MODEL_FIT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"

namespace psring::bench::model {

// One measured run: the mean time of one collective (exchange alone, no compute).
struct MeasuredRun {
  Topology topology = Topology::kRing;
  Conditions conditions;  // cpu_speedup must be 1 (measured on this host)
  double seconds = 0;     // > 0
};

struct ParameterFit {
  double value = 0;
  double std_error = -1;  // < 0: not determined
  bool at_bound = false;
  // Dropped as unidentified (then value 0 and at_bound: the term is off), with what it was before.
  bool dropped = false;
  double dropped_value = 0;
  double dropped_std_error = -1;
};

// A term whose standard error exceeds this share of its value (or has none) is not identified by the runs:
// the fit drops it (holds it off) and refits the others, rather than keep a value the noise happened to give
// (issue 33: the ring's per-message cost was 125 +- 287 us and drove every projection).
inline constexpr double kMaxRelativeStdError = 0.20;

struct ExchangeFit {
  Topology topology = Topology::kRing;
  ExchangeParams params;
  ParameterFit software_s, efficiency, window_bytes, cpu_bytes_per_second, burst_share, window_queueing,
      stream_contention, window_round_s, drain_windows;
  double median_abs_rel_error = 0;
  double max_abs_rel_error = 0;
  int runs = 0;  // used (the ring at N = 1 exchanges nothing and is left out)
  // Covariance of the logarithms of the free (not at_bound) parameters, row-major, in covariance_terms'
  // order; empty when the fit could not determine it. residual_rel_sd: the relative residuals' standard
  // deviation, sqrt(RSS / (runs - free parameters)); where the runs hold both regimes (shaped links and
  // loopback, kMinRegimeRuns each), the fit is weighted by regime and residual_rel_sd is the shaped runs'
  // scatter, loopback_residual_rel_sd the loopback runs' (-1: one regime only).
  std::vector<std::string> covariance_terms;
  std::vector<double> log_covariance;
  double residual_rel_sd = 0;
  double loopback_residual_rel_sd = -1;
};

// The fewest runs of a noise regime (shaped links, loopback) whose scatter the fit estimates and weighs.
inline constexpr int kMinRegimeRuns = 3;

// Fits `topology` on its runs among `runs` (others are ignored). kInvalidArgument naming the run for an
// invalid one (ValidateConditions, seconds not > 0, cpu_speedup != 1), and when no run of the topology moves
// bytes over a rate-limited link (the efficiency needs one: calibrate with a link rate).
absl::StatusOr<ExchangeFit> FitExchange(Topology topology, const std::vector<MeasuredRun>& runs);

struct FileInfo {
  std::string host;
  std::string date;  // ISO 8601
  std::string note;
  std::string hosts_tcp;  // the emulated hosts' TCP the runs were measured under ("" unknown)
};

// How far a fit is off beyond its coverage, from the calibration itself: for one dimension (N, one-way
// latency, size S, link rate) with at least two values among the topology's shaped-link runs, the runs at the
// values above largest / sqrt(2) (at least the largest; never the smallest) are held out, the others
// (loopback ones included) fitted by FitExchange, and each held-out run i predicted at its factor f_i = its
// value / the largest value kept (so no factor is near 1, where noise over log(f) would blow up). With e_i =
// log(measured / predicted) and s the inner fit's residual_rel_sd, the error the extrapolation added per unit
// of log(factor) is
//
//   log_sd_per_log_factor = sqrt(max(0, sum_i (e_i^2 - s^2)) / sum_i log(f_i)^2)
//
// (bias and scatter alike; the inner fit's parameter error is in e_i too, so it errs wide). The dimensions
// whose inner fit fails (too few runs left) are left out.
struct ExtrapolationScatter {
  std::string dimension;  // model_file.h Extrapolation::what: "N", "latency", "size", "link"
  double log_sd_per_log_factor = 0;
  double factor = 0;  // the largest value over the largest value kept
  int held_out_runs = 0;
  double rms_log_error = 0;
  double inner_scatter = 0;
};
std::vector<ExtrapolationScatter> MeasureExtrapolation(Topology topology,
                                                       const std::vector<MeasuredRun>& runs);

// Every exchange fitted and frozen into a file with its coverage and MeasureExtrapolation's scatter.
// FitExchange's errors, naming the exchange.
absl::StatusOr<proto::CostModelFile> FitModel(const std::vector<MeasuredRun>& runs, const FileInfo& info);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_FIT_H_
