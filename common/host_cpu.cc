#include "common/host_cpu.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/read_file.h"

namespace psring {
namespace {

// "" when the file cannot be read (a kernel without it): the callers then report the figure unknown.
std::string ReadProcFile(const char* path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  return text.ok() ? *std::move(text) : std::string();
}

}  // namespace

absl::StatusOr<CpuTimes> ParseProcStat(const std::string& text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, "cpu ")) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    uint64_t v[8] = {};
    if (fields.size() < 8) break;
    for (int i = 0; i < 8; ++i) {
      if (!absl::SimpleAtoi(fields[i], &v[i])) {
        return absl::InvalidArgumentError(absl::StrCat("/proc/stat: bad cpu field '", fields[i], "'"));
      }
    }
    CpuTimes t;
    t.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    t.total = t.busy + v[3] + v[4];
    return t;
  }
  return absl::InvalidArgumentError("/proc/stat has no well-formed 'cpu ' line");
}

double BusyFraction(const CpuTimes& from, const CpuTimes& to) {
  if (to.total <= from.total) return -1;
  return std::clamp(static_cast<double>(to.busy - from.busy) / static_cast<double>(to.total - from.total),
                    0.0, 1.0);
}

absl::StatusOr<uint64_t> ParseCpuPressureTotal(const std::string& text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, "some ")) continue;
    for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      uint64_t total = 0;
      if (absl::ConsumePrefix(&field, "total=") && absl::SimpleAtoi(field, &total)) return total;
    }
    break;
  }
  return absl::InvalidArgumentError("/proc/pressure/cpu has no well-formed 'some ... total=<us>' line");
}

HostCpuReading ReadHostCpu() {
  HostCpuReading reading;
  reading.time = absl::Now();
  absl::StatusOr<CpuTimes> times = ParseProcStat(ReadProcFile("/proc/stat"));
  if (times.ok()) {
    reading.has_cpu = true;
    reading.cpu = *times;
  }
  // A kernel without PSI (CONFIG_PSI off, or psi=0) has no such file: the stall share is then unknown.
  absl::StatusOr<uint64_t> stall = ParseCpuPressureTotal(ReadProcFile("/proc/pressure/cpu"));
  if (stall.ok()) reading.stall_us = static_cast<int64_t>(*stall);
  return reading;
}

HostCpuUse HostCpuBetween(const HostCpuReading& from, const HostCpuReading& to) {
  HostCpuUse use;
  if (from.has_cpu && to.has_cpu) use.busy = BusyFraction(from.cpu, to.cpu);
  const double seconds = absl::ToDoubleSeconds(to.time - from.time);
  if (from.stall_us >= 0 && to.stall_us >= from.stall_us && seconds > 0) {
    use.stall = std::clamp((to.stall_us - from.stall_us) / 1e6 / seconds, 0.0, 1.0);
  }
  return use;
}

}  // namespace psring
