// This host's CPU, read from the kernel: /proc/stat's busy and total jiffies and the CPU pressure stall
// information (/proc/pressure/cpu, PSI). The bench's emulator samples them for the box every emulated host
// shares (bench/emulator/probes.h); every worker reads them at the start and end of its measured steps and
// reports its own host's use (proto/results.proto WorkerResult.host_cpu_busy/host_cpu_stall), which is how a
// run on real hosts says whether a host's CPU, not the network, bound it.
//
//   const HostCpuReading start = ReadHostCpu();
//   ... measured steps ...
//   const HostCpuUse use = HostCpuBetween(start, ReadHostCpu());   // use.busy, use.stall: 0..1, -1 unknown
//
// Thread-safety: pure functions and reads of /proc.
#ifndef PSRING_COMMON_HOST_CPU_H_
#define PSRING_COMMON_HOST_CPU_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psring {

// Jiffies of all cores together, from /proc/stat's first ("cpu ") line: busy = user + nice + system + irq +
// softirq + steal; total = busy + idle + iowait. (guest time is already inside user.)
struct CpuTimes {
  uint64_t busy = 0;
  uint64_t total = 0;
};

// kInvalidArgument when the text has no well-formed "cpu " line.
absl::StatusOr<CpuTimes> ParseProcStat(const std::string& text);

// Busy fraction between two readings (0..1), -1 when no time passed.
double BusyFraction(const CpuTimes& from, const CpuTimes& to);

// The kernel's CPU pressure stall information (/proc/pressure/cpu, PSI): the "some" line's total, the
// microseconds during which at least one runnable task waited for a core. kInvalidArgument when the text has
// no well-formed "some ... total=<n>" line.
absl::StatusOr<uint64_t> ParseCpuPressureTotal(const std::string& text);

struct HostCpuReading {
  absl::Time time;
  bool has_cpu = false;  // /proc/stat was readable
  CpuTimes cpu;
  int64_t stall_us = -1;  // PSI "some" total; -1: no /proc/pressure/cpu
};

// One reading of /proc/stat and /proc/pressure/cpu now.
HostCpuReading ReadHostCpu();

struct HostCpuUse {
  double busy = -1;   // share of all the host's cores busy, 0..1; -1 unknown
  double stall = -1;  // share of the time some runnable task waited for a core, 0..1; -1 unknown
};

// The host's CPU use between two readings.
HostCpuUse HostCpuBetween(const HostCpuReading& from, const HostCpuReading& to);

}  // namespace psring

#endif  // PSRING_COMMON_HOST_CPU_H_
