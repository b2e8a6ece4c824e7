// //bench:cluster_run: runs one command per host on the emulated cluster (the harness's namespaces and tc
// links), e.g. a reference allreduce of another library on the same links:
//
//   ./bazelw run //bench:cluster_run -- --hosts=4 --link=100mbit -- \
//       /usr/bin/python3 bench/tools/gloo_allreduce.py --rank={rank} --world_size={world} \
//       --master_addr={master_addr}
//
// In every argument, {rank}, {world}, {addr} (this host's address) and {master_addr} (host 0's) are replaced.
// Each process's stdout is printed prefixed with its rank; the exit code is 0 only if every process exits 0.
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "bench/cluster.h"
#include "bench/cluster_flags.h"
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
  std::vector<ProcessSpec> specs;
  for (int h = 0; h < cluster->hosts(); ++h) {
    std::vector<std::string> argv;
    for (const auto& arg : command) {
      argv.push_back(absl::StrReplaceAll(arg, {{"{rank}", absl::StrCat(h)},
                                               {"{world}", absl::StrCat(cluster->hosts())},
                                               {"{addr}", cluster->HostAddress(h)},
                                               {"{master_addr}", cluster->HostAddress(0)}}));
    }
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
