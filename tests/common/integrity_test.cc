// common/integrity.h's tags (issue 22): a tag depends on every byte, the sequence number and the key, not on
// how the message is cut into parts. (The keys the handshake derives for them: auth_test.cc.)
#include "common/integrity.h"

#include <string>

#include "gtest/gtest.h"

namespace psring {
namespace {

DirectionKey Key(uint8_t fill) {
  DirectionKey k;
  k.fill(fill);
  return k;
}

TEST(MessageMacTest, TheTagCoversEveryByteTheSequenceAndTheKey) {
  const std::string message(100000, 'm');
  MessageMac a(Key(1)), b(Key(1));
  const MacTag first = a.Next({message});
  // The same bytes cut into other parts give the same tag: only the concatenation counts.
  EXPECT_EQ(b.Next({absl::string_view(message).substr(0, 17), absl::string_view(message).substr(17)}), first);
  // The next message of the same bytes gets another tag (sequence 1): a replayed message fails.
  EXPECT_NE(a.Next({message}), first);
  EXPECT_EQ(a.sequence(), 2u);

  for (size_t at : {size_t{0}, size_t{15}, size_t{16}, message.size() - 1}) {
    std::string changed = message;
    changed[at] ^= 1;
    MessageMac c(Key(1));
    EXPECT_FALSE(c.Check({changed}, first)) << "a flip at byte " << at << " went unnoticed";
  }
  MessageMac other_key(Key(2));
  EXPECT_FALSE(other_key.Check({message}, first));
  MessageMac shorter(Key(1));
  EXPECT_FALSE(shorter.Check({absl::string_view(message).substr(1)}, first));
  MessageMac same(Key(1));
  EXPECT_TRUE(same.Check({message}, first));
  // Empty messages are tagged too (a ring segment of zero elements).
  MessageMac e1(Key(3)), e2(Key(3));
  EXPECT_TRUE(e2.Check({}, e1.Next({})));
}

// Issue 34: values sealed for the store (NCCL's unique id): hidden, bound to key and context, and every
// change, cut or extension is refused with kDataLoss.
TEST(SealValueTest, HidesTheValueAndRefusesEveryChange) {
  const std::string id(128, 'i');
  absl::StatusOr<std::string> sealed = SealValue(Key(7), "job ring/nccl_id", id);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  ASSERT_EQ(sealed->size(), id.size() + kSealOverheadBytes);
  EXPECT_EQ(sealed->find(std::string(16, 'i')), std::string::npos) << "the value shows through";
  absl::StatusOr<std::string> opened = OpenValue(Key(7), "job ring/nccl_id", *sealed);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, id);
  absl::StatusOr<std::string> again = SealValue(Key(7), "job ring/nccl_id", id);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(*again, *sealed) << "a nonce was reused";

  EXPECT_EQ(OpenValue(Key(8), "job ring/nccl_id", *sealed).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(OpenValue(Key(7), "other ring/nccl_id", *sealed).status().code(), absl::StatusCode::kDataLoss);
  for (size_t i = 0; i < sealed->size(); i += 7) {
    std::string flipped = *sealed;
    flipped[i] ^= 1;
    EXPECT_EQ(OpenValue(Key(7), "job ring/nccl_id", flipped).status().code(), absl::StatusCode::kDataLoss) << i;
  }
  EXPECT_EQ(OpenValue(Key(7), "job ring/nccl_id", sealed->substr(0, sealed->size() - 1)).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(OpenValue(Key(7), "job ring/nccl_id", *sealed + "x").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(OpenValue(Key(7), "job ring/nccl_id", "short").status().code(), absl::StatusCode::kDataLoss);
  absl::StatusOr<std::string> empty = SealValue(Key(7), "", "");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*OpenValue(Key(7), "", *empty), "");
}

}  // namespace
}  // namespace psring
