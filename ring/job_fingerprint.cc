#include "ring/job_fingerprint.h"

#include <cstdlib>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace psring::ring {
namespace {

std::string Encode(const JobFingerprint& f) {
  std::string out;
  for (const auto& [flag, value] : f) absl::StrAppend(&out, flag, "=", value, "\n");
  return out;
}

std::vector<std::pair<std::string, std::string>> Decode(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    out.push_back(std::move(kv));
  }
  return out;
}

// Rank 0's comparison: OK, or the message every rank fails with.
absl::Status Compare(const JobFingerprint& zero, const std::string& other_text, int r) {
  const auto other = Decode(other_text);
  std::map<std::string, std::string> theirs(other.begin(), other.end());
  for (const auto& [flag, value] : zero) {
    auto it = theirs.find(flag);
    if (it == theirs.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, " does not report --", flag, "; run the same psring build on every rank"));
    }
    if (it->second != value) {
      return absl::InvalidArgumentError(absl::StrCat("ranks disagree on --", flag, ": rank 0 has ", value,
                                                     ", rank ", r, " has ", it->second,
                                                     "; start every rank with the same --", flag));
    }
    theirs.erase(it);
  }
  if (!theirs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", r, " reports --", theirs.begin()->first,
                                                   " that rank 0 does not; run the same psring build on "
                                                   "every rank"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string FingerprintValue(float value) {
  for (int digits = 6;; ++digits) {  // 9 significant digits always round-trip a float
    const std::string text = absl::StrFormat("%.*g", digits, value);
    if (digits >= 9 || std::strtof(text.c_str(), nullptr) == value) return text;
  }
}

absl::Status AgreeOnFingerprint(Store* store, int rank, int world_size, const JobFingerprint& mine,
                                const std::string& prefix, absl::Duration timeout) {
  const std::string base = absl::StrCat(prefix, "/fingerprint/");
  RETURN_IF_ERROR(store->Set(absl::StrCat(base, rank), Encode(mine)));
  if (rank == 0) {
    absl::Status verdict;
    for (int r = 1; r < world_size && verdict.ok(); ++r) {
      ASSIGN_OR_RETURN(std::string theirs, store->Get(absl::StrCat(base, r), timeout));
      verdict = Compare(mine, theirs, r);
    }
    RETURN_IF_ERROR(store->Set(absl::StrCat(base, "verdict"),
                               verdict.ok() ? "ok" : absl::StrCat("error:", verdict.message())));
  }
  ASSIGN_OR_RETURN(std::string verdict, store->Get(absl::StrCat(base, "verdict"), timeout));
  if (!absl::StartsWith(verdict, "error:")) return absl::OkStatus();
  const absl::Status mismatch = absl::InvalidArgumentError(verdict.substr(6));
  // Rank 0 serves the store, so it leaves only once every rank has read the verdict (or the timeout):
  // a slow rank would otherwise find the store gone and fail without the reason.
  if (rank != 0) {
    absl::StatusOr<int64_t> read = store->Add(absl::StrCat(base, "read"), 1);
    if (read.ok() && *read == world_size - 1) (void)store->Set(absl::StrCat(base, "all_read"), "1");
  } else {
    (void)store->Get(absl::StrCat(base, "all_read"), timeout);  // the mismatch is the error either way
  }
  return mismatch;
}

}  // namespace psring::ring
