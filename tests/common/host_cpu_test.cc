#include "common/host_cpu.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace psring {
namespace {

TEST(HostCpu, BusySpinShowsAsBusyAndUnknownStaysUnknown) {
  const HostCpuReading start = ReadHostCpu();
  ASSERT_TRUE(start.has_cpu) << "no /proc/stat";
  // Keep one core busy for 300 ms: the host's busy share is then above zero.
  const absl::Time until = absl::Now() + absl::Milliseconds(300);
  volatile uint64_t spins = 0;
  while (absl::Now() < until) spins = spins + 1;
  const HostCpuUse use = HostCpuBetween(start, ReadHostCpu());
  EXPECT_GT(use.busy, 0.0);
  EXPECT_LE(use.busy, 1.0);
  if (start.stall_us >= 0) {
    EXPECT_GE(use.stall, 0.0);
    EXPECT_LE(use.stall, 1.0);
  } else {
    EXPECT_EQ(use.stall, -1);
  }
  // Readings without /proc: unknown, never a made-up 0.
  const HostCpuUse none = HostCpuBetween(HostCpuReading(), HostCpuReading());
  EXPECT_EQ(none.busy, -1);
  EXPECT_EQ(none.stall, -1);
}

TEST(HostCpu, StallShareFromPsiTotals) {
  HostCpuReading a, b;
  a.time = absl::UnixEpoch();
  b.time = a.time + absl::Seconds(2);
  a.has_cpu = b.has_cpu = true;
  a.cpu = {100, 1000};
  b.cpu = {600, 2000};
  a.stall_us = 1'000'000;
  b.stall_us = 1'500'000;
  const HostCpuUse use = HostCpuBetween(a, b);
  EXPECT_DOUBLE_EQ(use.busy, 0.5);
  EXPECT_DOUBLE_EQ(use.stall, 0.25);  // 0.5 s of 2 s
}

}  // namespace
}  // namespace psring
