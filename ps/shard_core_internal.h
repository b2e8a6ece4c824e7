// What more than one of ShardCore's .cc files needs (ps/shard_core*.cc); private to //ps:shard_core.
#ifndef PSRING_PS_SHARD_CORE_INTERNAL_H_
#define PSRING_PS_SHARD_CORE_INTERNAL_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "ps/shard_layout.h"

namespace psring::ps {

// "flat (--bucket_mb=0)", "5 buckets (--bucket_mb=25)".
inline std::string DescribeLayout(const ShardLayout& layout, const std::string& settings) {
  return settings.empty() ? layout.Describe() : absl::StrCat(layout.Describe(), " (", settings, ")");
}

}  // namespace psring::ps

#endif  // PSRING_PS_SHARD_CORE_INTERNAL_H_
