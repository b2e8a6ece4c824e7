// Reads the one-line results worker and server binaries print (the contract in bench/PERFORMANCE.md 6):
//
//   PSRING_RESULT {"role":"worker","exchange":"ring-tcp","rank":0,"world_size":4,"steps":10,...}
//
// The payload is protobuf's JSON mapping of psring.proto.WorkerResult or ServerResult (proto/results.proto),
// chosen by its "role" key. Parsing is strict: a key the message does not have (a renamed or misspelt field)
// is an error, so the harness never reads a silent default where a producer changed the contract.
//
//   ASSIGN_OR_RETURN(ResultLines lines, ExtractResults(process.stdout_text));
//   for (const proto::WorkerResult& w : lines.workers) total += w.exchange_s();
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_RESULT_LINE_H_
#define PSRING_BENCH_RESULT_LINE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/results.pb.h"

namespace psring::bench {

inline constexpr char kResultPrefix[] = "PSRING_RESULT ";

// The result lines of one process's output, in the order printed, by role.
struct ResultLines {
  std::vector<proto::WorkerResult> workers;
  std::vector<proto::ServerResult> servers;
};

// Every "PSRING_RESULT {...}" line of `output`; other lines are ignored. kInvalidArgument naming the line
// and the offending key for a payload that is not JSON, has no known "role", or does not match its message.
absl::StatusOr<ResultLines> ExtractResults(absl::string_view output);

}  // namespace psring::bench

#endif  // PSRING_BENCH_RESULT_LINE_H_
