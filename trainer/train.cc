#include "trainer/train.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "trainer/checkpoint.h"
#include "trainer/cpu_kernels.h"
#include "trainer/dataset.h"
#include "trainer/engine.h"
#include "trainer/mlp.h"
#include "trainer/sampler.h"

namespace psring::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
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
  ExchangeAdapter(GradientExchange* exchange, Engine* engine)
      : exchange_(exchange),
        engine_(engine),
        staged_(engine->params().memory == MemoryKind::kCuda && !exchange->AcceptsDeviceMemory()) {
    if (staged_) {
      host_params_.resize(engine->layout().num_params());
      host_grads_.resize(engine->layout().num_params());
    }
  }

  bool staged() const { return staged_; }

  absl::Status SyncInitialParameters() {
    if (!staged_) return exchange_->SyncInitialParameters(engine_->params());
    RETURN_IF_ERROR(engine_->GetParams(absl::MakeSpan(host_params_)));
    RETURN_IF_ERROR(exchange_->SyncInitialParameters(HostBuffer(&host_params_)));
    return engine_->SetParams(host_params_);
  }

  absl::StatusOr<ExchangeOutcome> Exchange(int64_t step) {
    if (!staged_) return exchange_->Exchange(step, engine_->grads(), engine_->params());
    RETURN_IF_ERROR(engine_->GetGrads(absl::MakeSpan(host_grads_)));
    // Exchanges that update parameters remotely may read them too, so the host copy is kept current.
    RETURN_IF_ERROR(engine_->GetParams(absl::MakeSpan(host_params_)));
    ASSIGN_OR_RETURN(ExchangeOutcome outcome,
                     exchange_->Exchange(step, HostBuffer(&host_grads_), HostBuffer(&host_params_)));
    if (outcome == ExchangeOutcome::kGradientsAveraged) {
      RETURN_IF_ERROR(engine_->SetGrads(host_grads_));
    } else {
      RETURN_IF_ERROR(engine_->SetParams(host_params_));
    }
    return outcome;
  }

 private:
  static FloatBuffer HostBuffer(std::vector<float>* v) { return {v->data(), v->size(), MemoryKind::kHost}; }

  GradientExchange* exchange_;
  Engine* engine_;
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

// Test accuracy over the whole test set: each rank evaluates every world_size-th sample, then the counts are
// averaged across ranks (mean correct / mean count is the global ratio).
absl::StatusOr<double> EvaluateTestSet(const Dataset& test, Engine* engine, GradientExchange* exchange) {
  const int rank = exchange->rank();
  const int world = exchange->world_size();
  const int batch = engine->max_batch();
  std::vector<float> images(static_cast<size_t>(batch) * test.dim);
  std::vector<int32_t> labels(batch);
  double correct = 0;
  double count = 0;
  int filled = 0;
  auto flush = [&]() -> absl::Status {
    if (filled == 0) return absl::OkStatus();
    ASSIGN_OR_RETURN(BatchStats s, engine->Evaluate(images.data(), labels.data(), filled));
    correct += static_cast<double>(s.correct);
    count += static_cast<double>(s.count);
    filled = 0;
    return absl::OkStatus();
  };
  for (int64_t i = rank; i < test.size; i += world) {
    std::copy(test.image(i), test.image(i) + test.dim,
              images.begin() + static_cast<size_t>(filled) * test.dim);
    labels[filled++] = test.labels[i];
    if (filled == batch) RETURN_IF_ERROR(flush());
  }
  RETURN_IF_ERROR(flush());
  double sums[2] = {correct, count};
  RETURN_IF_ERROR(exchange->AverageMetrics(absl::MakeSpan(sums, 2)));
  return sums[1] > 0 ? sums[0] / sums[1] : 0.0;
}

CheckpointState MakeCheckpointState(const TrainOptions& o, int world_size, int64_t step, int64_t epoch) {
  CheckpointState state;
  state.step = step;
  state.epoch = epoch;
  state.hidden = o.hidden;
  state.batch_size = o.batch_size;
  state.world_size = world_size;
  state.seed = o.seed;
  state.lr = o.lr;
  state.momentum = o.momentum;
  state.weight_decay = o.weight_decay;
  state.dataset = o.dataset;
  return state;
}

absl::Status SaveState(const TrainOptions& o, Engine* engine, int world_size, int64_t step,
                       int64_t steps_per_epoch) {
  CheckpointState state = MakeCheckpointState(o, world_size, step, step / steps_per_epoch);
  state.params.resize(engine->layout().num_params());
  state.momentum_buffer.resize(engine->layout().num_params());
  RETURN_IF_ERROR(engine->GetParams(absl::MakeSpan(state.params)));
  RETURN_IF_ERROR(engine->GetMomentum(absl::MakeSpan(state.momentum_buffer)));
  return Annotate(SaveCheckpoint(LatestCheckpointPath(o.checkpoint_dir), state), "saving checkpoint");
}

// Loads checkpoint_dir/latest.npz into the engine; returns the global step to continue from.
absl::StatusOr<int64_t> RestoreState(const TrainOptions& o, Engine* engine, int world_size) {
  const std::string path = LatestCheckpointPath(o.checkpoint_dir);
  absl::StatusOr<CheckpointState> loaded = LoadCheckpoint(path);
  if (!loaded.ok()) return Annotate(loaded.status(), "--resume");
  const CheckpointState& state = *loaded;
  const CheckpointState want = MakeCheckpointState(o, world_size, state.step, state.epoch);
  // Exact continuation needs the same model, batch, world and sample order.
  if (state.hidden != want.hidden || state.batch_size != want.batch_size ||
      state.world_size != want.world_size || state.seed != want.seed || state.dataset != want.dataset) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--resume: checkpoint ", path, " was written with hidden=", absl::StrJoin(state.hidden, ","),
        " batch_size=", state.batch_size, " world_size=", state.world_size, " seed=", state.seed,
        " dataset=", state.dataset, " but this run has hidden=", absl::StrJoin(want.hidden, ","),
        " batch_size=", want.batch_size, " world_size=", want.world_size, " seed=", want.seed,
        " dataset=", want.dataset, "; rerun with the checkpoint's values or a fresh --checkpoint_dir"));
  }
  RETURN_IF_ERROR(Annotate(engine->SetParams(state.params), absl::StrCat("--resume from ", path)));
  RETURN_IF_ERROR(Annotate(engine->SetMomentum(state.momentum_buffer), absl::StrCat("--resume from ", path)));
  return state.step;
}

}  // namespace

absl::Status ValidateTrainOptions(const TrainOptions& o) {
  auto invalid = [](absl::string_view flag, auto value, absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, ": ", rule));
  };
  if (o.batch_size < 1) return invalid("batch_size", o.batch_size, "must be >= 1");
  if (o.epochs < 1) return invalid("epochs", o.epochs, "must be >= 1");
  if (o.max_steps < -1) return invalid("max_steps", o.max_steps, "must be >= 0, or -1 for no limit");
  if (!(o.lr > 0)) return invalid("lr", o.lr, "must be > 0");
  if (!(o.momentum >= 0 && o.momentum < 1)) return invalid("momentum", o.momentum, "must be in [0, 1)");
  if (!(o.weight_decay >= 0)) return invalid("weight_decay", o.weight_decay, "must be >= 0");
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda") {
    return invalid("device", o.device, "must be auto, cpu or cuda");
  }
  if (o.dataset != "fashion-mnist" && o.dataset != "synthetic") {
    return invalid("dataset", o.dataset, "must be fashion-mnist or synthetic");
  }
  if (o.synthetic_samples < 1) return invalid("synthetic_samples", o.synthetic_samples, "must be >= 1");
  if (o.resume && o.checkpoint_dir.empty()) {
    return invalid("resume", "true", "needs --checkpoint_dir (the folder holding latest.npz)");
  }
  if (o.log_every < 0) return invalid("log_every", o.log_every, "must be >= 0");
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> Train(const TrainOptions& options, GradientExchange* exchange) {
  const Clock::time_point wall_start = Clock::now();
  RETURN_IF_ERROR(ValidateTrainOptions(options));
  const int rank = exchange->rank();
  const int world = exchange->world_size();
  const bool chief = rank == 0;
  // One BLAS thread per rank: ranks share the machine's cores, and the comparison with PyTorch is per thread.
  cpu::SetBlasThreads(1);
  if (chief && !options.checkpoint_dir.empty()) RETURN_IF_ERROR(PrepareCheckpointDir(options.checkpoint_dir));

  std::string note;
  ASSIGN_OR_RETURN(std::string device, ResolveDevice(options.device, &note));
  if (!note.empty() && chief)
    std::fprintf(stderr, "psring: --device=%s: %s\n", options.device.c_str(), note.c_str());

  absl::StatusOr<Dataset> train_set = LoadSplit(options, Split::kTrain);
  if (!train_set.ok()) return Annotate(train_set.status(), "loading the training set");
  Dataset test_set;
  if (options.evaluate) {
    absl::StatusOr<Dataset> loaded = LoadSplit(options, Split::kTest);
    if (!loaded.ok()) return Annotate(loaded.status(), "loading the test set");
    test_set = std::move(loaded).value();
  }

  ASSIGN_OR_RETURN(MlpLayout layout,
                   MlpLayout::Create(train_set->dim, options.hidden, train_set->num_classes));
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, CreateEngine(device, layout, options.batch_size));
  {
    std::vector<float> initial(layout.num_params());
    InitParameters(layout, options.seed, absl::MakeSpan(initial));
    RETURN_IF_ERROR(engine->SetParams(initial));
  }

  ASSIGN_OR_RETURN(DistributedSampler sampler,
                   DistributedSampler::Create(train_set->size, world, rank, /*shuffle=*/true, options.seed));
  const int64_t steps_per_epoch = sampler.num_samples() / options.batch_size;
  if (steps_per_epoch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("each rank gets ", sampler.num_samples(),
                                                   " training samples per epoch, fewer than one batch of ",
                                                   options.batch_size, "; lower --batch_size"));
  }
  const int64_t total_steps = steps_per_epoch * options.epochs;
  const int64_t last_step = options.max_steps >= 0 ? std::min(total_steps, options.max_steps) : total_steps;

  int64_t step = 0;
  if (options.resume) {
    ASSIGN_OR_RETURN(step, RestoreState(options, engine.get(), world));
    if (chief)
      std::fprintf(stderr, "psring: resuming at step %ld (epoch %ld)\n", static_cast<long>(step),
                   static_cast<long>(step / steps_per_epoch + 1));
  }

  ExchangeAdapter adapter(exchange, engine.get());
  RETURN_IF_ERROR(Annotate(adapter.SyncInitialParameters(),
                           absl::StrCat("exchange ", exchange->name(), ": SyncInitialParameters")));
  if (chief) {
    std::vector<int> widths = {layout.input_dim()};
    widths.insert(widths.end(), options.hidden.begin(), options.hidden.end());
    widths.push_back(layout.num_classes());
    std::fprintf(stderr,
                 "psring: training MLP %s (%zu parameters, %.1f MB) on %s, exchange %s, world size %d%s\n",
                 absl::StrJoin(widths, "-").c_str(), layout.num_params(), layout.num_params() * 4.0 / 1e6,
                 device.c_str(), exchange->name().c_str(), world,
                 adapter.staged() ? " (staged through host memory)" : "");
  }

  const SgdOptions sgd{options.lr, options.momentum, options.weight_decay};
  TrainResult result;
  result.device = device;
  std::vector<float> batch_images(static_cast<size_t>(options.batch_size) * train_set->dim);
  std::vector<int32_t> batch_labels(options.batch_size);
  Window window;
  const int width = static_cast<int>(std::to_string(steps_per_epoch).size());
  const Clock::time_point train_start = Clock::now();

  while (step < last_step) {
    const int64_t epoch = step / steps_per_epoch;
    const std::vector<int64_t> indices = sampler.Indices(epoch);
    for (int64_t b = step % steps_per_epoch; b < steps_per_epoch && step < last_step; ++b) {
      const Clock::time_point compute_start = Clock::now();
      for (int i = 0; i < options.batch_size; ++i) {
        const int64_t sample = indices[b * options.batch_size + i];
        std::copy(train_set->image(sample), train_set->image(sample) + train_set->dim,
                  batch_images.begin() + static_cast<size_t>(i) * train_set->dim);
        batch_labels[i] = train_set->labels[sample];
      }
      ASSIGN_OR_RETURN(BatchStats stats,
                       engine->ForwardBackward(batch_images.data(), batch_labels.data(), options.batch_size));
      window.Add(stats);
      RETURN_IF_ERROR(engine->Synchronize());
      const Clock::time_point exchange_start = Clock::now();
      result.compute_seconds += std::chrono::duration<double>(exchange_start - compute_start).count();

      absl::StatusOr<ExchangeOutcome> outcome = adapter.Exchange(step);
      if (!outcome.ok()) {
        return Annotate(outcome.status(), absl::StrCat("exchange ", exchange->name(), " at step ", step));
      }
      result.exchange_seconds += SecondsSince(exchange_start);

      const Clock::time_point update_start = Clock::now();
      if (*outcome == ExchangeOutcome::kGradientsAveraged) {
        RETURN_IF_ERROR(engine->SgdStep(sgd));
        RETURN_IF_ERROR(engine->Synchronize());
      }
      result.compute_seconds += SecondsSince(update_start);
      ++step;
      ++result.steps;

      const bool log_now = options.log_every > 0 && (b + 1) % options.log_every == 0;
      if (log_now || step == last_step) {
        double sums[3] = {window.loss_sum, window.correct, window.count};
        RETURN_IF_ERROR(Annotate(exchange->AverageMetrics(absl::MakeSpan(sums, 3)), "averaging metrics"));
        result.final_loss = sums[0] / sums[2];
        result.train_accuracy = sums[1] / sums[2];
        if (chief && options.log_every > 0) {
          const double rate = sums[2] * world / std::max(SecondsSince(window.start), 1e-9);
          std::printf("step [%*ld/%ld] epoch [%ld/%d] | loss: %.3f | acc: %.1f%% | %s samples/s\n", width,
                      static_cast<long>(b + 1), static_cast<long>(steps_per_epoch),
                      static_cast<long>(epoch + 1), options.epochs, result.final_loss,
                      100.0 * result.train_accuracy, FormatRate(rate).c_str());
          std::fflush(stdout);
        }
        window = Window();
      }
    }
    // Every epoch end and the final step leave a checkpoint; both may coincide.
    if (chief && !options.checkpoint_dir.empty()) {
      RETURN_IF_ERROR(SaveState(options, engine.get(), world, step, steps_per_epoch));
    }
  }
  const double train_seconds = SecondsSince(train_start);
  result.samples_per_second =
      train_seconds > 0 ? static_cast<double>(result.steps) * options.batch_size * world / train_seconds : 0;

  if (options.evaluate) {
    ASSIGN_OR_RETURN(result.test_accuracy, EvaluateTestSet(test_set, engine.get(), exchange));
    if (chief) {
      std::printf("test accuracy: %.2f%% (%ld images)\n", 100.0 * result.test_accuracy,
                  static_cast<long>(test_set.size));
      std::fflush(stdout);
    }
  }
  result.params.resize(layout.num_params());
  RETURN_IF_ERROR(engine->GetParams(absl::MakeSpan(result.params)));
  result.wall_seconds = SecondsSince(wall_start);
  return result;
}

}  // namespace psring::trainer
