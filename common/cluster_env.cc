#include "common/cluster_env.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psring {
namespace {

using GetEnv = std::function<const char*(const char*)>;

// A launcher's variable names; empty names are not provided by that launcher.
struct Source {
  const char* name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
};

constexpr Source kSources[] = {
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
};

constexpr int kDefaultMasterPort = 29500;

// Launchers' per-host rank variables, read when the winning source gave none (--rank/--world_size under
// mpirun, a torchrun-style RANK with an MPI launcher's local rank, ...). MPI_LOCALRANKID: MPICH, Intel MPI.
constexpr const char* kLocalRankVariables[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                               "SLURM_LOCALID", "LOCAL_RANK"};

const char* Lookup(const GetEnv& getenv_fn, const char* name) {
  const char* v = getenv_fn(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

absl::StatusOr<std::optional<int>> IntVar(const GetEnv& getenv_fn, const char* name) {
  const char* v = Lookup(getenv_fn, name);
  if (v == nullptr) return std::optional<int>();
  int value = 0;
  if (!absl::SimpleAtoi(v, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "='", v, "' is not an integer"));
  }
  return std::optional<int>(value);
}

absl::Status Validate(const ClusterEnv& env) {
  const std::string from = absl::StrCat(" (from ", env.source, ")");
  if (env.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world size ", env.world_size, " must be >= 1", from));
  }
  if (env.rank < 0 || env.rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", env.rank, " is out of range [0, ", env.world_size - 1, "]", from));
  }
  if (env.local_rank < 0 || env.local_rank >= env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("local rank ", env.local_rank, " (from ",
                                                   env.local_rank_source, ") is out of range [0, ",
                                                   env.world_size - 1, "]", from));
  }
  if (env.master_port < 1 || env.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("master port ", env.master_port, " is out of range [1, 65535]"));
  }
  if (env.master_addr.empty()) return absl::InvalidArgumentError("master address is empty");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> FirstSlurmHost(const std::string& nodelist) {
  // "node[01-04,07],login1" -> "node01": copy characters up to the first top-level comma, and of each
  // bracketed range list keep the first number (with its zero padding).
  std::string host;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] == '[') {
      const size_t close = nodelist.find(']', i);
      if (close == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("SLURM_NODELIST '", nodelist, "' has an unclosed '['"));
      }
      const std::string inner = nodelist.substr(i + 1, close - i - 1);
      const std::string first = inner.substr(0, inner.find_first_of(",-"));
      if (first.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("SLURM_NODELIST '", nodelist, "' has an empty range"));
      }
      host += first;
      i = close + 1;
    } else {
      host += nodelist[i++];
    }
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("SLURM_NODELIST '", nodelist, "' names no host"));
  }
  return host;
}

std::string ThisHostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

absl::StatusOr<int> LocalRankFromStore(Store* store, int rank, int world_size, const std::string& host,
                                       const std::string& prefix, absl::Duration timeout) {
  const std::string base = absl::StrCat(prefix, "/host/");
  RETURN_IF_ERROR(store->Set(absl::StrCat(base, rank), host));
  int local_rank = 0;
  for (int r = 0; r < rank; ++r) {
    absl::StatusOr<std::string> other = store->Get(absl::StrCat(base, r), timeout);
    if (!other.ok()) {
      return absl::Status(
          other.status().code(),
          absl::StrCat("deriving the local rank (no --local_rank, no launcher variable): rank ", r,
                       " did not publish its host: ", other.status().message()));
    }
    local_rank += *other == host;
  }
  return local_rank;
}

absl::StatusOr<int> DeviceForLocalRank(int local_rank, const std::string& local_rank_source, int device_count,
                                       const char* visible_devices) {
  if (local_rank >= 0 && local_rank < device_count) return local_rank;
  const bool bound_by_launcher = device_count == 1 && visible_devices != nullptr && *visible_devices != '\0';
  if (local_rank >= 0 && bound_by_launcher) return 0;
  return absl::FailedPreconditionError(absl::StrCat(
      "local rank ", local_rank, " (from ",
      local_rank_source.empty() ? "nothing: default" : local_rank_source,
      ") has no GPU of its own: this process sees ", device_count, " CUDA device",
      device_count == 1 ? "" : "s", " (CUDA_VISIBLE_DEVICES=", visible_devices ? visible_devices : "unset",
      "); run at most ", device_count, " GPU rank", device_count == 1 ? "" : "s",
      " per host, fix --local_rank, or let the launcher give each rank one GPU"));
}

absl::StatusOr<ClusterEnv> DiscoverClusterEnv(const ClusterFlags& flags, const GetEnv& getenv_arg) {
  const GetEnv getenv_fn =
      getenv_arg ? getenv_arg : [](const char* n) -> const char* { return std::getenv(n); };
  ClusterEnv env;
  env.source = "default";

  if (flags.rank.has_value() || flags.world_size.has_value()) {
    if (!flags.rank.has_value() || !flags.world_size.has_value()) {
      return absl::InvalidArgumentError(
          "--rank and --world_size must be given together (or neither, to read them from mpirun, Slurm or "
          "torchrun-style environment variables)");
    }
    env.source = "flags";
    env.rank = *flags.rank;
    env.world_size = *flags.world_size;
  } else {
    for (const Source& src : kSources) {
      ASSIGN_OR_RETURN(std::optional<int> rank, IntVar(getenv_fn, src.rank));
      ASSIGN_OR_RETURN(std::optional<int> size, IntVar(getenv_fn, src.world_size));
      if (!rank.has_value() && !size.has_value()) continue;
      if (!rank.has_value() || !size.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(src.name, " environment is incomplete: ", src.rank,
                                                       rank ? " is set but " : " is missing while ",
                                                       src.world_size, rank ? " is missing" : " is set"));
      }
      ASSIGN_OR_RETURN(std::optional<int> local, IntVar(getenv_fn, src.local_rank));
      env.source = src.name;
      env.rank = *rank;
      env.world_size = *size;
      if (local.has_value()) {
        env.local_rank = *local;
        env.local_rank_source = src.local_rank;
      }
      if (env.source == "slurm") {
        const char* nodes = Lookup(getenv_fn, "SLURM_STEP_NODELIST");
        if (nodes == nullptr) nodes = Lookup(getenv_fn, "SLURM_JOB_NODELIST");
        if (nodes == nullptr) nodes = Lookup(getenv_fn, "SLURM_NODELIST");
        if (nodes != nullptr) {
          ASSIGN_OR_RETURN(env.master_addr, FirstSlurmHost(nodes));
        }
      }
      break;
    }
  }
  for (const char* name : kLocalRankVariables) {
    if (!env.local_rank_source.empty()) break;
    ASSIGN_OR_RETURN(std::optional<int> local, IntVar(getenv_fn, name));
    if (!local.has_value()) continue;
    env.local_rank = *local;
    env.local_rank_source = name;
  }
  if (flags.local_rank.has_value()) {
    env.local_rank = *flags.local_rank;
    env.local_rank_source = "--local_rank";
  }
  if (env.local_rank_source.empty() && env.world_size == 1) env.local_rank_source = "one rank";

  // The master: flag, else MASTER_ADDR/MASTER_PORT (torchrun sets them; with mpirun or Slurm users may),
  // else Slurm's first node, else the defaults.
  if (const char* addr = Lookup(getenv_fn, "MASTER_ADDR"); addr != nullptr) env.master_addr = addr;
  if (flags.master_addr.has_value() && !flags.master_addr->empty()) env.master_addr = *flags.master_addr;
  ASSIGN_OR_RETURN(std::optional<int> port, IntVar(getenv_fn, "MASTER_PORT"));
  env.master_port = port.value_or(kDefaultMasterPort);
  if (flags.master_port.has_value()) env.master_port = *flags.master_port;

  RETURN_IF_ERROR(Validate(env));
  return env;
}

}  // namespace psring
