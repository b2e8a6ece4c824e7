// //bench:cluster_run: runs one command per host on the emulated cluster (the harness's namespaces and tc
// links), e.g. a reference allreduce of another library on the same links:
//
//   ./bazelw run //bench:cluster_run -- --hosts=4 --link=100mbit --
//       /usr/bin/python3 bench/tools/gloo_allreduce.py --rank={rank} --world_size={world}
//       --master_addr={master_addr}
//   (one command line; a trailing backslash here would make the compiler join the comment lines)
//
// In every argument, {rank}, {world}, {addr} (this host's address) and {master_addr} (host 0's) are replaced;
// under `bazel run`, arguments that are paths relative to the workspace are made absolute (HostCommand).
// Each process's stdout is printed prefixed with its rank; the exit code is 0 only if every process exits 0.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/emulator/cluster.h"
#include "bench/emulator/cluster_flags.h"
#include "common/flags_usage.h"
#include "common/subprocess.h"
#include "common/status_macros.h"

ABSL_FLAG(int, hosts, psring::bench::ClusterOptions().hosts, "Number of emulated hosts; the command runs once in each.");
ABSL_FLAG(int, timeout, 300, "Seconds after which every process is killed.");

namespace psring::bench {
namespace {

absl::Status Main(const char* argv0, const std::vector<std::string>& command) {
  if (command.empty()) {
    return absl::InvalidArgumentError("no command: put it after --, e.g. -- /bin/echo {rank} {addr}");
  }
  ClusterOptions options = ClusterOptionsFromFlags(argv0);
  options.hosts = absl::GetFlag(FLAGS_hosts);
  ASSIGN_OR_RETURN(std::unique_ptr<EmulatedCluster> cluster, EmulatedCluster::Create(options));
  if (!cluster->emulated()) std::cerr << "cluster_run: loopback only: " << cluster->fallback_reason() << "\n";
  // Under `bazel run` the working directory is the runfiles tree: workspace paths are made absolute.
  const char* workspace_env = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  const std::string workspace = workspace_env != nullptr ? workspace_env : "";
  std::vector<ProcessSpec> specs;
  for (int h = 0; h < cluster->hosts(); ++h) {
    const std::vector<std::string> argv =
        HostCommand(command, h, cluster->hosts(), cluster->HostAddress(h), cluster->HostAddress(0), workspace);
    specs.push_back({absl::StrCat("host ", h), cluster->Command(h, argv)});
  }
  JobOptions job;
  job.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout));
  ASSIGN_OR_RETURN(std::vector<ProcessResult> results, RunJob(specs, job));
  for (size_t h = 0; h < results.size(); ++h) {
    for (absl::string_view line : absl::StrSplit(results[h].stdout_text, '\n', absl::SkipEmpty())) {
      std::cout << "[" << h << "] " << line << "\n";
    }
  }
  std::cout << std::flush;
  return JobStatus(results);
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Runs a command once in every host of an emulated cluster (network namespaces with tc-limited links). "
      "Usage: cluster_run --hosts=N [--link=100mbit] -- COMMAND ARGS... with {rank} {world} {addr} "
      "{master_addr} replaced in each argument.",
      {"bench/"});
  std::vector<char*> rest = psring::ParseFlags(argc, argv);
  std::vector<std::string> command(rest.begin() + 1, rest.end());
  absl::Status status = psring::bench::Main(argv[0], command);
  if (!status.ok()) {
    std::cerr << "cluster_run: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
