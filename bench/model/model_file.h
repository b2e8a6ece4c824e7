// The frozen model file (bench/model/cost_model_file.proto as JSON): one ExchangeModel per exchange with
// its parameters, their errors and the conditions they cover, the host and the date.
//
//   ASSIGN_OR_RETURN(proto::CostModelFile file, ReadModelFile("bench/results/model.json"));
//   ASSIGN_OR_RETURN(ExchangeParams ring, ParamsOf(file, Topology::kRing));
//
// Reading validates (ValidateModelFile): a file is used whole or not at all. Thread-safety: pure functions
// (Read/Write touch only their file).
#ifndef PSRING_BENCH_MODEL_MODEL_FILE_H_
#define PSRING_BENCH_MODEL_MODEL_FILE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"

namespace psring::bench::model {

// The file format this code writes and reads. A change of meaning of any field bumps it.
inline constexpr int kModelFileVersion = 1;

// kInvalidArgument naming the exchange and field, and saying what to do, for: another version, no host or
// date, an unknown, duplicate or missing exchange (all four are required), a missing parameter, a negative
// or non-finite value, an efficiency outside (0, 1].
absl::Status ValidateModelFile(const proto::CostModelFile& file);

// JSON -> validated file. `origin` (a path) names it in errors; unknown fields are errors.
absl::StatusOr<proto::CostModelFile> ParseModelFile(absl::string_view json, absl::string_view origin);
// Validated file -> JSON (pretty-printed, field names as in the .proto).
absl::StatusOr<std::string> ModelFileJson(const proto::CostModelFile& file);

// kNotFound when the file is missing, else ParseModelFile's errors.
absl::StatusOr<proto::CostModelFile> ReadModelFile(const std::string& path);
// Validates, then writes atomically (common/atomic_file.h).
absl::Status WriteModelFile(const std::string& path, const proto::CostModelFile& file);

// The fitted parameters of one exchange by their names (ParamTerms() order: software_s, efficiency,
// window_bytes, cpu_bytes_per_second, burst_share, window_queueing, stream_contention, window_round_s,
// drain_windows),
// pointing into `e` (a default, absent parameter where the file has none).
std::vector<std::pair<const char*, const proto::ModelParameter*>> NamedParameters(
    const proto::ExchangeModel& e);

// The parameters of `topology` (the file validated). kNotFound when the file lacks it.
absl::StatusOr<ExchangeParams> ParamsOf(const proto::CostModelFile& file, Topology topology);

// One line on the file's incast term (collective.h IncastCostOf): "incast term: c = 1.872 +- 0.086 round
// trips per window cut from a burst of R0 = 1.21 +- 0.04 times the port's buffer, fitted on 152 held-out runs
// (round trips 29-156 ms)", or that it has none.
std::string DescribeIncastTerm(const proto::CostModelFile& file);

// How far `at` (with `bytes` the collective's size: a flat step's S or one bucket's) lies outside what the
// file's calibration of `topology` ran: the largest ratio over N, the link rate (rate-limited runs only), the
// one-way latency (above the largest only: 0 to the largest is covered) and the size, 1 inside. An unlimited
// link (0) counts as covered when the calibration ran one. 0 when the file records no coverage (nothing to say).
struct Extrapolation {
  double factor = 0;
  std::string what;  // the dimension that sets the factor: "N", "link", "latency" or "size"
};
Extrapolation ExtrapolationOf(const proto::CostModelFile& file, Topology topology, const Conditions& at,
                              double bytes);
// Every dimension `at` lies outside the calibration by (factor > 1 only; ExtrapolationOf is their largest).
std::vector<Extrapolation> ExtrapolationFactors(const proto::CostModelFile& file, Topology topology,
                                                const Conditions& at, double bytes);
// Beyond this factor a prediction is marked.
inline constexpr double kExtrapolationMarkFactor = 2;
// "EXTRAPOLATED x128 (N)" when the factor is above kExtrapolationMarkFactor, else "".
std::string ExtrapolationMark(const Extrapolation& e);

// `model` with every PS exchange's window round (collective.h window_round_s) set to `seconds` (>= 0,
// finite): the target host's instead of the calibration host's, which is its wake-ups and its emulator's
// transit (bench/PERFORMANCE.md 9.29). Given, not fitted: no standard error; the fit's relative covariance
// stays, as for measured CPU ceilings (cpu_model.h WithCpuCeilings). kInvalidArgument for a bad value, or a
// file whose PS exchanges have no such term (fitted before 2026-11-30: their window round is a share of the
// window at the link's rate, which this would double). `source` says where it comes from
// (CostModelFile::window_round_source, e.g. "--window_round_us=50").
absl::StatusOr<proto::CostModelFile> WithWindowRound(const proto::CostModelFile& model, double seconds,
                                                     const std::string& source);

// The --window_round_us flag of the tools that project (crossover_maps, scaling, compare): < 0 (its default)
// leaves `model` as it is, else WithWindowRound(model, us * 1e-6, "--window_round_us=US").
inline constexpr char kWindowRoundFlagHelp[] =
    "The target host's PS window round d, microseconds: what each HTTP/2 window costs beyond the round trip "
    "(the receiver's wake-up, read and WINDOW_UPDATE, the sender's wake-up). Projections and maps use it for "
    "every PS exchange instead of the model file's, which is the calibration host's: its hosts' wake-ups on "
    "shared cores and its emulator's transit (bench/PERFORMANCE.md 9.29); a host with cores of its own "
    "reacts "
    "sooner. Rows whose step is 10 % or more d are marked ROUND P %. Negative: the model file's.";
absl::StatusOr<proto::CostModelFile> WithWindowRoundFlag(const proto::CostModelFile& model, double us);

// "as fitted on HOST (DATE): ps-1 1.27 ms, ps-colocated 1.38 ms, ps-dedicated 1.40 ms" (none: dropped), or
// "0.05 ms from SOURCE" where WithWindowRound set it; "" when no exchange has the term.
std::string DescribeWindowRound(const proto::CostModelFile& model);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_MODEL_FILE_H_
