#include "trainer/train.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/host_cpu.h"
#include "common/status_macros.h"
#include "trainer/checkpoint.h"
#include "trainer/train_checkpoint.h"
#include "trainer/cpu_kernels.h"
#include "trainer/dataset.h"
#include "trainer/engine.h"
#include "trainer/limits.h"
#include "trainer/mlp.h"
#include "trainer/sampler.h"

namespace psring::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Test split size of the synthetic data set.
constexpr int64_t kSyntheticTestSamples = 2048;

absl::StatusOr<Dataset> LoadSplit(const TrainOptions& o, Split split) {
  if (o.dataset == "synthetic") {
    return MakeSyntheticDataset(split == Split::kTrain ? o.synthetic_samples : kSyntheticTestSamples, o.seed,
                                split);
  }
  return LoadFashionMnist(o.data_dir, split);
}

std::string FormatRate(double samples_per_second) {
  if (samples_per_second >= 1e6) return absl::StrFormat("%.1fM", samples_per_second / 1e6);
  if (samples_per_second >= 1e3) return absl::StrFormat("%.0fk", samples_per_second / 1e3);
  return absl::StrFormat("%.0f", samples_per_second);
}

// Moves the flat buffers between the engine and an exchange that may not accept device memory: when it
// cannot, gradients (and parameters) are staged through host vectors around each exchange call.
class ExchangeAdapter {
 public:
  // `trainer_steps`: the exchange averages gradients (else it returns new parameters).
  ExchangeAdapter(GradientExchange* exchange, Engine* engine, bool trainer_steps)
      : exchange_(exchange),
        engine_(engine),
        trainer_steps_(trainer_steps),
        staged_(engine->params().memory == MemoryKind::kCuda && !exchange->AcceptsDeviceMemory()) {
    if (staged_) {
      host_params_.resize(engine->layout().num_params());
      host_grads_.resize(engine->layout().num_params());
    }
  }

  bool staged() const { return staged_; }

  // The bucketed step (GradientExchange::BeginStep): only without staging, where the exchange works on the
  // engine's own buffers as backward writes them.
  absl::Status BeginStep(int64_t step, const BucketPlan& plan) {
    return exchange_->BeginStep(step, engine_->grads(), engine_->params(), plan);
  }
  void GradientReady(size_t offset, size_t count) { exchange_->GradientReady(offset, count); }
  absl::Status FinishStep() { return Checked(exchange_->FinishStep()); }

  absl::Status SyncInitialParameters() {
    if (!staged_) return exchange_->SyncInitialParameters(engine_->params());
    RETURN_IF_ERROR(engine_->GetParams(absl::MakeSpan(host_params_)));
    RETURN_IF_ERROR(exchange_->SyncInitialParameters(HostBuffer(&host_params_)));
    return engine_->SetParams(host_params_);
  }

  absl::Status Exchange(int64_t step) {
    if (!staged_) return Checked(exchange_->Exchange(step, engine_->grads(), engine_->params()));
    RETURN_IF_ERROR(engine_->GetGrads(absl::MakeSpan(host_grads_)));
    // Exchanges that update parameters remotely may read them too, so the host copy is kept current.
    RETURN_IF_ERROR(engine_->GetParams(absl::MakeSpan(host_params_)));
    RETURN_IF_ERROR(Checked(exchange_->Exchange(step, HostBuffer(&host_grads_), HostBuffer(&host_params_))));
    return trainer_steps_ ? engine_->SetGrads(host_grads_) : engine_->SetParams(host_params_);
  }

 private:
  static FloatBuffer HostBuffer(std::vector<float>* v) { return {v->data(), v->size(), MemoryKind::kHost}; }

  // The outcome must be the one the exchange's optimizer owner promises, or the trainer would step on (or
  // skip) the wrong buffer.
  absl::Status Checked(const absl::StatusOr<ExchangeOutcome>& outcome) const {
    if (!outcome.ok()) return outcome.status();
    const ExchangeOutcome expected =
        trainer_steps_ ? ExchangeOutcome::kGradientsAveraged : ExchangeOutcome::kParametersUpdated;
    if (*outcome != expected) {
      return absl::InternalError(absl::StrCat("exchange ", exchange_->name(),
                                              " returned an outcome that contradicts its optimizer owner"));
    }
    return absl::OkStatus();
  }

  GradientExchange* exchange_;
  Engine* engine_;
  bool trainer_steps_;
  bool staged_;
  std::vector<float> host_params_;
  std::vector<float> host_grads_;
};

// Loss/accuracy/sample sums since the last progress line.
struct Window {
  double loss_sum = 0;
  double correct = 0;
  double count = 0;
  Clock::time_point start = Clock::now();

  void Add(const BatchStats& s) {
    loss_sum += s.loss_sum;
    correct += static_cast<double>(s.correct);
    count += static_cast<double>(s.count);
  }
};

// One call of Train(): the data, the engine and the loop state, set up by Create and then run.
class TrainingRun {
 public:
  // Resolves the device, loads the data, builds the engine with its initial (or resumed) parameters and
  // synchronises them through the exchange. Blocks.
  static absl::StatusOr<std::unique_ptr<TrainingRun>> Create(const TrainOptions& options,
                                                             GradientExchange* exchange) {
    std::unique_ptr<TrainingRun> run(new TrainingRun(options, exchange));
    RETURN_IF_ERROR(run->LoadData());
    RETURN_IF_ERROR(run->BuildEngine());
    RETURN_IF_ERROR(run->PlanSteps());
    RETURN_IF_ERROR(run->Synchronize());
    run->held_out_ = std::make_unique<HeldOutEvaluator>(options.held_out, &run->test_set_, exchange,
                                                        run->engine_.get());
    return run;
  }

  // Trains until the last step, checkpointing (rank 0) at every epoch end. Blocks.
  absl::Status TrainToTheEnd() {
    const int64_t steps_per_epoch = steps_per_epoch_;
    // At least one measured step (when there is any step at all).
    warmup_ = std::max<int64_t>(0, std::min(options_.warmup_steps, last_step_ - step_ - 1));
    if (held_out_->active()) {  // the model before the first step; the wall clock starts after it
      RETURN_IF_ERROR(EvaluateHeldOut());
      held_out_->StartClock();
    }
    if (warmup_ == 0) StartMeasuring();
    // Steps the job closed without this rank (a PS with backup workers) still to skip: each is passed over
    // like a step (its batch unused) so that evaluations and metrics windows, which are barriers, come at the
    // same job step on every rank.
    int64_t skip = 0;
    while (step_ < last_step_) {
      const int64_t epoch = step_ / steps_per_epoch;
      const std::vector<int64_t> indices = sampler_->Indices(epoch);
      for (int64_t b = step_ % steps_per_epoch; b < steps_per_epoch && step_ < last_step_; ++b) {
        if (skip > 0) {
          --skip;
          ++step_;
          ++result_.skipped_steps;
        } else {
          RETURN_IF_ERROR(Step(indices, b));
          skip = exchange_->TakeSkippedSteps();
        }
        if (held_out_->Due(step_, last_step_)) RETURN_IF_ERROR(EvaluateHeldOut());
        const bool log_now = options_.log_every > 0 && (b + 1) % options_.log_every == 0;
        if (log_now || step_ == last_step_) RETURN_IF_ERROR(CloseWindow(epoch, b));
      }
      // Every epoch end and the final step leave a checkpoint; both may coincide.
      if (chief_ && !options_.checkpoint_dir.empty()) {
        RETURN_IF_ERROR(SaveState(options_, engine_.get(), world_, step_, steps_per_epoch));
        std::fprintf(stderr,
                     "psring: wrote checkpoint %s (step %ld, epoch %ld; --resume continues from it)\n",
                     LatestCheckpointPath(options_.checkpoint_dir).c_str(), static_cast<long>(step_),
                     static_cast<long>(step_ / steps_per_epoch));
      }
    }
    result_.evaluations = held_out_->points();
    result_.eval_pause_seconds = held_out_->paused_seconds();
    if (measuring_) {
      result_.loop_seconds = SecondsSince(loop_start_) - (held_out_->paused_seconds() - paused_at_start_);
      result_.measured_end_unix_s = absl::ToUnixMicros(absl::Now()) / 1e6;
      const HostCpuUse cpu = HostCpuBetween(cpu_at_start_, ReadHostCpu());
      result_.host_cpu_busy = cpu.busy;
      result_.host_cpu_stall = cpu.stall;
      result_.bytes_sent = exchange_->bytes_sent() - sent_at_start_;
      result_.bytes_received = exchange_->bytes_received() - received_at_start_;
    }
    result_.samples_per_second = result_.loop_seconds > 0
                                     ? static_cast<double>(result_.measured_steps) * options_.batch_size *
                                           world_ / result_.loop_seconds
                                     : 0;
    return absl::OkStatus();
  }

  // Evaluates the test set (when asked) and returns the result with the final parameters; wall_seconds is
  // the caller's.
  absl::StatusOr<TrainResult> Finish() {
    if (options_.evaluate) {
      ASSIGN_OR_RETURN(result_.test_accuracy, EvaluateTestSet(test_set_, engine_.get(), exchange_));
      if (chief_) {
        std::printf("test accuracy: %.2f%% (%ld images)\n", 100.0 * result_.test_accuracy,
                    static_cast<long>(test_set_.size));
        std::fflush(stdout);
      }
    }
    result_.params.resize(engine_->layout().num_params());
    RETURN_IF_ERROR(engine_->GetParams(absl::MakeSpan(result_.params)));
    return std::move(result_);
  }

 private:
  TrainingRun(const TrainOptions& options, GradientExchange* exchange)
      : options_(options),
        exchange_(exchange),
        world_(exchange->world_size()),
        chief_(exchange->rank() == 0),
        trainer_steps_(exchange->optimizer().owner == OptimizerOwner::kTrainer),
        sgd_{options.lr, options.momentum, options.weight_decay},
        straggler_(options.straggler, exchange->rank()) {}

  absl::Status LoadData() {
    if (chief_ && !options_.checkpoint_dir.empty())
      RETURN_IF_ERROR(PrepareCheckpointDir(options_.checkpoint_dir));
    std::string note;
    ASSIGN_OR_RETURN(result_.device, ResolveDevice(options_.device, &note));
    if (!note.empty() && chief_) {  // rank 0 only: every rank of a job falls back alike
      std::fprintf(stderr, "psring: --device=%s: %s\n", options_.device.c_str(), note.c_str());
    }
    absl::StatusOr<Dataset> train_set = LoadSplit(options_, Split::kTrain);
    if (!train_set.ok()) return Annotate(train_set.status(), "loading the training set");
    train_set_ = std::move(train_set).value();
    RETURN_IF_ERROR(CheckBatchFits(train_set_.size, world_, options_.batch_size));  // before any batch buffer
    if (options_.evaluate || options_.held_out.every > 0) {
      absl::StatusOr<Dataset> test_set = LoadSplit(options_, Split::kTest);
      if (!test_set.ok()) return Annotate(test_set.status(), "loading the test set");
      test_set_ = std::move(test_set).value();
    }
    return absl::OkStatus();
  }

  absl::Status BuildEngine() {
    ASSIGN_OR_RETURN(MlpLayout layout,
                     MlpLayout::Create(train_set_.dim, options_.hidden, train_set_.num_classes));
    RETURN_IF_ERROR(CheckMlpSize(train_set_.dim, options_.hidden, train_set_.num_classes));
    RETURN_IF_ERROR(
        CheckTrainingMemory(train_set_.dim, options_.hidden, train_set_.num_classes, options_.batch_size));
    ASSIGN_OR_RETURN(engine_, CreateEngine(result_.device, layout, options_.batch_size));
    std::vector<float> initial(layout.num_params());
    InitParameters(layout, options_.seed, absl::MakeSpan(initial));
    RETURN_IF_ERROR(engine_->SetParams(initial));
    batch_images_.resize(static_cast<size_t>(options_.batch_size) * train_set_.dim);
    batch_labels_.resize(options_.batch_size);
    return absl::OkStatus();
  }

  // This rank's share of every epoch, the last step, and where a resumed run starts.
  absl::Status PlanSteps() {
    ASSIGN_OR_RETURN(DistributedSampler sampler,
                     DistributedSampler::Create(train_set_.size, world_, exchange_->rank(), /*shuffle=*/true,
                                                options_.seed));
    sampler_ = std::make_unique<DistributedSampler>(std::move(sampler));
    steps_per_epoch_ = sampler_->num_samples() / options_.batch_size;
    if (steps_per_epoch_ < 1) {
      return absl::InvalidArgumentError(absl::StrCat("each rank gets ", sampler_->num_samples(),
                                                     " training samples per epoch, fewer than one batch of ",
                                                     options_.batch_size, "; lower --batch_size"));
    }
    const int64_t total_steps = steps_per_epoch_ * options_.epochs;
    last_step_ = options_.max_steps >= 0 ? std::min(total_steps, options_.max_steps) : total_steps;
    if (options_.resume) {
      ASSIGN_OR_RETURN(step_, RestoreState(options_, engine_.get(), world_));
      RETURN_IF_ERROR(CheckResumeStep(step_, last_step_));
      if (chief_)
        std::fprintf(stderr, "psring: resuming at step %ld (epoch %ld)\n", static_cast<long>(step_),
                     static_cast<long>(step_ / steps_per_epoch_ + 1));
    }
    return absl::OkStatus();
  }

  absl::Status Synchronize() {
    adapter_ = std::make_unique<ExchangeAdapter>(exchange_, engine_.get(), trainer_steps_);
    // Before registering: a parameter server lays the elements out by bucket (ps/shard_layout.h).
    RETURN_IF_ERROR(PlanBuckets());
    RETURN_IF_ERROR(Annotate(
        exchange_->SetBucketPlan(*plan_, absl::StrCat("--bucket_mb=", options_.bucket_mb,
                                                      " --first_bucket_mb=", options_.first_bucket_mb)),
        absl::StrCat("exchange ", exchange_->name(), ": SetBucketPlan")));
    RETURN_IF_ERROR(Annotate(adapter_->SyncInitialParameters(),
                             absl::StrCat("exchange ", exchange_->name(), ": SyncInitialParameters")));
    if (chief_) {
      const MlpLayout& layout = engine_->layout();
      std::vector<int> widths = {layout.input_dim()};
      widths.insert(widths.end(), options_.hidden.begin(), options_.hidden.end());
      widths.push_back(layout.num_classes());
      std::fprintf(stderr,
                   "psring: training MLP %s (%zu parameters, %.1f MB) on %s, exchange %s, world size %d%s\n",
                   absl::StrJoin(widths, "-").c_str(), layout.num_params(), layout.num_params() * 4.0 / 1e6,
                   result_.device.c_str(), exchange_->name().c_str(), world_,
                   adapter_->staged() ? " (staged through host memory)" : "");
    }
    window_ = Window();
    return absl::OkStatus();
  }

  // One flat exchange unless --bucket_mb > 0 and the exchange overlaps buckets on the engine's buffers.
  absl::Status PlanBuckets() {
    const MlpLayout& layout = engine_->layout();
    plan_ = std::make_unique<BucketPlan>(BucketPlan::Flat(layout.num_params()));
    if (options_.bucket_mb > 0 && exchange_->SupportsBuckets() && !adapter_->staged()) {
      ASSIGN_OR_RETURN(
          *plan_, BucketPlan::Create(layout.layer_sizes(), options_.bucket_mb, options_.first_bucket_mb));
    } else if (options_.bucket_mb > 0 && chief_) {
      std::fprintf(stderr,
                   "psring: --bucket_mb=%g: exchange %s %s, so gradients are exchanged in one flat piece "
                   "after backward\n",
                   options_.bucket_mb, exchange_->name().c_str(),
                   adapter_->staged() ? "takes host memory only (staged)" : "does not overlap buckets");
    }
    result_.buckets = static_cast<int>(plan_->buckets().size());
    return absl::OkStatus();
  }

  // Evaluates the held-out subset (every rank takes part); when the target is reached every rank ends the
  // run after this step (trainer/eval_held_out.h).
  absl::Status EvaluateHeldOut() {
    ASSIGN_OR_RETURN(const bool stop, held_out_->Evaluate(step_));
    if (stop) last_step_ = step_;
    return absl::OkStatus();
  }

  void StartMeasuring() {
    measuring_ = true;
    loop_start_ = Clock::now();
    paused_at_start_ = held_out_->paused_seconds();
    result_.measured_start_unix_s = absl::ToUnixMicros(absl::Now()) / 1e6;
    cpu_at_start_ = ReadHostCpu();
    sent_at_start_ = exchange_->bytes_sent();
    received_at_start_ = exchange_->bytes_received();
  }

  // The injected straggler delay before this step's passes (trainer/straggler.h): (factor - 1) x the previous
  // step's forward + backward, plus a pause; recorded on the timeline and in injected_this_step_.
  void InjectStraggler(Timeline* timeline) {
    injected_this_step_ = 0;
    if (!straggler_.active()) return;
    const double delay =
        (straggler_.StepFactor(step_) - 1) * last_passes_seconds_ + straggler_.PauseSeconds(step_);
    if (delay <= 0) return;
    Timeline::Span span(timeline, "straggler delay (injected)", kComputeTrack);
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    injected_this_step_ = delay;
  }

  // Batch `b` of the epoch whose sample order is `indices`: forward/backward, exchange (flat after backward,
  // or bucket by bucket while backward runs), optimizer step when the trainer owns it.
  absl::Status Step(const std::vector<int64_t>& indices, int64_t b) {
    Timeline* const timeline = exchange_->timeline();
    const Clock::time_point compute_start = Clock::now();
    for (int i = 0; i < options_.batch_size; ++i) {
      const int64_t sample = indices[b * options_.batch_size + i];
      std::copy(train_set_.image(sample), train_set_.image(sample) + train_set_.dim,
                batch_images_.begin() + static_cast<size_t>(i) * train_set_.dim);
      batch_labels_[i] = train_set_.labels[sample];
    }
    InjectStraggler(timeline);
    const Clock::time_point passes_start = Clock::now();
    const std::string context = absl::StrCat("exchange ", exchange_->name(), " at step ", step_);
    BatchStats stats;
    Clock::time_point exchange_start;
    if (plan_->flat()) {
      {
        Timeline::Span span(timeline, "forward+backward", kComputeTrack);
        ASSIGN_OR_RETURN(
            stats, engine_->ForwardBackward(batch_images_.data(), batch_labels_.data(), options_.batch_size));
        RETURN_IF_ERROR(engine_->Synchronize());
      }
      exchange_start = Clock::now();
      Timeline::Span span(timeline, "exchange", kComputeTrack);
      RETURN_IF_ERROR(Annotate(adapter_->Exchange(step_), context));
    } else {
      RETURN_IF_ERROR(Annotate(adapter_->BeginStep(step_, *plan_), context));
      absl::StatusOr<BatchStats> passes = engine_->ForwardBackwardOverlapped(
          batch_images_.data(), batch_labels_.data(), options_.batch_size,
          [this](size_t offset, size_t count) { adapter_->GradientReady(offset, count); }, timeline);
      absl::Status synced = passes.ok() ? engine_->Synchronize() : passes.status();
      exchange_start = Clock::now();
      // FinishStep even after a failed backward: the exchange's thread must let go of the buffers.
      absl::Status finished;
      {
        Timeline::Span span(timeline, "wait for exchange", kComputeTrack);
        finished = Annotate(adapter_->FinishStep(), context);
      }
      RETURN_IF_ERROR(synced);
      RETURN_IF_ERROR(finished);
      stats = *passes;
    }
    if (absl::Status loss = CheckLoss(stats.loss_sum, step_); !loss.ok()) {
      if (!options_.allow_nonfinite_loss) return loss;
      if (chief_ && !warned_nonfinite_loss_) {
        std::fprintf(stderr,
                     "warning: the training loss became %g at step %lld (the run diverged); training goes on "
                     "because of --allow_nonfinite_loss; this warning is not repeated\n",
                     stats.loss_sum, static_cast<long long>(step_));
      }
      warned_nonfinite_loss_ = true;
    }
    window_.Add(stats);
    last_passes_seconds_ = std::chrono::duration<double>(exchange_start - passes_start).count();
    // The wall clock at the end of backward (exchange_start is on the steady clock).
    const double ready_unix_s =
        absl::ToUnixMicros(absl::Now()) / 1e6 - std::chrono::duration<double>(Clock::now() - exchange_start).count();
    const Clock::time_point update_start = Clock::now();
    if (trainer_steps_) {
      Timeline::Span span(timeline, "optimizer", kComputeTrack);
      RETURN_IF_ERROR(engine_->SgdStep(sgd_));
      RETURN_IF_ERROR(engine_->Synchronize());
    }
    const Clock::time_point step_end = Clock::now();
    if (measuring_) {
      auto seconds = [](Clock::time_point from, Clock::time_point to) {
        return std::chrono::duration<double>(to - from).count();
      };
      result_.forward_seconds += stats.forward_seconds;
      result_.backward_seconds += seconds(passes_start, exchange_start) - stats.forward_seconds;
      result_.optimizer_seconds += seconds(update_start, step_end);
      result_.compute_seconds += seconds(compute_start, exchange_start) + seconds(update_start, step_end);
      result_.injected_delay_seconds += injected_this_step_;
      result_.step_ready_unix_s.push_back(ready_unix_s);
      result_.exchange_seconds += seconds(exchange_start, update_start);
      ++result_.measured_steps;
    }
    ++step_;
    ++result_.steps;
    if (result_.steps == warmup_) StartMeasuring();
    return absl::OkStatus();
  }

  // Averages the window's loss and accuracy across ranks into the result; rank 0 prints a progress line.
  absl::Status CloseWindow(int64_t epoch, int64_t b) {
    double sums[3] = {window_.loss_sum, window_.correct, window_.count};
    RETURN_IF_ERROR(Annotate(exchange_->AverageMetrics(absl::MakeSpan(sums, 3)), "averaging metrics"));
    result_.final_loss = sums[0] / sums[2];
    result_.train_accuracy = sums[1] / sums[2];
    if (chief_ && options_.log_every > 0) {
      const int width = static_cast<int>(std::to_string(steps_per_epoch_).size());
      const double rate = sums[2] * world_ / std::max(SecondsSince(window_.start), 1e-9);
      std::printf("step [%*ld/%ld] epoch [%ld/%d] | loss: %.3f | acc: %.1f%% | %s samples/s\n", width,
                  static_cast<long>(b + 1), static_cast<long>(steps_per_epoch_), static_cast<long>(epoch + 1),
                  options_.epochs, result_.final_loss, 100.0 * result_.train_accuracy,
                  FormatRate(rate).c_str());
      std::fflush(stdout);
    }
    window_ = Window();
    return absl::OkStatus();
  }

  const TrainOptions& options_;
  GradientExchange* const exchange_;
  const int world_;
  const bool chief_;
  const bool trainer_steps_;  // the trainer owns the optimizer: it steps after every exchange
  const SgdOptions sgd_;
  Dataset train_set_;
  Dataset test_set_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ExchangeAdapter> adapter_;
  std::unique_ptr<DistributedSampler> sampler_;
  std::unique_ptr<BucketPlan> plan_;  // set by Synchronize
  std::unique_ptr<HeldOutEvaluator> held_out_;  // set by Create
  double paused_at_start_ = 0;  // held_out_'s pauses when the measured steps began
  int64_t warmup_ = 0;                // steps of this call before the measured ones
  bool measuring_ = false;
  bool warned_nonfinite_loss_ = false;
  Clock::time_point loop_start_;
  uint64_t sent_at_start_ = 0;
  HostCpuReading cpu_at_start_;
  Straggler straggler_;
  double last_passes_seconds_ = 0;  // the previous step's forward + backward
  double injected_this_step_ = 0;  // the host's CPU when the measured steps began
  uint64_t received_at_start_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t last_step_ = 0;
  int64_t step_ = 0;  // global step, counted across resumes
  std::vector<float> batch_images_;
  std::vector<int32_t> batch_labels_;
  Window window_;
  TrainResult result_;
};

}  // namespace

absl::Status ValidateTrainOptions(const TrainOptions& o) {
  auto invalid = [](absl::string_view flag, auto value, absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, ": ", rule));
  };
  if (o.batch_size < 1) return invalid("batch_size", o.batch_size, "must be >= 1");
  if (o.epochs < 1) return invalid("epochs", o.epochs, "must be >= 1");
  if (o.max_steps < -1) return invalid("max_steps", o.max_steps, "must be >= 0, or -1 for no limit");
  if (o.batch_size > kMaxBatchSize)
    return invalid("batch_size", o.batch_size, absl::StrCat("must be <= ", kMaxBatchSize));
  RETURN_IF_ERROR(ValidateSgdOptions({o.lr, o.momentum, o.weight_decay}));
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda") {
    return invalid("device", o.device, "must be auto, cpu or cuda");
  }
  if (o.dataset != "fashion-mnist" && o.dataset != "synthetic") {
    return invalid("dataset", o.dataset, "must be fashion-mnist or synthetic");
  }
  if (o.synthetic_samples < 1 || o.synthetic_samples > kMaxSyntheticSamples) {
    return invalid("synthetic_samples", o.synthetic_samples,
                   absl::StrCat("must be in [1, ", kMaxSyntheticSamples, "]"));
  }
  if (o.resume && o.checkpoint_dir.empty()) {
    return invalid("resume", "true", "needs --checkpoint_dir (the folder holding latest.npz)");
  }
  if (o.log_every < 0) return invalid("log_every", o.log_every, "must be >= 0");
  if (!(o.bucket_mb >= 0) || o.bucket_mb > 1e6) {
    return invalid("bucket_mb", o.bucket_mb, "must be in [0, 1e6] MiB (0: one flat exchange after backward)");
  }
  if (!(o.first_bucket_mb >= 0) || o.first_bucket_mb > 1e6) {
    return invalid("first_bucket_mb", o.first_bucket_mb, "must be in [0, 1e6] MiB (DDP's default: 1)");
  }
  if (o.warmup_steps < 0) return invalid("warmup_steps", o.warmup_steps, "must be >= 0");
  return ValidateHeldOutOptions(o.held_out);
}

absl::StatusOr<TrainResult> Train(const TrainOptions& options, GradientExchange* exchange) {
  const Clock::time_point wall_start = Clock::now();
  RETURN_IF_ERROR(ValidateTrainOptions(options));
  RETURN_IF_ERROR(CheckCheckpointOwnership(options, *exchange));
  // One BLAS thread per rank: ranks share the machine's cores, and the comparison with PyTorch is per thread.
  cpu::SetBlasThreads(1);
  ASSIGN_OR_RETURN(std::unique_ptr<TrainingRun> run, TrainingRun::Create(options, exchange));
  RETURN_IF_ERROR(run->TrainToTheEnd());
  ASSIGN_OR_RETURN(TrainResult result, run->Finish());
  result.wall_seconds = SecondsSince(wall_start);
  return result;
}

}  // namespace psring::trainer
