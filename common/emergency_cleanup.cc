#include "common/emergency_cleanup.h"

#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace psring {
namespace {

constexpr int kMaxGroups = 256;
constexpr int kMaxNamespaces = 1024;
constexpr size_t kMaxPath = 128;

std::atomic<pid_t> g_groups[kMaxGroups];

// A namespace slot is free (0), being written or cleared (1), or holds a path the handler may use (2).
struct NamespaceSlot {
  std::atomic<int> state{0};
  char path[kMaxPath];  // "/run/netns/NAME"
};
NamespaceSlot g_namespaces[kMaxNamespaces];

std::atomic<bool> g_installed{false};

void OnFatalSignal(int sig) {
  for (auto& group : g_groups) {
    pid_t pgid = group.load();
    if (pgid > 0) kill(-pgid, SIGKILL);
  }
  for (auto& slot : g_namespaces) {
    if (slot.state.load() != 2) continue;
    umount2(slot.path, MNT_DETACH);
    unlink(slot.path);
  }
  static const char kMessage[] = "\npsring: interrupted; killed launched processes, removed namespaces\n";
  ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void InstallEmergencyCleanup() {
  if (g_installed.exchange(true)) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnFatalSignal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&action.sa_mask, sig);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &action, nullptr);
}

bool RegisterProcessGroup(pid_t pgid) {
  for (auto& group : g_groups) {
    pid_t expected = 0;
    if (group.compare_exchange_strong(expected, pgid)) return true;
  }
  return false;
}

void UnregisterProcessGroup(pid_t pgid) {
  for (auto& group : g_groups) {
    pid_t expected = pgid;
    if (group.compare_exchange_strong(expected, 0)) return;
  }
}

bool RegisterNamespace(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  if (path.size() + 1 > kMaxPath) return false;
  for (auto& slot : g_namespaces) {
    int expected = 0;
    if (!slot.state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(slot.path, path.c_str(), path.size() + 1);
    slot.state.store(2);
    return true;
  }
  return false;
}

void UnregisterNamespace(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  for (auto& slot : g_namespaces) {
    int expected = 2;
    if (slot.state.load() != 2 || path != slot.path) continue;
    if (slot.state.compare_exchange_strong(expected, 1)) {
      slot.path[0] = '\0';
      slot.state.store(0);
      return;
    }
  }
}

}  // namespace psring
