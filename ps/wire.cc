#include "ps/wire.h"

#include <malloc.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <grpc/support/log.h>

#include "absl/strings/match.h"
#include "google/protobuf/descriptor.h"
#include "proto/ps.grpc.pb.h"

namespace psring::ps {
namespace {

const google::protobuf::MethodDescriptor& PushPullMethod() {
  // The generated service registers its methods in the descriptor's order, so index() is the handler slot.
  static const google::protobuf::MethodDescriptor* const method =
      google::protobuf::DescriptorPool::generated_pool()
          ->FindServiceByName(proto::ParameterServer::service_full_name())
          ->FindMethodByName("PushPull");
  return *method;
}

}  // namespace

const std::string& PushPullMethodName() {
  static const std::string* const name = new std::string(
      absl::StrCat("/", PushPullMethod().service()->full_name(), "/", PushPullMethod().name()));
  return *name;
}

int PushPullMethodIndex() { return PushPullMethod().index(); }

int MethodIndex(const std::string& name) {
  const google::protobuf::MethodDescriptor* method = google::protobuf::DescriptorPool::generated_pool()
                                                         ->FindServiceByName(proto::ParameterServer::service_full_name())
                                                         ->FindMethodByName(name);
  return method == nullptr ? -1 : method->index();
}

void TuneMallocForTensors() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

void QuietGrpcLogs() {
  const char* verbosity = std::getenv("GRPC_VERBOSITY");
  if (verbosity != nullptr && *verbosity != '\0') return;  // the user asked for gRPC's own lines
  gpr_set_log_function([](gpr_log_func_args* args) {
    if (absl::StartsWith(args->message, "assertion failed")) {
      std::fprintf(stderr, "gRPC %s:%d: %s\n", args->file, args->line, args->message);
    }
  });
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("cannot read ", path));
  return buffer.str();
}

absl::Status FromGrpc(const grpc::Status& status, const std::string& context) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(context, ": ", status.error_message()));
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status AcceptChunk(const proto::Chunk& chunk, float* dst, uint64_t count, uint64_t* filled,
                         const char* what) {
  const std::string& data = chunk.data();
  if (data.size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": chunk of ", data.size(), " bytes is not a whole number of float32 values"));
  }
  if (chunk.offset() != *filled) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": chunk at element ", chunk.offset(),
                                                   " but the next expected element is ", *filled,
                                                   " (chunks must arrive in order, without gaps)"));
  }
  const uint64_t len = data.size() / sizeof(float);
  if (len > count - *filled) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": chunk [", *filled, ", ", *filled + len,
                                                   ") overflows the tensor of ", count, " elements"));
  }
  if (dst != nullptr) std::memcpy(dst + *filled, data.data(), data.size());
  *filled += len;
  return absl::OkStatus();
}

}  // namespace psring::ps
