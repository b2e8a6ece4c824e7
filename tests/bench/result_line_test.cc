#include "bench/result_line.h"

#include "gtest/gtest.h"

namespace psring::bench {
namespace {

TEST(ResultLineTest, ParsesTheContractLine) {
  auto r = ParseFlatJson(
      R"({"role":"worker","exchange":"ring-tcp","rank":0,"world_size":4,"steps":10,"bytes":16777216,)"
      R"("compute_s":0.0,"exchange_s":12.3,"step_s":1.23,"samples_per_s":0,"bytes_sent":123,)"
      R"("bytes_received":456,"wrong":0,"test_accuracy":-1,"ok":true,"note":null,"esc":"a\"b"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->String("role"), "worker");
  EXPECT_EQ(r->String("exchange"), "ring-tcp");
  EXPECT_EQ(r->Number("world_size"), 4);
  EXPECT_EQ(r->Number("bytes"), 16777216);
  EXPECT_DOUBLE_EQ(r->Number("step_s"), 1.23);
  EXPECT_EQ(r->Number("test_accuracy"), -1);
  EXPECT_EQ(r->Number("ok"), 1);
  EXPECT_EQ(r->Number("note", 7), 7);
  EXPECT_EQ(r->String("esc"), "a\"b");
  EXPECT_EQ(r->String("missing"), "");
}

TEST(ResultLineTest, RejectsMalformedJson) {
  EXPECT_FALSE(ParseFlatJson("").ok());
  EXPECT_FALSE(ParseFlatJson(R"({"a":})").ok());
  EXPECT_FALSE(ParseFlatJson(R"({"a":1)").ok());
  EXPECT_FALSE(ParseFlatJson(R"({"a":1} x)").ok());
  EXPECT_FALSE(ParseFlatJson(R"({"a":[1]})").ok());
  EXPECT_TRUE(ParseFlatJson(" { } ").ok());
}

TEST(ResultLineTest, ExtractsOnlyResultLines) {
  auto results = ExtractResults(
      "step 1 loss 2.3\nPSRING_RESULT {\"role\":\"worker\",\"rank\":1}\nnoise\n"
      "PSRING_RESULT {\"role\":\"server\",\"shard\":0}\n");
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(), 2u);
  EXPECT_EQ((*results)[0].Number("rank"), 1);
  EXPECT_EQ((*results)[1].String("role"), "server");
  EXPECT_FALSE(ExtractResults("PSRING_RESULT {broken\n").ok());
}

}  // namespace
}  // namespace psring::bench
