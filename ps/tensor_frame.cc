#include "ps/tensor_frame.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/wire.h"

namespace psring::ps {
namespace {

// Protobuf wire format: field 1 / field 2 as length-delimited (wire type 2), Chunk.offset varint (field 1).
constexpr uint8_t kHeaderTag = (1 << 3) | 2;
constexpr uint8_t kChunkTag = (2 << 3) | 2;
constexpr uint8_t kOffsetTag = (1 << 3) | 0;
constexpr uint8_t kDataTag = (2 << 3) | 2;

void PutVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

size_t VarintSize(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

// Reads across the slices of a ByteBuffer.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>* slices) : slices_(slices) { Skip(0); }
  bool done() const { return index_ >= slices_->size(); }
  bool GetByte(uint8_t* byte) {
    if (done()) return false;
    *byte = (*slices_)[index_].begin()[pos_];
    Skip(1);
    return true;
  }
  bool GetVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte;
      if (!GetByte(&byte)) return false;
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }
  // Copies n bytes to dst (nullptr: skips them). False when fewer remain.
  bool Copy(void* dst, size_t n) {
    char* out = static_cast<char*>(dst);
    while (n > 0) {
      if (done()) return false;
      const grpc::Slice& s = (*slices_)[index_];
      const size_t take = std::min(n, s.size() - pos_);
      if (out != nullptr) {
        std::memcpy(out, s.begin() + pos_, take);
        out += take;
      }
      n -= take;
      Skip(take);
    }
    return true;
  }
  size_t consumed() const { return consumed_; }

 private:
  void Skip(size_t n) {
    pos_ += n;
    consumed_ += n;
    while (index_ < slices_->size() && pos_ >= (*slices_)[index_].size()) {
      pos_ -= (*slices_)[index_].size();
      ++index_;
    }
  }
  const std::vector<grpc::Slice>* slices_;
  size_t index_ = 0;
  size_t pos_ = 0;
  size_t consumed_ = 0;
};

absl::Status Malformed(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed tensor message: ", what));
}

}  // namespace

void SliceTracker::Add() {
  absl::MutexLock lock(&mu_);
  ++outstanding_;
}

void SliceTracker::Release(void* tracker) {
  auto* self = static_cast<SliceTracker*>(tracker);
  absl::MutexLock lock(&self->mu_);
  --self->outstanding_;
}

bool SliceTracker::WaitReleased(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto released = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return outstanding_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&released), timeout);
}

TensorFrame TensorFrame::Header(const google::protobuf::MessageLite& header) {
  TensorFrame frame;
  const std::string bytes = header.SerializeAsString();
  frame.encoded_header_.push_back(static_cast<char>(kHeaderTag));
  PutVarint(bytes.size(), &frame.encoded_header_);
  frame.encoded_header_ += bytes;
  return frame;
}

TensorFrame TensorFrame::Chunk(uint64_t offset, const float* data, uint64_t count, SliceTracker* tracker) {
  TensorFrame frame;
  frame.offset_ = offset;
  frame.data_ = data;
  frame.count_ = count;
  frame.tracker_ = tracker;
  return frame;
}

TensorFrame TensorFrame::CopiedChunk(uint64_t offset, const float* data, uint64_t count) {
  TensorFrame frame;
  frame.owned_ = grpc::Slice(data, count * sizeof(float));
  frame.offset_ = offset;
  frame.data_ = reinterpret_cast<const float*>(frame.owned_.begin());
  frame.count_ = count;
  return frame;
}

void TensorFrame::ExpectInto(float* dst, uint64_t count) {
  dst_ = dst;
  dst_count_ = count;
  filled_ = 0;
  error_ = absl::OkStatus();
}

}  // namespace psring::ps

namespace grpc {

Status SerializationTraits<psring::ps::TensorFrame, void>::Serialize(const psring::ps::TensorFrame& frame,
                                                                     ByteBuffer* buffer, bool* own_buffer) {
  using psring::ps::kChunkTag;
  using psring::ps::kDataTag;
  using psring::ps::kOffsetTag;
  *own_buffer = true;
  if (frame.data_ == nullptr) {
    Slice slice(frame.encoded_header_);
    *buffer = ByteBuffer(&slice, 1);
    return Status::OK;
  }
  const uint64_t bytes = frame.count_ * sizeof(float);
  const uint64_t inner = (frame.offset_ > 0 ? 1 + psring::ps::VarintSize(frame.offset_) : 0) + 1 +
                         psring::ps::VarintSize(bytes) + bytes;
  std::string prefix;
  prefix.push_back(static_cast<char>(kChunkTag));
  psring::ps::PutVarint(inner, &prefix);
  if (frame.offset_ > 0) {
    prefix.push_back(static_cast<char>(kOffsetTag));
    psring::ps::PutVarint(frame.offset_, &prefix);
  }
  prefix.push_back(static_cast<char>(kDataTag));
  psring::ps::PutVarint(bytes, &prefix);
  if (frame.tracker_ == nullptr) {  // CopiedChunk
    Slice slices[2] = {Slice(prefix), frame.owned_};
    *buffer = ByteBuffer(slices, 2);
    return Status::OK;
  }
  frame.tracker_->Add();
  Slice slices[2] = {Slice(prefix), Slice(const_cast<float*>(frame.data_), bytes,
                                          &psring::ps::SliceTracker::Release, frame.tracker_)};
  *buffer = ByteBuffer(slices, 2);
  return Status::OK;
}

Status SerializationTraits<psring::ps::TensorFrame, void>::Deserialize(ByteBuffer* buffer,
                                                                       psring::ps::TensorFrame* frame) {
  using psring::ps::Malformed;
  frame->is_header_ = false;
  std::vector<Slice> slices;
  if (!buffer->Dump(&slices).ok()) {
    frame->error_ = Malformed("unreadable buffer");
    return Status::OK;
  }
  buffer->Clear();
  if (!frame->error_.ok()) return Status::OK;  // keep the first error
  psring::ps::SliceCursor cursor(&slices);
  uint8_t tag = 0;
  uint64_t len = 0;
  if (!cursor.GetByte(&tag) || !cursor.GetVarint(&len)) {
    frame->error_ = Malformed("empty message");
    return Status::OK;
  }
  const size_t start = cursor.consumed();
  size_t total = 0;
  for (const Slice& slice : slices) total += slice.size();
  // The declared length is checked against the bytes that arrived before anything is allocated for it: a
  // 6-byte message must not buy an 8 MiB buffer.
  if (len > total - start) {
    frame->error_ = Malformed(absl::StrCat("field of ", len, " bytes in a message of ", total, " bytes"));
  } else if (len > static_cast<uint64_t>(psring::ps::kMaxMessageBytes)) {
    frame->error_ = Malformed("field longer than the message size limit");
  } else if (tag == psring::ps::kHeaderTag) {
    frame->is_header_ = true;
    frame->header_bytes_.resize(len);
    if (!cursor.Copy(frame->header_bytes_.data(), len)) frame->error_ = Malformed("truncated header");
  } else if (tag == psring::ps::kChunkTag) {
    uint64_t offset = 0;
    bool have_data = false;
    psring::ps::SliceCursor data = cursor;
    uint64_t data_len = 0;
    while (cursor.consumed() - start < len) {
      uint8_t field = 0;
      if (!cursor.GetByte(&field)) break;
      if (field == psring::ps::kOffsetTag) {
        if (!cursor.GetVarint(&offset)) break;
      } else if (field == psring::ps::kDataTag) {
        if (!cursor.GetVarint(&data_len)) break;
        data = cursor;
        have_data = true;
        if (!cursor.Copy(nullptr, data_len)) break;
      } else {
        frame->error_ = Malformed(absl::StrCat("unknown chunk field tag ", field));
        return Status::OK;
      }
    }
    if (cursor.consumed() - start != len) {
      frame->error_ = Malformed("chunk length does not match its fields");
    } else if (data_len % sizeof(float) != 0) {
      frame->error_ = absl::InvalidArgumentError(
          absl::StrCat("chunk of ", data_len, " bytes is not a whole number of float32 values"));
    } else if (offset != frame->filled_) {
      frame->error_ = absl::InvalidArgumentError(
          absl::StrCat("chunk at element ", offset, " but the next expected element is ", frame->filled_,
                       " (chunks must arrive in order, without gaps)"));
    } else if (data_len / sizeof(float) > frame->dst_count_ - frame->filled_) {
      frame->error_ = absl::InvalidArgumentError(
          absl::StrCat("chunk [", frame->filled_, ", ", frame->filled_ + data_len / sizeof(float),
                       ") overflows the tensor of ", frame->dst_count_, " elements"));
    } else if (have_data) {
      data.Copy(frame->dst_ + frame->filled_, data_len);
      frame->filled_ += data_len / sizeof(float);
    }
  } else {
    frame->error_ = Malformed(absl::StrCat("unexpected field tag ", tag));
  }
  if (frame->error_.ok() && !cursor.done()) frame->error_ = Malformed("trailing bytes after the first field");
  return Status::OK;
}

}  // namespace grpc
