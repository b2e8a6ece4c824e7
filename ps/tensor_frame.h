// TensorFrame: one message of the PushPull stream, serialized and parsed by hand so tensors never pass
// through protobuf strings. On the wire the bytes are exactly those of proto PushRequest / PullReply
// (ps.proto): field 1 = a header message, field 2 = Chunk{offset, data}. So a client built from ps.proto
// alone still talks to the server, while psring's own client and server save four of the eight copies of
// each tensor (both directions):
//   - sending: the chunk's data is a gRPC slice pointing at the caller's floats (zero copy); a SliceTracker
//     counts those slices so the sender can wait until gRPC has let go of the memory;
//   - receiving: the payload is copied once, from gRPC's slices straight into the destination tensor.
// The server installs it for PushPull with grpc::Service::MarkMethodStreamed; the client opens the method
// with grpc::internal::ClientReaderWriterFactory. Both are what gRPC's generated code calls, not its
// documented API (the second is in grpc::internal), so a gRPC upgrade may change them.
#ifndef PSRING_PS_TENSOR_FRAME_H_
#define PSRING_PS_TENSOR_FRAME_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/serialization_traits.h"

namespace psring::ps {

// Counts zero-copy slices gRPC still holds. Thread-safe: gRPC releases slices on its own threads.
class SliceTracker {
 public:
  SliceTracker() = default;
  SliceTracker(const SliceTracker&) = delete;
  SliceTracker& operator=(const SliceTracker&) = delete;
  void Add() ABSL_LOCKS_EXCLUDED(mu_);
  static void Release(void* tracker);
  // Blocks until every slice was released or `timeout` passed; true when all were released.
  bool WaitReleased(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
};

class TensorFrame {
 public:
  // Outgoing frames. The chunk's data must stay valid and unchanged until `tracker` reports it released.
  static TensorFrame Header(const google::protobuf::MessageLite& header);
  static TensorFrame Chunk(uint64_t offset, const float* data, uint64_t count, SliceTracker* tracker);
  // A chunk that owns a copy of data[0, count): the source may change as soon as this returns.
  static TensorFrame CopiedChunk(uint64_t offset, const float* data, uint64_t count);

  // Incoming: the chunks of the following frames are copied into dst[0, count), which they must fill in
  // order without gaps or overflow (otherwise error() says why and nothing more is copied).
  void ExpectInto(float* dst, uint64_t count);

  // After a Read(): whether it was a header (its serialized bytes in header_bytes()) or a chunk.
  bool is_header() const { return is_header_; }
  const std::string& header_bytes() const { return header_bytes_; }
  uint64_t filled() const { return filled_; }
  const absl::Status& error() const { return error_; }

 private:
  friend class grpc::SerializationTraits<TensorFrame, void>;
  // outgoing
  std::string encoded_header_;
  uint64_t offset_ = 0;
  const float* data_ = nullptr;
  uint64_t count_ = 0;
  SliceTracker* tracker_ = nullptr;
  grpc::Slice owned_;  // CopiedChunk: the copy data_ points into
  // incoming
  float* dst_ = nullptr;
  uint64_t dst_count_ = 0;
  uint64_t filled_ = 0;
  bool is_header_ = false;
  std::string header_bytes_;
  absl::Status error_;
};

// Writes data[begin, count) as zero-copy chunk frames of at most chunk_elements floats (offsets count from
// data[0]: a tensor may be written in several consecutive calls). False when the stream broke. Adds the
// payload bytes to *bytes_written. `before_chunk`, when set, is called with the range of each chunk before it
// is written and may block (flow control).
template <typename Writer>
bool WriteFrameChunks(Writer* writer, const float* data, uint64_t count, uint64_t chunk_elements,
                      SliceTracker* tracker, uint64_t* bytes_written,
                      const std::function<void(uint64_t offset, uint64_t len)>& before_chunk = nullptr,
                      uint64_t begin = 0) {
  for (uint64_t offset = begin; offset < count; offset += chunk_elements) {
    const uint64_t len = std::min(chunk_elements, count - offset);
    if (before_chunk) before_chunk(offset, len);
    if (!writer->Write(TensorFrame::Chunk(offset, data + offset, len, tracker))) return false;
    *bytes_written += len * sizeof(float);
  }
  return true;
}

// Reads chunk frames until the stream ends, straight into dst[0, count). kInvalidArgument for gaps,
// overflow, or a short tensor, and for a header among the chunks unless `on_header` is set: then reading
// stops at a header and returns on_header(its serialized bytes). Adds the payload bytes read to *bytes_read.
// `progress`, when set, is told the number of leading elements filled so far after every frame.
template <typename Reader>
absl::Status ReadFrameChunks(Reader* reader, float* dst, uint64_t count, uint64_t* bytes_read,
                             const char* what, const std::function<void(uint64_t filled)>& progress = nullptr,
                             const std::function<absl::Status(const std::string& header)>& on_header = nullptr) {
  TensorFrame frame;
  frame.ExpectInto(dst, count);
  while (reader->Read(&frame)) {
    if (progress) progress(frame.filled());
    if (!frame.error().ok()) {
      *bytes_read += frame.filled() * sizeof(float);
      return absl::Status(frame.error().code(), absl::StrCat(what, ": ", frame.error().message()));
    }
    if (frame.is_header()) {
      *bytes_read += frame.filled() * sizeof(float);
      if (on_header) return on_header(frame.header_bytes());
      return absl::InvalidArgumentError(absl::StrCat(what, ": expected only chunks after the header"));
    }
  }
  *bytes_read += frame.filled() * sizeof(float);
  if (frame.filled() != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": stream ended after ", frame.filled(), " of ", count, " elements"));
  }
  return absl::OkStatus();
}

}  // namespace psring::ps

namespace grpc {

template <>
class SerializationTraits<psring::ps::TensorFrame, void> {
 public:
  static Status Serialize(const psring::ps::TensorFrame& frame, ByteBuffer* buffer, bool* own_buffer);
  // Never fails: problems are recorded in the frame's error() so the handler can answer precisely.
  static Status Deserialize(ByteBuffer* buffer, psring::ps::TensorFrame* frame);
};

}  // namespace grpc

#endif  // PSRING_PS_TENSOR_FRAME_H_
