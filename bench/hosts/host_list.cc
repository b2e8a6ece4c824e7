#include "bench/hosts/host_list.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace psring::bench {
namespace {

absl::StatusOr<int> PositiveCount(absl::string_view text, absl::string_view what) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", text, "' is not a positive count"));
  }
  return value;
}

// Splits at commas outside brackets ("a[1-2,5],b" -> "a[1-2,5]", "b").
std::vector<std::string> TopLevelItems(absl::string_view list) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      items.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  items.push_back(current);
  return items;
}

}  // namespace

absl::StatusOr<std::vector<HostSlots>> ParseHostList(const std::string& list) {
  std::vector<HostSlots> hosts;
  for (absl::string_view entry : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    HostSlots host;
    const size_t colon = entry.rfind(':');
    host.name = std::string(entry.substr(0, colon));
    if (colon != absl::string_view::npos) {
      ASSIGN_OR_RETURN(host.slots, PositiveCount(entry.substr(colon + 1), absl::StrCat("--hosts entry '", entry, "'")));
    }
    if (host.name.empty()) return absl::InvalidArgumentError(absl::StrCat("--hosts entry '", entry, "' names no host"));
    hosts.push_back(host);
  }
  if (hosts.empty()) {
    return absl::InvalidArgumentError("--hosts names no host: give e.g. --hosts=node1:4,node2:4");
  }
  return hosts;
}

absl::StatusOr<std::vector<HostSlots>> ReadHostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--hostfile: cannot read '", path, "'"));
  std::vector<HostSlots> hosts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    absl::string_view text = line;
    text = text.substr(0, text.find('#'));
    std::vector<std::string> words = absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipWhitespace());
    if (words.empty()) continue;
    HostSlots host{words[0], 1};
    for (size_t i = 1; i < words.size(); ++i) {
      absl::string_view word = words[i];
      const std::string where = absl::StrCat(path, ":", number);
      if (absl::ConsumePrefix(&word, "slots=")) {
        ASSIGN_OR_RETURN(host.slots, PositiveCount(word, where));
      } else if (!absl::StartsWith(word, "max_slots=")) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": '", words[i],
                                                       "' is not 'slots=N' or 'max_slots=N' (Open MPI's format)"));
      }
    }
    hosts.push_back(host);
  }
  if (hosts.empty()) return absl::InvalidArgumentError(absl::StrCat("--hostfile '", path, "' names no host"));
  return hosts;
}

absl::StatusOr<std::vector<std::string>> ExpandSlurmNodelist(const std::string& nodelist) {
  std::vector<std::string> hosts;
  for (const std::string& item : TopLevelItems(nodelist)) {
    if (item.empty()) continue;
    const size_t open = item.find('[');
    if (open == std::string::npos) {
      hosts.push_back(item);
      continue;
    }
    const size_t close = item.find(']', open);
    if (close == std::string::npos || close + 1 != item.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Slurm node list '", nodelist, "': '", item, "' is not prefix[ranges]"));
    }
    const std::string prefix = item.substr(0, open);
    for (absl::string_view range : absl::StrSplit(item.substr(open + 1, close - open - 1), ',')) {
      const std::vector<std::string> ends = absl::StrSplit(range, '-');
      int first = 0, last = 0;
      if (ends.size() > 2 || !absl::SimpleAtoi(ends[0], &first) ||
          !absl::SimpleAtoi(ends.size() == 2 ? ends[1] : ends[0], &last) || last < first || last - first > 100000) {
        return absl::InvalidArgumentError(absl::StrCat("Slurm node list '", nodelist, "': bad range '", range, "'"));
      }
      const size_t width = ends[0].size();  // zero padding: node[01-10]
      for (int i = first; i <= last; ++i) {
        std::string number = absl::StrCat(i);
        if (number.size() < width) number.insert(0, width - number.size(), '0');
        hosts.push_back(prefix + number);
      }
    }
  }
  if (hosts.empty()) return absl::InvalidArgumentError(absl::StrCat("Slurm node list '", nodelist, "' names no host"));
  return hosts;
}

absl::StatusOr<std::vector<int>> ExpandSlurmCounts(const std::string& counts) {
  std::vector<int> out;
  for (absl::string_view item : absl::StrSplit(counts, ',', absl::SkipEmpty())) {
    int repeat = 1;
    const size_t paren = item.find("(x");
    if (paren != absl::string_view::npos) {
      if (item.back() != ')') return absl::InvalidArgumentError(absl::StrCat("Slurm counts '", counts, "': bad '", item, "'"));
      ASSIGN_OR_RETURN(repeat, PositiveCount(item.substr(paren + 2, item.size() - paren - 3), "Slurm counts"));
      item = item.substr(0, paren);
    }
    ASSIGN_OR_RETURN(const int value, PositiveCount(item, "Slurm counts"));
    out.insert(out.end(), repeat, value);
  }
  return out;
}

absl::StatusOr<std::vector<HostSlots>> SlurmHostsFromEnv() {
  const char* nodelist = std::getenv("SLURM_JOB_NODELIST");
  if (nodelist == nullptr || *nodelist == '\0') {
    return absl::FailedPreconditionError(
        "--launcher=srun: SLURM_JOB_NODELIST is not set; run inside an allocation (salloc -N 4 ... or sbatch)");
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> names, ExpandSlurmNodelist(nodelist));
  std::vector<int> slots(names.size(), 1);
  if (const char* cpus = std::getenv("SLURM_JOB_CPUS_PER_NODE"); cpus != nullptr && *cpus != '\0') {
    ASSIGN_OR_RETURN(slots, ExpandSlurmCounts(cpus));
    if (slots.size() != names.size()) {
      return absl::InvalidArgumentError(absl::StrCat("SLURM_JOB_CPUS_PER_NODE '", cpus, "' gives ", slots.size(),
                                                     " counts for the ", names.size(), " nodes of '", nodelist, "'"));
    }
  }
  std::vector<HostSlots> hosts;
  for (size_t i = 0; i < names.size(); ++i) hosts.push_back({names[i], slots[i]});
  return hosts;
}

absl::StatusOr<std::vector<int>> MapByNode(const std::vector<HostSlots>& hosts, int processes) {
  std::vector<int> used(hosts.size(), 0);
  std::vector<int> host_of;
  int total = 0;
  for (const HostSlots& h : hosts) total += h.slots;
  if (processes > total) {
    std::vector<std::string> named;
    for (const HostSlots& h : hosts) named.push_back(absl::StrCat(h.name, ":", h.slots));
    return absl::ResourceExhaustedError(absl::StrCat(
        "the plan needs ", processes, " processes at once (its largest run's workers and servers) but the hosts ",
        absl::StrJoin(named, ","), " have ", total, " slots: add hosts or slots, or lower --nodes"));
  }
  for (size_t h = 0; static_cast<int>(host_of.size()) < processes; h = (h + 1) % hosts.size()) {
    if (used[h] < hosts[h].slots) {
      host_of.push_back(static_cast<int>(h));
      ++used[h];
    }
  }
  return host_of;
}

}  // namespace psring::bench
