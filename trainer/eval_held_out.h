// Test accuracy during training: the model evaluated on a fixed held-out subset every K steps, and a stop at
// a target accuracy (--eval_every, --eval_samples, --target_accuracy; //bench:time_to_accuracy's measure).
//
// The subset is the first `samples` images of the test set (never trained on), the same for every run. Every
// rank calls Evaluate() at the same step counts: before the first step (step 0), after every multiple of
// `every`, and after the last step. One evaluation, on every rank:
//
//   1. Barrier                 every rank has finished step s (async PS: its own s-th step)
//   2. rank 0 evaluates        the current model: its own parameters when the trainer owns the optimizer
//                              (the ring's are the same on every rank), else the servers' parameters pulled
//                              into a side buffer (its training state is left as it was)
//   3. AverageMetrics({rank 0: reached ? N : 0, others 0})
//                              every rank learns whether accuracy >= target; if so all stop after step s
//
// So every rank stops after the same number of its own steps (sync exchanges end on one step; an async PS's
// ranks stop at the barrier of that evaluation). Rank 0 times 2 + 3 (everyone is held in 3 meanwhile) and
// leaves that pause out of the wall clock it reports; the barrier of 1 stays in (under async updates it is a
// synchronisation the run would not otherwise have, once per K steps). Rank 0 prints one line per evaluation:
//
//   PSRING_EVAL {"step":100,"wall_s":3.214000,"accuracy":0.845500,"samples":2000,"eval_s":0.031000}
//
// step: steps done; wall_s: seconds since the first step began, evaluation pauses left out; eval_s: this
// evaluation's pause.
//
//   HeldOutEvaluator eval(options.held_out, &test_set, exchange, engine);
//   ASSIGN_OR_RETURN(bool stop, eval.Evaluate(0));  eval.StartClock();
//   ... after each step: if (eval.Due(step, last)) { ASSIGN_OR_RETURN(stop, eval.Evaluate(step)); }
//
// Thread-compatible: belongs to one rank's training thread.
#ifndef PSRING_TRAINER_EVAL_HELD_OUT_H_
#define PSRING_TRAINER_EVAL_HELD_OUT_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/dataset.h"
#include "trainer/engine.h"
#include "trainer/exchange.h"

namespace psring::trainer {

struct HeldOutOptions {
  int64_t every = 0;       // steps between evaluations; 0: none
  int64_t samples = 2000;  // the first this many test images (capped at the test set's size)
  double target = 0;       // stop once the accuracy (a fraction) reaches it; 0: never stop early
};

// One evaluation as rank 0 saw it.
struct EvalPoint {
  int64_t step = 0;     // steps done when evaluated
  double wall_s = 0;    // seconds since the first step, evaluation pauses left out
  double accuracy = 0;  // correct / samples on the held-out subset
  int64_t samples = 0;
  double eval_s = 0;    // this evaluation's pause (step 2 + 3 above)
};

// kInvalidArgument naming the flag: every >= 0, samples >= 1, target in [0, 1] and > 0 only with every > 0.
absl::Status ValidateHeldOutOptions(const HeldOutOptions& options);

// "PSRING_EVAL {...}" (no newline), the line of the file comment.
std::string FormatEvalLine(const EvalPoint& point);

// The correct predictions and the count over test images first, first + stride, ... below end, in batches
// of engine->max_batch(). Blocks on the engine.
absl::StatusOr<BatchStats> CountCorrect(const Dataset& test, Engine* engine, int64_t first, int64_t stride,
                                        int64_t end);

// Test accuracy over the whole test set, shared among the ranks: each evaluates every world_size-th image,
// then the counts are averaged across ranks (mean correct / mean count is the global ratio). Every rank
// calls it.
absl::StatusOr<double> EvaluateTestSet(const Dataset& test, Engine* engine, GradientExchange* exchange);

class HeldOutEvaluator {
 public:
  // Everything must outlive the evaluator; `test` may be empty when options.every is 0.
  HeldOutEvaluator(const HeldOutOptions& options, const Dataset* test, GradientExchange* exchange,
                   Engine* engine);

  bool active() const { return options_.every > 0; }
  // Whether an evaluation follows after `steps_done` steps of a run that ends at `last_step`.
  bool Due(int64_t steps_done, int64_t last_step) const;
  // The wall clock's origin: call just before the first step (after the evaluation before it). Resets
  // paused_seconds().
  void StartClock();
  // The protocol of the file comment; true when every rank must stop (the target was reached). Errors of
  // the exchange or the engine as they are, with context.
  absl::StatusOr<bool> Evaluate(int64_t steps_done);

  // Seconds of evaluation pauses so far (left out of the wall clock and of the trainer's step times).
  double paused_seconds() const { return paused_seconds_; }
  const std::vector<EvalPoint>& points() const { return points_; }  // rank 0's; empty on other ranks

 private:
  using Clock = std::chrono::steady_clock;
  // Rank 0's accuracy on the subset with the current model (see 2. above).
  absl::StatusOr<EvalPoint> EvaluateSubset();

  const HeldOutOptions options_;
  const Dataset* const test_;
  GradientExchange* const exchange_;
  Engine* const engine_;
  Clock::time_point clock_start_;
  bool clock_started_ = false;
  double paused_seconds_ = 0;
  int64_t last_evaluated_ = -1;
  std::vector<EvalPoint> points_;
  std::vector<float> saved_;  // rank 0's parameters while the servers' are evaluated
  std::vector<float> pulled_;
};

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_EVAL_HELD_OUT_H_
