#include "trainer/gradient_only.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/host_cpu.h"
#include "common/status_macros.h"
#include "trainer/optimizer.h"
#include "trainer/timeline.h"

namespace psring::trainer {
namespace {

constexpr float kUnit = 1.0f / 32768;  // 2^-15: the values are integers times this
constexpr size_t kMeanPeriod = 251;    // j(i)
constexpr size_t kSpreadPeriod = 127;  // s(i)

absl::Status Annotate(const absl::Status& status, absl::string_view what) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("gradient-only mode: ", what, ": ", status.message()));
}

// Waits until `deadline` (the end of a layer's compute). Deadlines accumulate from the step's start, so the
// sleeps' own overshoot does not add up over a model's hundreds of layers.
void WaitUntil(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left > absl::ZeroDuration()) absl::SleepFor(left);
}

// Where each step's time went (replay mode).
struct StepTimes {
  double forward_s = 0;
  double backward_s = 0;
  double exposed_s = 0;  // in FinishStep, after backward
  // From the moment the first bucket was complete (handed over whole) to the end of FinishStep: the time the
  // exchange was under way, hidden or not (flat: = exposed_s).
  double exchange_s = 0;
  double ready_unix_s = 0;  // when the last replayed step's backward ended (Unix seconds)
  double injected_s = 0;  // straggler delay added (trainer/straggler.h): pauses and stretched layer waits
};

// Sleeps `pause_s` before a step (trainer/straggler.h), recorded on the timeline and in `times`.
void Pause(double pause_s, Timeline* timeline, StepTimes* times) {
  if (pause_s <= 0) return;
  const int64_t begin_us = Timeline::NowMicros();
  absl::SleepFor(absl::Seconds(pause_s));
  timeline->Record("pause (injected)", kComputeTrack, begin_us, Timeline::NowMicros() - begin_us);
  times->injected_s += pause_s;
}

// One replayed step: forward waits, then backward from the last layer, each layer's gradient handed over as
// its wait ends, then the wait for the exchange. An injected straggler stretches every wait by `factor` (>= 1).
absl::Status ReplayStep(const GradientOnlyOptions& options, const BucketPlan& plan,
                        const std::vector<size_t>& offsets, int64_t step, double factor, FloatBuffer grads,
                        FloatBuffer params, GradientExchange* exchange, StepTimes* times) {
  Timeline* timeline = exchange->timeline();
  const absl::Time start = absl::Now();
  absl::Time deadline = start;
  // The compute times are the sums of the spans' own durations, so the timeline and the result line agree
  // whatever the calls between the spans cost.
  for (const ReplayLayer& layer : options.layers) {
    const int64_t begin_us = Timeline::NowMicros();
    deadline += layer.forward * factor;
    times->injected_s += absl::ToDoubleSeconds(layer.forward) * (factor - 1);
    WaitUntil(deadline);
    const int64_t dur_us = Timeline::NowMicros() - begin_us;
    timeline->Record(absl::StrCat("forward/", layer.name), kComputeTrack, begin_us, dur_us);
    times->forward_s += dur_us * 1e-6;
  }
  const absl::Time backward_start = absl::Now();
  RETURN_IF_ERROR(exchange->BeginStep(step, grads, params, plan));
  deadline = backward_start;
  // Layers are handed over last first, and bucket 0 holds the last layers: it is complete once that many
  // elements went over.
  const size_t first_bucket = plan.buckets().empty() ? 0 : plan.buckets()[0].count;
  size_t handed_over = 0;
  int64_t first_release_us = -1;
  for (size_t l = options.layers.size(); l-- > 0;) {
    const ReplayLayer& layer = options.layers[l];
    const int64_t begin_us = Timeline::NowMicros();
    deadline += layer.backward * factor;
    times->injected_s += absl::ToDoubleSeconds(layer.backward) * (factor - 1);
    WaitUntil(deadline);
    const int64_t dur_us = Timeline::NowMicros() - begin_us;
    timeline->Record(absl::StrCat("backward/", layer.name), kComputeTrack, begin_us, dur_us);
    times->backward_s += dur_us * 1e-6;
    // Stamped before the hand-over: the bucket cannot launch earlier, however late this thread runs after.
    handed_over += layer.count;
    if (first_release_us < 0 && handed_over >= first_bucket) first_release_us = Timeline::NowMicros();
    exchange->GradientReady(offsets[l], layer.count);
  }
  const int64_t wait_us = Timeline::NowMicros();
  times->ready_unix_s = absl::ToUnixMicros(absl::Now()) / 1e6;
  if (first_release_us < 0) first_release_us = wait_us;
  const absl::Status finished = exchange->FinishStep().status();
  const int64_t end_us = Timeline::NowMicros();
  const int64_t waited_us = end_us - wait_us;
  timeline->Record("wait for exchange", kComputeTrack, wait_us, waited_us);
  times->exposed_s += waited_us * 1e-6;
  times->exchange_s += (end_us - first_release_us) * 1e-6;
  return finished;
}

// (slowest - fastest) / median; 0 for fewer than two steps.
double StepSpread(std::vector<double> times) {
  if (times.size() < 2) return 0;
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  const double median = n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  return median > 0 ? (times.back() - times.front()) / median : 0;
}

int64_t CountWrong(const std::vector<float>& got, const std::vector<float>& want) {
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
  return wrong;
}

}  // namespace

// Initial parameters offered by every rank (server-owned optimizers); any values work, these vary.
float GradientOnlyInitialValue(size_t i) { return static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f; }

// The parameters the servers must hold after `steps` training steps of `world_size` ranks, from the same
// initial values, applying the same float32 operations in the same order.
std::vector<float> ExpectedServerParameters(const OptimizerInfo& optimizer, size_t count, int world_size,
                                            int steps) {
  std::vector<float> params(count), velocity(count, 0.0f), gradient(count);
  SgdOptions h = optimizer.server_hyperparameters;
  int updates = steps;
  for (size_t i = 0; i < count; ++i) {
    params[i] = GradientOnlyInitialValue(i);
    gradient[i] = GradientOnlyMean(i);
  }
  if (optimizer.server_update == ServerUpdate::kEachPush) {
    const float n = static_cast<float>(world_size);
    for (float& g : gradient) g /= n;
    h.weight_decay /= n;
    updates = steps * world_size;
  }
  for (int u = 0; u < updates; ++u)
    SgdMomentumStep(h, gradient.data(), params.data(), velocity.data(), count);
  return params;
}

float GradientOnlyValue(int rank, int world_size, size_t index) {
  const int64_t spread =
      (2 * static_cast<int64_t>(rank) - (world_size - 1)) * static_cast<int64_t>(1 + index % kSpreadPeriod);
  return static_cast<float>(32768 + static_cast<int64_t>(1 + index % kMeanPeriod) + spread) * kUnit;
}

float GradientOnlyMean(size_t index) { return static_cast<float>(32768 + 1 + index % kMeanPeriod) * kUnit; }

absl::StatusOr<proto::WorkerResult> RunGradientOnly(const GradientOnlyOptions& options,
                                                    GradientExchange* exchange) {
  const bool replay = !options.layers.empty();
  size_t count = options.bytes / sizeof(float);
  std::vector<size_t> offsets, layer_counts;
  if (replay) {
    count = 0;
    for (const ReplayLayer& layer : options.layers) {
      offsets.push_back(count);
      layer_counts.push_back(layer.count);
      count += layer.count;
    }
  }
  const int n = exchange->world_size();
  if (count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient-only mode needs --model_bytes >= 4 (one float); got ", options.bytes));
  }
  if (options.steps < 1 || options.warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("gradient-only mode needs --max_steps >= 1 (got ",
                                                   options.steps, ") and --warmup_steps >= 0 (got ",
                                                   options.warmup_steps, ")"));
  }
  if (n > kGradientOnlyMaxRanks) {
    return absl::InvalidArgumentError(absl::StrCat("gradient-only mode checks exact sums of at most ",
                                                   kGradientOnlyMaxRanks, " ranks; this job has ", n));
  }
  BucketPlan plan = BucketPlan::Flat(count);
  if (replay) {
    ASSIGN_OR_RETURN(plan, BucketPlan::Create(layer_counts, options.bucket_mb, options.first_bucket_mb));
  }
  std::vector<float> params(count), grads(count);
  for (size_t i = 0; i < count; ++i) params[i] = GradientOnlyInitialValue(i);
  FloatBuffer params_buffer{params.data(), count};
  FloatBuffer grads_buffer{grads.data(), count};
  const bool on_device = options.device.allocate && exchange->AcceptsDeviceMemory();
  std::shared_ptr<float> device_params, device_grads;
  if (on_device) {
    ASSIGN_OR_RETURN(device_params, options.device.allocate(count));
    ASSIGN_OR_RETURN(device_grads, options.device.allocate(count));
    RETURN_IF_ERROR(options.device.upload(device_params.get(), params.data(), count));
    params_buffer = {device_params.get(), count, MemoryKind::kCuda};
    grads_buffer = {device_grads.get(), count, MemoryKind::kCuda};
  }
  RETURN_IF_ERROR(Annotate(
      exchange->SetBucketPlan(plan, replay ? absl::StrCat("--bucket_mb=", options.bucket_mb,
                                                          " --first_bucket_mb=", options.first_bucket_mb)
                                           : "--bucket_mb=0"),
      "SetBucketPlan"));
  RETURN_IF_ERROR(Annotate(exchange->SyncInitialParameters(params_buffer), "SyncInitialParameters"));
  // Read after SyncInitialParameters: a PS learns its servers' update rule when it registers.
  const OptimizerInfo optimizer = exchange->optimizer();
  const bool trainer_owned = optimizer.owner == OptimizerOwner::kTrainer;
  // Which pushes an update takes depends on arrival order there, so only equal values give a closed form.
  const bool same_on_every_rank =
      optimizer.owner == OptimizerOwner::kServer && optimizer.server_update != ServerUpdate::kMeanPerStep;

  std::vector<float> mean(count), own;
  for (size_t i = 0; i < count; ++i) mean[i] = GradientOnlyMean(i);
  // This rank's gradient, computed once: per element it cost more CPU than the exchange moving it (a fifth of
  // a 64 MiB PS step's profile), and the benches count the process's CPU over the measured steps.
  if (!same_on_every_rank) {
    own.resize(count);
    for (size_t i = 0; i < count; ++i) own[i] = GradientOnlyValue(exchange->rank(), n, i);
  }
  const std::vector<float>& gradient = same_on_every_rank ? mean : own;
  proto::WorkerResult result;
  const int total = options.warmup_steps + options.steps;
  uint64_t sent0 = 0, received0 = 0;
  HostCpuReading cpu_at_start = ReadHostCpu();  // re-read when the measured steps begin
  int64_t wrong = 0;
  double exchange_s = 0;  // the measured steps' time (replay mode: compute and exchange)
  StepTimes times;
  Straggler straggler(options.straggler, exchange->rank());
  std::vector<double> step_times;  // wall time of each measured step
  for (int step = 0; step < total; ++step) {
    const bool measured = step >= options.warmup_steps;
    if (step == options.warmup_steps) {
      if (options.before_measured) options.before_measured();
      // Measured steps start together on every rank.
      RETURN_IF_ERROR(Annotate(exchange->Barrier(), "barrier before the measured steps"));
      sent0 = exchange->bytes_sent();
      received0 = exchange->bytes_received();
      times = StepTimes();
      result.set_measured_start_unix_s(absl::ToUnixMicros(absl::Now()) / 1e6);
      cpu_at_start = ReadHostCpu();
    }
    // Trainer-owned exchanges average in place, so the values are written again before every step.
    std::copy(gradient.begin(), gradient.end(), grads.begin());
    if (on_device) RETURN_IF_ERROR(options.device.upload(grads_buffer.data, grads.data(), count));
    const double factor = straggler.StepFactor(step);
    const double pause_s = straggler.PauseSeconds(step);
    // A pause is part of a replayed step (compute time); in gradient mode it stays out of the exchange's time.
    if (!replay) Pause(pause_s, exchange->timeline(), &times);
    const absl::Time start = absl::Now();
    if (replay) Pause(pause_s, exchange->timeline(), &times);
    if (replay) {
      RETURN_IF_ERROR(Annotate(
          ReplayStep(options, plan, offsets, step, factor, grads_buffer, params_buffer, exchange, &times),
          absl::StrCat("step ", step)));
    } else {
      RETURN_IF_ERROR(Annotate(exchange->Exchange(step, grads_buffer, params_buffer).status(),
                               absl::StrCat("step ", step)));
    }
    const double step_s = absl::ToDoubleSeconds(absl::Now() - start);
    if (options.log_every > 0 && exchange->rank() == 0 && (step + 1) % options.log_every == 0) {
      *options.log << absl::StrFormat("step [%d/%d] %s | %.3f s\n", step + 1, total,
                                      measured ? "measured" : "warm-up", step_s)
                   << std::flush;
    }
    if (!measured) continue;
    step_times.push_back(step_s);
    // Replay: the end of backward; gradient mode: the step's start (the gradient is ready at once).
    result.add_step_ready_unix_s(replay ? times.ready_unix_s : absl::ToUnixMicros(start) / 1e6);
    exchange_s += step_s;
    if (on_device) RETURN_IF_ERROR(options.device.download(grads.data(), grads_buffer.data, count));
    if (trainer_owned) wrong += CountWrong(grads, mean);
  }
  result.set_measured_end_unix_s(absl::ToUnixMicros(absl::Now()) / 1e6);
  const HostCpuUse cpu = HostCpuBetween(cpu_at_start, ReadHostCpu());
  result.set_host_cpu_busy(cpu.busy);
  result.set_host_cpu_stall(cpu.stall);
  result.set_bytes_sent(static_cast<double>(exchange->bytes_sent() - sent0));
  result.set_bytes_received(static_cast<double>(exchange->bytes_received() - received0));
  if (options.after_measured) options.after_measured();
  // Nobody leaves while a ring neighbour may still be receiving from it, and once every rank is past this
  // barrier every push is in: the servers' parameters are final.
  RETURN_IF_ERROR(Annotate(exchange->Barrier(), "barrier after the measured steps"));
  if (!trainer_owned) {
    RETURN_IF_ERROR(Annotate(exchange->PullParameters(params_buffer), "reading the parameters back"));
    wrong = CountWrong(params, ExpectedServerParameters(optimizer, count, n, total));
  }
  result.set_exchange(exchange->name());
  result.set_rank(exchange->rank());
  result.set_world_size(n);
  result.set_steps(options.steps);
  result.set_bytes(static_cast<double>(count * sizeof(float)));
  if (replay) {
    result.set_forward_s(times.forward_s);
    result.set_backward_s(times.backward_s);
    result.set_compute_s(times.forward_s + times.backward_s);
    result.set_exchange_s(times.exchange_s);
    result.set_exposed_exchange_s(times.exposed_s);
    result.set_buckets(static_cast<double>(plan.buckets().size()));
    result.set_bucket_mb(options.bucket_mb);
  } else {
    result.set_exchange_s(exchange_s);
  }
  // The steps themselves: refilling the values and checking them are the harness's work, not training's.
  result.set_step_s(exchange_s / options.steps);
  result.set_step_spread(StepSpread(step_times));
  result.set_wrong(static_cast<double>(wrong));
  result.set_injected_delay_s(times.injected_s);
  return result;
}

}  // namespace psring::trainer
