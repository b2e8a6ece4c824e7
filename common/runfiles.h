// Finding a file a binary needs: the path the user gave, else the copy Bazel put in the binary's runfiles
// (`bazel run` and bazel-bin both have them), checked before use so a missing program or data file is a
// clear error naming the flag that fixes it, never an exec failure later.
//
//   ASSIGN_OR_RETURN(std::string worker,
//                    FindRunfile(argv[0], {absl::GetFlag(FLAGS_ring_worker), "psring/ring/ring_worker",
//                                          "--ring_worker", "build it (./bazelw build //ring:ring_worker)",
//                                          /*executable=*/true}));
//
// Thread-safety: reads the file system and the environment; no shared state.
#ifndef PSRING_COMMON_RUNFILES_H_
#define PSRING_COMMON_RUNFILES_H_

#include <string>

#include "absl/status/statusor.h"

namespace psring {

struct RunfileRequest {
  std::string given;      // the flag's value ("": look in the runfiles)
  std::string rlocation;  // "<workspace>/<package>/<file>", e.g. "psring/bench/emulator/netdelay"
  std::string flag;       // the flag that takes the path, e.g. "--ring_worker"
  std::string hint;       // what else the user can do, e.g. "run through `bazel run`"
  bool executable = false;  // checked with X_OK, else R_OK
};

// The path: `given` when not empty, else `rlocation` in the runfiles of the binary at `argv0` (null: none).
// kNotFound "cannot find <rlocation> (tried '<path>'): <hint>, or pass <flag>=PATH" when the path is not
// readable (executable).
absl::StatusOr<std::string> FindRunfile(const char* argv0, const RunfileRequest& request);

// `rlocation`'s path in the runfiles of the binary at `argv0`, "" without runfiles (not checked).
std::string RunfilePath(const char* argv0, const std::string& rlocation);

// A path the user typed, as they meant it: a relative one under `bazel run` (which runs the binary in its
// runfiles tree) is taken from where the command was typed ($BUILD_WORKING_DIRECTORY); empty, absolute or
// outside `bazel run`, it is returned as it is.
std::string FromWhereTyped(const std::string& path);

}  // namespace psring

#endif  // PSRING_COMMON_RUNFILES_H_
