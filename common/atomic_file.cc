#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace psring {
namespace {

// `what` failed with errno `err`: a status whose code says what the user can do about it.
absl::Status FileError(int err, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(absl::StrCat(message, "; is the folder writable by this user?"));
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(absl::StrCat(message, "; free some space or write elsewhere"));
    default:
      return absl::InternalError(message);
  }
}

std::string FolderOf(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

uint32_t Crc32(absl::string_view data, uint32_t crc) {
  uLong value = crc;
  while (!data.empty()) {  // zlib takes a uInt length
    const uInt chunk = static_cast<uInt>(std::min<size_t>(data.size(), 1u << 30));
    value = crc32(value, reinterpret_cast<const Bytef*>(data.data()), chunk);
    data.remove_prefix(chunk);
  }
  return static_cast<uint32_t>(value);
}

absl::StatusOr<AtomicFileWriter> AtomicFileWriter::Create(const std::string& path) {
  const std::string folder = FolderOf(path);
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error)
    return FileError(error.value(), absl::StrCat("cannot create the folder ", folder, " for ", path));
  std::string temp = absl::StrCat(path, ".tmp.", ::getpid());
  // A new file or nothing: O_EXCL never opens what is there already, O_NOFOLLOW never a symlink that
  // someone else (sharing the folder) planted to make us clobber another file; 0600, so only this user
  // reads the parameters.
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(temp.c_str(), kFlags, 0600);
  if (fd < 0 && errno == EEXIST) {
    // Left by an earlier process with our pid (RemoveStaleTemporaries spares it while we run), or planted.
    // unlink() removes the name, never what a symlink points to; then try once more, exclusively.
    if (::unlink(temp.c_str()) != 0 && errno != ENOENT) {
      return FileError(errno, absl::StrCat("cannot remove the old temporary file ", temp));
    }
    fd = ::open(temp.c_str(), kFlags, 0600);
  }
  if (fd < 0) return FileError(errno, absl::StrCat("cannot create ", temp));
  return AtomicFileWriter(path, std::move(temp), fd);
}

absl::StatusOr<int> RemoveStaleTemporaries(const std::string& path) {
  const std::filesystem::path target(path);
  const std::string prefix = target.filename().string() + ".tmp.";
  std::error_code error;
  std::filesystem::directory_iterator it(FolderOf(path), error);
  if (error == std::errc::no_such_file_or_directory) return 0;
  if (error) return FileError(error.value(), absl::StrCat("cannot list the folder of ", path));
  int removed = 0;
  for (const std::filesystem::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    int pid = 0;
    if (!absl::SimpleAtoi(absl::string_view(name).substr(prefix.size()), &pid) || pid <= 0) continue;
    // The writer's process is gone (kill(pid, 0) reports ESRCH): nobody will rename or remove this file.
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (std::filesystem::remove(entry.path(), error)) {
      ++removed;
    } else if (error) {
      return FileError(error.value(), absl::StrCat("cannot remove the stale temporary file ", entry.path().string()));
    }
  }
  return removed;
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      temp_(std::move(other.temp_)),
      fd_(std::exchange(other.fd_, -1)),
      crc_(other.crc_) {}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& other) noexcept {
  if (this != &other) {
    Abandon();
    path_ = std::move(other.path_);
    temp_ = std::move(other.temp_);
    fd_ = std::exchange(other.fd_, -1);
    crc_ = other.crc_;
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { Abandon(); }

void AtomicFileWriter::Abandon() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(temp_.c_str());
}

absl::Status AtomicFileWriter::Append(const void* data, size_t size) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is no longer being written"));
  crc_ = Crc32(absl::string_view(static_cast<const char*>(data), size), crc_);
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd_, p, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      const absl::Status status = FileError(errno, absl::StrCat("cannot write ", temp_));
      Abandon();
      return status;
    }
    p += written;
    size -= static_cast<size_t>(written);
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is no longer being written"));
  // Data on disk before the rename makes it visible; a file system may report a full disk only here.
  if (::fsync(fd_) != 0) {
    const absl::Status status = FileError(errno, absl::StrCat("cannot write ", temp_, " to disk (fsync)"));
    Abandon();
    return status;
  }
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    const absl::Status status = FileError(errno, absl::StrCat("cannot close ", temp_));
    ::unlink(temp_.c_str());
    return status;
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const absl::Status status = FileError(errno, absl::StrCat("cannot rename ", temp_, " to ", path_));
    ::unlink(temp_.c_str());
    return status;
  }
  // The rename itself lasts once the folder's entry is on disk. A folder that cannot be opened or synced
  // (some file systems) leaves the new file in place all the same, so that is not an error.
  const int folder = ::open(FolderOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder >= 0) {
    ::fsync(folder);
    ::close(folder);
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::Create(path));
  RETURN_IF_ERROR(out.Append(contents.data(), contents.size()));
  return out.Commit();
}

absl::Status MakeDirectories(const std::string& dir) {
  std::string path;
  for (absl::string_view part : absl::StrSplit(dir, '/')) {
    path += std::string(part) + "/";
    if (part.empty()) continue;
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create output directory ", path, ": ", std::strerror(errno), "; pass --out_dir"));
    }
  }
  return absl::OkStatus();
}

}  // namespace psring
