#include "trainer/train_checkpoint.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "common/status_macros.h"

namespace psring::trainer {

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

absl::Status CheckCheckpointOwnership(const TrainOptions& o, const GradientExchange& exchange) {
  if (exchange.optimizer().owner == OptimizerOwner::kTrainer || (o.checkpoint_dir.empty() && !o.resume)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      o.resume ? "--resume" : "--checkpoint_dir", ": exchange ", exchange.name(),
      " applies the optimizer on the parameter servers, so this worker holds no momentum to checkpoint and "
      "could not resume the run exactly; drop --checkpoint_dir/--resume from the workers and give the "
      "servers "
      "--checkpoint_dir instead (a restarted server resumes parameters and momentum, and the workers "
      "reconnect to it)"));
}

}  // namespace psring::trainer
