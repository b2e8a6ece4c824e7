// Which data-path sources a calibrated model was fitted on, and whether the tree still has them.
//
// The data path is every source whose change alters an exchange's timing: the PS client, service and shard
// core, the ring and its transports, the sockets and integrity tags, the trainer's side of the exchange seam
// (the `data_path_srcs` filegroups of ps/, ring/, common/ and trainer/). A build digests them
// (tools/data_path_digest.sh); //bench:calibrate records the digests in the model file it writes, and
// //bench:compare, //bench:scaling and //bench:validate say when the model they use predates the tree.
//
//   const DataPathState state = CompareDataPath(model_file);
//   if (!state.current) std::cerr << state.Describe() << "\n";   // names the files that changed
//
// Thread-safety: constant tables and pure functions.
#ifndef PSRING_BENCH_MODEL_DATA_PATH_H_
#define PSRING_BENCH_MODEL_DATA_PATH_H_

#include <string>
#include <vector>

#include "bench/model/cost_model_file.pb.h"

namespace psring::bench::model {

struct DataPathSource {
  const char* path;    // relative to the workspace, e.g. "ps/service.cc"
  const char* sha256;  // first 16 hex digits of the file's SHA-256
};

// Generated at build time (//bench/model:data_path_digest), sorted by path.
extern const DataPathSource kDataPathSources[];
extern const int kDataPathSourceCount;
// The SHA-256 (16 hex digits) of the sorted "digest  path" lines: one value for the whole set.
extern const char kDataPathFingerprint[];

// Fills `file`'s data_path_fingerprint and data_path_sources with this build's (calibrate calls it).
void RecordDataPath(proto::CostModelFile& file);

// How a model file's recorded data path compares with this build's.
struct DataPathState {
  bool recorded = false;  // the file has a fingerprint (models written before 2026-11-27 have none)
  bool current = false;   // recorded and equal to this build's
  std::string recorded_fingerprint;
  std::vector<std::string> changed;  // files whose digest differs
  std::vector<std::string> added;    // in the tree, not in the model's record
  std::vector<std::string> removed;  // in the model's record, no longer in the tree
  // One line: "data path: current (fingerprint F)", or "data path: STALE: ... changed since the model was
  // calibrated: a, b (+3 more); recalibrate: ./bazelw run //bench:calibrate -- --quick", or "... not
  // recorded ...".
  std::string Describe() const;
};
DataPathState CompareDataPath(const proto::CostModelFile& file);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_DATA_PATH_H_
