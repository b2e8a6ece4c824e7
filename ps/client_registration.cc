// PsExchange's registration (ps/client.h): the element layout from the bucket plan, and registering with
// every shard (with retries while a shard is unreachable or forgot this rank).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "ps/client.h"
#include "ps/client_internal.h"

namespace psring::ps {

absl::Status PsExchange::RegisterOnce(Shard* shard, trainer::FloatBuffer params) {
  const std::string where = absl::StrCat("Register with shard ", shard->index, " (", shard->address, ")");
  const ShardRange range = layout_.WireRange(shard->index);
  RETURN_IF_ERROR(EnsureChannel(shard));
  grpc::ClientContext context;
  proto::RegisterRequest request;
  proto::RegisterHeader* header = request.mutable_header();
  *header->mutable_address() = Address(*shard);
  header->set_rank(options_.rank);
  header->set_world_size(options_.world_size);
  header->set_total_params(params.count);
  header->mutable_hyperparameters()->set_lr(options_.hyperparameters.lr);
  header->mutable_hyperparameters()->set_momentum(options_.hyperparameters.momentum);
  header->mutable_hyperparameters()->set_weight_decay(options_.hyperparameters.weight_decay);
  header->set_offers_parameters(true);
  if (!layout_.flat()) {
    for (uint64_t n : layout_.buckets()) header->mutable_layout()->add_bucket_elements(n);
  }
  header->mutable_layout()->set_settings(layout_settings_);
  const absl::Time deadline = PrepareContext(shard, &context, "Register", RegisterFields(*header));
  auto stream = shard->stub->Register(&context);
  bool ok = stream->Write(request) &&
            WriteChunks<proto::RegisterRequest>(stream.get(), params.data + range.begin, range.size(),
                                                chunk_elements_, &shard->bytes_sent);
  if (ok) ok = stream->WritesDone();
  proto::RegisterReply reply;
  absl::Status received = absl::OkStatus();
  if (ok && stream->Read(&reply) && reply.has_header()) {
    const proto::RegisterReplyHeader& h = reply.header();
    if (h.total_params() != params.count || h.shard_begin() != range.begin || h.shard_end() != range.end) {
      received = absl::FailedPreconditionError(absl::StrCat(
          where, ": server holds range [", h.shard_begin(), ", ", h.shard_end(), ") of ", h.total_params(),
          " parameters, this worker expects [", range.begin, ", ", range.end, ") of ", params.count));
    } else {
      received = ReadChunks<proto::RegisterReply>(stream.get(), params.data + range.begin, range.size(),
                                                  &shard->bytes_received, "registered parameters");
      if (received.ok()) {
        shard->session = GetSession(h);
        shard->next_step = h.next_step();
        shard->version = h.version();
        shard->range = range;
        shard->reply_chunk_elements = h.reply_chunk_elements();
        shard->backup_workers = h.backup_workers();
        if (shard->index == 0) {
          name_ = absl::StrCat("ps-", h.mode());
          server_update_ = h.mode() == "async"      ? trainer::ServerUpdate::kEachPush
                           : h.backup_workers() > 0 ? trainer::ServerUpdate::kMeanOfFirstPushes
                                                    : trainer::ServerUpdate::kMeanPerStep;
        }
      }
    }
  }
  // Drain what the server still sends, so Finish() reports how the call really ended.
  while (!received.ok() && stream->Read(&reply)) {
  }
  grpc::Status status = stream->Finish();
  RETURN_IF_ERROR(CallResult(shard, status, deadline, where));
  if (!received.ok()) return absl::Status(received.code(), absl::StrCat(where, ": ", received.message()));
  if (!ok) return absl::UnavailableError(absl::StrCat(where, ": stream broke"));
  return absl::OkStatus();
}

absl::Status PsExchange::RegisterWithRetries(Shard* shard, trainer::FloatBuffer params) {
  const absl::Time give_up = absl::Now() + options_.reconnect_timeout;
  absl::Duration backoff = options_.initial_backoff;
  while (true) {
    absl::Status status = RegisterOnce(shard, params);
    if (status.ok() || !NeedsReregistration(status) || absl::Now() + backoff > give_up) {
      if (!status.ok() && NeedsReregistration(status)) {
        return absl::UnavailableError(absl::StrCat(
            status.message(), " (gave up after --timeout=", absl::FormatDuration(options_.reconnect_timeout),
            " of retries; is the server running?)"));
      }
      return status;
    }
    // Wait on the channel rather than sleep: with the synchronous API a connection attempt progresses only
    // while some call polls for it, so a plain sleep left a restarted server's handshakes pending for
    // seconds (re-registration took 3.7 s after a 0.2 s outage). This returns as soon as it is connected.
    const absl::Time next = absl::Now() + backoff;
    shard->channel->WaitForConnected(absl::ToChronoTime(next));
    absl::SleepFor(next - absl::Now());
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::Status PsExchange::SetBucketPlan(const trainer::BucketPlan& plan, absl::string_view settings) {
  if (registered_) {
    return absl::FailedPreconditionError(
        "SetBucketPlan after SyncInitialParameters: the servers' element layout is fixed at registration");
  }
  // The layout names buckets by size only: they must tile the vector from its end, in launch order.
  size_t end = plan.total();
  for (const trainer::FloatRange& bucket : plan.buckets()) {
    if (bucket.count == 0 || bucket.end() != end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket plan: bucket [", bucket.offset, ", ", bucket.end(), ") does not end where the previous one "
          "begins (", end, "); the parameter server takes plans in launch order, last layers first"));
    }
    end = bucket.offset;
  }
  layout_plan_ = plan.buckets();
  layout_settings_ = std::string(settings);
  return absl::OkStatus();
}

absl::Status PsExchange::SyncInitialParameters(trainer::FloatBuffer params) {
  RETURN_IF_ERROR(CheckBuffer(params, "params"));
  if (params.count < shards_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a model of ", params.count, " parameters cannot be split over ", shards_.size(), " shards"));
  }
  std::vector<uint64_t> buckets;
  size_t planned = 0;
  for (const trainer::FloatRange& bucket : layout_plan_) {
    buckets.push_back(bucket.count);
    planned += bucket.count;
  }
  if (!layout_plan_.empty() && planned != params.count) {
    return absl::InvalidArgumentError(absl::StrCat("the bucket plan (SetBucketPlan) covers ", planned,
                                                   " elements but the model has ", params.count));
  }
  ASSIGN_OR_RETURN(layout_, ShardLayout::Create(params.count, std::move(buckets), num_shards()));
  total_params_ = params.count;
  const trainer::FloatBuffer wire = ToWire(params, &wire_params_);
  RETURN_IF_ERROR(ForEachShard([&](Shard* shard) { return RegisterWithRetries(shard, wire); }));
  registered_ = true;
  FromWire(wire, params);
  // With backup workers a step closes once N-B pushes are in: a rank still registering would find steps
  // closed without it, and its registration (which resets the shard's closed step) would then strand the
  // others. So with B > 0 every rank waits here until all N have registered, before any step.
  const bool backup = std::any_of(shards_.begin(), shards_.end(), [](const Shard& s) { return s.backup_workers > 0; });
  if (backup) RETURN_IF_ERROR(Barrier());
  return absl::OkStatus();
}

}  // namespace psring::ps
