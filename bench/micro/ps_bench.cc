// ps_bench: synchronous push-pull through the gRPC parameter server on loopback, in the nccl-tests table
// format (bench/report.h), for every size from --min_bytes to --max_bytes, K shards and N ranks (in-process
// servers on 127.0.0.1, ranks as threads, each rank with its own TCP connections).
//
// Columns: time = mean wall time of one push-pull step (slowest rank); algbw = size / time; busbw = algbw *
// N / K, the load on one server's link per direction (cost model T ~ N*S/(K*B), DESIGN.md); #wrong = elements
// that differ from the closed form (trainer/gradient_only.h); srv_MB = payload MB the busiest server moved (in +
// out) per step, from its own counters.
//
// The same run then streams --socket_bytes through a plain TCP socket on loopback (a kept, warmed-up
// connection; median of 7 streams) and reports the ratio of the PS's effective throughput for one rank and
// one shard (2 * S / time: S pushed and S pulled) to the socket's (S / time). Target: >= 0.8 at 64 MB.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/report/table.h"
#include "common/flags_usage.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "proto/results.pb.h"
#include "ps/client.h"
#include "ps/server.h"
#include "ps/wire.h"
#include "trainer/gradient_only.h"

ABSL_FLAG(std::string, min_bytes, "4K", "Smallest push-pull size (bytes; K, M, G suffixes allowed).");
ABSL_FLAG(std::string, max_bytes, "256M", "Largest push-pull size (bytes; K, M, G suffixes allowed).");
ABSL_FLAG(int, factor, 4, "Multiply the size by this factor from one row to the next (>= 2).");
ABSL_FLAG(std::vector<std::string>, shards, std::vector<std::string>({"1", "2"}),
          "Comma-separated numbers of server shards K to run.");
ABSL_FLAG(std::vector<std::string>, ranks, std::vector<std::string>({"1", "2", "4"}),
          "Comma-separated numbers of worker ranks N to run.");
ABSL_FLAG(int, warmup, 1, "Unmeasured push-pull steps before the measured ones.");
ABSL_FLAG(int, iters, 0,
          "Measured steps per row; 0: automatic (about 256 MB moved per rank per row, between 2 and 50).");
ABSL_FLAG(std::string, chunk_bytes, "1M", "Tensor chunk size on the wire (at most 4M).");
ABSL_FLAG(std::string, push_window_bytes, "8M",
          "Sync: each worker pushes at most this far ahead of the parameters received back (the worker's "
          "--push_window_bytes, same default; 0: no window).");
ABSL_FLAG(std::string, max_lead_bytes, "1M",
          "Sync servers: how far one push may run ahead of the slowest (the server's --max_lead_bytes; 0: no "
          "limit).");
ABSL_FLAG(std::string, socket_bytes, "64M",
          "Bytes streamed through the plain TCP socket for the reference throughput; the PS row of this size "
          "(N=1, K=1) gives the ratio. 0: skip.");
ABSL_FLAG(std::string, json, "", "Also write all tables as JSON to this file.");

namespace psring::bench {
namespace {

// The PS's effective push-pull throughput (one rank, one shard, 64 MiB) against a plain socket's.
constexpr double kSocketRatioTarget = 0.8;

// The plain-socket reference: one TCP connection on 127.0.0.1 (common/socket.h's non-blocking calls and
// poll; its blocking mode receives with MSG_WAITALL, which the kernel wakes only once the whole request or a
// full receive buffer is there, so sender and receiver take turns: 1 GB/s instead of 2-3), a sender thread and the calling thread as receiver, like the PS's client and server in
// this process. The connection is kept and warmed up: a fresh loopback connection starts with a 128 KiB
// receive window (tcp_rmem) that autotuning grows only while data flows, so the first 64 MiB on it ran at
// 0.2-0.4 GB/s and later ones at 1-3 GB/s; the old one-shot reference on a new connection per stream swung
// between 0.36 and 4.1 GB/s.
class SocketReference {
 public:
  static absl::StatusOr<std::unique_ptr<SocketReference>> Create(size_t bytes) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    auto ref = std::unique_ptr<SocketReference>(new SocketReference(bytes));
    ASSIGN_OR_RETURN(Socket listener, ListenTcp("127.0.0.1", 0));
    ASSIGN_OR_RETURN(int port, LocalPort(listener));
    ASSIGN_OR_RETURN(ref->sender_, ConnectTcp("127.0.0.1", port, deadline));
    ASSIGN_OR_RETURN(ref->receiver_, AcceptTcp(listener, deadline));
    for (int i = 0; i < kWarmupStreams; ++i) RETURN_IF_ERROR(ref->Stream().status());
    return ref;
  }

  // Streams the buffer once; returns bytes/s.
  absl::StatusOr<double> Stream() {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    const absl::Time start = absl::Now();
    absl::Status sent;
    std::thread send_thread([&] { sent = SendAll(sender_, out_.data(), out_.size(), deadline); });
    const absl::Status received = RecvAll(receiver_, in_.data(), in_.size(), deadline);
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    send_thread.join();
    RETURN_IF_ERROR(sent);
    RETURN_IF_ERROR(received);
    return static_cast<double>(out_.size()) / seconds;
  }

  struct Result {
    double bytes_per_s = 0;     // the median stream's
    double cpu_ns_per_byte = 0;  // process CPU (sender + receiver) over all `n` streams
  };
  absl::StatusOr<Result> Median(int n) {
    std::vector<double> streams;
    const double cpu0 = ProcessCpuSeconds();
    for (int i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(double bps, Stream());
      streams.push_back(bps);
    }
    std::sort(streams.begin(), streams.end());
    return Result{streams[streams.size() / 2],
                  (ProcessCpuSeconds() - cpu0) * 1e9 / (static_cast<double>(out_.size()) * n)};
  }

 private:
  static constexpr int kWarmupStreams = 2;
  explicit SocketReference(size_t bytes) : out_(bytes, 'x'), in_(bytes) {}
  std::vector<char> out_, in_;
  Socket sender_, receiver_;
};

// Snapshots every shard's payload counters and the process's CPU time when the last of `ranks` rank threads
// calls Arrive().
class CounterSnapshot {
 public:
  CounterSnapshot(int ranks, std::vector<std::unique_ptr<ps::PsServer>>* servers)
      : ranks_(ranks), servers_(servers) {}
  void Arrive() {
    absl::MutexLock lock(&mu_);
    if (++arrived_ < ranks_) return;
    for (auto& server : *servers_) {
      const ps::proto::StatsReply stats = server->service()->GetStats();
      bytes_.push_back(stats.bytes_sent() + stats.bytes_received());
    }
    cpu_s_ = ProcessCpuSeconds();
  }
  std::vector<uint64_t> bytes() {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }
  double cpu_s() {
    absl::MutexLock lock(&mu_);
    return cpu_s_;
  }

 private:
  const int ranks_;
  std::vector<std::unique_ptr<ps::PsServer>>* servers_;
  absl::Mutex mu_;
  int arrived_ = 0;
  std::vector<uint64_t> bytes_;
  double cpu_s_ = 0;
};

struct Measurement {
  double seconds = 0;  // mean step time of the slowest rank
  int64_t wrong = 0;
  double server_bytes_per_step = 0;  // busiest server, in + out
  // CPU of the whole process (all ranks and servers) over the measured steps per byte of gradient the ranks
  // pushed (N * S per step).
  double cpu_ns_per_byte = 0;
};

absl::StatusOr<Measurement> MeasurePushPull(size_t bytes, int shards, int ranks, int warmup, int iters,
                                            size_t chunk_bytes) {
  ps::ServiceOptions service;
  service.workers = ranks;
  service.num_shards = shards;
  service.step_timeout = absl::Seconds(120);
  service.chunk_bytes = chunk_bytes;
  service.max_lead_bytes = ParseSize(absl::GetFlag(FLAGS_max_lead_bytes));
  service.log_registrations = false;  // a fresh server per row: 192 "registered at version 0" lines otherwise
  const size_t push_window_bytes = ParseSize(absl::GetFlag(FLAGS_push_window_bytes));
  std::vector<std::unique_ptr<ps::PsServer>> servers;
  std::vector<std::string> addresses;
  for (int k = 0; k < shards; ++k) {
    ps::ServerOptions options;
    options.service = service;
    options.service.shard = k;
    options.bind_addr = "127.0.0.1";
    ASSIGN_OR_RETURN(std::unique_ptr<ps::PsServer> server, ps::PsServer::Start(options));
    addresses.push_back(absl::StrCat("127.0.0.1:", server->port()));
    servers.push_back(std::move(server));
  }
  CounterSnapshot before(ranks, &servers), after(ranks, &servers);
  std::vector<absl::StatusOr<proto::WorkerResult>> results(ranks, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      ps::PsClientOptions options;
      options.servers = addresses;
      options.rank = r;
      options.world_size = ranks;
      options.chunk_bytes = chunk_bytes;
      options.push_window_bytes = push_window_bytes;
      options.timeout = absl::Seconds(300);
      absl::StatusOr<std::unique_ptr<ps::PsExchange>> exchange = ps::PsExchange::Create(options);
      if (!exchange.ok()) {
        results[r] = exchange.status();
        return;
      }
      trainer::GradientOnlyOptions go;
      go.bytes = bytes;
      go.warmup_steps = warmup;
      go.steps = iters;
      go.before_measured = [&] { before.Arrive(); };
      go.after_measured = [&] { after.Arrive(); };
      results[r] = trainer::RunGradientOnly(go, exchange->get());
    });
  }
  for (std::thread& t : threads) t.join();
  Measurement m;
  for (auto& result : results) {
    RETURN_IF_ERROR(result.status());
    m.seconds = std::max(m.seconds, result->step_s());
    m.wrong += static_cast<int64_t>(result->wrong());
  }
  const std::vector<uint64_t> b = before.bytes(), a = after.bytes();
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    m.server_bytes_per_step = std::max(m.server_bytes_per_step, static_cast<double>(a[k] - b[k]) / iters);
  }
  m.cpu_ns_per_byte = (after.cpu_s() - before.cpu_s()) * 1e9 / (static_cast<double>(bytes) * ranks * iters);
  for (auto& server : servers) RETURN_IF_ERROR(server->Stop(false));
  return m;
}

absl::StatusOr<std::vector<int>> ParseList(const std::vector<std::string>& items, const char* flag) {
  std::vector<int> values;
  for (const std::string& item : items) {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", item, "' is not a positive integer"));
    }
    values.push_back(v);
  }
  return values;
}

absl::Status Run() {
  const size_t min_bytes = ParseSize(absl::GetFlag(FLAGS_min_bytes));
  const size_t max_bytes = ParseSize(absl::GetFlag(FLAGS_max_bytes));
  const size_t chunk_bytes = ParseSize(absl::GetFlag(FLAGS_chunk_bytes));
  const std::string socket_text = absl::GetFlag(FLAGS_socket_bytes);
  const size_t socket_bytes = socket_text == "0" ? 0 : ParseSize(socket_text);
  if (min_bytes < 4 || max_bytes < min_bytes || absl::GetFlag(FLAGS_factor) < 2) {
    return absl::InvalidArgumentError("need 4 <= --min_bytes <= --max_bytes and --factor >= 2");
  }
  ASSIGN_OR_RETURN(std::vector<int> shard_list, ParseList(absl::GetFlag(FLAGS_shards), "shards"));
  ASSIGN_OR_RETURN(std::vector<int> rank_list, ParseList(absl::GetFlag(FLAGS_ranks), "ranks"));

  double ps_ratio = -1;
  std::string json = "[";
  int64_t wrong_total = 0;
  for (int shards : shard_list) {
    for (int ranks : rank_list) {
      Table table(&std::cout, {"srv_MB", "cpu_ns/B"});
      table.Comment(absl::StrCat(" nranks ", ranks, "  shards ", shards, "  exchange ps-sync (gRPC, loopback, chunk ",
                                 chunk_bytes, " B, push window ", ParseSize(absl::GetFlag(FLAGS_push_window_bytes)),
                                 " B)"));
      table.Comment(
          "busbw = algbw * N / K (one server link's load per direction); srv_MB per step; cpu_ns/B = "
          "process CPU (ranks + servers) per gradient byte pushed");
      table.Header();
      for (size_t bytes : SizeSweep(min_bytes, max_bytes, absl::GetFlag(FLAGS_factor))) {
        int iters = absl::GetFlag(FLAGS_iters);
        if (iters <= 0) {
          iters = static_cast<int>(std::clamp<size_t>((256u << 20) / (bytes * ranks), 2, 50));
        }
        const size_t rounded = std::max<size_t>(bytes / 4, shards) * 4;
        ASSIGN_OR_RETURN(Measurement m, MeasurePushPull(rounded, shards, ranks, absl::GetFlag(FLAGS_warmup),
                                                        iters, chunk_bytes));
        Row row = MakeRow(rounded, rounded / 4, m.seconds, static_cast<double>(ranks) / shards, m.wrong);
        row.extra.push_back(m.server_bytes_per_step / 1e6);
        row.extra.push_back(m.cpu_ns_per_byte);
        table.Add(row);
      }
      table.Footer();
      wrong_total += table.total_wrong();
      json += absl::StrCat(json.size() > 1 ? "," : "", "{\"ranks\":", ranks, ",\"shards\":", shards,
                           ",\"table\":", table.ToJson(), "}");
      std::cout << "\n";
    }
  }
  json += "]";
  double socket_bps = 0;
  if (socket_bytes > 0) {
    // The ratio in its own pass: three rounds of (7 streams on the warm reference connection, median) then
    // (10 push-pulls with one rank and one shard after one warm-up step, mean), adjacent in time so both see
    // the same machine load; the median round counts.
    ASSIGN_OR_RETURN(std::unique_ptr<SocketReference> reference, SocketReference::Create(socket_bytes));
    std::vector<std::pair<double, double>> rounds;  // (ratio, socket bytes/s)
    for (int round = 0; round < 3; ++round) {
      ASSIGN_OR_RETURN(const SocketReference::Result socket, reference->Median(7));
      const double median = socket.bytes_per_s;
      ASSIGN_OR_RETURN(Measurement m, MeasurePushPull(socket_bytes, 1, 1, 1, 10, chunk_bytes));
      if (m.wrong != 0) return absl::DataLossError("wrong elements in the ratio pass");
      rounds.emplace_back(2.0 * static_cast<double>(socket_bytes) / m.seconds / median, median);
      std::cout << "# ratio round " << round << ": plain socket " << median / 1e9
                << " GB/s (warm connection, median of 7; " << socket.cpu_ns_per_byte << " CPU ns/B), PS "
                << socket_bytes << " B push-pull " << m.seconds * 1e3 << " ms -> 2*S/time "
                << 2.0 * socket_bytes / m.seconds / 1e9 << " GB/s (" << m.cpu_ns_per_byte
                << " CPU ns per pushed B, push and pull)\n";
    }
    std::sort(rounds.begin(), rounds.end());
    ps_ratio = rounds[1].first;
    socket_bps = rounds[1].second;
    std::cout << "# PS push-pull (N=1, K=1, " << socket_bytes
              << " B) effective throughput 2*S/time = " << ps_ratio * socket_bps / 1e9
              << " GB/s = " << ps_ratio << " x plain socket (median of 3 rounds; "
              << "target >= " << kSocketRatioTarget << ")\n";
    // The target is stated for 64 MiB; at other sizes the line is information, not a check.
    const bool target_size = socket_bytes == (64u << 20);
    std::cout << absl::StrFormat("# %s ps push-pull vs plain socket S=%s: %.2fx (>= %.1fx at 64M)%s\n",
                                 target_size ? "check" : "info", socket_text, ps_ratio, kSocketRatioTarget,
                                 target_size ? (ps_ratio >= kSocketRatioTarget ? ": PASS" : ": FAIL")
                                             : " (not 64M: no acceptance check)");
  }
  if (!absl::GetFlag(FLAGS_json).empty()) {
    FILE* f = std::fopen(absl::GetFlag(FLAGS_json).c_str(), "w");
    if (f == nullptr) return absl::InternalError("cannot write --json=" + absl::GetFlag(FLAGS_json));
    std::fprintf(f, "{\"socket_bps\":%.6g,\"ps_socket_ratio\":%.6g,\"runs\":%s}\n", socket_bps, ps_ratio,
                 json.c_str());
    std::fclose(f);
  }
  if (wrong_total != 0) return absl::DataLossError(absl::StrCat(wrong_total, " wrong elements"));
  return absl::OkStatus();
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Benchmarks synchronous push-pull through the gRPC parameter server on loopback (K shards, N ranks as "
      "threads) and compares with a plain TCP socket stream.\n  bazel run //bench:ps_bench -- "
      "--max_bytes=64M",
      {"bench/", "common/", "ps/"});
  psring::ParseFlags(argc, argv);
  psring::ps::TuneMallocForTensors();
  psring::ps::QuietGrpcLogs();
  absl::Status status = psring::bench::Run();
  if (!status.ok()) {
    std::cerr << "ps_bench: " << status << "\n";
    return 1;
  }
  return 0;
}
