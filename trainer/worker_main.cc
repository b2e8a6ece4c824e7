#include "trainer/worker_main.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/atomic_file.h"
#include "common/binary_main.h"
#include "common/status_macros.h"
#include "common/worker_result.h"
#include "proto/results.pb.h"
#include "trainer/cuda_engine.h"
#include "trainer/limits.h"
#include "trainer/timeline.h"
#include "trainer/train_flags.h"
#include "trainer/workload.h"

ABSL_FLAG(double, timeout, absl::ToDoubleSeconds(psring::trainer::WorkerOptions{}.timeout),
          "Seconds (> 0) any wait for another process may take before this rank fails instead of hanging on "
          "a peer that died or stalled. Ring: connecting to the rendezvous store and the neighbours, and "
          "every collective. Parameter server: the deadline of each call to a server (a step includes "
          "waiting for the other workers) and how long to keep reconnecting to a server that is down or "
          "restarting.");
ABSL_FLAG(
    int64_t, model_bytes, psring::trainer::GradientOnlyOptions{}.bytes,
    "Gradient-only mode when > 0: no model; this many bytes of float32 values f(rank, index) go through "
    "the exchange (ring: averaged; parameter server: pushed, stepped by the servers and pulled) for "
    "--warmup_steps + --max_steps (default 10) steps, and the elements that differ from the closed "
    "form are counted (\"wrong\" in the result line). 0: train the MLP.");
ABSL_FLAG(int, warmup_steps, psring::trainer::GradientOnlyOptions{}.warmup_steps,
          "Unmeasured steps before the measured ones (>= 0). Gradient-only mode: run before the "
          "--max_steps measured steps. Training: the first steps of the run (--max_steps counts them), "
          "trained as usual but left out of step_s, samples_per_s and the time sums (at least one step "
          "stays measured).");

ABSL_FLAG(std::string, workload, psring::trainer::WorkerOptions{}.workload,
          "Replay mode: a workload profile (resnet50, vgg16, bert_base, mlp, or a profile file; see "
          "proto/workload.proto and bench/tools/make_profile.py). Each step allocates nothing new: it waits "
          "out every layer's forward time, then every layer's backward time from the last layer, handing each "
          "layer's real-sized gradient to the exchange as its backward ends (buckets: --bucket_mb), and checks "
          "every element exactly as gradient-only mode does (\"wrong\"). The waits stand for a GPU that "
          "computes while the host CPU is free for communication. Overrides --model_bytes.");
ABSL_FLAG(double, compute_scale, psring::trainer::WorkerOptions{}.compute_scale,
          "Replay mode: multiplies every layer's compute time (> 0). A slower emulated link stands for a "
          "faster real one when compute is scaled by the same factor: e.g. 100 Mbit/s standing for 25 Gbit/s "
          "is a factor 250, so --compute_scale=250 keeps that cluster's compute/communication ratio.");
ABSL_FLAG(std::string, params_out, psring::trainer::WorkerOptions{}.params_out,
          "Training only: write the final parameters to this path as raw little-endian float32 in layout "
          "order (\"{rank}\" as for --timeline), e.g. to check that every rank ends with the same model. "
          "Empty: none.");
ABSL_FLAG(std::string, timeline, psring::trainer::WorkerOptions{}.timeline,
          "Write this rank's timeline (Chrome trace-event JSON: forward, backward per layer, each bucket's "
          "exchange, optimizer, waits; open it in https://ui.perfetto.dev or chrome://tracing) to this path. "
          "\"{rank}\" in it becomes the rank; without it \".rank<r>\" goes before the extension. Empty: "
          "none.");
ABSL_FLAG(std::string, straggler, "",
          "Inject a slow rank: RANK:FACTOR (FACTOR >= 1) makes rank RANK's compute take FACTOR times as long, "
          "as real wall time (replay: every layer's wait stretched; training: a sleep before each step's "
          "forward pass of (FACTOR - 1) x the rank's previous forward + backward). Empty: none. Every rank "
          "may be given the same flag; only RANK acts on it. The injected seconds are in the result line "
          "(injected_delay_s).");
ABSL_FLAG(std::string, step_noise, "",
          "Per-step noise on every rank's compute: SIGMA[:SEED] stretches each step by max(1, exp(SIGMA * Z)), Z "
          "standard normal drawn per step from a generator seeded SEED + rank (SEED 1): a log-normal tail. "
          "Empty: none.");
ABSL_FLAG(std::string, pause, "",
          "Periodic pauses: EVERY:DURATION (e.g. 10:200ms) sleeps DURATION before every EVERY-th step on every "
          "rank. Empty: none.");

namespace psring::trainer {
namespace {

// The profile's layers with their times multiplied by `scale`.
std::vector<ReplayLayer> ReplayLayers(const proto::Workload& workload, double scale) {
  std::vector<ReplayLayer> layers;
  for (const proto::WorkloadLayer& l : workload.layers()) {
    layers.push_back({l.name(), static_cast<size_t>(l.params()), absl::Milliseconds(l.forward_ms() * scale),
                      absl::Milliseconds(l.backward_ms() * scale)});
  }
  return layers;
}

// The result-line fields a training run knows, over the measured steps only (TrainResult's timing
// contract); the caller adds the exchange's identity.
proto::WorkerResult ResultFromTraining(const TrainResult& r, double bucket_mb) {
  proto::WorkerResult result;
  result.set_steps(static_cast<int32_t>(r.measured_steps));
  result.set_bytes(static_cast<double>(r.params.size() * sizeof(float)));
  result.set_compute_s(r.compute_seconds);
  result.set_exchange_s(r.exchange_seconds);
  result.set_step_s(r.measured_steps > 0 ? r.loop_seconds / r.measured_steps : 0.0);
  result.set_samples_per_s(r.samples_per_second);
  result.set_test_accuracy(r.test_accuracy);
  result.set_bytes_sent(static_cast<double>(r.bytes_sent));
  result.set_bytes_received(static_cast<double>(r.bytes_received));
  result.set_forward_s(r.forward_seconds);
  result.set_backward_s(r.backward_seconds);
  result.set_optimizer_s(r.optimizer_seconds);
  result.set_exposed_exchange_s(r.exchange_seconds);
  result.set_buckets(r.buckets);
  result.set_bucket_mb(bucket_mb);
  result.set_measured_start_unix_s(r.measured_start_unix_s);
  result.set_measured_end_unix_s(r.measured_end_unix_s);
  result.set_host_cpu_busy(r.host_cpu_busy);
  result.set_host_cpu_stall(r.host_cpu_stall);
  result.set_injected_delay_s(r.injected_delay_seconds);
  for (double t : r.step_ready_unix_s) result.add_step_ready_unix_s(t);
  for (const EvalPoint& e : r.evaluations) {
    proto::EvalPoint* point = result.add_evals();
    point->set_step(static_cast<int32_t>(e.step));
    point->set_wall_s(e.wall_s);
    point->set_accuracy(e.accuracy);
    point->set_samples(static_cast<int32_t>(e.samples));
  }
  result.set_eval_s(r.eval_pause_seconds);
  if (r.skipped_steps > 0) result.set_skipped_steps(static_cast<double>(r.skipped_steps));
  return result;
}

absl::StatusOr<proto::WorkerResult> TrainAndReport(const WorkerOptions& options, GradientExchange* exchange) {
  ASSIGN_OR_RETURN(TrainResult trained, Train(options.train, exchange));
  if (!options.params_out.empty()) {
    const std::string path = RankTimelinePath(options.params_out, exchange->rank());
    RETURN_IF_ERROR(WriteFileAtomically(
        path, absl::string_view(reinterpret_cast<const char*>(trained.params.data()),
                                trained.params.size() * sizeof(float))));
  }
  proto::WorkerResult result = ResultFromTraining(trained, options.train.bucket_mb);
  result.set_exchange(exchange->name());
  result.set_rank(exchange->rank());
  result.set_world_size(exchange->world_size());
  return result;
}

}  // namespace

absl::StatusOr<WorkerOptions> WorkerOptionsFromFlags() {
  WorkerOptions o;
  ASSIGN_OR_RETURN(o.env, ClusterEnvFromFlags());
  ASSIGN_OR_RETURN(o.train, TrainOptionsFromFlags());
  ASSIGN_OR_RETURN(o.timeout, TimeoutFromSeconds("timeout", absl::GetFlag(FLAGS_timeout)));
  const int64_t model_bytes = absl::GetFlag(FLAGS_model_bytes);
  if (model_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model_bytes=", model_bytes, ": must be >= 0 (0: train the MLP)"));
  }
  // Parameters, gradients and the exchange's own buffer.
  RETURN_IF_ERROR(CheckModelSize(absl::StrCat("--model_bytes=", model_bytes),
                                 static_cast<uint64_t>(model_bytes) / sizeof(float), /*buffers=*/3));
  o.gradient_only.bytes = static_cast<size_t>(model_bytes);
  o.gradient_only.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  o.gradient_only.log_every = o.train.log_every;
  ASSIGN_OR_RETURN(o.train.straggler, ParseStragglerFlags(absl::GetFlag(FLAGS_straggler),
                                                          absl::GetFlag(FLAGS_step_noise), absl::GetFlag(FLAGS_pause)));
  if (o.train.straggler.slow_rank >= o.env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("--straggler=", absl::GetFlag(FLAGS_straggler), ": rank ",
                                                   o.train.straggler.slow_rank, " is not in a job of ",
                                                   o.env.world_size, " ranks (ranks 0 .. ", o.env.world_size - 1,
                                                   ")"));
  }
  o.gradient_only.straggler = o.train.straggler;
  o.train.warmup_steps = o.gradient_only.warmup_steps;
  if (o.train.max_steps >= 0) o.gradient_only.steps = static_cast<int>(o.train.max_steps);
  o.workload = absl::GetFlag(FLAGS_workload);
  o.compute_scale = absl::GetFlag(FLAGS_compute_scale);
  if (!(o.compute_scale > 0) || !std::isfinite(o.compute_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compute_scale=", o.compute_scale, ": must be a finite number > 0"));
  }
  if (!o.workload.empty()) {
    ASSIGN_OR_RETURN(const proto::Workload workload, LoadWorkload(o.workload));
    RETURN_IF_ERROR(CheckModelSize(absl::StrCat("--workload=", o.workload), WorkloadParameters(workload),
                                   /*buffers=*/3));
    o.gradient_only.layers = ReplayLayers(workload, o.compute_scale);
    o.gradient_only.bucket_mb = o.train.bucket_mb;
    o.gradient_only.first_bucket_mb = o.train.first_bucket_mb;
  }
  o.timeline = absl::GetFlag(FLAGS_timeline);
  o.params_out = absl::GetFlag(FLAGS_params_out);
  return o;
}

absl::Status RunWorker(const WorkerOptions& options, ExchangeFactory make_exchange) {
  // One GPU per local rank, chosen before anything creates a CUDA context (on device 0 otherwise). A local
  // rank nobody gave is left to the exchange: the ring derives it from the ranks that share a host.
  if (options.train.device != "cpu" && !options.env.local_rank_source.empty()) {
    RETURN_IF_ERROR(SelectCudaDevice(options.env.local_rank, options.env.local_rank_source));
  }
  // Torn down after the training run (its engine included): safe because an exchange that fails aborts its
  // communication at once (NCCL: ncclCommAbort inside the failing call), so no collective kernel is left
  // spinning when the engine's cudaFree/cublasDestroy synchronise the device.
  ASSIGN_OR_RETURN(WorkerExchange made, make_exchange(options));
  std::unique_ptr<Timeline> timeline;
  if (!options.timeline.empty()) {
    timeline = std::make_unique<Timeline>(options.env.rank);
    made.exchange->set_timeline(timeline.get());
  }
  proto::WorkerResult result;
  if (options.gradient_only.bytes > 0 || !options.gradient_only.layers.empty()) {
    GradientOnlyOptions gradient_only = options.gradient_only;
    // --device=cuda: the exchanged buffers in device memory where the exchange takes it (NCCL), as training's.
    if (options.train.device == "cuda") {
      gradient_only.device = {AllocateCudaFloats, CopyFloatsToCuda, CopyFloatsFromCuda};
    }
    ASSIGN_OR_RETURN(result, RunGradientOnly(gradient_only, made.exchange.get()));
  } else {
    ASSIGN_OR_RETURN(result, TrainAndReport(options, made.exchange.get()));
  }
  if (made.finish) RETURN_IF_ERROR(made.finish());
  if (timeline != nullptr) {
    made.exchange->set_timeline(nullptr);
    RETURN_IF_ERROR(timeline->WriteJson(RankTimelinePath(options.timeline, options.env.rank)));
  }
  return PrintResultLine(result);
}

std::string RankTimelinePath(const std::string& pattern, int rank) {
  const std::string r = absl::StrCat(rank);
  if (absl::StrContains(pattern, "{rank}")) return absl::StrReplaceAll(pattern, {{"{rank}", r}});
  const size_t slash = pattern.rfind('/');
  const size_t dot = pattern.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return absl::StrCat(pattern, ".rank", r);
  }
  return absl::StrCat(pattern.substr(0, dot), ".rank", r, pattern.substr(dot));
}

int WorkerMain(int argc, char** argv, absl::string_view name, ExchangeFactory make_exchange) {
  return RunMain(argc, argv, name, [&](const std::vector<std::string>&) -> absl::Status {
    ASSIGN_OR_RETURN(const WorkerOptions options, WorkerOptionsFromFlags());
    return RunWorker(options, make_exchange);
  });
}

}  // namespace psring::trainer
