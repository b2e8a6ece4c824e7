// //bench/hosts:link_probe — what a real cluster's hosts and links are, measured by the harness through its
// launcher (mpirun, srun) because nothing shapes a real link (bench/hosts/launcher_cluster.h):
//
//   link_probe --info --check=/path/ring_worker,/path/ps/server   # PSRING_HOST name=node1 cores=16 missing=
//   link_probe --listen=10.0.0.2:29399 --mode=stream             # one connection; prints the goodput
//   link_probe --connect=10.0.0.2:29399 --mode=stream --bytes=67108864
//   link_probe --listen=10.0.0.2:29399 --mode=rtt --rounds=21    # echoes; the connecting end prints the RTT
//   link_probe --connect=10.0.0.2:29399 --mode=rtt --rounds=21
//
// Each side gives up after --timeout seconds. Results are single lines starting "PSRING_PROBE" or "PSRING_HOST".
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/binary_main.h"
#include "common/flags_usage.h"
#include "common/socket.h"
#include "common/status_macros.h"

ABSL_FLAG(bool, info, false, "Print this host's name, its usable cores and which --check paths are not executable.");
ABSL_FLAG(std::string, check, "", "Comma-separated paths --info checks are executable files on this host.");
ABSL_FLAG(std::string, listen, "", "ADDR:PORT: accept one connection there (the receiving / echoing end).");
ABSL_FLAG(std::string, connect, "", "ADDR:PORT: connect there (the sending / timing end).");
ABSL_FLAG(std::string, mode, "stream", "stream (one TCP stream's goodput) or rtt (1-byte round trips).");
ABSL_FLAG(int64_t, bytes, 32 << 20, "stream: bytes the connecting end sends; the last 3/4 are timed.");
ABSL_FLAG(int, rounds, 21, "rtt: measured round trips (after 3 unmeasured); the median is printed.");
ABSL_FLAG(int, timeout, 60, "Seconds either end waits in all.");

namespace psring::bench {
namespace {

constexpr int kUnmeasuredRounds = 3;

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}

absl::Status Info() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return absl::InternalError("gethostname failed");
  std::vector<std::string> missing;
  for (absl::string_view path : absl::StrSplit(absl::GetFlag(FLAGS_check), ',', absl::SkipEmpty())) {
    if (access(std::string(path).c_str(), X_OK) != 0) missing.emplace_back(path);
  }
  std::printf("PSRING_HOST name=%s cores=%d missing=%s\n", host, UsableCores(), absl::StrJoin(missing, ",").c_str());
  return absl::OkStatus();
}

absl::Status Listen(const HostPort& at, const std::string& mode, absl::Time deadline) {
  ASSIGN_OR_RETURN(Socket listener, ListenTcp(at.host, at.port));
  std::printf("link_probe: listening on %s:%d\n", at.host.c_str(), at.port);
  std::fflush(stdout);
  ASSIGN_OR_RETURN(Socket peer, AcceptTcp(listener, deadline));
  if (mode == "rtt") {
    RETURN_IF_ERROR(SetNoDelay(peer));
    int64_t rounds = 0;
    RETURN_IF_ERROR(RecvAll(peer, &rounds, sizeof(rounds), deadline));
    char byte = 0;
    for (int64_t i = 0; i < rounds; ++i) {
      RETURN_IF_ERROR(RecvAll(peer, &byte, 1, deadline));
      RETURN_IF_ERROR(SendAll(peer, &byte, 1, deadline));
    }
    return absl::OkStatus();
  }
  int64_t bytes = 0;
  RETURN_IF_ERROR(RecvAll(peer, &bytes, sizeof(bytes), deadline));
  if (bytes < 1024 || bytes > (int64_t{1} << 34)) return absl::InvalidArgumentError("peer announced a bad size");
  std::vector<char> buffer(1 << 20);
  // The clock starts after the first quarter, once slow start and the socket buffers are past.
  const int64_t head = bytes / 4;
  int64_t received = 0;
  absl::Time start;
  while (received < bytes) {
    if (received >= head && start == absl::Time()) start = absl::Now();
    const int64_t want = std::min<int64_t>(buffer.size(), (received < head ? head : bytes) - received);
    RETURN_IF_ERROR(RecvAll(peer, buffer.data(), want, deadline));
    received += want;
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const char done = 'd';
  RETURN_IF_ERROR(SendAll(peer, &done, 1, deadline));
  if (seconds <= 0) return absl::InternalError("the stream took no time");
  std::printf("PSRING_PROBE stream_bytes_per_second=%.6g\n", (bytes - head) / seconds);
  return absl::OkStatus();
}

absl::Status Connect(const HostPort& to, const std::string& mode, absl::Time deadline) {
  // The listener may still be starting: ConnectTcp retries until the deadline.
  ASSIGN_OR_RETURN(Socket socket, ConnectTcp(to.host, to.port, deadline));
  if (mode == "rtt") {
    RETURN_IF_ERROR(SetNoDelay(socket));
    const int64_t rounds = kUnmeasuredRounds + std::max(1, absl::GetFlag(FLAGS_rounds));
    RETURN_IF_ERROR(SendAll(socket, &rounds, sizeof(rounds), deadline));
    std::vector<double> rtts;
    char byte = 'p';
    for (int64_t i = 0; i < rounds; ++i) {
      const absl::Time start = absl::Now();
      RETURN_IF_ERROR(SendAll(socket, &byte, 1, deadline));
      RETURN_IF_ERROR(RecvAll(socket, &byte, 1, deadline));
      if (i >= kUnmeasuredRounds) rtts.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    }
    std::nth_element(rtts.begin(), rtts.begin() + rtts.size() / 2, rtts.end());
    std::printf("PSRING_PROBE rtt_s=%.6g\n", rtts[rtts.size() / 2]);
    return absl::OkStatus();
  }
  const int64_t bytes = absl::GetFlag(FLAGS_bytes);
  if (bytes < 1024) return absl::InvalidArgumentError("--bytes must be at least 1024");
  RETURN_IF_ERROR(SendAll(socket, &bytes, sizeof(bytes), deadline));
  std::vector<char> buffer(1 << 20, 'x');
  for (int64_t sent = 0; sent < bytes;) {
    const int64_t n = std::min<int64_t>(buffer.size(), bytes - sent);
    RETURN_IF_ERROR(SendAll(socket, buffer.data(), n, deadline));
    sent += n;
  }
  char done = 0;
  return RecvAll(socket, &done, 1, deadline);  // the receiver has timed it
}

absl::Status Run() {
  const absl::Time deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_timeout));
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode != "stream" && mode != "rtt") return absl::InvalidArgumentError("--mode must be stream or rtt");
  if (absl::GetFlag(FLAGS_info)) return Info();
  if (!absl::GetFlag(FLAGS_listen).empty()) {
    ASSIGN_OR_RETURN(const HostPort at, ParseHostPort(absl::GetFlag(FLAGS_listen), "--listen"));
    return Listen(at, mode, deadline);
  }
  if (!absl::GetFlag(FLAGS_connect).empty()) {
    ASSIGN_OR_RETURN(const HostPort to, ParseHostPort(absl::GetFlag(FLAGS_connect), "--connect"));
    return Connect(to, mode, deadline);
  }
  return absl::InvalidArgumentError("give --info, --listen=ADDR:PORT or --connect=ADDR:PORT (see --help)");
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Measures a real cluster's hosts and links for the bench (bench/hosts/launcher_cluster.h), started on\n"
      "each host by the harness through mpirun or srun:\n"
      "  link_probe --info --check=PATH,...            this host's name, cores, missing programs\n"
      "  link_probe --listen=ADDR:PORT --mode=stream   then, on another host,\n"
      "  link_probe --connect=ADDR:PORT --mode=stream  one TCP stream's goodput (printed by the listener)\n"
      "  --mode=rtt on both ends: the median 1-byte TCP round trip (printed by the connecting end)",
      {"bench/hosts/"});
  return psring::RunMain(argc, argv, "link_probe",
                         [](const std::vector<std::string>&) { return psring::bench::Run(); });
}
