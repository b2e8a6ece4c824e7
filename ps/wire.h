// What the parameter server and its client share about the wire: the PushPull method, tensor chunking, and the one place grpc::Status becomes absl::Status (the ps/ edge). The shard layout is
// in ps/shard_layout.h (included here).
//
// Tensors cross as raw little-endian float32 bytes in Chunk messages of at most `chunk_elements` floats,
// streamed in order (see proto/ps.proto), so no message depends on gRPC's 4 MB default limit.
#ifndef PSRING_PS_WIRE_H_
#define PSRING_PS_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "proto/ps.pb.h"
#include "ps/shard_layout.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ps/ sends host floats as little-endian bytes");

namespace psring::ps {

// A session id (proto/ps.proto): 128 random bits, the low half in `session`, the high half in
// `session_high` of the message.
template <typename Message>
absl::uint128 GetSession(const Message& message) {
  return absl::MakeUint128(message.session_high(), message.session());
}
template <typename Message>
void SetSession(absl::uint128 session, Message* message) {
  message->set_session(absl::Uint128Low64(session));
  message->set_session_high(absl::Uint128High64(session));
}

// The full name ("/package.Service/Method") and the index in the service of the PushPull method, both
// from the generated descriptor of proto/ps.proto (the server installs its TensorFrame handler at that
// index, the client opens the method by that name). Thread-safe; computed once.
const std::string& PushPullMethodName();
int PushPullMethodIndex();
// The index in the service of the method `name` ("Pull"), for handlers installed by hand. -1 if none.
int MethodIndex(const std::string& name);

// Makes glibc keep large freed blocks instead of returning them to the kernel (mmap threshold 32 MB, trim
// threshold 512 MB). gRPC allocates a fresh buffer for every large read; without this each one is a new
// mmap whose pages fault in one by one, which costs more than the copy itself. Call once at the start of
// main(), before threads start; process-wide.
void TuneMallocForTensors();

// Drops gRPC's own log lines ("E1125 ... ssl_transport_security.cc ... Handshake failed", ten a second while
// a TLS client retries a plaintext server; "chttp2_server.cc ... bind" before our port-in-use message): every
// gRPC failure psring sees becomes its own one-line message that says what to do. A GPR_ASSERT's "assertion
// failed" line, which precedes an abort, is kept. Does nothing when the user set GRPC_VERBOSITY (then gRPC
// logs as it always does). Call once at the start of main(), before gRPC starts; process-wide.
void QuietGrpcLogs();

// Reads a whole file (TLS certificates and keys). kNotFound / kInternal with the path.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// grpc::Status -> absl::Status with the same code; `context` is prepended to the message.
absl::Status FromGrpc(const grpc::Status& status, const std::string& context);
// absl::Status -> grpc::Status with the same code and message.
grpc::Status ToGrpc(const absl::Status& status);

// Writes data[0, count) as Chunk messages of `Message` (a oneof with a `chunk` field) of at most
// `chunk_elements` floats each, in order. Returns false when the stream broke (the caller reads the status
// from Finish()). Adds the payload bytes written to *bytes_written.
template <typename Message, typename Writer>
bool WriteChunks(Writer* writer, const float* data, uint64_t count, uint64_t chunk_elements,
                 uint64_t* bytes_written) {
  Message message;
  for (uint64_t offset = 0; offset < count; offset += chunk_elements) {
    const uint64_t len = std::min(chunk_elements, count - offset);
    proto::Chunk* chunk = message.mutable_chunk();
    chunk->set_offset(offset);
    chunk->set_data(reinterpret_cast<const char*>(data + offset), len * sizeof(float));
    if (!writer->Write(message)) return false;
    *bytes_written += len * sizeof(float);
  }
  return true;
}

// Copies one chunk into dst[0, count), which must continue exactly at *filled (chunks arrive in order and
// never overlap or overflow). kInvalidArgument otherwise; `what` names the tensor in messages. dst nullptr:
// checks and counts the chunk without keeping it.
absl::Status AcceptChunk(const proto::Chunk& chunk, float* dst, uint64_t count, uint64_t* filled,
                         const char* what);

// Reads Chunk messages of `Message` from `reader` until the stream ends, filling dst[0, count) in order.
// kInvalidArgument for a non-chunk message, a gap, an overflow or a short tensor. Adds the payload bytes
// read to *bytes_read.
template <typename Message, typename Reader>
absl::Status ReadChunks(Reader* reader, float* dst, uint64_t count, uint64_t* bytes_read, const char* what) {
  Message message;
  uint64_t filled = 0;
  while (reader->Read(&message)) {
    if (!message.has_chunk()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": expected only chunks after the header"));
    }
    const uint64_t before = filled;
    absl::Status status = AcceptChunk(message.chunk(), dst, count, &filled, what);
    if (!status.ok()) return status;
    *bytes_read += (filled - before) * sizeof(float);
  }
  if (filled != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": stream ended after ", filled, " of ", count, " elements"));
  }
  return absl::OkStatus();
}

}  // namespace psring::ps

#endif  // PSRING_PS_WIRE_H_
