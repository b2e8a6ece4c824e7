#include "ring/gradient_only.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace psring::ring {

float GradientOnlyValue(int rank, size_t index) {
  return static_cast<float>(index % 4093 + 4096 * static_cast<size_t>(rank + 1));
}

absl::StatusOr<GradientOnlyResult> RunGradientOnly(const GradientOnlyOptions& options,
                                                   RingExchange* exchange) {
  if (options.steps < 1 || options.warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("gradient-only mode needs --max_steps >= 1 (got ",
                                                   options.steps, ") and --warmup_steps >= 0 (got ",
                                                   options.warmup_steps, ")"));
  }
  const size_t count = options.bytes / sizeof(float);
  const int n = exchange->world_size();
  std::vector<float> grads(count), expected(count);
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < n; ++r) sum += GradientOnlyValue(r, i);
    expected[i] = n == 1 ? sum : sum * (1.0f / static_cast<float>(n));
  }
  const trainer::FloatBuffer grads_buffer{grads.data(), count};
  GradientOnlyResult result;
  ProcessGroup* group = exchange->group();
  uint64_t sent0 = 0, received0 = 0;
  for (int step = 0; step < options.warmup_steps + options.steps; ++step) {
    for (size_t i = 0; i < count; ++i) grads[i] = GradientOnlyValue(exchange->rank(), i);
    const bool measured = step >= options.warmup_steps;
    if (step == options.warmup_steps) {
      RETURN_IF_ERROR(exchange->Barrier());  // measured steps start together on every rank
      sent0 = group->bytes_sent();
      received0 = group->bytes_received();
    }
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(exchange->Exchange(step, grads_buffer, trainer::FloatBuffer{}).status());
    if (!measured) continue;
    result.exchange_seconds += absl::ToDoubleSeconds(absl::Now() - start);
    for (size_t i = 0; i < count; ++i) result.wrong += grads[i] != expected[i];
  }
  result.bytes_sent = group->bytes_sent() - sent0;
  result.bytes_received = group->bytes_received() - received0;
  result.steps = options.steps;
  result.step_seconds = result.exchange_seconds / options.steps;
  return result;
}

}  // namespace psring::ring
