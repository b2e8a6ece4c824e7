#include "bench/cluster.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <thread>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/emergency_cleanup.h"
#include "common/subprocess.h"
#include "common/socket.h"
#include "common/status_macros.h"

namespace psring::bench {
namespace {

constexpr int kCapNetAdmin = 12;

const std::string& Ip() {
  static const std::string* ip = new std::string(FindExecutable("ip"));
  return *ip;
}

const std::string& Tc() {
  static const std::string* tc = new std::string(FindExecutable("tc"));
  return *tc;
}

bool HasCapNetAdmin() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "CapEff:")) continue;
    uint64_t caps = std::strtoull(std::string(absl::StripAsciiWhitespace(rest)).c_str(), nullptr, 16);
    return (caps >> kCapNetAdmin) & 1;
  }
  return false;
}

bool ProcessAlive(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// Kills what still runs inside `ns`, then deletes it.
absl::Status DeleteNamespace(const std::string& ns) {
  absl::StatusOr<std::string> pids = RunCommand({Ip(), "netns", "pids", ns});
  if (pids.ok()) {
    for (absl::string_view token : absl::StrSplit(*pids, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(token, &pid) && pid > 1) kill(pid, SIGKILL);
    }
  }
  absl::Status deleted = RunCommand({Ip(), "netns", "del", ns}).status();
  UnregisterNamespace(ns);
  return deleted;
}

}  // namespace

absl::StatusOr<double> ParseLinkRate(const std::string& rate) {
  const std::string lower = absl::AsciiStrToLower(rate);
  absl::string_view text = lower;
  double scale = 1;
  for (auto [suffix, factor] : {std::pair<const char*, double>{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3},
                                {"bit", 1}}) {
    if (absl::ConsumeSuffix(&text, suffix)) {
      scale = factor;
      break;
    }
  }
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || value < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad link rate '", rate, "': use a tc rate like 100mbit, 1gbit, 500kbit (decimal bits per second)"));
  }
  return value * scale;
}

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv) {
  JobOptions options;
  options.timeout = absl::Seconds(30);
  ASSIGN_OR_RETURN(std::vector<ProcessResult> results, RunJob({{argv.empty() ? "" : argv[0], argv}}, options));
  const ProcessResult& r = results[0];
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat(
        "command failed (", r.timed_out ? "timed out" : absl::StrCat("exit ", r.exit_code), "): ",
        absl::StrJoin(argv, " "), ": ", absl::StripAsciiWhitespace(r.stderr_tail)));
  }
  return r.stdout_text;
}

bool NamespaceExists(const std::string& name) { return access(("/run/netns/" + name).c_str(), F_OK) == 0; }

absl::StatusOr<std::vector<std::string>> CleanupLeftoverNamespaces(const std::string& family) {
  ASSIGN_OR_RETURN(std::string list, RunCommand({Ip(), "netns", "list"}));
  std::vector<std::string> removed;
  for (absl::string_view line : absl::StrSplit(list, '\n', absl::SkipEmpty())) {
    // "psr1234-h0 (id: 7)" or just "psr1234-h0".
    std::string name(line.substr(0, line.find(' ')));
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, family)) continue;
    size_t dash = rest.find('-');
    int pid = 0;
    if (dash == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, dash), &pid) || pid <= 0) continue;
    if (ProcessAlive(pid)) continue;
    absl::Status deleted = DeleteNamespace(name);
    // Another harness starting at the same time may have removed it first: that is fine.
    if (!deleted.ok() && NamespaceExists(name)) return deleted;
    if (deleted.ok()) removed.push_back(name);
  }
  return removed;
}

absl::StatusOr<std::unique_ptr<EmulatedCluster>> EmulatedCluster::Create(const ClusterOptions& options) {
  if (options.hosts < 1 || options.hosts > 60000) {
    return absl::InvalidArgumentError(absl::StrCat("cluster needs 1..60000 hosts, got ", options.hosts));
  }
  std::unique_ptr<EmulatedCluster> cluster(new EmulatedCluster(options));
  double bits = 0;
  if (!options.link.empty()) {
    ASSIGN_OR_RETURN(bits, ParseLinkRate(options.link));
  }
  std::string reason;
  if (options.force_loopback) {
    reason = "loopback requested";
  } else if (!HasCapNetAdmin()) {
    reason = "no CAP_NET_ADMIN (run as root for the emulated cluster)";
  } else {
    InstallEmergencyCleanup();
    absl::StatusOr<std::vector<std::string>> leftovers = CleanupLeftoverNamespaces(options.family);
    if (!leftovers.ok()) return leftovers.status();
    absl::Status built = cluster->Build();
    if (built.ok()) {
      cluster->emulated_ = true;
      cluster->link_bytes_per_second_ = bits / 8;
      return cluster;
    }
    // Do not hide real configuration errors (bad rate, missing netem): only a namespace that cannot be
    // created at all means "no namespaces here".
    const bool no_namespaces = cluster->created_.empty();
    absl::Status destroyed = cluster->Destroy();
    if (!no_namespaces) return built;
    if (!destroyed.ok()) return destroyed;
    reason = absl::StrCat("cannot create network namespaces: ", built.message());
  }
  if (!options.allow_loopback_fallback && !options.force_loopback) {
    return absl::FailedPreconditionError(absl::StrCat("emulated cluster unavailable: ", reason));
  }
  cluster->fallback_reason_ = reason;
  cluster->bridge_namespace_.clear();
  cluster->host_namespaces_.assign(options.hosts, "");
  return cluster;
}

absl::Status EmulatedCluster::Build() {
  const std::string prefix = absl::StrCat(options_.family, getpid(), "-");
  bridge_namespace_ = prefix + "br";
  for (int i = 0; i < options_.hosts; ++i) host_namespaces_.push_back(absl::StrCat(prefix, "h", i));

  auto add_namespace = [&](const std::string& ns) -> absl::Status {
    // Registered first: a Ctrl-C between `add` and the push below must still remove it.
    RegisterNamespace(ns);
    absl::Status added = RunCommand({Ip(), "netns", "add", ns}).status();
    if (!added.ok()) {
      UnregisterNamespace(ns);
      return added;
    }
    created_.push_back(ns);
    return absl::OkStatus();
  };
  const std::string& br = bridge_namespace_;
  RETURN_IF_ERROR(add_namespace(br));
  RETURN_IF_ERROR(RunCommand({Ip(), "-n", br, "link", "add", "br0", "type", "bridge"}).status());
  RETURN_IF_ERROR(RunCommand({Ip(), "-n", br, "link", "set", "br0", "up"}).status());
  for (int i = 0; i < options_.hosts; ++i) {
    const std::string& host = host_namespaces_[i];
    const std::string port = absl::StrCat("h", i);
    RETURN_IF_ERROR(add_namespace(host));
    RETURN_IF_ERROR(RunCommand({Ip(), "-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                                "netns", host})
                        .status());
    RETURN_IF_ERROR(RunCommand({Ip(), "-n", br, "link", "set", port, "master", "br0"}).status());
    RETURN_IF_ERROR(RunCommand({Ip(), "-n", br, "link", "set", port, "up"}).status());
    RETURN_IF_ERROR(
        RunCommand({Ip(), "-n", host, "addr", "add", HostAddress(i) + "/15", "dev", "eth0"}).status());
    RETURN_IF_ERROR(RunCommand({Ip(), "-n", host, "link", "set", "eth0", "up"}).status());
    RETURN_IF_ERROR(RunCommand({Ip(), "-n", host, "link", "set", "lo", "up"}).status());
    RETURN_IF_ERROR(ShapeLink(host, "eth0"));
    RETURN_IF_ERROR(ShapeLink(br, port));
  }
  return absl::OkStatus();
}

absl::Status EmulatedCluster::ShapeLink(const std::string& ns, const std::string& dev) {
  double bits = 0;
  if (!options_.link.empty()) {
    ASSIGN_OR_RETURN(bits, ParseLinkRate(options_.link));
  }
  std::string parent = "root";
  if (!options_.delay.empty()) {
    absl::Status netem = RunCommand({Tc(), "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:",
                                     "netem", "delay", options_.delay, "limit", "100000"})
                             .status();
    if (!netem.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot add latency --delay=", options_.delay, " (the kernel needs sch_netem; run without --delay): ",
          netem.message()));
    }
    parent = "1:1";
  }
  if (bits <= 0) return absl::OkStatus();
  // Burst: 10 ms of traffic (at least 10 full frames), so TCP can fill the link; queue: --queue (50 ms).
  const int64_t burst = std::max<int64_t>(static_cast<int64_t>(bits / 8 / 100), 15140);
  std::vector<std::string> argv = {Tc(), "-n", ns, "qdisc", "add", "dev", dev};
  if (parent == "root") {
    argv.push_back("root");
  } else {
    argv.insert(argv.end(), {"parent", parent});
  }
  argv.insert(argv.end(), {"handle", "10:", "tbf", "rate", absl::StrCat(static_cast<int64_t>(bits), "bit"),
                           "burst", absl::StrCat(burst), "latency", options_.queue});
  return RunCommand(argv).status();
}

std::string EmulatedCluster::HostAddress(int host) const {
  if (!emulated_ && bridge_namespace_.empty()) return "127.0.0.1";
  const int k = host + 1;
  return absl::StrCat("198.18.", k / 256, ".", k % 256);
}

std::string EmulatedCluster::HostNamespace(int host) const {
  return emulated_ ? host_namespaces_.at(host) : "";
}

std::vector<std::string> EmulatedCluster::Command(int host, const std::vector<std::string>& argv) const {
  if (!emulated_) return argv;
  std::vector<std::string> full = {Ip(), "netns", "exec", host_namespaces_.at(host)};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

absl::StatusOr<std::pair<int64_t, int64_t>> EmulatedCluster::HostLinkBytes(int host) const {
  if (!emulated_) return absl::FailedPreconditionError("loopback cluster: no per-host link counters");
  // `ip netns exec` mounts the namespace's own sysfs.
  ASSIGN_OR_RETURN(std::string text, RunCommand(Command(host, {FindExecutable("cat"),
                                                               "/sys/class/net/eth0/statistics/tx_bytes",
                                                               "/sys/class/net/eth0/statistics/rx_bytes"})));
  std::vector<std::string> fields = absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  int64_t tx = 0, rx = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &tx) || !absl::SimpleAtoi(fields[1], &rx)) {
    return absl::InternalError(absl::StrCat("unexpected interface counters of host ", host, ": '", text, "'"));
  }
  return std::make_pair(tx, rx);
}

namespace {

// Moves the calling thread (only it) into the named network namespace.
absl::Status EnterNamespace(const std::string& ns) {
  if (ns.empty()) return absl::OkStatus();
  const std::string path = "/run/netns/" + ns;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  const int rc = setns(fd, CLONE_NEWNET);
  const int saved = errno;
  close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat("setns ", path, ": ", std::strerror(saved)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> EmulatedCluster::MeasureStream(int from, int to, size_t bytes) const {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  const std::string to_addr = HostAddress(to);
  std::promise<absl::StatusOr<int>> port_promise;
  std::future<absl::StatusOr<int>> port_future = port_promise.get_future();
  absl::Status server_status, client_status;
  double seconds = 0;
  size_t measured_bytes = 0;
  std::thread server([&] {
    auto run = [&]() -> absl::Status {
      RETURN_IF_ERROR(EnterNamespace(HostNamespace(to)));
      ASSIGN_OR_RETURN(Socket listener, ListenTcp(to_addr, 0));
      ASSIGN_OR_RETURN(int port, LocalPort(listener));
      port_promise.set_value(port);
      ASSIGN_OR_RETURN(Socket peer, AcceptTcp(listener, deadline));
      std::vector<char> buffer(bytes);
      // The clock starts after the first quarter: by then the token bucket's burst and the socket buffers
      // are used up and the stream runs at the shaped rate.
      const size_t head = bytes / 4;
      RETURN_IF_ERROR(RecvAll(peer, buffer.data(), head, deadline));
      const absl::Time start = absl::Now();
      RETURN_IF_ERROR(RecvAll(peer, buffer.data() + head, bytes - head, deadline));
      seconds = absl::ToDoubleSeconds(absl::Now() - start);
      measured_bytes = bytes - head;
      return absl::OkStatus();
    };
    server_status = run();
    if (!server_status.ok()) {
      try {
        port_promise.set_value(server_status);
      } catch (const std::future_error&) {
        // The port was already published; the client sees the failure as a closed connection.
      }
    }
  });
  std::thread client([&] {
    auto run = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(int port, port_future.get());
      RETURN_IF_ERROR(EnterNamespace(HostNamespace(from)));
      ASSIGN_OR_RETURN(Socket socket, ConnectTcp(to_addr, port, deadline));
      std::vector<char> buffer(bytes, 'x');
      return SendAll(socket, buffer.data(), bytes, deadline);
    };
    client_status = run();
  });
  server.join();
  client.join();
  RETURN_IF_ERROR(server_status);
  RETURN_IF_ERROR(client_status);
  if (seconds <= 0) return absl::InternalError("stream measurement took no time");
  return measured_bytes / seconds;
}

absl::Status EmulatedCluster::Destroy() {
  absl::Status first;
  while (!created_.empty()) {
    absl::Status deleted = DeleteNamespace(created_.back());
    if (first.ok()) first = deleted;
    created_.pop_back();
  }
  return first;
}

EmulatedCluster::~EmulatedCluster() {
  absl::Status destroyed = Destroy();
  (void)destroyed;
}

}  // namespace psring::bench
