// The ports a run's listeners take on clusters whose hosts each have a port space of their own (the emulated
// cluster's network namespaces, real hosts): the rendezvous master's and one per PS server, fixed per run
// slot and rotating over kJobPortSlots slots, so a port of a recent run, maybe still in TIME_WAIT, is not
// asked for again at once. On loopback every host shares the machine's port space, and the kernel picks free
// ports instead (common/socket.h FreeLoopbackPorts).
//
// A fixed port can still be taken: by an outgoing connection whose ephemeral port the kernel happened to
// choose from the same range (32768-60999 by default holds the servers' ports). The emulated hosts reserve
// JobPortRanges() (net.ipv4.ip_local_reserved_ports of each host namespace), so there it cannot happen; on
// real hosts the harness retries a clashing run once in RetrySlot()'s ports.
#ifndef PSRING_BENCH_CORE_JOB_PORTS_H_
#define PSRING_BENCH_CORE_JOB_PORTS_H_

#include <string>
#include <vector>

namespace psring::bench {

inline constexpr int kJobMasterPort = 29500;  // torchrun's default rendezvous port
inline constexpr int kJobServerPort = 50051;  // gRPC's customary first port
inline constexpr int kJobPortStride = 300;    // > the most servers of one run (N <= 256)
inline constexpr int kJobPortSlots = 16;      // runs before a slot's ports are used again

// The rendezvous master's port followed by `servers` server ports (0 <= servers < kJobPortStride) for run
// slot `slot` (any int >= 0; taken modulo kJobPortSlots).
std::vector<int> JobPorts(int slot, int servers);

// A slot whose ports share none with `slot`'s, for a second try after a clash.
int RetrySlot(int slot);

// Every port JobPorts() can return, as ranges for net.ipv4.ip_local_reserved_ports ("29500-34000,...").
std::string JobPortRanges();

}  // namespace psring::bench

#endif  // PSRING_BENCH_CORE_JOB_PORTS_H_
