// Ring allreduce, broadcast and barrier with ranks as threads over the real TCP transport on loopback.
#include "ring/ring_allreduce.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "ring/process_group.h"
#include "ring/thread_ranks.h"

namespace psring::ring {
namespace {

// Distinct small integers: every partial sum is exact in float, so expected results are exact.
float Value(int rank, size_t i) { return static_cast<float>((i * 7 + 3) % 1999) + 2048.0f * rank; }

std::vector<size_t> Lengths(int n) {
  return {0,
          1,
          static_cast<size_t>(n - 1),
          static_cast<size_t>(n),
          static_cast<size_t>(n + 1),
          2,
          3,
          7,
          13,
          101,
          1009,
          4099};
}

// Checks a buffer of `count` after AllReduce(op) against the closed form; returns a description or "".
std::string Check(const std::vector<float>& got, int n, ReduceOp op) {
  for (size_t i = 0; i < got.size(); ++i) {
    float sum = 0;
    for (int r = 0; r < n; ++r) sum += Value(r, i);
    const float want = op == ReduceOp::kSum ? sum : sum * (1.0f / n);
    if (got[i] != want) return absl::StrCat("element ", i, " of ", got.size(), ": ", got[i], " != ", want);
  }
  return "";
}

class AllReduceTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(AllReduceTest, MatchesClosedFormForManyLengths) {
  // Plain variables, not a structured binding: C++17 lambdas cannot capture bindings (clang rejects it).
  const int n = std::get<0>(GetParam());
  const size_t segment_bytes = std::get<1>(GetParam());
  std::vector<absl::Status> results =
      RunRanks(n, LoopbackOptions(segment_bytes), [&](int rank, ProcessGroup* g) {
        for (size_t len : Lengths(n)) {
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
            std::vector<float> buf(len);
            for (size_t i = 0; i < len; ++i) buf[i] = Value(rank, i);
            absl::Status s = g->AllReduce(buf.data(), len, op, false);
            if (!s.ok()) return s;
            const std::string bad = Check(buf, n, op);
            if (!bad.empty()) {
              return absl::InternalError(
                  absl::StrCat("rank ", rank, " length ", len, " op ", static_cast<int>(op), ": ", bad));
            }
          }
        }
        return absl::OkStatus();
      });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
}

// World sizes 2..8; segments of 4 bytes (one float: the most segments), 12 bytes (uneven last segments)
// and the default (one segment per block).
INSTANTIATE_TEST_SUITE_P(WorldsAndSegments, AllReduceTest,
                         ::testing::Combine(::testing::Range(2, 9), ::testing::Values(4, 12, 512 << 10)));

TEST(RingTest, LargeMultiSegmentBufferAndBytesMoved) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = (1 << 20) + 3;  // 4 MB, not divisible by 4, 64 KB segments
  std::vector<uint64_t> sent(kRanks);
  std::vector<absl::Status> results =
      RunRanks(kRanks, LoopbackOptions(64 << 10), [&](int rank, ProcessGroup* g) {
        std::vector<float> buf(kCount);
        for (size_t i = 0; i < kCount; ++i) buf[i] = Value(rank, i);
        const uint64_t before = g->bytes_sent();
        absl::Status s = g->AllReduce(buf.data(), kCount, ReduceOp::kSum, false);
        if (!s.ok()) return s;
        sent[rank] = g->bytes_sent() - before;
        const PhaseTimes t = g->last_phase_times();
        if (t.reduce_scatter_s <= 0 || t.allgather_s <= 0) return absl::InternalError("phase times missing");
        const std::string bad = Check(buf, kRanks, ReduceOp::kSum);
        return bad.empty() ? absl::OkStatus() : absl::InternalError(bad);
      });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(results[r].ok()) << results[r];
    // 2(N-1) blocks of ~count/N floats, plus one 24-byte header: the 2(N-1)/N * S of the cost model.
    const double expected = 2.0 * (kRanks - 1) / kRanks * kCount * sizeof(float);
    EXPECT_NEAR(static_cast<double>(sent[r]), expected, 2 * (kRanks - 1) * sizeof(float) + 24);
  }
}

TEST(RingTest, DoublesAverageForMetrics) {
  constexpr int kRanks = 3;
  std::vector<absl::Status> results = RunRanks(kRanks, LoopbackOptions(8), [&](int rank, ProcessGroup* g) {
    std::vector<double> m = {1.0 * rank, 10.0 + rank, 0.25};
    absl::Status s = g->AllReduceHost(m.data(), m.size(), ReduceOp::kAverage);
    if (!s.ok()) return s;
    if (m[0] != 1.0 || m[1] != 11.0 || m[2] != 0.25) {
      return absl::InternalError(absl::StrCat("got ", m[0], " ", m[1], " ", m[2]));
    }
    return absl::OkStatus();
  });
  for (const auto& s : results) EXPECT_TRUE(s.ok()) << s;
}

TEST(RingTest, BroadcastFromEveryRoot) {
  for (int n : {2, 3, 5}) {
    std::vector<absl::Status> results = RunRanks(n, LoopbackOptions(8), [&](int rank, ProcessGroup* g) {
      for (int root = 0; root < n; ++root) {
        for (size_t len : {0, 1, 2, 5, 1001}) {
          std::vector<float> buf(len);
          for (size_t i = 0; i < len; ++i) buf[i] = Value(rank, i);
          absl::Status s = g->Broadcast(buf.data(), len, root, false);
          if (!s.ok()) return s;
          for (size_t i = 0; i < len; ++i) {
            if (buf[i] != Value(root, i)) {
              return absl::InternalError(absl::StrCat("root ", root, " len ", len, " element ", i));
            }
          }
        }
      }
      return g->Barrier();
    });
    for (const auto& s : results) EXPECT_TRUE(s.ok()) << "world " << n << ": " << s;
  }
}

TEST(RingTest, WorldSizeOneIsANoOp) {
  std::vector<absl::Status> results = RunRanks(1, LoopbackOptions(), [&](int, ProcessGroup* g) {
    std::vector<float> buf = {1, 2, 3};
    absl::Status s = g->AllReduce(buf.data(), 3, ReduceOp::kAverage, false);
    if (!s.ok()) return s;
    s = g->Barrier();
    if (!s.ok()) return s;
    return buf == std::vector<float>{1, 2, 3} && g->bytes_sent() == 0 ? absl::OkStatus()
                                                                      : absl::InternalError("changed");
  });
  EXPECT_TRUE(results[0].ok()) << results[0];
}

TEST(RingTest, BarrierWaitsForTheSlowestRank) {
  constexpr int kRanks = 3;
  std::atomic<int> arrived{0};
  std::vector<int> seen(kRanks, -1);
  std::vector<absl::Status> results = RunRanks(kRanks, LoopbackOptions(), [&](int rank, ProcessGroup* g) {
    if (rank == 2) absl::SleepFor(absl::Milliseconds(200));
    ++arrived;
    absl::Status s = g->Barrier();
    seen[rank] = arrived.load();
    return s;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(results[r].ok()) << results[r];
    EXPECT_EQ(seen[r], kRanks) << "rank " << r << " left the barrier early";
  }
}

TEST(RingTest, SizeMismatchNamesBothValues) {
  constexpr int kRanks = 3;
  std::vector<absl::Status> results = RunRanks(kRanks, LoopbackOptions(), [&](int rank, ProcessGroup* g) {
    std::vector<float> buf(rank == 1 ? 10 : 12, 1.0f);
    return g->AllReduce(buf.data(), buf.size(), ReduceOp::kSum, false);
  });
  // Rank 1 sees rank 0's 12; rank 2 sees rank 1's 10; rank 0 is cut off when they abort.
  EXPECT_EQ(results[1].code(), absl::StatusCode::kInvalidArgument) << results[1];
  EXPECT_NE(results[1].message().find("10 elements here, 12 there"), std::string::npos) << results[1];
  EXPECT_EQ(results[2].code(), absl::StatusCode::kInvalidArgument) << results[2];
  EXPECT_NE(results[2].message().find("12 elements here, 10 there"), std::string::npos) << results[2];
  EXPECT_FALSE(results[0].ok());
  EXPECT_NE(results[0].code(), absl::StatusCode::kDeadlineExceeded)
      << "rank 0 should fail fast: " << results[0];
}

// Fewer values than ranks (the barrier's one float, a few metrics): every rank still sends one element in
// each of the 2 (N-1) steps, so the steps run side by side and the ranks finish together instead of one
// latency apart as the lone value travels the ring.
TEST(RingTest, FewerValuesThanRanksStillSendInEveryStep) {
  constexpr int kRanks = 5;
  std::vector<uint64_t> sent(kRanks);
  std::vector<absl::Status> results = RunRanks(kRanks, LoopbackOptions(), [&](int rank, ProcessGroup* g) {
    std::vector<float> buf = {Value(rank, 0), Value(rank, 1)};
    const uint64_t before = g->bytes_sent();
    RETURN_IF_ERROR(g->AllReduce(buf.data(), buf.size(), ReduceOp::kSum, false));
    sent[rank] = g->bytes_sent() - before;
    const std::string bad = Check(buf, kRanks, ReduceOp::kSum);
    return bad.empty() ? absl::OkStatus() : absl::InternalError(bad);
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(results[r].ok()) << results[r];
    EXPECT_EQ(sent[r], 2 * (kRanks - 1) * sizeof(float) + 24) << "rank " << r << " (24: the header)";
  }
}

TEST(RingTest, SizeMismatchBelowTheWorldSizeStillFails) {
  constexpr int kRanks = 4;
  std::vector<absl::Status> results = RunRanks(kRanks, LoopbackOptions(), [&](int rank, ProcessGroup* g) {
    std::vector<float> buf(rank == 1 ? 1 : 2, 1.0f);
    return g->AllReduce(buf.data(), buf.size(), ReduceOp::kSum, false);
  });
  EXPECT_EQ(results[1].code(), absl::StatusCode::kInvalidArgument) << results[1];
  EXPECT_NE(results[1].message().find("1 elements here, 2 there"), std::string::npos) << results[1];
  EXPECT_EQ(results[2].code(), absl::StatusCode::kInvalidArgument) << results[2];
  EXPECT_NE(results[2].message().find("2 elements here, 1 there"), std::string::npos) << results[2];
}

TEST(RingTest, WorldSizeMismatchNamesBothValues) {
  InMemoryStore store;
  std::vector<absl::Status> results(2);
  TcpRingOptions o = LoopbackOptions(512 << 10, absl::Seconds(1)).tcp;
  std::thread a([&] { results[0] = ConnectTcpRing(&store, 0, 2, o).status(); });
  std::thread b([&] { results[1] = ConnectTcpRing(&store, 1, 3, o).status(); });
  a.join();
  b.join();
  EXPECT_EQ(results[0].code(), absl::StatusCode::kInvalidArgument) << results[0];
  EXPECT_NE(results[0].message().find("rank 0 has world size 2 but rank 1 has world size 3"),
            std::string::npos)
      << results[0];
  EXPECT_FALSE(results[1].ok());  // rank 2 of its world never shows up
}

TEST(RingTest, ADeadRankMakesEveryOtherRankFailWithUnavailable) {
  constexpr int kRanks = 4;
  // Timeouts far beyond the test's run time: failing through kUnavailable shows the error travelled around
  // the ring instead of each rank waiting for its deadline.
  std::vector<absl::Status> results =
      RunRanks(kRanks, LoopbackOptions(64 << 10, absl::Seconds(600)), [&](int rank, ProcessGroup* g) {
        std::vector<float> buf(1 << 18, 1.0f);
        absl::Status s = g->AllReduce(buf.data(), buf.size(), ReduceOp::kSum, false);
        if (!s.ok()) return s;
        if (rank == 2) return absl::AbortedError("rank 2 exits");  // its group (and sockets) close
        for (int i = 0; i < 1000; ++i) {
          s = g->AllReduce(buf.data(), buf.size(), ReduceOp::kSum, false);
          if (!s.ok()) return s;
        }
        return absl::OkStatus();
      });
  for (int r = 0; r < kRanks; ++r) {
    if (r == 2) continue;
    EXPECT_EQ(results[r].code(), absl::StatusCode::kUnavailable) << "rank " << r << ": " << results[r];
  }
}

TEST(RingTest, AStalledRankMakesTheOthersTimeOut) {
  constexpr int kRanks = 3;
  std::atomic<bool> done{false};
  std::atomic<int> finished{0};
  std::vector<absl::Status> results =
      RunRanks(kRanks, LoopbackOptions(512 << 10, absl::Milliseconds(500)), [&](int rank, ProcessGroup* g) {
        if (rank == 1) {  // never calls the collective; holds its sockets open until the others gave up
          while (!done) absl::SleepFor(absl::Milliseconds(10));
          return absl::OkStatus();
        }
        std::vector<float> buf(100, 1.0f);
        absl::Status s = g->AllReduce(buf.data(), buf.size(), ReduceOp::kSum, false);
        if (++finished == kRanks - 1) done = true;
        return s;
      });
  for (int r : {0, 2}) {
    EXPECT_FALSE(results[r].ok()) << "rank " << r;
    EXPECT_TRUE(absl::IsDeadlineExceeded(results[r]) || absl::IsUnavailable(results[r])) << results[r];
  }
  EXPECT_TRUE(absl::IsDeadlineExceeded(results[0]) || absl::IsDeadlineExceeded(results[2]))
      << results[0] << " / " << results[2];
}

}  // namespace
}  // namespace psring::ring
