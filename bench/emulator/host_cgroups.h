// One cgroup v2 group per emulated host, for the kernel's per-group CPU pressure: how long some task of that
// host was runnable and waited for a core. A real host has cores of its own, so on a cluster this is the
// host's own contention; on the emulating box it is the emulator failing its host invariant (every host runs
// when it is ready to), the CPU side of what the delay program's lateness is for the links
// (bench/emulator/probes.h, rule (d); bench/PERFORMANCE.md 1.2).
//
//   ASSIGN_OR_RETURN(HostCgroups groups, HostCgroups::Create("psr123-", 4));  // empty without cgroup v2 PSI
//   argv = groups.Wrap(2, argv);         // enters host 2's group, then execs argv
//   std::vector<int64_t> us = groups.StallMicros();  // per host, cumulative; empty when unreadable
//
// Groups live under <cgroup2 mount>/psring/<prefix>h<i> (the cgroup2 mount is /sys/fs/cgroup, or
// /sys/fs/cgroup/unified on a hybrid hierarchy). No controller is enabled and no limit is set: the groups
// only count. Remove() deletes them once their processes have exited (the namespaces' teardown kills those).
// Not thread-safe except StallMicros, which only reads files.
#ifndef PSRING_BENCH_EMULATOR_HOST_CGROUPS_H_
#define PSRING_BENCH_EMULATOR_HOST_CGROUPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace psring::bench {

class HostCgroups {
 public:
  HostCgroups() = default;  // no groups: Wrap returns argv, StallMicros is empty

  // Makes `hosts` groups named "<prefix>h<i>". Never fails the cluster: where cgroup v2 or its cpu.pressure
  // is missing, or the groups cannot be made (no permission, a read-only /sys), it returns no groups and
  // reason() says why. Empty groups left by runs that died (a group whose processes are gone) are removed.
  static HostCgroups Create(const std::string& prefix, int hosts);

  bool available() const { return !dirs_.empty(); }
  // Why there are no groups ("" when there are).
  const std::string& reason() const { return reason_; }

  // argv that first moves itself into host `host`'s group, then execs `argv` (a /bin/sh prefix; the pid,
  // and so every thread and child it makes later, stays in the group). argv unchanged without groups.
  std::vector<std::string> Wrap(int host, const std::vector<std::string>& argv) const;

  // Each host's cumulative "some" CPU stall in microseconds (index = host); empty when any group's
  // cpu.pressure cannot be read.
  std::vector<int64_t> StallMicros() const;

  // Deletes the groups (rmdir; a group still holding a process stays, and the first such error is returned).
  absl::Status Remove();

 private:
  std::vector<std::string> dirs_;
  std::string reason_;
};

// The cgroup2 mount of this machine ("/sys/fs/cgroup" or "/sys/fs/cgroup/unified"), or "" when none.
std::string Cgroup2Mount();

}  // namespace psring::bench

#endif  // PSRING_BENCH_EMULATOR_HOST_CGROUPS_H_
