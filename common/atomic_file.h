// Files that are never seen half-written (checkpoints), and the CRC-32 their formats carry.
//
//   ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::Create("/ckpt/shard.ckpt"));
//   RETURN_IF_ERROR(out.Append(header.data(), header.size()));
//   const uint32_t crc = out.crc();  // of everything appended so far
//   RETURN_IF_ERROR(out.Append(&crc, sizeof(crc)));
//   RETURN_IF_ERROR(out.Commit());   // now /ckpt/shard.ckpt is the new file
//
//   RETURN_IF_ERROR(WriteFileAtomically("/ckpt/latest.npz", bytes));  // the same for bytes in memory
//
// The bytes go to "<path>.tmp.<pid>" in the same folder (created when missing; a new file of mode 0600,
// created exclusively and never through a symlink, so a shared folder cannot redirect the write), which is
// fsynced and renamed over `path`, and the folder is fsynced: a crash, a full disk or an error at any point leaves either the
// previous file at `path` or the complete new one, and at most a stale temporary file (removed on errors).
// Two processes may write the same path; two threads of one process must not.
//
// Errors name the file and say what to check: kPermissionDenied (not writable, read-only file system),
// kResourceExhausted (disk or quota full), kInternal (other system errors).
#ifndef PSRING_COMMON_ATOMIC_FILE_H_
#define PSRING_COMMON_ATOMIC_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psring {

// The CRC-32 of zip, gzip and PNG (zlib's crc32) of `data`, continuing from `crc` (0 to start):
// Crc32(b, Crc32(a)) is the CRC of a followed by b.
uint32_t Crc32(absl::string_view data, uint32_t crc = 0);

// One file being written; see above. Move-only. Destroying it before Commit() abandons the new contents.
// Thread-compatible.
class AtomicFileWriter {
 public:
  static absl::StatusOr<AtomicFileWriter> Create(const std::string& path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  // Appends bytes (blocks on disk I/O). After an error the writer only abandons.
  absl::Status Append(const void* data, size_t size);
  // The CRC-32 of every byte appended so far.
  uint32_t crc() const { return crc_; }
  // Makes the appended bytes the contents of `path`. Call once.
  absl::Status Commit();

 private:
  AtomicFileWriter(std::string path, std::string temp, int fd)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}
  void Abandon();  // closes and removes the temporary file

  std::string path_;
  std::string temp_;
  int fd_ = -1;
  uint32_t crc_ = 0;
};

// Removes the temporary files "<path>.tmp.<pid>" that writers of `path` killed before they could clean up
// left behind (those of running processes stay). Returns how many it removed; the first error otherwise
// (a missing folder is not one). Blocks on the file system; call at start, before writing `path`.
absl::StatusOr<int> RemoveStaleTemporaries(const std::string& path);

// Creates or replaces `path` with `contents` through an AtomicFileWriter.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// Creates `dir` and its missing parents (mkdir -p, mode 0755). kPermissionDenied naming the part that could
// not be created and why (for an output folder the user chose: pass another --out_dir).
absl::Status MakeDirectories(const std::string& dir);

}  // namespace psring

#endif  // PSRING_COMMON_ATOMIC_FILE_H_
