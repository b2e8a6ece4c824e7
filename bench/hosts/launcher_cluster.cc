#include "bench/hosts/launcher_cluster.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace psring::bench {
namespace {

constexpr int kProbePort = 29399;            // the probes' listener (one pair at a time)
constexpr int kProbeTimeoutSeconds = 60;
// Variables a remote process needs from the harness's environment (mpirun forwards only those named).
constexpr const char* kForwardedVariables[] = {"LD_LIBRARY_PATH", "PSRING_AUTH_TOKEN", "PSRING_JOB_ID", "PATH"};

// The IPv4 address `name` resolves to here (a numeric address as it is).
absl::StatusOr<std::string> ResolveIpv4(const std::string& name) {
  in_addr numeric{};
  if (inet_pton(AF_INET, name.c_str(), &numeric) == 1) return name;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    return absl::NotFoundError(absl::StrCat("host '", name, "' does not resolve to an IPv4 address here (",
                                            gai_strerror(rc), "): give its address in --hosts/--hostfile"));
  }
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(result->ai_addr)->sin_addr, text, sizeof(text));
  freeaddrinfo(result);
  return std::string(text);
}

// The value after "key=" on the first line starting with `tag` in `text`.
absl::StatusOr<std::string> TaggedValue(const std::string& text, absl::string_view tag, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, tag)) continue;
    for (absl::string_view word : absl::StrSplit(line, ' ')) {
      if (absl::ConsumePrefix(&word, absl::StrCat(key, "="))) return std::string(word);
    }
  }
  return absl::NotFoundError(absl::StrCat("no ", tag, " ", key, "= line"));
}

std::string Tail(const std::string& text, size_t bytes) {
  return text.substr(text.size() > bytes ? text.size() - bytes : 0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LauncherCluster>> LauncherCluster::Create(LauncherOptions options,
                                                                        std::unique_ptr<Cluster> links) {
  if (options.launcher != "mpirun" && options.launcher != "srun") {
    return absl::InvalidArgumentError(absl::StrCat("launcher '", options.launcher, "': use mpirun or srun"));
  }
  if (options.launcher_path.empty()) {
    options.launcher_path = FindExecutable(options.launcher);
    if (options.launcher_path.empty()) {
      return absl::NotFoundError(absl::StrCat(
          options.launcher, " is not in PATH: install ",
          options.launcher == "mpirun" ? "Open MPI (Debian: openmpi-bin)" : "Slurm's client (Debian: slurm-client)",
          " or put it in PATH"));
    }
  }
  if (options.link_probe.empty()) {
    return absl::InvalidArgumentError("no link_probe program (//bench/hosts:link_probe): pass --link_probe");
  }
  std::unique_ptr<LauncherCluster> cluster(new LauncherCluster(std::move(options)));
  cluster->links_ = std::move(links);
  ASSIGN_OR_RETURN(cluster->host_of_, MapByNode(cluster->options_.hosts, cluster->options_.processes));
  RETURN_IF_ERROR(cluster->ProbeHosts());
  if (cluster->links_ == nullptr) RETURN_IF_ERROR(cluster->ProbeLinks());
  return cluster;
}

LauncherCluster::~LauncherCluster() { (void)Destroy(); }

std::vector<std::string> LauncherCluster::PhysicalCommand(int physical, const std::vector<std::string>& argv) const {
  std::vector<std::string> out = options_.prefix;
  out.push_back(options_.launcher_path);
  const std::string& name = options_.hosts[physical].name;
  if (options_.launcher == "mpirun") {
    // One process on that host, unbound (Open MPI binds a lone process to a core: every process of a host
    // would share core 0), the harness's variables forwarded.
    out.insert(out.end(), {"--host", absl::StrCat(name, ":1"), "-np", "1", "--bind-to", "none"});
    if (geteuid() == 0) out.push_back("--allow-run-as-root");
    for (const char* variable : kForwardedVariables) {
      if (std::getenv(variable) != nullptr) out.insert(out.end(), {"-x", variable});
    }
  } else {
    // One task as a job step of the allocation, sharing its CPUs with the run's other steps.
    out.insert(out.end(), {"--nodes=1", "--ntasks=1", absl::StrCat("--nodelist=", name), "--overlap",
                           "--cpu-bind=none", "--kill-on-bad-exit=1", "--quiet", "--export=ALL",
                           absl::StrCat("--job-name=", StepName())});
  }
  out.insert(out.end(), options_.launcher_args.begin(), options_.launcher_args.end());
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::string> LauncherCluster::Command(int host, const std::vector<std::string>& argv) const {
  return PhysicalCommand(host_of_.at(host), argv);
}

std::string LauncherCluster::HostAddress(int host) const { return reports_.at(host_of_.at(host)).address; }

absl::Status LauncherCluster::ProbeHosts() {
  std::vector<ProcessSpec> specs;
  const std::string check = absl::StrCat("--check=", absl::StrJoin(options_.programs, ","));
  for (size_t h = 0; h < options_.hosts.size(); ++h) {
    specs.push_back({absl::StrCat("host ", options_.hosts[h].name),
                     PhysicalCommand(static_cast<int>(h), {options_.link_probe, "--info", check})});
  }
  JobOptions job;
  job.timeout = absl::Seconds(kProbeTimeoutSeconds);
  ASSIGN_OR_RETURN(const std::vector<ProcessResult> results, RunJob(specs, job));
  for (size_t h = 0; h < results.size(); ++h) {
    const std::string& name = options_.hosts[h].name;
    const ProcessResult& r = results[h];
    absl::StatusOr<std::string> cores = TaggedValue(r.stdout_text, "PSRING_HOST", "cores");
    if (r.exit_code != 0 || !cores.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "host ", name, ": ", options_.launcher, " could not run ", options_.link_probe, " there (",
          r.timed_out ? "timed out" : absl::StrCat("exit ", r.exit_code), "): ", Tail(r.stderr_tail, 600),
          options_.launcher == "mpirun"
              ? " -- check that `ssh " + name + " true` works without a password and that the bench binaries are "
                "at the same path there"
              : " -- check the allocation (sinfo, squeue) and that the binaries are at the same path on the node"));
    }
    HostReport report;
    report.slots = options_.hosts[h].slots;
    report.name = TaggedValue(r.stdout_text, "PSRING_HOST", "name").value_or(name);
    (void)absl::SimpleAtoi(*cores, &report.cores);
    const std::string missing = TaggedValue(r.stdout_text, "PSRING_HOST", "missing").value_or("");
    if (!missing.empty()) {
      return absl::NotFoundError(absl::StrCat("host ", name, " lacks ", missing,
                                              ": copy the bench binaries (or the bench bundle) to the same path "
                                              "on every host"));
    }
    ASSIGN_OR_RETURN(report.address, ResolveIpv4(name));
    reports_.push_back(report);
  }
  return absl::OkStatus();
}

absl::StatusOr<double> LauncherCluster::ProbePair(int from, int to, const std::vector<std::string>& mode_flags,
                                                  const std::string& key) const {
  const std::string at = absl::StrCat(reports_[to].address, ":", kProbePort);
  std::vector<std::string> listen = {options_.link_probe, "--listen=" + at,
                                     absl::StrCat("--timeout=", kProbeTimeoutSeconds)};
  std::vector<std::string> connect = {options_.link_probe, "--connect=" + at,
                                      absl::StrCat("--timeout=", kProbeTimeoutSeconds)};
  listen.insert(listen.end(), mode_flags.begin(), mode_flags.end());
  connect.insert(connect.end(), mode_flags.begin(), mode_flags.end());
  std::vector<ProcessSpec> specs = {
      {absl::StrCat("probe on ", options_.hosts[to].name), PhysicalCommand(to, listen), /*service=*/true,
       "listening on"},
      {absl::StrCat("probe from ", options_.hosts[from].name), PhysicalCommand(from, connect)}};
  JobOptions job;
  job.timeout = absl::Seconds(kProbeTimeoutSeconds + 30);
  ASSIGN_OR_RETURN(const std::vector<ProcessResult> results, RunJob(specs, job));
  const absl::Status status = JobStatus(results);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("the link ", options_.hosts[from].name, " -> ",
                                               options_.hosts[to].name, " could not be measured: ", status.message()));
  }
  for (const ProcessResult& r : results) {
    absl::StatusOr<std::string> value = TaggedValue(r.stdout_text, "PSRING_PROBE", key);
    double number = 0;
    if (value.ok() && absl::SimpleAtod(*value, &number) && number > 0) return number;
  }
  return absl::InternalError(absl::StrCat("link_probe printed no ", key, " for ", options_.hosts[from].name, " -> ",
                                          options_.hosts[to].name));
}

absl::Status LauncherCluster::ProbeLinks() {
  const int n = static_cast<int>(options_.hosts.size());
  goodput_.assign(n, std::vector<double>(n, 0));
  rtt_.assign(n, std::vector<double>(n, 0));
  std::vector<double> rtts;
  double slowest = 0;
  for (int from = 0; from < n; ++from) {
    for (int to = 0; to < n; ++to) {
      if (from == to || (!options_.measure_links && (from > 1 || to > 1))) continue;
      ASSIGN_OR_RETURN(rtt_[from][to], ProbePair(from, to, {"--mode=rtt", "--rounds=21"}, "rtt_s"));
      ASSIGN_OR_RETURN(goodput_[from][to],
                       ProbePair(from, to, {"--mode=stream", absl::StrCat("--bytes=", options_.stream_bytes)},
                                 "stream_bytes_per_second"));
      rtts.push_back(rtt_[from][to]);
      slowest = slowest == 0 ? goodput_[from][to] : std::min(slowest, goodput_[from][to]);
    }
  }
  if (!rtts.empty()) {
    std::nth_element(rtts.begin(), rtts.begin() + rtts.size() / 2, rtts.end());
    latency_seconds_ = rtts[rtts.size() / 2] / 2;
  }
  link_bytes_per_second_ = slowest;
  return absl::OkStatus();
}

std::string LauncherCluster::LinkMatrix() const {
  if (goodput_.size() < 2) return "";
  std::string out = "# link matrix (one TCP stream's goodput MB/s / median round trip ms, row -> column):\n#";
  absl::StrAppend(&out, absl::StrFormat(" %-14s", "from \\ to"));
  for (const HostReport& r : reports_) absl::StrAppend(&out, absl::StrFormat(" %16s", r.name.substr(0, 16)));
  for (size_t from = 0; from < goodput_.size(); ++from) {
    absl::StrAppend(&out, "\n#", absl::StrFormat(" %-14s", reports_[from].name.substr(0, 14)));
    for (size_t to = 0; to < goodput_.size(); ++to) {
      absl::StrAppend(&out, goodput_[from][to] > 0 ? absl::StrFormat(" %8.1f/%6.3f", goodput_[from][to] / 1e6,
                                                                     rtt_[from][to] * 1e3)
                                                   : absl::StrFormat(" %16s", "-"));
    }
  }
  return out + "\n";
}

std::string LauncherCluster::Describe() const {
  std::vector<std::string> hosts;
  for (size_t h = 0; h < reports_.size(); ++h) {
    hosts.push_back(absl::StrCat(options_.hosts[h].name, " (", reports_[h].address, ", ", reports_[h].cores,
                                 " cores, ", reports_[h].slots, reports_[h].slots == 1 ? " slot)" : " slots)"));
  }
  std::string text = absl::StrCat(hosts.size(), hosts.size() == 1 ? " host" : " hosts", " through ",
                                  options_.launcher, ": ", absl::StrJoin(hosts, ", "), "; ", host_of_.size(),
                                  " processes placed by node");
  if (links_) return absl::StrCat(text, "; links of ", links_->Describe());
  if (hosts.size() < 2) return absl::StrCat(text, "; one host: no link between hosts (loopback speeds)");
  return absl::StrCat(text, absl::StrFormat("; links measured, not shaped: slowest pair %.1f MB/s, one-way %.3f ms",
                                            link_bytes_per_second_ / 1e6, latency_seconds_ * 1e3));
}

double LauncherCluster::link_bytes_per_second() const {
  return links_ ? links_->link_bytes_per_second() : link_bytes_per_second_;
}

double LauncherCluster::latency_seconds() const { return links_ ? links_->latency_seconds() : latency_seconds_; }

double LauncherCluster::port_buffer_bytes() const {
  return links_ ? links_->port_buffer_bytes() : options_.port_buffer_bytes;
}

const std::string& LauncherCluster::latency_method() const {
  return links_ ? links_->latency_method() : latency_method_;
}

absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> LauncherCluster::AllHostLinkBytes() const {
  if (links_ == nullptr) return absl::FailedPreconditionError("real hosts: no per-host link counters");
  ASSIGN_OR_RETURN(const auto physical, links_->AllHostLinkBytes());
  // Logical host -> its physical host's counters (the rig has one slot per host, so they are the same).
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int p : host_of_) {
    if (p >= static_cast<int>(physical.size())) return absl::InternalError("link counters of fewer hosts");
    out.push_back(physical[p]);
  }
  return out;
}

absl::StatusOr<DelayCounters> LauncherCluster::ReadDelayCounters() {
  if (links_ == nullptr) return absl::FailedPreconditionError("real hosts: no delay program");
  return links_->ReadDelayCounters();
}

absl::StatusOr<double> LauncherCluster::MeasureStream(int from, int to, size_t bytes) const {
  return ProbePair(host_of_.at(from), host_of_.at(to), {"--mode=stream", absl::StrCat("--bytes=", bytes)},
                   "stream_bytes_per_second");
}

absl::StatusOr<double> LauncherCluster::MeasureRtt(int from, int to, int rounds) const {
  return ProbePair(host_of_.at(from), host_of_.at(to), {"--mode=rtt", absl::StrCat("--rounds=", rounds)}, "rtt_s");
}

std::string LauncherCluster::StepName() { return absl::StrCat("psring-bench-", getpid()); }

// A job step whose srun was SIGKILLed together with its process group (the harness's kill on a timeout) keeps
// running in Slurm 22.05 until the allocation ends: cancel the steps this process started (named StepName()).
void LauncherCluster::CancelLeftoverSteps() const {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (options_.launcher != "srun" || job == nullptr) return;
  JobOptions quick;
  quick.timeout = absl::Seconds(20);
  absl::StatusOr<std::vector<ProcessResult>> listed = RunJob(
      {{"squeue", {"squeue", "--steps", absl::StrCat("--jobs=", job), "--noheader", "--format=%i %j"}}}, quick);
  if (!listed.ok() || listed->empty()) return;
  std::vector<ProcessSpec> cancels;
  for (absl::string_view line : absl::StrSplit((*listed)[0].stdout_text, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() == 2 && words[1] == StepName()) {
      cancels.push_back({"scancel " + words[0], {"scancel", words[0]}});
    }
  }
  if (!cancels.empty()) (void)RunJob(cancels, quick);
}

absl::Status LauncherCluster::Destroy() {
  CancelLeftoverSteps();
  options_.companion.reset();
  if (links_ == nullptr) return absl::OkStatus();
  return links_->Destroy();
}

}  // namespace psring::bench
