#include "ring/ring_allreduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psring::ring {
namespace {

constexpr uint32_t kMagic = 0x52494e47;  // "RING"
constexpr uint32_t kAllReduce = 1;
constexpr uint32_t kBroadcast = 2;

int Mod(int a, int n) { return ((a % n) + n) % n; }

template <typename T>
void AddInto(T* __restrict dst, const T* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

template <typename T>
void ScaleBy(T* __restrict dst, size_t n, int world) {
  const T inv = T(1) / static_cast<T>(world);
  for (size_t i = 0; i < n; ++i) dst[i] *= inv;
}

const char* KindName(uint32_t kind) { return kind == kAllReduce ? "AllReduce" : "Broadcast"; }

}  // namespace

size_t ElementSize(DataType type) { return type == DataType::kFloat64 ? 8 : 4; }

RingCollectives::RingCollectives(Peer* peer, RingOptions options) : peer_(peer), options_(options) {
  if (peer_->world_size() > 1) sender_ = std::thread([this] { SenderLoop(); });
}

RingCollectives::~RingCollectives() {
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
  }
  if (sender_.joinable()) sender_.join();
}

absl::Status RingCollectives::AllReduce(void* data, size_t count, DataType type, ReduceOp op) {
  const int n = peer_->world_size();
  times_ = PhaseTimes{};
  if (n == 1) return absl::OkStatus();
  // Fewer elements than ranks leave blocks empty, and an empty block is not sent: the values then travel one
  // hop at a time, and the ranks finish one latency apart (2 (n - 1) latencies for a one-value barrier). One
  // element per block keeps every step's sends parallel, so every rank finishes in the same step. The header
  // keeps the caller's count, so ranks that disagree on it still fail.
  const size_t es = ElementSize(type);
  if (count > 0 && count < static_cast<size_t>(n)) {
    padded_.assign(static_cast<size_t>(n) * es, 0);
    std::copy_n(static_cast<const char*>(data), count * es, padded_.data());
    RETURN_IF_ERROR(AllReduceBlocks(padded_.data(), count, n, type, op));
    std::copy_n(padded_.data(), count * es, static_cast<char*>(data));
    return absl::OkStatus();
  }
  return AllReduceBlocks(data, count, count, type, op);
}

absl::Status RingCollectives::AllReduceBlocks(void* data, size_t count, size_t elements, DataType type,
                                              ReduceOp op) {
  const int n = peer_->world_size();
  const int r = peer_->rank();
  const size_t seg = std::max<size_t>(1, options_.segment_bytes / ElementSize(type));
  const size_t q = elements / n, rem = elements % n;
  auto block_start = [&](int b) { return b * q + std::min<size_t>(b, rem); };
  auto block_len = [&](int b) { return q + (static_cast<size_t>(b) < rem ? 1 : 0); };

  recv_items_.clear();
  send_items_.clear();
  size_t prev_step_first = 0;
  for (int t = 0; t < 2 * (n - 1); ++t) {
    const bool rs = t < n - 1;
    const int s = rs ? t : t - (n - 1);
    const int send_block = rs ? Mod(r - s, n) : Mod(r + 1 - s, n);
    const int recv_block = rs ? Mod(r - s - 1, n) : Mod(r - s, n);
    const size_t step_first = recv_items_.size();
    // Segment j of this step's send block is segment j of the previous step's receive block (same block).
    for (size_t off = 0, j = 0; off < block_len(send_block); off += seg, ++j) {
      send_items_.push_back({block_start(send_block) + off, std::min(seg, block_len(send_block) - off),
                             t == 0 ? 0 : prev_step_first + j + 1});
    }
    for (size_t off = 0; off < block_len(recv_block); off += seg) {
      recv_items_.push_back({block_start(recv_block) + off, std::min(seg, block_len(recv_block) - off), rs,
                             rs && t == n - 2 && op == ReduceOp::kAverage});
    }
    if (t == n - 2) rs_items_ = recv_items_.size();
    prev_step_first = step_first;
  }
  Header header{kMagic, kAllReduce, static_cast<uint32_t>(type), static_cast<uint32_t>(op), count};
  return Run(header, data, type, n);
}

absl::Status RingCollectives::Broadcast(void* data, size_t count, DataType type, int root) {
  const int n = peer_->world_size();
  times_ = PhaseTimes{};
  if (root < 0 || root >= n) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank of ", n));
  }
  if (n == 1) return absl::OkStatus();
  const int pos = Mod(peer_->rank() - root, n);  // place along the chain root -> root+1 -> ...
  const size_t seg = std::max<size_t>(1, options_.segment_bytes / ElementSize(type));
  recv_items_.clear();
  send_items_.clear();
  for (size_t off = 0, j = 0; off < count; off += seg, ++j) {
    const size_t len = std::min(seg, count - off);
    if (pos != n - 1) send_items_.push_back({off, len, pos == 0 ? 0 : j + 1});
    if (pos != 0) recv_items_.push_back({off, len, false, false});
  }
  rs_items_ = 0;
  Header header{kMagic, kBroadcast, static_cast<uint32_t>(type), static_cast<uint32_t>(root), count};
  return Run(header, data, type, n);
}

absl::Status RingCollectives::Run(const Header& header, void* data, DataType type, int world) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("an earlier collective on this ring failed (",
                                                        error_.message(),
                                                        "); the ring cannot be used any more"));
    }
    job_header_ = &header;
    job_data_ = static_cast<const char*>(data);
    job_elem_size_ = ElementSize(type);
    job_deadline_ = deadline;
    recv_done_ = 0;
    header_sent_ = false;
    ++job_id_;
  }
  const size_t scratch_bytes =
      std::max<size_t>(1, options_.segment_bytes / ElementSize(type)) * ElementSize(type);
  if (scratch_.size() < scratch_bytes) scratch_.resize(scratch_bytes);

  const absl::Time start = absl::Now();
  absl::Status received = Receive(header, static_cast<char*>(data), type, deadline);
  if (!received.ok()) {
    // Let our header reach the right neighbour before the links break, so it can name the mismatch too.
    {
      absl::MutexLock lock(&mu_);
      auto header_out = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return header_sent_ || job_done_ == job_id_;
      };
      mu_.AwaitWithDeadline(absl::Condition(&header_out), deadline);
    }
    Fail(received);
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](RingCollectives* self)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) { return self->job_done_ == self->job_id_; },
      this));
  const absl::Time end = absl::Now();
  if (header.kind == kAllReduce) {
    times_.reduce_scatter_s = absl::ToDoubleSeconds(rs_end_ - start);
    times_.allgather_s = absl::ToDoubleSeconds(end - rs_end_);
  } else {
    times_.allgather_s = absl::ToDoubleSeconds(end - start);
  }
  if (!error_.ok()) {
    return absl::Status(error_.code(), absl::StrCat("ring ", KindName(header.kind), " of ", header.count,
                                                    " elements on rank ", peer_->rank(), " of ", world, ": ",
                                                    error_.message()));
  }
  return absl::OkStatus();
}

absl::Status RingCollectives::CheckHeader(const Header& mine, const Header& left) const {
  const int l = Mod(peer_->rank() - 1, peer_->world_size());
  const std::string who = absl::StrCat("rank ", peer_->rank(), " and its left neighbour rank ", l);
  if (left.magic != kMagic) {
    return absl::InternalError(absl::StrCat("corrupt ring stream from rank ", l, " (bad magic)"));
  }
  if (left.kind != mine.kind) {
    return absl::InvalidArgumentError(absl::StrCat(who, " disagree on the collective: ", KindName(mine.kind),
                                                   " here, ", KindName(left.kind), " there"));
  }
  if (left.count != mine.count) {
    return absl::InvalidArgumentError(absl::StrCat(who, " disagree on the buffer size: ", mine.count,
                                                   " elements here, ", left.count,
                                                   " there; every rank must pass the same size"));
  }
  if (left.type != mine.type || left.op_or_root != mine.op_or_root) {
    return absl::InvalidArgumentError(absl::StrCat(who, " disagree on the element type or reduce op/root (",
                                                   mine.type, "/", mine.op_or_root, " here, ", left.type, "/",
                                                   left.op_or_root, " there)"));
  }
  return absl::OkStatus();
}

absl::Status RingCollectives::Receive(const Header& header, char* data, DataType type, absl::Time deadline) {
  rs_end_ = absl::Now();
  Header left{};
  RETURN_IF_ERROR(peer_->RecvLeft(&left, sizeof(left), deadline));
  RETURN_IF_ERROR(CheckHeader(header, left));
  const size_t es = ElementSize(type);
  const int world = peer_->world_size();
  for (size_t i = 0; i < recv_items_.size(); ++i) {
    const RecvItem& item = recv_items_[i];
    char* dst = data + item.offset * es;
    if (item.reduce) {
      RETURN_IF_ERROR(peer_->RecvLeft(scratch_.data(), item.count * es, deadline));
      if (type == DataType::kFloat32) {
        AddInto(reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(scratch_.data()), item.count);
        if (item.scale) ScaleBy(reinterpret_cast<float*>(dst), item.count, world);
      } else {
        AddInto(reinterpret_cast<double*>(dst), reinterpret_cast<const double*>(scratch_.data()), item.count);
        if (item.scale) ScaleBy(reinterpret_cast<double*>(dst), item.count, world);
      }
    } else {
      RETURN_IF_ERROR(peer_->RecvLeft(dst, item.count * es, deadline));
    }
    if (i + 1 == rs_items_) rs_end_ = absl::Now();
    absl::MutexLock lock(&mu_);
    recv_done_ = i + 1;
    if (!error_.ok()) return error_;  // the sender failed; stop early
  }
  return absl::OkStatus();
}

void RingCollectives::SenderLoop() {
  uint64_t seen = 0;
  while (true) {
    const Header* header;
    const char* data;
    size_t es;
    absl::Time deadline;
    {
      absl::MutexLock lock(&mu_);
      auto has_job = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutting_down_ || job_id_ != seen; };
      mu_.Await(absl::Condition(&has_job));
      if (shutting_down_) return;
      seen = job_id_;
      header = job_header_;
      data = job_data_;
      es = job_elem_size_;
      deadline = job_deadline_;
    }
    absl::Status status = peer_->SendRight(header, sizeof(*header), deadline);
    {
      absl::MutexLock lock(&mu_);
      header_sent_ = true;
    }
    for (size_t i = 0; status.ok() && i < send_items_.size(); ++i) {
      const SendItem& item = send_items_[i];
      {
        absl::MutexLock lock(&mu_);
        auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return recv_done_ >= item.after || !error_.ok();
        };
        if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
          status = absl::DeadlineExceededError(
              "timed out waiting for data from the left neighbour; a rank is stalled or dead");
          break;
        }
        if (!error_.ok()) break;  // the receiver failed and aborted the peer
      }
      status = peer_->SendRight(data + item.offset * es, item.count * es, deadline);
    }
    if (!status.ok()) Fail(status);
    absl::MutexLock lock(&mu_);
    job_done_ = seen;
  }
}

void RingCollectives::Fail(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (error_.ok()) error_ = status;
  }
  peer_->Abort();
}

}  // namespace psring::ring
