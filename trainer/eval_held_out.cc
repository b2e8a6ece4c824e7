#include "trainer/eval_held_out.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "common/status_macros.h"

namespace psring::trainer {

absl::Status ValidateHeldOutOptions(const HeldOutOptions& o) {
  if (o.every < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--eval_every=", o.every, ": must be >= 0 (0: no evaluation)"));
  }
  if (o.samples < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--eval_samples=", o.samples, ": must be >= 1 test images"));
  }
  if (!(o.target >= 0 && o.target <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--target_accuracy=", o.target, ": must be a fraction in [0, 1], e.g. 0.85 for 85 % (0: no target)"));
  }
  if (o.target > 0 && o.every == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--target_accuracy=", o.target, ": needs --eval_every=K > 0 (the target is checked at every evaluation)"));
  }
  return absl::OkStatus();
}

std::string FormatEvalLine(const EvalPoint& p) {
  return absl::StrFormat(R"(PSRING_EVAL {"step":%d,"wall_s":%.6f,"accuracy":%.6f,"samples":%d,"eval_s":%.6f})",
                         p.step, p.wall_s, p.accuracy, p.samples, p.eval_s);
}

absl::StatusOr<BatchStats> CountCorrect(const Dataset& test, Engine* engine, int64_t first, int64_t stride,
                                        int64_t end) {
  const int batch = engine->max_batch();
  std::vector<float> images(static_cast<size_t>(batch) * test.dim);
  std::vector<int32_t> labels(batch);
  BatchStats total;
  int filled = 0;
  auto flush = [&]() -> absl::Status {
    if (filled == 0) return absl::OkStatus();
    ASSIGN_OR_RETURN(BatchStats s, engine->Evaluate(images.data(), labels.data(), filled));
    total.correct += s.correct;
    total.count += s.count;
    total.loss_sum += s.loss_sum;
    filled = 0;
    return absl::OkStatus();
  };
  end = std::min(end, test.size);
  for (int64_t i = first; i < end; i += stride) {
    std::copy(test.image(i), test.image(i) + test.dim, images.begin() + static_cast<size_t>(filled) * test.dim);
    labels[filled++] = test.labels[i];
    if (filled == batch) RETURN_IF_ERROR(flush());
  }
  RETURN_IF_ERROR(flush());
  return total;
}

absl::StatusOr<double> EvaluateTestSet(const Dataset& test, Engine* engine, GradientExchange* exchange) {
  ASSIGN_OR_RETURN(const BatchStats s,
                   CountCorrect(test, engine, exchange->rank(), exchange->world_size(), test.size));
  double sums[2] = {static_cast<double>(s.correct), static_cast<double>(s.count)};
  RETURN_IF_ERROR(exchange->AverageMetrics(absl::MakeSpan(sums, 2)));
  return sums[1] > 0 ? sums[0] / sums[1] : 0.0;
}

HeldOutEvaluator::HeldOutEvaluator(const HeldOutOptions& options, const Dataset* test, GradientExchange* exchange,
                                   Engine* engine)
    : options_(options), test_(test), exchange_(exchange), engine_(engine) {}

bool HeldOutEvaluator::Due(int64_t steps_done, int64_t last_step) const {
  if (!active() || steps_done == last_evaluated_) return false;
  return steps_done % options_.every == 0 || steps_done == last_step;
}

void HeldOutEvaluator::StartClock() {
  clock_start_ = Clock::now();
  clock_started_ = true;
  paused_seconds_ = 0;
}

absl::StatusOr<EvalPoint> HeldOutEvaluator::EvaluateSubset() {
  const bool servers_own = exchange_->optimizer().owner != OptimizerOwner::kTrainer;
  if (servers_own) {
    const size_t n = engine_->layout().num_params();
    saved_.resize(n);
    pulled_.resize(n);
    RETURN_IF_ERROR(engine_->GetParams(absl::MakeSpan(saved_)));
    RETURN_IF_ERROR(Annotate(exchange_->PullParameters({pulled_.data(), n, MemoryKind::kHost}),
                             "pulling the servers' parameters to evaluate them"));
    RETURN_IF_ERROR(engine_->SetParams(pulled_));
  }
  absl::StatusOr<BatchStats> counted = CountCorrect(*test_, engine_, 0, 1, options_.samples);
  if (servers_own) RETURN_IF_ERROR(engine_->SetParams(saved_));
  if (!counted.ok()) return Annotate(counted.status(), "evaluating the held-out subset");
  EvalPoint point;
  point.samples = counted->count;
  point.accuracy = counted->count > 0 ? static_cast<double>(counted->correct) / counted->count : 0.0;
  return point;
}

absl::StatusOr<bool> HeldOutEvaluator::Evaluate(int64_t steps_done) {
  last_evaluated_ = steps_done;
  RETURN_IF_ERROR(Annotate(exchange_->Barrier(), absl::StrCat("barrier before the evaluation at step ", steps_done)));
  const Clock::time_point pause_start = Clock::now();
  const bool chief = exchange_->rank() == 0;
  EvalPoint point;
  if (chief) {
    ASSIGN_OR_RETURN(point, EvaluateSubset());
  }
  const bool reached = chief && options_.target > 0 && point.accuracy >= options_.target;
  double vote[1] = {reached ? static_cast<double>(exchange_->world_size()) : 0.0};
  RETURN_IF_ERROR(Annotate(exchange_->AverageMetrics(absl::MakeSpan(vote, 1)),
                           absl::StrCat("sharing the evaluation at step ", steps_done)));
  const Clock::time_point pause_end = Clock::now();
  const double pause = std::chrono::duration<double>(pause_end - pause_start).count();
  if (chief) {
    point.step = steps_done;
    // Before StartClock (the evaluation before the first step): 0.
    point.wall_s = clock_started_
                       ? std::chrono::duration<double>(pause_start - clock_start_).count() - paused_seconds_
                       : 0.0;
    point.eval_s = pause;
    points_.push_back(point);
    std::printf("%s\n", FormatEvalLine(point).c_str());
    std::fflush(stdout);
  }
  paused_seconds_ += pause;
  // Every rank holds the same vote (N / N exactly, or 0).
  return vote[0] > 0.5;
}

}  // namespace psring::trainer
