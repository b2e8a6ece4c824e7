// Per-host cgroup v2 groups and their CPU pressure (host_cgroups.h).
#include "bench/emulator/host_cgroups.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/host_cpu.h"
#include "common/read_file.h"

namespace psring::bench {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The pid in a group name "<family><pid>-h<i>", or -1.
int OwnerPid(const std::string& name) {
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos) return -1;
  size_t begin = dash;
  while (begin > 0 && absl::ascii_isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  int pid = -1;
  if (begin == dash || !absl::SimpleAtoi(name.substr(begin, dash - begin), &pid)) return -1;
  return pid;
}

// Removes groups under `base` whose owning run (the pid in the name) no longer exists.
void RemoveLeftovers(const std::string& base) {
  DIR* dir = opendir(base.c_str());
  if (dir == nullptr) return;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const int pid = OwnerPid(name);
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) rmdir((base + "/" + name).c_str());
  }
  closedir(dir);
}

}  // namespace

std::string Cgroup2Mount() {
  // A hybrid hierarchy's cgroup2 mount (".../unified") has no subtree_control at its root on some kernels:
  // its cgroup.procs and cpu.pressure are enough.
  for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    if (IsFile(absl::StrCat(mount, "/cgroup.procs")) &&
        (IsFile(absl::StrCat(mount, "/cgroup.subtree_control")) ||
         (absl::StrContains(mount, "unified") && IsFile(absl::StrCat(mount, "/cpu.pressure"))))) {
      return mount;
    }
  }
  return "";
}

HostCgroups HostCgroups::Create(const std::string& prefix, int hosts) {
  HostCgroups groups;
  const std::string mount = Cgroup2Mount();
  if (mount.empty()) {
    groups.reason_ = "no cgroup v2 mount (/sys/fs/cgroup or /sys/fs/cgroup/unified)";
    return groups;
  }
  const std::string base = mount + "/psring";
  if (mkdir(base.c_str(), 0755) != 0 && errno != EEXIST) {
    groups.reason_ = absl::StrCat("cannot make ", base, ": ", std::strerror(errno));
    return groups;
  }
  RemoveLeftovers(base);
  std::vector<std::string> dirs;
  for (int i = 0; i < hosts; ++i) {
    const std::string dir = absl::StrCat(base, "/", prefix, "h", i);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      groups.reason_ = absl::StrCat("cannot make ", dir, ": ", std::strerror(errno));
    } else if (!IsFile(dir + "/cpu.pressure")) {
      groups.reason_ = absl::StrCat(dir, " has no cpu.pressure (a kernel without PSI)");
    }
    dirs.push_back(dir);
    if (!groups.reason_.empty()) break;
  }
  groups.dirs_ = std::move(dirs);
  if (!groups.reason_.empty()) (void)groups.Remove();  // Remove() also forgets the groups
  return groups;
}

std::vector<std::string> HostCgroups::Wrap(int host, const std::vector<std::string>& argv) const {
  if (host < 0 || host >= static_cast<int>(dirs_.size())) return argv;
  // The move cannot fail the run: without it the host's stall is only unreadable (StallMicros then says so).
  std::vector<std::string> full = {"/bin/sh", "-c", "echo $$ > \"$0\" 2>/dev/null; exec \"$@\"",
                                   dirs_[host] + "/cgroup.procs"};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

std::vector<int64_t> HostCgroups::StallMicros() const {
  std::vector<int64_t> out;
  for (const std::string& dir : dirs_) {
    absl::StatusOr<std::string> text = ReadFileToString(dir + "/cpu.pressure");
    if (!text.ok()) return {};
    absl::StatusOr<uint64_t> total = ParseCpuPressureTotal(*text);
    if (!total.ok()) return {};
    out.push_back(static_cast<int64_t>(*total));
  }
  return out;
}

absl::Status HostCgroups::Remove() {
  absl::Status first;
  for (const std::string& dir : dirs_) {
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT && first.ok()) {
      first = absl::FailedPreconditionError(absl::StrCat("cannot remove ", dir, ": ", std::strerror(errno),
                                                         " (a process of the host still runs)"));
    }
  }
  dirs_.clear();
  return first;
}

}  // namespace psring::bench
