// TensorFrame writes exactly the bytes protobuf writes for PushRequest/PullReply, reads what protobuf
// writes, lands chunks in the destination in order, rejects bad chunks, and lets go of zero-copy memory.
#include "ps/tensor_frame.h"

#include <vector>

#include "gtest/gtest.h"
#include "proto/ps.pb.h"

namespace psring::ps {
namespace {

std::string Flatten(grpc::ByteBuffer* buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer->Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

grpc::ByteBuffer FromString(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string Serialize(const TensorFrame& frame) {
  grpc::ByteBuffer buffer;
  bool own = false;
  EXPECT_TRUE(grpc::SerializationTraits<TensorFrame>::Serialize(frame, &buffer, &own).ok());
  return Flatten(&buffer);
}

TEST(TensorFrameTest, SameBytesAsProtobuf) {
  const std::vector<float> data = {1.5f, -2.0f, 3.0f};
  SliceTracker tracker;
  for (uint64_t offset : {uint64_t{0}, uint64_t{300}}) {
    proto::PullReply reply;
    reply.mutable_chunk()->set_offset(offset);
    reply.mutable_chunk()->set_data(reinterpret_cast<const char*>(data.data()), data.size() * 4);
    EXPECT_EQ(Serialize(TensorFrame::Chunk(offset, data.data(), data.size(), &tracker)),
              reply.SerializeAsString());
  }
  proto::PushRequest request;
  request.mutable_header()->set_rank(3);
  request.mutable_header()->set_step(12345678901);
  EXPECT_EQ(Serialize(TensorFrame::Header(request.header())), request.SerializeAsString());
  EXPECT_TRUE(tracker.WaitReleased(absl::Seconds(5)));  // the buffers above are gone
}

TEST(TensorFrameTest, ReadsProtobufIntoDestination) {
  std::vector<float> dst(5, 0.0f);
  TensorFrame frame;
  frame.ExpectInto(dst.data(), dst.size());
  proto::PushRequest header;
  header.mutable_header()->set_step(7);
  grpc::ByteBuffer buffer = FromString(header.SerializeAsString());
  ASSERT_TRUE(grpc::SerializationTraits<TensorFrame>::Deserialize(&buffer, &frame).ok());
  ASSERT_TRUE(frame.is_header());
  proto::PushHeader parsed;
  ASSERT_TRUE(parsed.ParseFromString(frame.header_bytes()));
  EXPECT_EQ(parsed.step(), 7);
  const std::vector<std::vector<float>> parts = {{1, 2}, {3, 4, 5}};
  uint64_t offset = 0;
  for (const auto& part : parts) {
    proto::PushRequest chunk;
    chunk.mutable_chunk()->set_offset(offset);
    chunk.mutable_chunk()->set_data(reinterpret_cast<const char*>(part.data()), part.size() * 4);
    grpc::ByteBuffer b = FromString(chunk.SerializeAsString());
    ASSERT_TRUE(grpc::SerializationTraits<TensorFrame>::Deserialize(&b, &frame).ok());
    ASSERT_TRUE(frame.error().ok()) << frame.error();
    EXPECT_FALSE(frame.is_header());
    offset += part.size();
  }
  EXPECT_EQ(frame.filled(), 5u);
  EXPECT_EQ(dst, (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST(TensorFrameTest, RejectsBadChunks) {
  const auto read = [](uint64_t offset, const std::string& data, uint64_t capacity) {
    std::vector<float> dst(capacity, -1.0f);
    TensorFrame frame;
    frame.ExpectInto(dst.data(), dst.size());
    proto::PullReply reply;
    reply.mutable_chunk()->set_offset(offset);
    reply.mutable_chunk()->set_data(data);
    grpc::ByteBuffer b = FromString(reply.SerializeAsString());
    EXPECT_TRUE(grpc::SerializationTraits<TensorFrame>::Deserialize(&b, &frame).ok());
    EXPECT_EQ(dst, std::vector<float>(capacity, -1.0f)) << "nothing copied";
    return frame.error();
  };
  EXPECT_TRUE(absl::IsInvalidArgument(read(1, std::string(8, 'a'), 4)));   // gap
  EXPECT_TRUE(absl::IsInvalidArgument(read(0, std::string(20, 'a'), 4)));  // overflow
  EXPECT_TRUE(absl::IsInvalidArgument(read(0, std::string(7, 'a'), 4)));   // partial float
  std::vector<float> dst(4);
  TensorFrame frame;
  frame.ExpectInto(dst.data(), dst.size());
  grpc::ByteBuffer junk = FromString("\x7f\x01\x02");
  EXPECT_TRUE(grpc::SerializationTraits<TensorFrame>::Deserialize(&junk, &frame).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(frame.error()));
}

// A header field that declares more bytes than the message holds is refused before anything is allocated
// for it (6 bytes on the wire must not buy 8 MiB).
TEST(TensorFrameTest, HeaderLengthIsCheckedBeforeAllocating) {
  std::string message = "\x0a";  // field 1 (the header), length-delimited
  for (uint64_t len = 8 << 20; len >= 0x80; len >>= 7) message.push_back(static_cast<char>((len & 0x7f) | 0x80));
  message.push_back(static_cast<char>((8 << 20) >> 21));
  message += "a";
  ASSERT_LE(message.size(), 6u);
  TensorFrame frame;
  grpc::ByteBuffer buffer = FromString(message);
  EXPECT_TRUE(grpc::SerializationTraits<TensorFrame>::Deserialize(&buffer, &frame).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(frame.error())) << frame.error();
  EXPECT_NE(frame.error().message().find("field of 8388608 bytes in a message of"), std::string::npos)
      << frame.error();
  EXPECT_LT(frame.header_bytes().capacity(), 4096u);
}

}  // namespace
}  // namespace psring::ps
