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

}  // namespace
}  // namespace psring
