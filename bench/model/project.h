// Projection: the frozen model carried to a target cluster (link rate, latency, N, K) at a workload's real
// size and real bucket caps, every exchange held to its CPU ceiling as measured on the calibration host
// (times Conditions::cpu_speedup for a faster host) or on the target host (cpu_model.h WithCpuCeilings), each
// saying which bound binds. A model, not measured: the file's host and date are printed with it.
//
//   ASSIGN_OR_RETURN(Projection p, Project(model_file, target, shape));
//   std::cout << FormatProjection(model_file, target, p, "resnet50, 25 MiB buckets");
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_MODEL_PROJECT_H_
#define PSRING_BENCH_MODEL_PROJECT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/model/collective.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/model/model_file.h"
#include "bench/model/schedule.h"
#include "bench/model/uncertainty.h"

namespace psring::bench::model {

struct ExchangeProjection {
  Topology topology = Topology::kRing;
  StepTime step;
  double cpu_ceiling_bytes_per_second = 0;  // the file's ceiling times cpu_speedup (0: none known)
  // How far the target lies outside the calibration's coverage (its largest bucket as the size).
  Extrapolation extrapolation;
  // The step's kIntervalLevel interval from the fit's uncertainty (bench/model/uncertainty.h). It does not
  // widen with extrapolation beyond what the parameters' errors imply: the EXTRAPOLATED mark says that part.
  PredictionInterval interval;
  // Its window burst into a server's port against Conditions::port_buffer_bytes (collective.h IncastOf; the
  // largest bucket as the collective): marked; the step includes the incast term's cost where it holds
  // (StepTime::incast_s), else the model is likely too fast there.
  Incast incast;
  // The share of the step its window rounds' own cost makes (collective.h window_round_s d): 1 - the step
  // with d = 0 over the step; 0 for the ring and where no window binds. d is the calibration host's (its
  // wake-ups and its emulator's transit, bench/PERFORMANCE.md 9.29) unless WithWindowRound set the target's:
  // a share of kRoundMarkShare or more is marked, the row rests on that host's reactions.
  double round_share = 0;
};

// A projection row whose window rounds' own cost is this share of its step or more is marked "ROUND P %".
inline constexpr double kRoundMarkShare = 0.1;

struct Projection {
  std::vector<ExchangeProjection> exchanges;  // AllTopologies() order
  int fastest = 0;                             // index into exchanges (the first of equals)
  double margin = 0;                           // second fastest step / fastest step - 1
  // The fastest one's interval lies below every other's: the model names a winner. Else "undetermined".
  bool determined = false;
  // The fastest with every PS window round at 0 (a host that reacts at once): != fastest where the window
  // round's value decides the winner.
  int fastest_without_round = 0;
};

// Every exchange of `model` at `target` (bytes ignored: the shape's buckets carry them). Errors of
// ParamsOf and PredictStep.
absl::StatusOr<Projection> Project(const proto::CostModelFile& model, const Conditions& target,
                                   const StepShape& shape);

// The table, one row per exchange (step, exposed and total exchange time, bound, CPU ceiling, and
// "EXTRAPOLATED xK (what)" where the target lies more than kExtrapolationMarkFactor outside the calibration,
// and "INCAST xR" where a PS's window burst exceeds the target's port buffer when one is given), under a
// heading that says it is a model and where its CPU ceilings were measured: `cpu_source` ("FILE (host,
// date)", cpu_model.h CpuModelSource) when `model` carries a --cpu_model file's ceilings (WithCpuCeilings),
// else "" for the calibration host's. Lines start with "# ".
std::string FormatProjection(const proto::CostModelFile& model, const Conditions& target,
                             const Projection& projection, const std::string& what,
                             const std::string& cpu_source = "");

// "25 Gbit/s", "100 Mbit/s" (bytes/s in); "5 us", "1 ms" (seconds in). For tables and map axes.
std::string FormatLinkRate(double bytes_per_second);
std::string FormatLatency(double seconds);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_PROJECT_H_
