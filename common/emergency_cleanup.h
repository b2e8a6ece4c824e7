// Last-resort cleanup when a launcher is interrupted (Ctrl-C, SIGTERM, SIGHUP): kill every process group it
// launched (common/subprocess.h registers them) and delete every network namespace it created (the bench's
// emulated cluster), then die of the same signal.
//
// Everything here is async-signal-safe on the handler side: the registries are fixed arrays of atomics and
// preformatted paths, and a namespace is deleted the way `ip netns del` does it (umount2 + unlink of
// /run/netns/NAME); the kernel frees the namespace, its veth ends and its qdiscs once no process is left in
// it, which killing the process groups first ensures.
//
// Thread-safety: all functions may be called from any thread. Register/Unregister are lock-free.
#ifndef PSRING_COMMON_EMERGENCY_CLEANUP_H_
#define PSRING_COMMON_EMERGENCY_CLEANUP_H_

#include <sys/types.h>

#include <string>

namespace psring {

// Installs the SIGINT/SIGTERM/SIGHUP handler once per process (idempotent).
void InstallEmergencyCleanup();

// A process group to SIGKILL on a fatal signal. Returns false when the registry (256 slots) is full.
bool RegisterProcessGroup(pid_t pgid);
void UnregisterProcessGroup(pid_t pgid);

// A named network namespace (the name under /run/netns) to delete on a fatal signal. Returns false when the
// registry (1024 slots) is full or the name is too long.
bool RegisterNamespace(const std::string& name);
void UnregisterNamespace(const std::string& name);

}  // namespace psring

#endif  // PSRING_COMMON_EMERGENCY_CLEANUP_H_
