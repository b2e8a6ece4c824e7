// Parses the one-line results worker and server binaries print (see the contract in bench/PERFORMANCE.md):
//
//   PSRING_RESULT {"role":"worker","exchange":"ring-tcp","rank":0,"world_size":4,"steps":10,...}
//
// The payload is a flat JSON object of strings, numbers, booleans and null. Thread-safety: pure functions.
#ifndef PSRING_BENCH_RESULT_LINE_H_
#define PSRING_BENCH_RESULT_LINE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psring::bench {

inline constexpr char kResultPrefix[] = "PSRING_RESULT ";

struct ResultLine {
  std::map<std::string, double> numbers;       // numbers; true/false as 1/0
  std::map<std::string, std::string> strings;  // strings
  double Number(const std::string& key, double fallback = 0) const;
  std::string String(const std::string& key) const;  // "" when absent
};

// Parses a flat JSON object. kInvalidArgument (with the offset) for anything else.
absl::StatusOr<ResultLine> ParseFlatJson(absl::string_view json);

// Every "PSRING_RESULT {...}" line of a process's stdout, parsed; other lines are ignored. An error for a
// result line that does not parse.
absl::StatusOr<std::vector<ResultLine>> ExtractResults(absl::string_view output);

}  // namespace psring::bench

#endif  // PSRING_BENCH_RESULT_LINE_H_
