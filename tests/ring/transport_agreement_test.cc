// AgreeOnTransport: one transport for the whole job, decided by rank 0 and read by every rank, with ranks as
// threads over an in-memory store.
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/store.h"
#include "gtest/gtest.h"
#include "ring/process_group.h"

namespace psring::ring {
namespace {

struct Rank {
  Transport requested = Transport::kAuto;
  std::string gpu;
};

std::vector<absl::StatusOr<Transport>> Agree(const std::vector<Rank>& ranks,
                                             absl::Duration timeout = absl::Seconds(10)) {
  InMemoryStore store;
  const int n = static_cast<int>(ranks.size());
  std::vector<absl::StatusOr<Transport>> results(n, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      results[r] = AgreeOnTransport(&store, r, n, ranks[r].requested, ranks[r].gpu, "job", timeout);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

void ExpectEveryRankGets(const std::vector<absl::StatusOr<Transport>>& results, Transport want) {
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    EXPECT_EQ(*results[r], want) << "rank " << r << " got " << TransportName(*results[r]);
  }
}

TEST(TransportAgreementTest, ParsesTheFlag) {
  EXPECT_EQ(*ParseTransport(""), Transport::kAuto);
  EXPECT_EQ(*ParseTransport("auto"), Transport::kAuto);
  EXPECT_EQ(*ParseTransport("tcp"), Transport::kTcp);
  EXPECT_EQ(*ParseTransport("nccl"), Transport::kNccl);
  EXPECT_EQ(ParseTransport("gloo").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TransportAgreementTest, AutoPicksNcclOnlyWhenEveryRankHasAGpuOfItsOwn) {
  const Transport with_own_gpus = NcclCompiledIn() ? Transport::kNccl : Transport::kTcp;
  ExpectEveryRankGets(Agree({{Transport::kAuto, "a:0000:01:00.0"},
                             {Transport::kAuto, "a:0000:02:00.0"},
                             {Transport::kAuto, "b:0000:01:00.0"}}),
                      with_own_gpus);
}

// What the scaling harness does: every rank on one host with --local_rank=0, i.e. the same GPU.
TEST(TransportAgreementTest, RanksSharingAGpuGetTcp) {
  ExpectEveryRankGets(Agree({{Transport::kAuto, "a:0000:01:00.0"},
                             {Transport::kAuto, "a:0000:01:00.0"},
                             {Transport::kAuto, "a:0000:02:00.0"}}),
                      Transport::kTcp);
}

// Issue 25: ranks that collide on one GPU (no local rank given) got TCP with host staging silently. Every
// rank now learns why, and rank 0 prints it.
TEST(TransportAgreementTest, RanksSharingAGpuAreToldWhyTheJobGotTcp) {
  InMemoryStore store;
  const std::vector<std::string> gpus = {"a:0000:01:00.0", "a:0000:02:00.0", "a:0000:01:00.0"};
  std::vector<std::string> why(gpus.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      EXPECT_TRUE(
          AgreeOnTransport(&store, r, 3, Transport::kAuto, gpus[r], "job", absl::Seconds(10), &why[r]).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(why[r].find("ranks 0 and 2 share GPU a:0000:01:00.0"), std::string::npos) << why[r];
    EXPECT_NE(why[r].find("LOCAL_RANK"), std::string::npos) << why[r];
  }
  std::string none = "stale";
  InMemoryStore cpu_store;
  ASSERT_TRUE(AgreeOnTransport(&cpu_store, 0, 1, Transport::kAuto, "", "job", absl::Seconds(1), &none).ok());
  EXPECT_EQ(none, "") << "a CPU job has nothing to explain";
}

TEST(TransportAgreementTest, OneRankWithoutAGpuMakesTheJobTcp) {
  ExpectEveryRankGets(Agree({{Transport::kAuto, "a:0000:01:00.0"}, {Transport::kAuto, ""}}), Transport::kTcp);
}

TEST(TransportAgreementTest, AnExplicitRequestDecidesForTheRanksThatLeftItToAuto) {
  ExpectEveryRankGets(Agree({{Transport::kAuto, "a:1"}, {Transport::kTcp, "a:2"}, {Transport::kAuto, "a:3"}}),
                      Transport::kTcp);
  ExpectEveryRankGets(Agree({{Transport::kAuto, ""}, {Transport::kNccl, ""}, {Transport::kNccl, ""}}),
                      Transport::kNccl);
}

TEST(TransportAgreementTest, ConflictingRequestsFailOnEveryRankNamingThem) {
  const std::vector<absl::StatusOr<Transport>> results = Agree(
      {{Transport::kAuto, ""}, {Transport::kNccl, "a:1"}, {Transport::kAuto, ""}, {Transport::kTcp, ""}});
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kFailedPrecondition) << "rank " << r;
    EXPECT_EQ(results[r].status().message(),
              "ranks disagree on the ring transport: rank 1 asked for nccl, rank 3 for tcp; pass the same "
              "--ring_transport to every rank (or none)");
  }
}

TEST(TransportAgreementTest, WorldSizeOne) {
  ExpectEveryRankGets(Agree({{Transport::kTcp, "a:1"}}), Transport::kTcp);
}

TEST(TransportAgreementTest, AMissingRankTimesOut) {
  InMemoryStore store;
  const absl::StatusOr<Transport> t =
      AgreeOnTransport(&store, 0, 2, Transport::kAuto, "", "job", absl::Milliseconds(100));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDeadlineExceeded) << t.status();
}

}  // namespace
}  // namespace psring::ring
