#include "bench/model/model_file.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "bench/model/fit.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"
#include "tests/testing/temp_dir.h"

namespace psring::bench::model {
namespace {

// Fitted once (a fit takes about a second).
const proto::CostModelFile& Fitted() {
  static const proto::CostModelFile* const file = [] {
    absl::StatusOr<proto::CostModelFile> fitted = FitModel(SyntheticRuns(), {"box", "2026-12-01", "synthetic"});
    EXPECT_TRUE(fitted.ok()) << fitted.status();
    return new proto::CostModelFile(fitted.ok() ? *fitted : proto::CostModelFile());
  }();
  return *file;
}

// The error of parsing `file` after `edit`, which must be kInvalidArgument and mention every `words`.
void ExpectRejected(const std::function<void(proto::CostModelFile*)>& edit, std::vector<std::string> words) {
  proto::CostModelFile file = Fitted();
  edit(&file);
  const absl::Status status = ValidateModelFile(file);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  for (const std::string& w : words) EXPECT_NE(status.message().find(w), std::string::npos) << status;
  EXPECT_NE(status.message().find("recalibrate"), std::string::npos) << status;
}

TEST(ModelFileTest, JsonRoundTrip) {
  const proto::CostModelFile file = Fitted();
  absl::StatusOr<std::string> json = ModelFileJson(file);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_NE(json->find("\"cpu_bytes_per_second\""), std::string::npos) << *json;
  absl::StatusOr<proto::CostModelFile> back = ParseModelFile(*json, "model.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(file, *back));
  absl::StatusOr<ExchangeParams> ps1 = ParamsOf(*back, Topology::kPsOne);
  ASSERT_TRUE(ps1.ok()) << ps1.status();
  EXPECT_NEAR(ps1->efficiency, 0.9, 1e-4);
}

TEST(ModelFileTest, WriteAndRead) {
  const std::string path = testing::FreshTempPath("model_file_test.json");
  ASSERT_TRUE(WriteModelFile(path, Fitted()).ok());
  absl::StatusOr<proto::CostModelFile> read = ReadModelFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->date(), "2026-12-01");
  std::remove(path.c_str());
  read = ReadModelFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find("//bench:calibrate"), std::string::npos) << read.status();
}

TEST(ModelFileTest, RejectsWhatCannotBeTrusted) {
  ExpectRejected([](proto::CostModelFile* f) { f->set_version(kModelFileVersion + 1); }, {"version", "2"});
  ExpectRejected([](proto::CostModelFile* f) { f->clear_version(); }, {"version", "missing"});
  ExpectRejected([](proto::CostModelFile* f) { f->clear_host(); }, {"host"});
  ExpectRejected([](proto::CostModelFile* f) { f->clear_date(); }, {"date"});
  ExpectRejected([](proto::CostModelFile* f) { f->mutable_exchanges()->RemoveLast(); },
                 {"ps-dedicated", "missing"});
  ExpectRejected([](proto::CostModelFile* f) { *f->add_exchanges() = f->exchanges(0); }, {"ring", "twice"});
  ExpectRejected([](proto::CostModelFile* f) { f->mutable_exchanges(1)->set_exchange("ps-2"); },
                 {"unknown exchange 'ps-2'"});
  ExpectRejected([](proto::CostModelFile* f) { f->mutable_exchanges(0)->mutable_software_s()->set_value(-1e-6); },
                 {"ring.software_s", ">= 0"});
  ExpectRejected([](proto::CostModelFile* f) { f->mutable_exchanges(2)->mutable_efficiency()->set_value(1.3); },
                 {"ps-colocated.efficiency", "(0, 1]"});
  ExpectRejected([](proto::CostModelFile* f) { f->mutable_exchanges(3)->clear_window_bytes(); },
                 {"ps-dedicated.window_bytes", "missing"});
  ExpectRejected(
      [](proto::CostModelFile* f) { f->mutable_exchanges(1)->mutable_cpu_bytes_per_second()->set_value(NAN); },
      {"ps-1.cpu_bytes_per_second"});
  ExpectRejected(
      [](proto::CostModelFile* f) { f->mutable_exchanges(0)->mutable_burst_share()->set_value(1.2); },
      {"ring.burst_share", "[0, 1]"});
  ExpectRejected(
      [](proto::CostModelFile* f) { f->mutable_exchanges(0)->mutable_burst_share()->set_value(-0.2); },
      {"ring.burst_share", ">= 0"});
  ExpectRejected(
      [](proto::CostModelFile* f) { f->mutable_exchanges(1)->mutable_window_queueing()->set_value(1.5); },
      {"ps-1.window_queueing", "[0, 1]"});
  ExpectRejected(
      [](proto::CostModelFile* f) { f->mutable_exchanges(1)->mutable_stream_contention()->set_value(-0.1); },
      {"ps-1.stream_contention", ">= 0"});
  ExpectRejected([](proto::CostModelFile* f) { f->mutable_exchanges(3)->set_window_update_share(1.5); },
                 {"ps-dedicated.window_update_share", "[0, 1]"});
  ExpectRejected([](proto::CostModelFile* f) { f->mutable_exchanges(3)->set_window_update_share(-0.5); },
                 {"ps-dedicated.window_update_share", "[0, 1]"});
  ExpectRejected(
      [](proto::CostModelFile* f) { f->mutable_exchanges(2)->mutable_window_round_s()->set_value(-1e-3); },
      {"ps-colocated.window_round_s", ">= 0"});
  ExpectRejected([](proto::CostModelFile* f) { f->mutable_exchanges(2)->set_loopback_residual_rel_sd(-0.1); },
                 {"ps-colocated", "loopback_residual_rel_sd", ">= 0"});
  ExpectRejected(
      [](proto::CostModelFile* f) {
        proto::ExtrapolationScatter* x = f->mutable_exchanges(0)->add_extrapolation();
        x->set_dimension("servers");
        x->set_log_sd_per_log_factor(0.1);
      },
      {"ring", "extrapolation dimension 'servers'"});
  ExpectRejected(
      [](proto::CostModelFile* f) {
        proto::ExtrapolationScatter* x = f->mutable_exchanges(1)->add_extrapolation();
        x->set_dimension("N");
        x->set_log_sd_per_log_factor(-0.1);
      },
      {"ps-1", "extrapolation N", ">= 0"});
}

TEST(ModelFileTest, BurstShareIsReadAndAbsentMeansTheWholeCredit) {
  proto::CostModelFile file =
      ModelFileOf({{1e-5, 0.9, 0, 1e9}, {1e-5, 0.9, 0, 1e9}, {1e-5, 0.9, 0, 1e9}, {1e-5, 0.9, 0, 1e9}});
  ASSERT_TRUE(ValidateModelFile(file).ok());
  absl::StatusOr<ExchangeParams> before = ParamsOf(file, Topology::kRing);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->burst_share, 1);  // a file fitted before the term
  file.mutable_exchanges(0)->mutable_burst_share()->set_value(0.35);
  absl::StatusOr<proto::CostModelFile> parsed = ParseModelFile(*ModelFileJson(file), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<ExchangeParams> ring = ParamsOf(*parsed, Topology::kRing);
  ASSERT_TRUE(ring.ok()) << ring.status();
  EXPECT_EQ(ring->burst_share, 0.35);
  EXPECT_EQ(ParamsOf(*parsed, Topology::kPsOne)->burst_share, 1);
  EXPECT_EQ(ParamsOf(*parsed, Topology::kPsOne)->window_queueing, 0);  // absent: none
  file.mutable_exchanges(1)->mutable_window_queueing()->set_value(0.25);
  parsed = ParseModelFile(*ModelFileJson(file), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(ParamsOf(*parsed, Topology::kPsOne)->window_queueing, 0.25);
  EXPECT_EQ(ParamsOf(*parsed, Topology::kPsOne)->stream_contention, 0);  // absent: none
  file.mutable_exchanges(1)->mutable_stream_contention()->set_value(0.02);
  parsed = ParseModelFile(*ModelFileJson(file), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(ParamsOf(*parsed, Topology::kPsOne)->stream_contention, 0.02);
  EXPECT_EQ(ParamsOf(*parsed, Topology::kPsOne)->window_update_share, 0);  // absent: none
  file.mutable_exchanges(1)->set_window_update_share(0.5);
  parsed = ParseModelFile(*ModelFileJson(file), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(ParamsOf(*parsed, Topology::kPsOne)->window_update_share, 0.5);
  EXPECT_EQ(ParamsOf(*parsed, Topology::kPsOne)->window_round_s, 0);  // absent: none
  file.mutable_exchanges(1)->mutable_window_round_s()->set_value(1.5e-3);
  file.mutable_exchanges(1)->mutable_window_round_s()->set_std_error(1e-4);
  parsed = ParseModelFile(*ModelFileJson(file), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(ParamsOf(*parsed, Topology::kPsOne)->window_round_s, 1.5e-3);
  bool named = false;  // among the parameters the intervals and the report read
  for (const auto& [name, p] : NamedParameters(parsed->exchanges(1))) {
    if (std::string(name) == "window_round_s") named = p->value() == 1.5e-3 && p->std_error() == 1e-4;
  }
  EXPECT_TRUE(named);
}

TEST(ModelFileTest, ParseErrorsNameTheFile) {
  absl::StatusOr<proto::CostModelFile> bad = ParseModelFile("{\"version\": 1, \"colour\": 3}", "/tmp/m.json");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("/tmp/m.json"), std::string::npos) << bad.status();
  bad = ParseModelFile("{\"version\": 1, \"host\": \"h\", \"date\": \"d\"}", "m.json");
  EXPECT_NE(bad.status().message().find("ring"), std::string::npos) << bad.status();
}

// Coverage of the committed quick calibration's shape: N 2-8, 100 and 200 Mbit/s plus loopback, 0-20 ms,
// 1-64 MiB. A prediction is marked only more than 2x outside it, with the dimension that sets the factor.
TEST(ModelFileTest, ExtrapolationIsTheLargestFactorOutsideTheCoverage) {
  proto::CostModelFile file = ModelFileOf({TruthFor(Topology::kRing), TruthFor(Topology::kPsOne),
                                           TruthFor(Topology::kPsColocated), TruthFor(Topology::kPsDedicated)});
  // No coverage recorded: nothing to say.
  EXPECT_EQ(ExtrapolationOf(file, Topology::kRing, Conditions{1024, 0, 4e6, 12.5e6, 0}, 4e6).factor, 0);
  EXPECT_EQ(ExtrapolationMark(ExtrapolationOf(file, Topology::kRing, Conditions{1024, 0, 4e6, 12.5e6, 0}, 4e6)),
            "");
  proto::Coverage* c = file.mutable_exchanges(0)->mutable_coverage();
  for (int n : {2, 4, 8}) c->add_nodes(n);
  for (double b : {0.0, 12.5e6, 25e6}) c->add_link_bytes_per_second(b);
  for (double l : {0.0, 1e-3, 5e-3, 20e-3}) c->add_latency_s(l);
  for (double s : {1048576.0, 67108864.0}) c->add_bytes(s);
  auto at = [&](int nodes, double link, double latency, double bytes) {
    return ExtrapolationOf(file, Topology::kRing, Conditions{nodes, 0, bytes, link, latency}, bytes);
  };
  EXPECT_EQ(at(4, 12.5e6, 5e-3, 4e6).factor, 1);
  EXPECT_EQ(ExtrapolationMark(at(4, 12.5e6, 5e-3, 4e6)), "");
  EXPECT_EQ(ExtrapolationMark(at(16, 12.5e6, 5e-3, 4e6)), "");  // exactly 2x: not marked
  EXPECT_EQ(ExtrapolationMark(at(1024, 12.5e6, 5e-3, 4e6)), "EXTRAPOLATED x128 (N)");
  EXPECT_EQ(ExtrapolationMark(at(8, 25e9 / 8, 5e-6, 4e6)), "EXTRAPOLATED x125 (link)");  // 5 us: within 0-20 ms
  EXPECT_NEAR(at(8, 12.5e6, 50e-3, 4e6).factor, 2.5, 1e-12);
  EXPECT_EQ(at(8, 12.5e6, 50e-3, 4e6).what, "latency");
  EXPECT_NEAR(at(8, 12.5e6, 0, 0.4e6).factor, 1048576 / 0.4e6, 1e-9);
  EXPECT_EQ(at(8, 12.5e6, 0, 0.4e6).what, "size");
  EXPECT_EQ(at(8, 0, 0, 4e6).factor, 1);  // loopback was calibrated
  // Another exchange without coverage says nothing.
  EXPECT_EQ(ExtrapolationOf(file, Topology::kPsOne, Conditions{1024, 1, 4e6, 12.5e6, 0}, 4e6).factor, 0);
  // Every dimension outside, not only the largest: N x4 and latency x2.5 at once.
  const std::vector<Extrapolation> all =
      ExtrapolationFactors(file, Topology::kRing, Conditions{32, 0, 4e6, 12.5e6, 50e-3}, 4e6);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].what, "N");
  EXPECT_NEAR(all[0].factor, 4, 1e-12);
  EXPECT_EQ(all[1].what, "latency");
  EXPECT_NEAR(all[1].factor, 2.5, 1e-12);
  EXPECT_TRUE(ExtrapolationFactors(file, Topology::kRing, Conditions{4, 0, 4e6, 12.5e6, 5e-3}, 4e6).empty());
}

// A projection may carry the target host's window round instead of the fit's: every PS exchange's, given (no
// standard error) and named; a file without the term (its window round is a share of the window) refuses.
TEST(ModelFileTest, WithWindowRoundSetsEveryPsExchangesAndSaysWhereItCameFrom) {
  proto::CostModelFile file =
      ModelFileOf({{0, 1, 0, 0}, {0, 1, 65536, 0}, {0, 1, 65536, 0}, {0, 1, 65536, 0}});
  EXPECT_EQ(DescribeWindowRound(file), "");
  absl::StatusOr<proto::CostModelFile> none = WithWindowRound(file, 50e-6, "--window_round_us=50");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no window-round term"), std::string::npos) << none.status();
  for (int i = 1; i < 4; ++i) {
    file.mutable_exchanges(i)->mutable_window_round_s()->set_value(1e-3 * i);
    file.mutable_exchanges(i)->mutable_window_round_s()->set_std_error(1e-4);
  }
  file.mutable_exchanges(3)->mutable_window_round_s()->set_value(0);  // dropped by the fit
  file.mutable_exchanges(3)->mutable_window_round_s()->clear_std_error();
  file.mutable_exchanges(3)->mutable_window_round_s()->set_at_bound(true);
  EXPECT_EQ(
      DescribeWindowRound(file),
      "as fitted on testhost (2026-12-01): ps-1 1.00 ms, ps-colocated 2.00 ms, ps-dedicated none (dropped)");
  absl::StatusOr<proto::CostModelFile> given = WithWindowRoundFlag(file, 50);
  ASSERT_TRUE(given.ok()) << given.status();
  for (Topology t : {Topology::kPsOne, Topology::kPsColocated, Topology::kPsDedicated}) {
    EXPECT_DOUBLE_EQ(ParamsOf(*given, t)->window_round_s, 50e-6) << TopologyName(t);
  }
  EXPECT_FALSE(given->exchanges(1).window_round_s().has_std_error());
  EXPECT_FALSE(given->exchanges(0).has_window_round_s());  // the ring has none
  EXPECT_EQ(DescribeWindowRound(*given), "0.05 ms from --window_round_us=50");
  absl::StatusOr<proto::CostModelFile> unchanged = WithWindowRoundFlag(file, -1);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(ParamsOf(*unchanged, Topology::kPsOne)->window_round_s, 1e-3);
  EXPECT_FALSE(unchanged->has_window_round_source());
  EXPECT_FALSE(WithWindowRound(file, -1e-6, "x").ok());
  EXPECT_FALSE(WithWindowRound(file, std::nan(""), "x").ok());
}

}  // namespace
}  // namespace psring::bench::model
