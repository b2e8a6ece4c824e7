// The result lines psring binaries print at the end, the contract with the scaling harness (bench/) and with
// users' scripts: one line per process,
//
//   PSRING_RESULT {"role":"worker","exchange":"ring-tcp","rank":0,"world_size":4,"steps":10,...}
//   PSRING_RESULT {"role":"server","shard":0,"num_shards":2,"mode":"sync","version":12,...}
//
// whose payload is protobuf's JSON mapping of a psring::proto::WorkerResult or ServerResult
// (proto/results.proto) with the field names as written there. Producers fill the message; nothing else
// formats these lines.
//
//   proto::WorkerResult result;
//   result.set_exchange(exchange->name());
//   ...
//   RETURN_IF_ERROR(PrintResultLine(result));
//
// Pure functions apart from PrintResultLine's write to stdout; thread-safe.
#ifndef PSRING_COMMON_WORKER_RESULT_H_
#define PSRING_COMMON_WORKER_RESULT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "proto/results.pb.h"

namespace psring {

// "PSRING_RESULT <json>" without a trailing newline. Every field of `result` prints, the unset ones with
// their schema defaults, so every key is always there for the scripts that read the line.
// kInternal if protobuf cannot print the message.
absl::StatusOr<std::string> FormatResultLine(const google::protobuf::Message& result);

// Writes FormatResultLine(result) and a newline to stdout and flushes it. Blocks on stdout.
absl::Status PrintResultLine(const google::protobuf::Message& result);

}  // namespace psring

#endif  // PSRING_COMMON_WORKER_RESULT_H_
