// Kernel settings of the emulated hosts' network namespaces: IPv6 off, the jobs' listening ports kept out of
// the ephemeral ports, the TCP congestion control, TCP's slow start after idle.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "bench/core/job_ports.h"
#include "bench/emulator/cluster.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace psring::bench {
namespace {

// Runs a shell line inside namespace `ns`. Through the shell rather than sysctl(8), which a minimal host may
// lack: /proc/sys/net shows the network namespace of the process that reads it.
absl::StatusOr<std::string> InNamespace(const std::string& ns, const std::string& line) {
  static const std::string* ip = new std::string(FindExecutable("ip"));
  return RunCommand({*ip, "netns", "exec", ns, "/bin/sh", "-c", line});
}

constexpr char kCongestionFile[] = "/proc/sys/net/ipv4/tcp_congestion_control";

bool IsCongestionName(const std::string& name) {
  if (name.empty() || name.size() > 15) return false;  // TCP_CA_NAME_MAX is 16 with the NUL
  for (char c : name) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '_') return false;
  }
  return true;
}

}  // namespace

absl::Status EmulatedCluster::DisableIpv6(const std::string& ns) const {
  // The emulated hosts speak IPv4 only. With IPv6 on, a link that comes up sends router solicitations,
  // duplicate-address probes and multicast-listener reports for seconds; the switch floods them to every
  // port, which puts bytes no job sent on the per-host counters.
  if (access("/proc/sys/net/ipv6", F_OK) != 0) return absl::OkStatus();  // a kernel without IPv6
  return InNamespace(ns, "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && "
                         "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6")
      .status();
}

absl::Status EmulatedCluster::ReserveJobPorts(const std::string& ns) const {
  // The harness's servers and rendezvous master listen on fixed ports (bench/core/job_ports.h) that lie in
  // the kernel's ephemeral range: a worker's outgoing connection could take one a moment before the server
  // that needs it binds (the server then exits: port in use). Reserved ports are never picked for an outgoing
  // connection or a bind to port 0. The setting is the namespace's own; the machine's is left alone.
  constexpr char kFile[] = "/proc/sys/net/ipv4/ip_local_reserved_ports";
  const std::string ranges = JobPortRanges();
  absl::StatusOr<std::string> in_use =
      InNamespace(ns, absl::StrCat("echo ", ranges, " > ", kFile, " && cat ", kFile));
  if (!in_use.ok() || absl::StripAsciiWhitespace(*in_use) != ranges) {
    return absl::InternalError(absl::StrCat(
        "cannot reserve the jobs' ports ", ranges, " in namespace ", ns, " (", kFile, "): ",
        in_use.ok() ? absl::StrCat("it reads '", absl::StripAsciiWhitespace(*in_use), "'")
                    : in_use.status().message(),
        "; the emulated cluster needs a kernel whose network namespaces have their own reserved ports"));
  }
  return absl::OkStatus();
}

absl::Status EmulatedCluster::ApplySlowStartAfterIdle(const std::string& ns) {
  constexpr char kFile[] = "/proc/sys/net/ipv4/tcp_slow_start_after_idle";
  const std::string& want = options_.tcp_slow_start_after_idle;
  if (!want.empty()) {
    if (want != "on" && want != "off") {
      return absl::InvalidArgumentError(absl::StrCat("--tcp_slow_start_after_idle='", want,
                                                     "' must be on, off, or empty (the kernel's default)"));
    }
    RETURN_IF_ERROR(InNamespace(ns, absl::StrCat("echo ", want == "on" ? 1 : 0, " > ", kFile)).status());
  }
  ASSIGN_OR_RETURN(const std::string in_use, InNamespace(ns, absl::StrCat("cat ", kFile)));
  tcp_slow_start_after_idle_ = absl::StripAsciiWhitespace(in_use) == "0" ? "off" : "on";
  if (!want.empty() && tcp_slow_start_after_idle_ != want) {
    return absl::InternalError(absl::StrCat("--tcp_slow_start_after_idle=", want, ": namespace ", ns,
                                            " still has it ", tcp_slow_start_after_idle_));
  }
  return absl::OkStatus();
}

absl::Status EmulatedCluster::ApplyTcpCongestion(const std::string& ns) {
  const std::string& want = options_.tcp_congestion;
  // Every new namespace inherits the same default from the machine: read it once, from the first host.
  if (want.empty() && !tcp_congestion_.empty()) return absl::OkStatus();
  if (!want.empty()) {
    if (!IsCongestionName(want)) {
      return absl::InvalidArgumentError(absl::StrCat("--tcp_congestion='", want, "' is not a congestion control "
                                                     "name (lower case, digits, '_'; e.g. cubic, bbr, reno)"));
    }
    const std::string set_line = absl::StrCat("echo ", want, " > ", kCongestionFile);
    if (InNamespace(ns, set_line).ok()) return RecordTcpCongestion(ns);
    const auto words = [&](const char* file) -> std::string {
      absl::StatusOr<std::string> text = InNamespace(ns, absl::StrCat("cat /proc/sys/net/ipv4/", file));
      return text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
    };
    const std::string offered = words("tcp_available_congestion_control");
    const std::string allowed = words("tcp_allowed_congestion_control");
    if (absl::StrCat(" ", offered, " ").find(absl::StrCat(" ", want, " ")) == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tcp_congestion=", want,
                       ": the kernel refused it (it offers: ", offered.empty() ? "unknown" : offered,
                       "; `modprobe tcp_", want, "` as root loads a module that is not in)"));
    }
    // Loaded, but a namespace other than the machine's own may only pick an allowed one. The list is the
    // machine's (which ones non-root sockets and namespaces may choose); one more in it changes no connection
    // and no default, so add it, say so, and set it again.
    constexpr char kAllowed[] = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
    if (!allowed.empty()) {
      std::ofstream out(kAllowed);
      out << allowed << " " << want << "\n";
      out.close();
      if (out && InNamespace(ns, set_line).ok()) {
        std::cerr << "# " << kAllowed << ": added " << want << " (was: " << allowed
                  << ") so the emulated hosts may use it\n";
        return RecordTcpCongestion(ns);
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("--tcp_congestion=", want,
                                                   ": the kernel has it, but a network namespace may only "
                                                   "choose one of tcp_allowed_congestion_control (",
                                                   allowed.empty() ? "unknown" : allowed,
                                                   ") and adding it failed; as root: echo '", allowed, " ",
                                                   want, "' > ", kAllowed));
  }
  return RecordTcpCongestion(ns);
}

absl::Status EmulatedCluster::RecordTcpCongestion(const std::string& ns) {
  const std::string& want = options_.tcp_congestion;
  ASSIGN_OR_RETURN(const std::string in_use, InNamespace(ns, absl::StrCat("cat ", kCongestionFile)));
  tcp_congestion_ = std::string(absl::StripAsciiWhitespace(in_use));
  if (!want.empty() && tcp_congestion_ != want) {
    return absl::InternalError(absl::StrCat("--tcp_congestion=", want, ": namespace ", ns, " still uses ",
                                            tcp_congestion_));
  }
  return absl::OkStatus();
}

}  // namespace psring::bench
