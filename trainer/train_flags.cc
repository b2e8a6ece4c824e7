#include "trainer/train_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace {

// --hidden's default: TrainOptions' widths as the flag's strings.
std::vector<std::string> DefaultHidden() {
  std::vector<std::string> widths;
  for (int w : psring::trainer::TrainOptions{}.hidden) widths.push_back(std::to_string(w));
  return widths;
}

}  // namespace

ABSL_FLAG(std::vector<std::string>, hidden, DefaultHidden(),
          "Comma-separated widths of the MLP's hidden layers, input 784 and 10 classes around them "
          "(e.g. 256,256 or 4096,4096 for large gradients). Each width must be >= 1; empty (--hidden=): "
          "no hidden layer, a linear softmax classifier.");
ABSL_FLAG(int, batch_size, psring::trainer::TrainOptions{}.batch_size,
          "Training samples per step on EACH rank (the global batch is batch_size x world size). The last "
          "partial batch of an epoch is dropped.");
ABSL_FLAG(int, epochs, psring::trainer::TrainOptions{}.epochs, "Passes over the training set (>= 1).");
ABSL_FLAG(int64_t, max_steps, psring::trainer::TrainOptions{}.max_steps,
          "Stop once this many optimizer steps have been taken in total (counted across --resume); -1: no "
          "limit, train for --epochs.");
ABSL_FLAG(float, lr, psring::trainer::TrainOptions{}.lr,
          "SGD learning rate (> 0), constant for the whole run (a parameter server applies the same value).");
ABSL_FLAG(float, momentum, psring::trainer::TrainOptions{}.momentum,
          "SGD momentum in [0, 1) (PyTorch semantics, no dampening, no Nesterov).");
ABSL_FLAG(float, weight_decay, psring::trainer::TrainOptions{}.weight_decay,
          "L2 weight decay added to the gradient, g += weight_decay * param (>= 0).");
ABSL_FLAG(uint64_t, seed, psring::trainer::TrainOptions{}.seed,
          "Seed for parameter initialisation, the per-epoch shuffle of the DistributedSampler and the "
          "synthetic data set. Same seed, same run.");
ABSL_FLAG(std::string, device, psring::trainer::TrainOptions{}.device,
          "Where to train: auto (the GPU when one is usable, otherwise the CPU, saying why), cpu, or cuda "
          "(fails when no GPU is usable).");
ABSL_FLAG(std::string, dataset, psring::trainer::TrainOptions{}.dataset,
          "Training data: fashion-mnist (IDX files from --data_dir) or synthetic (generated, "
          "--synthetic_samples samples with Fashion-MNIST's shape; for benchmarks).");
ABSL_FLAG(
    std::string, data_dir, psring::trainer::TrainOptions{}.data_dir,
    "Folder with Fashion-MNIST's train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte "
    "and t10k-labels-idx1-ubyte, each plain or .gz (Debian: apt-get install dataset-fashion-mnist).");
ABSL_FLAG(int64_t, synthetic_samples, psring::trainer::TrainOptions{}.synthetic_samples,
          "Training samples of --dataset=synthetic (>= 1).");
ABSL_FLAG(
    std::string, checkpoint_dir, psring::trainer::TrainOptions{}.checkpoint_dir,
    "Folder for checkpoints: rank 0 writes <dir>/latest.npz (NumPy .npz, see README.md) after every "
    "epoch and at the end. Empty: no checkpoints. Refused by parameter-server workers: their servers own "
    "the optimizer's momentum, so checkpoint there (the servers' --checkpoint_dir).");
ABSL_FLAG(bool, resume, psring::trainer::TrainOptions{}.resume,
          "Continue exactly from <checkpoint_dir>/latest.npz (parameters, momentum, step); the run must use "
          "the same --hidden, --batch_size, --seed, --dataset and world size. Every rank reads the file, so "
          "on several hosts --checkpoint_dir must be a shared folder. Refused by parameter-server workers (a "
          "restarted server resumes from its own --checkpoint_dir).");
ABSL_FLAG(int, log_every, psring::trainer::TrainOptions{}.log_every,
          "Steps between progress lines printed by rank 0 (0: no progress lines).");
ABSL_FLAG(bool, evaluate, psring::trainer::TrainOptions{}.evaluate,
          "Measure accuracy on the full test set at the end and print it.");
ABSL_FLAG(bool, allow_nonfinite_loss, psring::trainer::TrainOptions{}.allow_nonfinite_loss,
          "Keep training when the loss becomes NaN or Inf (one warning, from rank 0). Off: the run stops with "
          "an error naming the step, since a diverged run only produces garbage from then on.");
ABSL_FLAG(double, bucket_mb, psring::trainer::TrainOptions{}.bucket_mb,
          "Gradient bucket cap in MiB (PyTorch DDP's bucket_cap_mb; DDP's default is 25). > 0: each layer's "
          "gradient is handed to the exchange as soon as backward has computed it (last layer first); "
          "layers join the open bucket, which closes once it holds at least this size (DDP's rule: a bucket "
          "ends up to one layer above the cap; the first bucket's cap is --first_bucket_mb, so the exchange "
          "starts early), and each closed bucket is exchanged on a communication thread while backward goes "
          "on. The result equals the flat exchange's (parameter server: bit for bit; ring: up to float "
          "rounding). 0: one flat exchange after backward.");
ABSL_FLAG(double, first_bucket_mb, psring::trainer::TrainOptions{}.first_bucket_mb,
          "With --bucket_mb > 0: the first bucket's cap in MiB (the last layers' gradients, ready first; "
          "PyTorch DDP's first bucket is 1 MiB), at most --bucket_mb. Small, so the exchange starts as soon "
          "as backward begins.");
ABSL_FLAG(int64_t, eval_every, psring::trainer::HeldOutOptions{}.every,
          "Test accuracy during training: every this many steps (and before the first and after the last), "
          "rank 0 evaluates the model on the first --eval_samples test images while the other ranks wait, and "
          "prints PSRING_EVAL {\"step\":..,\"wall_s\":..,\"accuracy\":..,\"samples\":..,\"eval_s\":..}; "
          "wall_s counts from the first step with the evaluations' pauses left out (as are the step times). "
          "0: no evaluation during training.");
ABSL_FLAG(int64_t, eval_samples, psring::trainer::HeldOutOptions{}.samples,
          "With --eval_every: how many test images (the first ones of the test set, never trained on) each "
          "evaluation uses (>= 1; capped at the test set's size).");
ABSL_FLAG(double, target_accuracy, psring::trainer::HeldOutOptions{}.target,
          "With --eval_every: stop every rank after the first evaluation whose accuracy reaches this fraction "
          "(e.g. 0.85). All ranks stop after the same number of steps (each rank learns the outcome from rank "
          "0 at the evaluation). 0: train for --epochs / --max_steps.");

namespace psring::trainer {

absl::StatusOr<TrainOptions> TrainOptionsFromFlags() {
  TrainOptions o;
  o.hidden.clear();
  for (const std::string& w : absl::GetFlag(FLAGS_hidden)) {
    int width = 0;
    if (!absl::SimpleAtoi(w, &width) || width < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hidden=", absl::StrJoin(absl::GetFlag(FLAGS_hidden), ","), ": '", w,
                       "' is not a positive integer width"));
    }
    o.hidden.push_back(width);
  }
  o.batch_size = absl::GetFlag(FLAGS_batch_size);
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.max_steps = absl::GetFlag(FLAGS_max_steps);
  o.lr = absl::GetFlag(FLAGS_lr);
  o.momentum = absl::GetFlag(FLAGS_momentum);
  o.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.device = absl::GetFlag(FLAGS_device);
  o.dataset = absl::GetFlag(FLAGS_dataset);
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.synthetic_samples = absl::GetFlag(FLAGS_synthetic_samples);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.log_every = absl::GetFlag(FLAGS_log_every);
  o.evaluate = absl::GetFlag(FLAGS_evaluate);
  o.bucket_mb = absl::GetFlag(FLAGS_bucket_mb);
  o.first_bucket_mb = absl::GetFlag(FLAGS_first_bucket_mb);
  o.allow_nonfinite_loss = absl::GetFlag(FLAGS_allow_nonfinite_loss);
  o.held_out.every = absl::GetFlag(FLAGS_eval_every);
  o.held_out.samples = absl::GetFlag(FLAGS_eval_samples);
  o.held_out.target = absl::GetFlag(FLAGS_target_accuracy);

  RETURN_IF_ERROR(ValidateTrainOptions(o));
  return o;
}

}  // namespace psring::trainer
