#include "ring/tcp_transport.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace psring::ring {
namespace {

struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t world_size;
  uint32_t version;
};
constexpr uint32_t kHelloMagic = 0x48454c4f;  // "HELO"
constexpr uint32_t kVersion = 1;

absl::StatusOr<std::string> DefaultAddress(const TcpRingOptions& o) {
  if (!o.iface_addr.empty()) return o.iface_addr;
  if (o.master_addr == "localhost" || o.master_addr.rfind("127.", 0) == 0) return std::string("127.0.0.1");
  return LocalAddressToward(o.master_addr, o.master_port);
}

absl::Status CheckHello(const Hello& h, int expected_rank, int my_rank, int world_size, const char* role) {
  if (h.magic != kHelloMagic || h.version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", role,
                     " neighbour's connection did not start with a psring ring hello; is another "
                     "program using this address, or a different psring version?"));
  }
  if (h.world_size != world_size) {
    return absl::InvalidArgumentError(absl::StrCat("world size mismatch: rank ", my_rank, " has world size ",
                                                   world_size, " but its ", role, " neighbour rank ", h.rank,
                                                   " has world size ", h.world_size,
                                                   "; start every rank with the same --world_size"));
  }
  if (h.rank != expected_rank) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", my_rank, " expected rank ", expected_rank,
                                                   " as its ", role, " neighbour but rank ", h.rank,
                                                   " connected; are two processes using the same rank?"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TcpRingPeer::SendRight(const void* data, size_t bytes, absl::Time deadline) {
  if (aborted_) return absl::UnavailableError("the ring transport was aborted after an earlier error");
  RETURN_IF_ERROR(SendAll(right_, data, bytes, deadline));
  sent_ += bytes;
  return absl::OkStatus();
}

absl::Status TcpRingPeer::RecvLeft(void* data, size_t bytes, absl::Time deadline) {
  if (aborted_) return absl::UnavailableError("the ring transport was aborted after an earlier error");
  RETURN_IF_ERROR(RecvAll(left_, data, bytes, deadline));
  received_ += bytes;
  return absl::OkStatus();
}

void TcpRingPeer::Abort() {
  aborted_ = true;
  right_.Shutdown();
  left_.Shutdown();
}

absl::StatusOr<std::unique_ptr<TcpRingPeer>> ConnectTcpRing(Store* store, int rank, int world_size,
                                                            const TcpRingOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " / world size ", world_size, " is invalid"));
  }
  if (world_size == 1) return std::make_unique<TcpRingPeer>(0, 1, Socket(), Socket());
  const absl::Time deadline = absl::Now() + options.timeout;
  const int right = (rank + 1) % world_size;
  const int left = (rank + world_size - 1) % world_size;

  ASSIGN_OR_RETURN(std::string host, DefaultAddress(options));
  ASSIGN_OR_RETURN(Socket listener, ListenTcp(host, 0));
  if (options.socket_buffer_bytes > 0) RETURN_IF_ERROR(SetBufferSizes(listener, options.socket_buffer_bytes));
  ASSIGN_OR_RETURN(int port, LocalPort(listener));
  RETURN_IF_ERROR(store->Set(absl::StrCat(options.store_prefix, "/addr/", rank),
                             absl::StrCat(host, ":", port, " ", world_size)));

  // The right neighbour's address, and its idea of the world size.
  ASSIGN_OR_RETURN(std::string published,
                   store->Get(absl::StrCat(options.store_prefix, "/addr/", right), options.timeout));
  std::vector<std::string> parts = absl::StrSplit(published, ' ');
  int right_world = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &right_world)) {
    return absl::InvalidArgumentError(absl::StrCat("malformed ring address '", published, "' in the store"));
  }
  if (right_world != world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size mismatch: rank ", rank, " has world size ", world_size, " but rank ", right,
                     " has world size ", right_world, "; start every rank with the same --world_size"));
  }
  ASSIGN_OR_RETURN(HostPort right_addr,
                   ParseHostPort(parts[0], absl::StrCat("rank ", right, "'s ring address")));
  ASSIGN_OR_RETURN(Socket to_right, ConnectTcp(right_addr.host, right_addr.port, deadline));
  to_right.set_peer_name(absl::StrCat("right neighbour rank ", right, " (", parts[0], ")"));
  if (options.socket_buffer_bytes > 0) RETURN_IF_ERROR(SetBufferSizes(to_right, options.socket_buffer_bytes));
  const Hello mine{kHelloMagic, rank, world_size, kVersion};
  RETURN_IF_ERROR(SendAll(to_right, &mine, sizeof(mine), deadline));

  absl::StatusOr<Socket> accepted = AcceptTcp(listener, deadline);
  if (!accepted.ok()) {
    return absl::Status(accepted.status().code(),
                        absl::StrCat("rank ", rank, " waiting for its left neighbour rank ", left,
                                     " to connect: ", accepted.status().message()));
  }
  Socket from_left = std::move(*accepted);
  from_left.set_peer_name(absl::StrCat("left neighbour rank ", left));
  if (options.socket_buffer_bytes > 0)
    RETURN_IF_ERROR(SetBufferSizes(from_left, options.socket_buffer_bytes));
  Hello theirs{};
  RETURN_IF_ERROR(RecvAll(from_left, &theirs, sizeof(theirs), deadline));
  RETURN_IF_ERROR(CheckHello(theirs, left, rank, world_size, "left"));
  RETURN_IF_ERROR(SendAll(from_left, &mine, sizeof(mine), deadline));

  Hello reply{};
  RETURN_IF_ERROR(RecvAll(to_right, &reply, sizeof(reply), deadline));
  RETURN_IF_ERROR(CheckHello(reply, right, rank, world_size, "right"));
  if (options.blocking_io) {
    RETURN_IF_ERROR(to_right.SetBlockingSlice(absl::Milliseconds(100)));
    RETURN_IF_ERROR(from_left.SetBlockingSlice(absl::Milliseconds(100)));
  }
  return std::make_unique<TcpRingPeer>(rank, world_size, std::move(to_right), std::move(from_left));
}

}  // namespace psring::ring
