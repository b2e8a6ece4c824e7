// The measured runs of a calibration, saved beside its model so the model can be fitted again on the same
// measurements (a change of the fit or of the model's terms) without rerunning the sweep.
//
//   // //bench:calibrate --runs_out=runs.json after the sweep:
//   RETURN_IF_ERROR(WriteCalibrationRuns("runs.json", calibration.runs, info));
//   // //bench:calibrate --refit=runs.json:
//   ASSIGN_OR_RETURN(SavedRuns saved, ReadCalibrationRuns("runs.json"));
//   ASSIGN_OR_RETURN(proto::CostModelFile file, RefitModel(saved));  // the runs' host, date and data path
//
// Thread-safety: pure functions (the file system aside).
#ifndef PSRING_BENCH_MODEL_CALIBRATION_RUNS_H_
#define PSRING_BENCH_MODEL_CALIBRATION_RUNS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/model/fit.h"

namespace psring::bench::model {

struct SavedRuns {
  proto::CalibrationRunsFile file;  // host, date, note, data path (runs left out: see `runs`)
  std::vector<MeasuredRun> runs;
};

// Writes `runs` with `info` and this build's data path (the code that measured them), atomically.
absl::Status WriteCalibrationRuns(const std::string& path, const std::vector<MeasuredRun>& runs,
                                  const FileInfo& info);

// Writes `saved` as it is (its host, date, note and data path: a merge of runs files keeps theirs),
// atomically.
absl::Status WriteSavedRuns(const std::string& path, const SavedRuns& saved);

// kNotFound when the file cannot be opened; kInvalidArgument naming the run for a file that is not a runs
// file, an unknown exchange, conditions ValidateConditions refuses, or a time that is not > 0.
absl::StatusOr<SavedRuns> ReadCalibrationRuns(const std::string& path);

// Several runs files as one (calibrate --refit=a.json,b.json: a supplementary sweep beside a calibration):
// their runs in order, the latest date, the notes joined, each after its file (one file: as it is).
// kInvalidArgument naming both files when two were measured on different hosts (the CPU ceilings hold for
// one) or different data paths (the parameters would describe two codes); kInvalidArgument for an empty list.
absl::StatusOr<SavedRuns> MergeSavedRuns(const std::vector<SavedRuns>& parts,
                                         const std::vector<std::string>& origins);

// FitModel over the saved runs; the model file carries the runs' host, date and data path (not this
// build's: the parameters describe the code that was measured), its note says it is a refit.
absl::StatusOr<proto::CostModelFile> RefitModel(const SavedRuns& saved, const std::string& origin);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_CALIBRATION_RUNS_H_
