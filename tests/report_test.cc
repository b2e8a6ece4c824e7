#include "bench/report/table.h"

#include <sstream>

#include "gtest/gtest.h"

namespace psring::bench {
namespace {

TEST(ReportTest, BusFactorMatchesNcclTests) {
  EXPECT_DOUBLE_EQ(AllReduceBusFactor(1), 0.0);
  EXPECT_DOUBLE_EQ(AllReduceBusFactor(2), 1.0);
  EXPECT_DOUBLE_EQ(AllReduceBusFactor(4), 1.5);
  EXPECT_DOUBLE_EQ(AllReduceBusFactor(8), 1.75);
}

TEST(ReportTest, RowBandwidths) {
  Row r = MakeRow(1000000000, 250000000, 2.0, 1.5, 3);
  EXPECT_DOUBLE_EQ(r.time_us, 2e6);
  EXPECT_DOUBLE_EQ(r.algbw_gbs, 0.5);
  EXPECT_DOUBLE_EQ(r.busbw_gbs, 0.75);
  EXPECT_EQ(r.wrong, 3);
}

TEST(ReportTest, TableFooterAndJson) {
  std::ostringstream out;
  Table t(&out, {"srv_MB"});
  t.Header();
  Row a = MakeRow(4096, 1024, 1e-3, 1.0, 0);
  a.extra = {1.5};
  t.Add(a);
  t.Add(MakeRow(8192, 2048, 1e-3, 1.0, 2));
  t.Footer();
  EXPECT_NE(out.str().find("busbw(GB/s)"), std::string::npos);
  EXPECT_NE(out.str().find("srv_MB"), std::string::npos);
  EXPECT_NE(out.str().find("# Out of bounds values : 2 FAILED"), std::string::npos);
  EXPECT_EQ(t.total_wrong(), 2);
  EXPECT_NEAR(t.avg_busbw(), (4.096e-3 + 8.192e-3) / 2, 1e-12);
  std::string js = t.ToJson();
  EXPECT_NE(js.find("\"srv_MB\":1.5"), std::string::npos);
  EXPECT_NE(js.find("\"size\":8192"), std::string::npos);
}

// A miss within the run's own step-to-step noise gives no verdict; a miss beyond it fails; a pass passes
// whatever the noise.
TEST(ReportTest, ChecksAllowForTheMeasuredNoise) {
  EXPECT_EQ(JudgeCheck(1.10, 1.15, /*at_most=*/true, 0.0), CheckOutcome::kPass);
  EXPECT_EQ(JudgeCheck(1.20, 1.15, /*at_most=*/true, 0.0), CheckOutcome::kFail);
  EXPECT_EQ(JudgeCheck(1.20, 1.15, /*at_most=*/true, 0.05), CheckOutcome::kWithinNoise);  // 4.3 % over
  EXPECT_EQ(JudgeCheck(1.25, 1.15, /*at_most=*/true, 0.05), CheckOutcome::kFail);         // 8.7 % over
  EXPECT_EQ(JudgeCheck(1.28, 1.30, /*at_most=*/false, 0.02), CheckOutcome::kWithinNoise);
  EXPECT_EQ(JudgeCheck(1.20, 1.30, /*at_most=*/false, 0.02), CheckOutcome::kFail);
  EXPECT_EQ(Combine({CheckOutcome::kPass, CheckOutcome::kWithinNoise}), CheckOutcome::kWithinNoise);
  EXPECT_EQ(Combine({CheckOutcome::kWithinNoise, CheckOutcome::kFail}), CheckOutcome::kFail);
  EXPECT_EQ(Combine({CheckOutcome::kPass, CheckOutcome::kPass}), CheckOutcome::kPass);
  EXPECT_EQ(CheckLine("x", CheckOutcome::kPass, 0.1), "# check x: PASS\n");
  EXPECT_EQ(CheckLine("x", CheckOutcome::kFail, 0.1), "# check x: FAIL\n");
  EXPECT_EQ(CheckLine("x", CheckOutcome::kWithinNoise, 0.043),
            "# info x: misses by less than the measured step-to-step noise 4.3 %: no verdict\n");
}

TEST(ReportTest, ParseSizeAndSweep) {
  EXPECT_EQ(ParseSize("4K"), 4096u);
  EXPECT_EQ(ParseSize("64M"), 64u << 20);
  EXPECT_EQ(ParseSize("1G"), 1u << 30);
  EXPECT_EQ(ParseSize("512"), 512u);
  EXPECT_EQ(ParseSize("16MB"), 16u << 20);
  EXPECT_EQ(ParseSize("x"), 0u);
  EXPECT_EQ(ParseSize("4Q"), 0u);
  std::vector<size_t> s = SizeSweep(4096, 65536, 4);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2], 65536u);
}

}  // namespace
}  // namespace psring::bench
