#include "ps/gradient_only.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "trainer/optimizer.h"

namespace psring::ps {
namespace {

float InitialValue(size_t i) { return static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f; }
float BaseGradient(size_t i) { return static_cast<float>(i % 1013) * 1e-3f - 0.5f; }

}  // namespace

absl::StatusOr<WorkerResult> RunGradientOnly(const GradientOnlyOptions& options, PsExchange* exchange) {
  const size_t count = options.bytes / sizeof(float);
  if (count < static_cast<size_t>(exchange->num_shards())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model_bytes=", options.bytes, " gives fewer floats than the ", exchange->num_shards(), " shards"));
  }
  if (options.steps < 1 || options.warmup_steps < 0) {
    return absl::InvalidArgumentError("gradient-only mode needs --max_steps >= 1 and --warmup_steps >= 0");
  }
  std::vector<float> params(count), grads(count);
  for (size_t i = 0; i < count; ++i) params[i] = InitialValue(i);
  const trainer::FloatBuffer params_buffer{params.data(), count};
  const trainer::FloatBuffer grads_buffer{grads.data(), count};
  RETURN_IF_ERROR(exchange->SyncInitialParameters(params_buffer));
  const bool async = exchange->name() == "ps-async";
  const int n = exchange->world_size();
  const float scale = async ? 1.0f : static_cast<float>(exchange->rank() + 1);
  for (size_t i = 0; i < count; ++i) grads[i] = scale * BaseGradient(i);

  WorkerResult result;
  result.bytes = count * sizeof(float);
  const int total = options.warmup_steps + options.steps;
  uint64_t sent0 = 0, received0 = 0;
  for (int step = 0; step < total; ++step) {
    if (step == options.warmup_steps) {
      if (options.before_measured) options.before_measured();
      RETURN_IF_ERROR(exchange->Barrier());
      sent0 = exchange->bytes_sent();
      received0 = exchange->bytes_received();
    }
    const absl::Time start = absl::Now();
    ASSIGN_OR_RETURN(trainer::ExchangeOutcome outcome, exchange->Exchange(step, grads_buffer, params_buffer));
    (void)outcome;  // always kParametersUpdated
    if (step >= options.warmup_steps) result.exchange_s += absl::ToDoubleSeconds(absl::Now() - start);
  }
  result.steps = options.steps;
  result.step_s = result.exchange_s / options.steps;
  result.bytes_sent = exchange->bytes_sent() - sent0;
  result.bytes_received = exchange->bytes_received() - received0;

  if (options.after_measured) options.after_measured();
  // Every rank's pushes are in once all passed the barrier; then the servers' state is final.
  RETURN_IF_ERROR(exchange->Barrier());
  RETURN_IF_ERROR(exchange->Pull(params_buffer));

  std::vector<float> expected(count), velocity(count, 0.0f), gradient(count);
  trainer::SgdOptions h = exchange->hyperparameters();
  for (size_t i = 0; i < count; ++i) {
    expected[i] = InitialValue(i);
    if (async) {
      gradient[i] = BaseGradient(i) / static_cast<float>(n);
    } else {
      float sum = BaseGradient(i);
      for (int r = 1; r < n; ++r) sum += static_cast<float>(r + 1) * BaseGradient(i);
      gradient[i] = sum / static_cast<float>(n);
    }
  }
  int applications = total;
  if (async) {
    h.weight_decay /= static_cast<float>(n);
    applications = total * n;
  }
  for (int s = 0; s < applications; ++s)
    trainer::SgdMomentumStep(h, gradient.data(), expected.data(), velocity.data(), count);
  for (size_t i = 0; i < count; ++i) result.wrong += params[i] != expected[i];
  result.exchange = exchange->name();
  result.rank = exchange->rank();
  result.world_size = n;
  return result;
}

}  // namespace psring::ps
