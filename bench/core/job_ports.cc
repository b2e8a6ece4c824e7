#include "bench/core/job_ports.h"

#include "absl/strings/str_cat.h"

namespace psring::bench {

std::vector<int> JobPorts(int slot, int servers) {
  const int offset = (slot % kJobPortSlots) * kJobPortStride;
  std::vector<int> ports = {kJobMasterPort + offset};
  for (int k = 0; k < servers; ++k) ports.push_back(kJobServerPort + offset + k);
  return ports;
}

int RetrySlot(int slot) { return slot % kJobPortSlots + kJobPortSlots / 2; }

std::string JobPortRanges() {
  constexpr int kLastOffset = (kJobPortSlots - 1) * kJobPortStride;
  return absl::StrCat(kJobMasterPort, "-", kJobMasterPort + kLastOffset, ",", kJobServerPort, "-",
                      kJobServerPort + kLastOffset + kJobPortStride - 2);  // servers < stride
}

}  // namespace psring::bench
