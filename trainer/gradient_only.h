// Gradient-only mode of the worker binaries (--model_bytes=S, the harness contract): no model; S bytes of
// float32 "gradients" go through any GradientExchange for warmup + measured steps, and the result is checked
// against a closed form, element by element and exactly (`wrong` counts the elements that differ at all).
// The closed form follows what the exchange reports (GradientExchange::optimizer()), never its name:
//
//   trainer owns the optimizer (ring, local): rank r sends f(r, i); after every measured step `grads` must
//     hold the mean m(i), compared after each step.
//   servers own it, one update on the mean per step (PS sync): rank r pushes f(r, i); the servers apply
//     SGD-momentum (trainer/optimizer.h, the exchange's hyperparameters) to m(i) once per step. After the
//     last step and a barrier, every rank reads the parameters back (PullParameters) and compares them with
//     the same steps run locally from the same initial parameters.
//   servers own it, one update per push on gradient / N with weight_decay / N (PS async): every rank pushes
//     the same m(i) (distinct values per rank would make the result depend on the arrival order), so the
//     servers take warmup + steps rounds of N identical updates; checked like the sync case.
//   servers own it, one update per step on the mean of the first N - B pushes (PS sync with backup workers):
//     which ranks make a step depends on arrival, so every rank pushes the same m(i) as in async; the mean
//     of any N - B copies is exactly m(i), so the check is the sync case's, and it still catches a dropped
//     push added (even in part), a push added twice or a wrong divisor. That a late push is left out while
//     the others count is tested with distinct values in tests/ps/backup_workers_test.cc.
//
// The values, for N ranks (any N <= kGradientOnlyMaxRanks):
//   f(r, i) = (2^15 + j(i) + (2r - (N - 1)) * s(i)) / 2^15,  j(i) = 1 + i mod 251,  s(i) = 1 + i mod 127
//   m(i)    = (2^15 + j(i)) / 2^15, in (1, 1 + 2^-7]          (the (2r - (N - 1)) terms sum to 0 over r)
// Why they stay exact:
//   - every f(r, i) is a positive integer below 2^16 times 2^-15, so any partial sum of N <= 256 of them, in
//     any order, is an integer below 256 * 2^16 = 2^24 times 2^-15: float32 holds it exactly, whatever order
//     the ring or the servers add in;
//   - the full sum is N * m(i) exactly, so sum / N (the servers) is exactly m(i); sum * float(1/N) (the TCP
//     ring) is m(i) * (1 + d) where float(1/N) = (1 + d) / N and |d| <= (127/128) * 2^-24 for every
//     N <= 256, and m(i) <= 1 + 2^-7 keeps |m(i) * d| below half the float spacing 2^-23 near 1, so it
//     rounds back to m(i) too. tests/trainer/gradient_only_test.cc checks both for every N and j.
// f differs between ranks at every index (by 2 s(i) / 2^15 per rank) and along the index within each rank
// (period 251 * 127 = 31877: a chunk or segment placed at the wrong offset changes the result). NCCL's
// average scales each rank's value before adding, which is not exact for N other than a power of two; NCCL
// runs at world size 1 on the GPU machines here, where it is.
//
// Replay mode (--workload, GradientOnlyOptions::layers not empty) runs the same values and checks through a
// real model's layout: the gradient is the model's layers (forward order), each step waits out every
// layer's forward time, then walks backward from the last layer, waiting out its backward time and handing
// its gradient to the exchange (BeginStep / GradientReady / FinishStep, buckets of --bucket_mb) as soon as
// it is "computed". The waits stand for a GPU that computes while the host CPU is free for communication.
#ifndef PSRING_TRAINER_GRADIENT_ONLY_H_
#define PSRING_TRAINER_GRADIENT_ONLY_H_

#include <cstddef>
#include <functional>
#include <iostream>
#include <ostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "absl/status/statusor.h"
#include "proto/results.pb.h"
#include "trainer/exchange.h"
#include "trainer/straggler.h"

namespace psring::trainer {

// The largest world size whose sums the values above keep exact (the scaling harness's --nodes limit).
inline constexpr int kGradientOnlyMaxRanks = 256;

// One layer of a replayed model (trainer/workload.h turns a profile into these, with its times scaled).
struct ReplayLayer {
  std::string name;
  size_t count = 0;  // floats of its gradient
  absl::Duration forward;
  absl::Duration backward;
};

// Device memory for the exchanged buffers (gradient-only mode with --device=cuda on an exchange that takes
// device memory, i.e. NCCL): the values are still written and checked on the host, but copied in before and
// out after each exchange, outside the timed part, so exchange_s is that of device-to-device collectives
// (what nccl-tests measures). All three set, or none (host buffers).
struct GradientOnlyDevice {
  // `count` floats of device memory, freed with the last copy of the pointer.
  std::function<absl::StatusOr<std::shared_ptr<float>>(size_t count)> allocate;
  // Blocking copies.
  std::function<absl::Status(float* device, const float* host, size_t count)> upload;
  std::function<absl::Status(float* host, const float* device, size_t count)> download;
};

struct GradientOnlyOptions {
  size_t bytes = 0;  // rounded down to whole floats; at least one float (and one per PS shard)
  // Replay mode when not empty: the model's layers in forward order; `bytes` is then ignored (the layers'
  // counts make the gradient) and the steps go through BeginStep/GradientReady/FinishStep.
  std::vector<ReplayLayer> layers;
  double bucket_mb = 0;  // replay mode: the bucket cap (trainer/exchange.h BucketPlan; 0: one flat exchange)
  double first_bucket_mb = kDefaultFirstBucketMb;  // replay mode: the first bucket's cap
  int warmup_steps = 2;
  int steps = 10;  // measured steps
  // Rank 0 prints one progress line to `log` after every log_every-th step, warm-up steps included (0: none):
  // "step [3/12] measured | 0.412 s" (the worker binaries' --log_every; //bench:scaling --verbose sets 1).
  int log_every = 0;
  std::ostream* log = &std::cerr;
  // Called by every rank right before its first measured step and right after its last one (benchmarks
  // snapshot server counters when all ranks got there). May be empty.
  std::function<void()> before_measured;
  std::function<void()> after_measured;
  // Used when set and the exchange AcceptsDeviceMemory(); otherwise host buffers.
  GradientOnlyDevice device;
  // Injected stragglers (trainer/straggler.h): replayed compute stretched, pauses before steps.
  StragglerOptions straggler;
};

// The value rank `rank` of `world_size` sends at `index` (the exactly averaged f above).
float GradientOnlyValue(int rank, int world_size, size_t index);
// The mean m(index) of GradientOnlyValue over the ranks.
float GradientOnlyMean(size_t index);
// The initial parameter every rank offers at `index` (server-owned optimizers).
float GradientOnlyInitialValue(size_t index);
// The parameters [0, count) servers with `optimizer`'s rule and hyperparameters must hold after `steps`
// steps of `world_size` ranks pushing GradientOnlyValue, from GradientOnlyInitialValue, applying the same
// float32 operations in the same order (what RunGradientOnly checks; chaos tests use it with the steps a
// restarted shard really applied).
std::vector<float> ExpectedServerParameters(const OptimizerInfo& optimizer, size_t count, int world_size,
                                            int steps);

// Runs the steps on `exchange` (not yet synchronised: this calls SyncInitialParameters) and checks the
// result. Every rank of the job calls it with the same options. Blocks; every wait is bounded by the
// exchange's timeouts. Returns this rank's PSRING_RESULT fields: exchange, rank, world_size, steps
// (measured), bytes, exchange_s (sum over measured steps), step_s (mean per measured step),
// bytes_sent/received (payload during measured steps) and wrong; compute_s and samples_per_s stay 0,
// test_accuracy -1. Replay mode adds forward_s, backward_s and compute_s (sums of the waits), buckets and
// bucket_mb, exposed_exchange_s (the time the step waited in FinishStep after backward: the exchange time
// that did not hide behind backward) and exchange_s = the time the exchange was under way, from the moment
// the first bucket was complete to the end of FinishStep (flat: = exposed_exchange_s). kInvalidArgument for
// bad options or a world size above kGradientOnlyMaxRanks; the exchange's errors as they are, with context.
absl::StatusOr<proto::WorkerResult> RunGradientOnly(const GradientOnlyOptions& options,
                                                    GradientExchange* exchange);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_GRADIENT_ONLY_H_
