// The training loop shared by //trainer:train, //ring:ring_worker and //ps:worker.
//
//   TrainOptions opts = TrainOptionsFromFlags();           // trainer/train_flags.h
//   LocalExchange local;                                   // or a ring / PS exchange
//   ASSIGN_OR_RETURN(TrainResult r, Train(opts, &local));
//
// Every rank calls Train() with the same options and its own exchange; the DistributedSampler gives each rank
// a disjoint shard of every epoch. Rank 0 alone prints progress and writes checkpoints.
#ifndef PSRING_TRAINER_TRAIN_H_
#define PSRING_TRAINER_TRAIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/eval_held_out.h"
#include "trainer/exchange.h"
#include "trainer/straggler.h"

namespace psring::trainer {

struct TrainOptions {
  std::vector<int> hidden = {256, 256};  // hidden layer widths of the MLP
  int batch_size = 128;                  // per rank
  int epochs = 5;
  int64_t max_steps = -1;  // stop after this many steps (per rank) when >= 0
  // lr 0.03 / weight decay 1e-4: the default MLP reaches 88.3-89.2% test accuracy in 10 epochs (seeds 1-5);
  // lr 0.05 / 5e-4 ended at 87.7-87.9% on some seeds.
  float lr = 0.03f;
  float momentum = 0.9f;
  float weight_decay = 1e-4f;
  uint64_t seed = 1;
  std::string device = "auto";            // auto | cpu | cuda
  std::string dataset = "fashion-mnist";  // fashion-mnist | synthetic
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t synthetic_samples = 8192;  // training samples when dataset == synthetic
  std::string checkpoint_dir;        // empty: no checkpoints
  bool resume = false;               // continue from checkpoint_dir/latest
  int log_every = 50;                // steps between progress lines (0: none)
  bool evaluate = true;              // compute test accuracy at the end
  // A training loss that becomes non-finite (NaN, Inf) stops the run with an error naming the step; true:
  // rank 0 warns once and training goes on (a parameter server still refuses non-finite gradients).
  bool allow_nonfinite_loss = false;
  // Gradient buckets (trainer/exchange.h BucketPlan): cap in MiB, the first bucket's min(first_bucket_mb,
  // bucket_mb); each layer's gradient goes to the exchange as backward produces it. 0: one flat exchange after
  // backward (also what an exchange that does not overlap gets: SupportsBuckets() false, or buffers staged
  // through host).
  double bucket_mb = 0;
  double first_bucket_mb = kDefaultFirstBucketMb;
  // Steps at the start of this call that are trained but not measured (step_s, samples/s and the sums
  // below count the rest); capped so that at least one step is measured.
  int64_t warmup_steps = 0;
  // Injected stragglers (trainer/straggler.h): this rank sleeps before a step's forward pass for
  // (factor - 1) x its previous step's forward + backward, and for the pauses.
  StragglerOptions straggler;
  // Test accuracy on a fixed held-out subset every K steps, and the stop at a target (trainer/eval_held_out.h).
  HeldOutOptions held_out;
};

// Timing contract: the measured steps are the steps of this call after options.warmup_steps; every time and
// byte figure below except wall_seconds covers them only (no data loading, engine set-up, initial
// synchronisation, held-out evaluation pauses or final evaluation).
struct TrainResult {
  std::vector<float> params;    // final flat parameters (host copy)
  int64_t steps = 0;            // optimizer steps taken in this call (warm-up included)
  int64_t measured_steps = 0;   // steps - warm-up steps
  // Steps the job closed without this rank (a PS with backup workers) that it skipped, not in `steps`.
  int64_t skipped_steps = 0;
  double final_loss = 0;        // mean training loss of the last logged window, averaged across ranks
  double train_accuracy = 0;    // same window
  double test_accuracy = -1;    // on the full test set; -1 when not evaluated
  double loop_seconds = 0;      // wall time of the measured steps (the training loop only)
  double measured_start_unix_s = 0;  // wall clock (Unix seconds) when the measured steps began, and ended
  double measured_end_unix_s = 0;
  double host_cpu_busy = -1;    // this host's CPU over the measured steps (common/host_cpu.h; -1 unknown)
  double host_cpu_stall = -1;
  double injected_delay_seconds = 0;  // straggler delay injected over the measured steps (trainer/straggler.h)
  // Per measured step: when this rank's gradient was complete (backward ended), Unix seconds.
  std::vector<double> step_ready_unix_s;
  double compute_seconds = 0;   // batch assembly + forward + backward + optimizer, summed over measured steps
  double forward_seconds = 0;   // parts of compute_seconds (0 when the engine cannot tell them apart:
  double backward_seconds = 0;  // then backward_seconds holds forward + backward)
  double optimizer_seconds = 0;
  // Time the training thread spent in exchange calls, summed over measured steps: the exchange when flat,
  // only the part backward did not hide when bucketed (exposed_exchange_seconds is the same figure).
  double exchange_seconds = 0;
  int buckets = 1;                // gradient buckets per step
  uint64_t bytes_sent = 0;        // exchange payload during the measured steps
  uint64_t bytes_received = 0;
  // options.held_out.every > 0: rank 0's evaluations in order (empty on other ranks), and every rank's time
  // paused for them (left out of loop_seconds).
  std::vector<EvalPoint> evaluations;
  double eval_pause_seconds = 0;
  double wall_seconds = 0;        // the whole call
  double samples_per_second = 0;  // global (all ranks) throughput over the measured steps (loop_seconds)
  std::string device;             // the device actually used: "cpu" or "cuda"
};

// kInvalidArgument naming the flag, its value and the rule ("--batch_size=0: must be >= 1") when an option
// is out of range; Train() and TrainOptionsFromFlags() both check with it. Pure.
absl::Status ValidateTrainOptions(const TrainOptions& options);

// Runs training to the end (epochs or max_steps; with options.held_out.target, the first held-out evaluation
// that reaches it: trainer/eval_held_out.h). Blocks. Records spans (forward, backward per layer on CPU,
// the exchange waits, the optimizer) into exchange->timeline(), the same recorder the exchange records into. Steps the optimizer after each exchange when the
// exchange says the trainer owns it (GradientExchange::optimizer()); otherwise takes the parameters the
// exchange returns. kFailedPrecondition when options.checkpoint_dir or resume is set but the exchange's
// servers own the optimizer (the momentum is theirs: checkpoint on the servers). Errors from data, device or
// exchange are returned as they are, with context added.
absl::StatusOr<TrainResult> Train(const TrainOptions& options, GradientExchange* exchange);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_TRAIN_H_
