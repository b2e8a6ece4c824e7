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

// The model is calibrated with the harness's own PS and ring flags (bench/harness/launch.cc, part of the
// fingerprint); extra flags a sweep passes to the workers or servers (--worker_args, --server_args) that
// set the exchange's transport change what the runs measure without changing a source. These are the
// flags that do: the PS's chunk, push window, receive windows and lead (e.g. --receive_window_bytes=0 on
// the servers turns gRPC's BDP probe on, and the PS at 5-40 ms then runs up to 12 times faster than the
// model says; bench/PERFORMANCE.md 9.36).
// The entries of `args` (each "--name" or "--name=value") that name such a flag, in order.
std::vector<std::string> DataPathFlagsIn(const std::vector<std::string>& args);
// "" when neither list has such a flag and `ps_chunks` is "" or "harness" (scaling --ps_chunks=bdp or
// capped: the harness sizes the PS's chunks by the link, bench/harness/ps_chunk_rule.h), else one line for a
// report: "MODEL NOT
// COMPARABLE: these runs pass --server_args=--receive_window_bytes=0, which sets the exchange's transport;
// the model was calibrated with the harness's and the binaries' own values ..., so its model_ms and err% are
// of those, not of these runs".
std::string DescribeDataPathFlags(const std::vector<std::string>& worker_args,
                                  const std::vector<std::string>& server_args, const std::string& ps_chunks);

}  // namespace psring::bench::model

#endif  // PSRING_BENCH_MODEL_DATA_PATH_H_
