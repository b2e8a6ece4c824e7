// bench/model/data_path.h: a model file records this build's data-path digests, and a reader tells a current
// record from a stale or missing one, naming the files that changed.
#include "bench/model/data_path.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace psring::bench::model {
namespace {

TEST(DataPath, TheBuildDigestsTheExchangesSources) {
  ASSERT_GT(kDataPathSourceCount, 10);
  bool has_service = false, has_ring = false;
  for (int i = 0; i < kDataPathSourceCount; ++i) {
    EXPECT_EQ(std::string(kDataPathSources[i].sha256).size(), 16u) << kDataPathSources[i].path;
    if (i > 0) {
      EXPECT_LT(std::string(kDataPathSources[i - 1].path), std::string(kDataPathSources[i].path));
    }
    has_service |= std::string(kDataPathSources[i].path) == "ps/service.cc";
    has_ring |= std::string(kDataPathSources[i].path) == "ring/ring_allreduce.cc";
  }
  EXPECT_TRUE(has_service);
  EXPECT_TRUE(has_ring);
  EXPECT_EQ(std::string(kDataPathFingerprint).size(), 16u);
}

TEST(DataPath, ARecordOfThisBuildIsCurrent) {
  proto::CostModelFile file;
  RecordDataPath(file);
  EXPECT_EQ(file.data_path_sources_size(), kDataPathSourceCount);
  const DataPathState state = CompareDataPath(file);
  EXPECT_TRUE(state.recorded);
  EXPECT_TRUE(state.current);
  EXPECT_TRUE(state.changed.empty() && state.added.empty() && state.removed.empty());
  EXPECT_NE(state.Describe().find("current"), std::string::npos) << state.Describe();
}

TEST(DataPath, AChangedFileMakesTheModelStaleAndIsNamed) {
  proto::CostModelFile file;
  RecordDataPath(file);
  // As if the model had been fitted on an older ps/service.cc: its digest and the set's fingerprint differ.
  for (proto::SourceDigest& d : *file.mutable_data_path_sources()) {
    if (d.path() == "ps/service.cc") d.set_sha256("0000000000000000");
  }
  file.set_data_path_fingerprint("ffffffffffffffff");
  proto::SourceDigest* gone = file.add_data_path_sources();
  gone->set_path("ps/old_transport.cc");
  gone->set_sha256("1111111111111111");
  const DataPathState state = CompareDataPath(file);
  EXPECT_TRUE(state.recorded);
  EXPECT_FALSE(state.current);
  ASSERT_EQ(state.changed.size(), 1u);
  EXPECT_EQ(state.changed[0], "ps/service.cc");
  ASSERT_EQ(state.removed.size(), 1u);
  EXPECT_EQ(state.removed[0], "ps/old_transport.cc");
  const std::string line = state.Describe();
  EXPECT_NE(line.find("STALE"), std::string::npos) << line;
  EXPECT_NE(line.find("ps/service.cc"), std::string::npos) << line;
  EXPECT_NE(line.find("//bench:calibrate"), std::string::npos) << line;
}

TEST(DataPath, AFileWithoutARecordIsNotCurrent) {
  const DataPathState state = CompareDataPath(proto::CostModelFile());
  EXPECT_FALSE(state.recorded);
  EXPECT_FALSE(state.current);
  EXPECT_NE(state.Describe().find("NOT RECORDED"), std::string::npos);
}

// A sweep's extra worker or server flags that set the transport make the model's figures not those of its
// runs (the model was calibrated with the harness's own values); other flags leave them comparable.
TEST(DataPath, TransportFlagsInExtraArgsAreNamed) {
  EXPECT_TRUE(DataPathFlagsIn({}).empty());
  EXPECT_TRUE(
      DataPathFlagsIn({"--lr=0.1", "--straggler=1:2", "--chunk_bytes_extra=3", "chunk_bytes=4"}).empty());
  const std::vector<std::string> found =
      DataPathFlagsIn({"--lr=0.1", "--receive_window_bytes=0", "-chunk_bytes=65536", "--push_window_bytes",
                       "--max_lead_bytes=0"});
  ASSERT_EQ(found.size(), 4u);
  EXPECT_EQ(found[0], "--receive_window_bytes=0");
  EXPECT_EQ(found[1], "-chunk_bytes=65536");
  EXPECT_EQ(found[2], "--push_window_bytes");
  EXPECT_EQ(found[3], "--max_lead_bytes=0");

  EXPECT_EQ(DescribeDataPathFlags({"--lr=0.1"}, {"--backup_workers=1"}, "harness"), "");
  const std::string line =
      DescribeDataPathFlags({"--lr=0.1", "--chunk_bytes=65536"}, {"--receive_window_bytes=0"}, "");
  EXPECT_EQ(line.rfind("MODEL NOT COMPARABLE", 0), 0u) << line;
  EXPECT_NE(line.find("--worker_args=--chunk_bytes=65536"), std::string::npos) << line;
  EXPECT_NE(line.find("--server_args=--receive_window_bytes=0"), std::string::npos) << line;
  EXPECT_EQ(line.find("--lr"), std::string::npos) << line;
  // scaling --ps_chunks=bdp sets the PS's chunks without a flag in either list.
  const std::string bdp = DescribeDataPathFlags({"--lr=0.1"}, {}, "bdp");
  EXPECT_EQ(bdp.rfind("MODEL NOT COMPARABLE: these runs pass --ps_chunks=bdp,", 0), 0u) << bdp;
  // Each line points to where its kind was measured: the flags' windows 9.36, the chunk rule 9.37.
  EXPECT_NE(line.find("(bench/PERFORMANCE.md section 9.36)"), std::string::npos) << line;
  EXPECT_NE(bdp.find("(bench/PERFORMANCE.md section 9.37)"), std::string::npos) << bdp;
  const std::string both = DescribeDataPathFlags({"--chunk_bytes=65536"}, {}, "bdp");
  EXPECT_NE(both.find("(bench/PERFORMANCE.md sections 9.36 and 9.37)"), std::string::npos) << both;
  // --ps_chunks=capped: measured in 9.40.
  const std::string capped = DescribeDataPathFlags({}, {"--receive_window_bytes=0"}, "capped");
  EXPECT_EQ(capped.rfind("MODEL NOT COMPARABLE: these runs pass --ps_chunks=capped --server_args=", 0), 0u)
      << capped;
  EXPECT_NE(capped.find("(bench/PERFORMANCE.md sections 9.36 and 9.40)"), std::string::npos) << capped;
}

}  // namespace
}  // namespace psring::bench::model
