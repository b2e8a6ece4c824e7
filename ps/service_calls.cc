// ParameterServerService (ps/service.h): the calls besides Register and PushPull (service.cc): Authenticate,
// and Pull, AverageMetrics, Stats and Shutdown, served as streams so nothing of them is read before CheckAuth.
#include <openssl/crypto.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/status_macros.h"
#include "ps/call_auth.h"
#include "ps/service.h"
#include "ps/wire.h"

namespace psring::ps {
namespace {

grpc::Status ClientGone() { return grpc::Status(grpc::StatusCode::UNAVAILABLE, "client went away"); }

// A handshake message is a few dozen bytes; a larger one is refused unread beyond gRPC's own limit.
constexpr size_t kMaxHandshakeMessageBytes = 1024;

}  // namespace

template <typename Stream, typename Request>
absl::Status ParameterServerService::ReadRequest(grpc::ServerContext* context, Stream* stream, Request* request,
                                                 const char* method, absl::Duration limit) {
  CallWatchdog::Guard guard(&watchdog_, context, limit);
  if (stream->Read(request)) return absl::OkStatus();
  if (guard.fired()) {
    return absl::DeadlineExceededError(absl::StrCat(method, ": no message within ", absl::FormatDuration(limit),
                                                    "; the server cancelled the call"));
  }
  return absl::InvalidArgumentError(absl::StrCat(method, ": no request message"));
}

grpc::Status ParameterServerService::StreamedPull(
    grpc::ServerContext* context, grpc::ServerSplitStreamer<proto::PullRequest, proto::PullReply>* stream) {
  absl::StatusOr<CallGrant> call = CheckAuth(context, "Pull");
  if (!call.ok()) return ToGrpc(call.status());
  proto::PullRequest request;
  absl::Status status = ReadRequest(context, stream, &request, "Pull", options_.first_message_timeout);
  if (status.ok()) status = call->CheckFields(PullFields(request));
  if (status.ok()) status = CheckAddress(request.address());
  if (status.ok() && request.rank() >= 0 && request.rank() < options_.workers) {
    status = channels_.CheckOwner(*call, request.rank());
  }
  if (!status.ok()) return ToGrpc(status);
  absl::StatusOr<ParameterSnapshot> snapshot = core_->Pull(request.rank(), GetSession(request));
  if (!snapshot.ok()) return ToGrpc(snapshot.status());
  proto::PullReply header;
  header.mutable_header()->set_version(snapshot->version);
  header.mutable_header()->set_num_elements(snapshot->params.size());
  if (!stream->Write(header)) return ClientGone();
  uint64_t sent = 0;
  const bool ok = WriteChunks<proto::PullReply>(stream, snapshot->params.data(), snapshot->params.size(),
                                                core_->chunk_elements(), &sent);
  bytes_sent_ += sent;
  return ok ? grpc::Status::OK : ClientGone();
}

grpc::Status ParameterServerService::StreamedAverageMetrics(
    grpc::ServerContext* context, grpc::ServerUnaryStreamer<proto::MetricsRequest, proto::MetricsReply>* stream) {
  absl::StatusOr<CallGrant> call = CheckAuth(context, "AverageMetrics");
  if (!call.ok()) return ToGrpc(call.status());
  proto::MetricsRequest request;
  absl::Status status = ReadRequest(context, stream, &request, "AverageMetrics", options_.first_message_timeout);
  if (status.ok()) status = call->CheckFields(MetricsFields(request));
  if (status.ok()) status = CheckAddress(request.address());
  if (status.ok() && request.rank() >= 0 && request.rank() < options_.workers) {
    status = channels_.CheckOwner(*call, request.rank());
  }
  if (!status.ok()) return ToGrpc(status);
  absl::StatusOr<std::vector<double>> mean = core_->AverageMetrics(
      request.rank(), GetSession(request), std::vector<double>(request.values().begin(), request.values().end()));
  if (!mean.ok()) return ToGrpc(mean.status());
  proto::MetricsReply reply;
  for (double v : *mean) reply.add_values(v);
  return stream->Write(reply) ? grpc::Status::OK : ClientGone();
}

grpc::Status ParameterServerService::StreamedStats(
    grpc::ServerContext* context, grpc::ServerUnaryStreamer<proto::StatsRequest, proto::StatsReply>* stream) {
  absl::StatusOr<CallGrant> call = CheckAuth(context, "Stats");
  if (!call.ok()) return ToGrpc(call.status());
  proto::StatsRequest request;
  absl::Status status = ReadRequest(context, stream, &request, "Stats", options_.first_message_timeout);
  if (status.ok()) status = call->CheckFields("");
  if (!status.ok()) return ToGrpc(status);
  return stream->Write(GetStats()) ? grpc::Status::OK : ClientGone();
}

grpc::Status ParameterServerService::StreamedShutdown(
    grpc::ServerContext* context, grpc::ServerUnaryStreamer<proto::ShutdownRequest, proto::ShutdownReply>* stream) {
  absl::StatusOr<CallGrant> call = CheckAuth(context, "Shutdown");
  if (!call.ok()) return ToGrpc(call.status());
  proto::ShutdownRequest request;
  absl::Status status = ReadRequest(context, stream, &request, "Shutdown", options_.first_message_timeout);
  if (status.ok()) status = call->CheckFields("");
  if (status.ok()) status = channels_.CheckShutdown(*call);
  if (!status.ok()) return ToGrpc(status);
  RequestShutdown();
  return stream->Write(proto::ShutdownReply()) ? grpc::Status::OK : ClientGone();
}

// ---- Authenticate -----------------------------------------------------------------------------------------

bool ParameterServerService::TakeHandshakeSlot() {
  absl::MutexLock lock(&handshake_mu_);
  if (pending_handshakes_ >= options_.max_pending_handshakes) return false;
  ++pending_handshakes_;
  return true;
}

void ParameterServerService::ReleaseHandshakeSlot() {
  absl::MutexLock lock(&handshake_mu_);
  --pending_handshakes_;
}

grpc::Status ParameterServerService::Authenticate(
    grpc::ServerContext* context, grpc::ServerReaderWriter<proto::AuthReply, proto::AuthRequest>* stream) {
  if (!channels_.enabled()) {
    return ToGrpc(absl::FailedPreconditionError(
        "this server runs without a token (--auth_token); give it the job's token, or run the worker without "
        "one"));
  }
  if (!TakeHandshakeSlot()) {
    return ToGrpc(absl::ResourceExhaustedError(absl::StrCat(
        "Authenticate: ", options_.max_pending_handshakes, " handshakes are already pending; try again")));
  }
  const absl::Status status = RunHandshake(context, stream);
  ReleaseHandshakeSlot();
  return ToGrpc(status);
}

absl::Status ParameterServerService::RunHandshake(
    grpc::ServerContext* context, grpc::ServerReaderWriter<proto::AuthReply, proto::AuthRequest>* stream) {
  proto::AuthRequest request;
  RETURN_IF_ERROR(ReadRequest(context, stream, &request, "Authenticate", options_.handshake_timeout));
  const proto::AuthHello hello = request.hello();
  if (!request.has_hello() || request.ByteSizeLong() > kMaxHandshakeMessageBytes ||
      hello.nonce().size() != kNonceBytes || hello.public_key().size() != 32) {
    return absl::InvalidArgumentError("Authenticate must start with an AuthHello (32-byte nonce and key)");
  }
  RETURN_IF_ERROR(CheckAddress(hello.address()));
  if (hello.rank() != kOperatorRank &&
      (hello.rank() < 0 || hello.rank() >= options_.workers || hello.world_size() != options_.workers)) {
    return absl::InvalidArgumentError(absl::StrCat("worker rank ", hello.rank(), " of world size ",
                                                   hello.world_size(), " does not fit this server's --workers=",
                                                   options_.workers));
  }
  ASSIGN_OR_RETURN(const EphemeralKey mine, EphemeralKey::Generate());
  proto::AuthReply reply;
  proto::AuthChallenge* challenge = reply.mutable_challenge();
  challenge->set_nonce(RandomBytes(kNonceBytes));
  challenge->set_public_key(mine.public_key());
  const std::string transcript = HandshakeTranscript(hello, *challenge);
  challenge->set_proof(ServerProof(channels_.ps_key(), transcript));
  if (!stream->Write(reply)) return absl::UnavailableError("client went away");
  RETURN_IF_ERROR(ReadRequest(context, stream, &request, "Authenticate", options_.handshake_timeout));
  if (!request.has_proof() || request.ByteSizeLong() > kMaxHandshakeMessageBytes ||
      !ConstantTimeEquals(request.proof().proof(), ClientProof(channels_.ps_key(), transcript))) {
    return absl::UnauthenticatedError(absl::StrCat("Authenticate: the client (", context->peer(),
                                                   ") did not prove the job's token; refused"));
  }
  ASSIGN_OR_RETURN(std::string shared, mine.SharedSecret(hello.public_key()));
  std::string key = ChannelKey(channels_.ps_key(), shared, transcript);
  OPENSSL_cleanse(shared.data(), shared.size());
  proto::AuthReply accepted;
  accepted.mutable_accepted()->set_channel(channels_.Add(hello.rank(), std::move(key)));
  if (!stream->Write(accepted)) return absl::UnavailableError("client went away");
  return absl::OkStatus();
}

}  // namespace psring::ps
