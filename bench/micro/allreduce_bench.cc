// //bench:allreduce_bench — the ring allreduce (TCP transport) on loopback, nccl-tests style.
//
// Ranks run as THREADS of this one process, each with its own TCP ring connections on 127.0.0.1 (the real
// transport: every byte crosses the kernel's loopback). For every world size in --ranks and every size from
// --min_bytes to --max_bytes (x --factor) it prints a row of the table in bench/report.h:
//   size count type redop time(us) algbw(GB/s) busbw(GB/s) #wrong [rs_us ag_us with --phases] cpu_ns/B
// time = mean per iteration (all ranks start together after a barrier; averaged over ranks);
// algbw = size / time; busbw = algbw * 2(N-1)/N (bench/PERFORMANCE.md); cpu_ns/B = the process's CPU (all
// ranks) over the measured calls per byte each rank contributed (N * S per call). #wrong: elements of a fresh
// allreduce of f(rank, i) = (7i + 3) mod 1999 + 2048 rank that differ from the exact closed-form sum.
//
// Then, unless --gloo=false, it measures Gloo's allreduce (torch.distributed, gloo backend, one process per
// rank on 127.0.0.1: bench/tools/gloo_allreduce.py under /usr/bin/python3) at --gloo_bytes for --gloo_ranks
// in the same run, and prints psring's busbw next to Gloo's and their ratio ("# gloo" comment lines) — both
// for psring's ranks as threads (the table) and as processes like Gloo's (//ring:ring_worker --model_bytes),
// in --gloo_rounds rounds of (psring processes, Gloo) back to back; the median round counts.
//
// With --integrity_compare it measures only the cost of the per-segment integrity tags (common/integrity.h):
// for each world size in --integrity_ranks, --integrity_reps runs of --integrity_bytes with a token and
// --data_integrity off, then on, interleaved, and one "# integrity" line with each run's busbw, the medians
// and the cost (1 - on/off).
//
//   bazel run -c opt //bench:allreduce_bench
//   bazel run -c opt //bench:allreduce_bench -- --integrity_compare
//   bazel run //bench:allreduce_bench -- --ranks=2,4 --max_bytes=64M --phases --json=/tmp/ring.json
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bench/report/table.h"
#include "bench/harness/result_line.h"
#include "common/auth.h"
#include "common/flags_usage.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "ring/process_group.h"
#include "ring/thread_ranks.h"
#include "common/runfiles.h"

ABSL_FLAG(std::vector<std::string>, ranks, std::vector<std::string>({"2", "4", "8"}),
          "Comma-separated world sizes to measure (each >= 1).");
ABSL_FLAG(std::string, min_bytes, "4K",
          "Smallest message, bytes with optional K/M/G suffix (like nccl-tests -b).");
ABSL_FLAG(std::string, max_bytes, "256M", "Largest message (like nccl-tests -e).");
ABSL_FLAG(int, factor, 2, "Size multiplier between rows (like nccl-tests -f; >= 2).");
ABSL_FLAG(int, iters, 20,
          "Measured iterations per row for messages up to 8 MB; larger messages use proportionally fewer "
          "(at least 3).");
ABSL_FLAG(int, warmup_iters, 2, "Unmeasured iterations per row, after the correctness check.");
ABSL_FLAG(int64_t, segment_bytes, 512 << 10, "Ring pipeline segment (RingOptions::segment_bytes).");
ABSL_FLAG(int, socket_buffer_bytes, 0, "SO_SNDBUF/SO_RCVBUF per ring connection (0: kernel autotuning).");
ABSL_FLAG(bool, blocking_io, true,
          "Ring sockets use blocking calls with a 100 ms wake-up for deadlines (false: non-blocking calls + "
          "poll).");
ABSL_FLAG(bool, phases, false,
          "Add columns rs_us and ag_us: mean reduce-scatter and allgather time per call.");
ABSL_FLAG(std::string, json, "", "Also write the tables (and the Gloo comparison) as JSON to this file.");
ABSL_FLAG(bool, gloo, true, "Measure Gloo's allreduce at --gloo_bytes for --gloo_ranks and print the ratio.");
ABSL_FLAG(std::string, gloo_bytes, "64M", "Message size of the Gloo comparison.");
ABSL_FLAG(std::vector<std::string>, gloo_ranks, std::vector<std::string>({"2", "4"}),
          "World sizes of the Gloo comparison.");
ABSL_FLAG(int, gloo_rounds, 3,
          "Rounds of (psring as processes, Gloo) per world size; the median round's ratio is reported.");
ABSL_FLAG(std::string, gloo_script, "",
          "Path of bench/tools/gloo_allreduce.py. Empty: the copy in this binary's runfiles.");
ABSL_FLAG(
    std::string, ring_worker, "",
    "Path of //ring:ring_worker, run one process per rank (gradient-only mode) for the Gloo comparison. "
    "Empty: the copy in this binary's runfiles.");
ABSL_FLAG(std::string, python, "/usr/bin/python3",
          "Python with Debian's python3-torch for the Gloo comparison.");
ABSL_FLAG(bool, integrity_compare, false,
          "Only measure busbw with a token and data integrity off vs on (see the file comment).");
ABSL_FLAG(std::string, integrity_bytes, "64M", "Message size of --integrity_compare.");
ABSL_FLAG(std::vector<std::string>, integrity_ranks, std::vector<std::string>({"2", "4"}),
          "World sizes of --integrity_compare.");
ABSL_FLAG(int, integrity_reps, 3, "Runs of each setting per world size in --integrity_compare.");
ABSL_FLAG(double, timeout, 120, "Seconds: bound on each collective and on each Gloo run.");

namespace psring::bench {
namespace {

using ring::ProcessGroup;
using ring::ReduceOp;

constexpr size_t kFullIterBytes = 8 << 20;

float Value(int rank, size_t i) { return static_cast<float>((i * 7 + 3) % 1999) + 2048.0f * rank; }

int ItersFor(size_t bytes, int iters) {
  if (bytes <= kFullIterBytes) return iters;
  return std::max<int>(3, static_cast<int>(static_cast<double>(iters) * kFullIterBytes / bytes));
}

absl::StatusOr<std::vector<int>> ParseInts(const std::vector<std::string>& items, const char* flag) {
  std::vector<int> out;
  for (const std::string& s : items) {
    int v = 0;
    if (!absl::SimpleAtoi(s, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", s, "' is not a world size >= 1"));
    }
    out.push_back(v);
  }
  return out;
}

// One rank's part of a row: check, warm up, measure. Returns {time_s, rs_s, ag_s, wrong, cpu_s} summed over
// ranks; cpu_s is the process's CPU over the measured calls, reported by rank 0 only (the others add 0).
absl::StatusOr<std::vector<double>> MeasureRow(int rank, ProcessGroup* g, std::vector<float>& buf,
                                               size_t count, int iters, int warmup) {
  const int n = g->world_size();
  for (size_t i = 0; i < count; ++i) buf[i] = Value(rank, i);
  RETURN_IF_ERROR(g->AllReduce(buf.data(), count, ReduceOp::kSum, false));
  double wrong = 0;
  const float offset = 2048.0f * static_cast<float>(n * (n - 1) / 2);
  for (size_t i = 0; i < count; ++i) {
    wrong += buf[i] != static_cast<float>((i * 7 + 3) % 1999) * n + offset;
  }
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(g->AllReduce(buf.data(), count, ReduceOp::kSum, false));
  RETURN_IF_ERROR(g->Barrier());
  double rs = 0, ag = 0;
  const double cpu0 = ProcessCpuSeconds();
  const absl::Time start = absl::Now();
  for (int i = 0; i < iters; ++i) {
    // Values grow by N per call; a few dozen calls stay far from float overflow (only time is measured).
    RETURN_IF_ERROR(g->AllReduce(buf.data(), count, ReduceOp::kSum, false));
    rs += g->last_phase_times().reduce_scatter_s;
    ag += g->last_phase_times().allgather_s;
  }
  const double t = absl::ToDoubleSeconds(absl::Now() - start) / iters;
  const double cpu = rank == 0 ? ProcessCpuSeconds() - cpu0 : 0;
  std::vector<double> sums = {t, rs / iters, ag / iters, wrong, cpu};
  RETURN_IF_ERROR(g->AllReduceHost(sums.data(), sums.size(), ReduceOp::kSum));
  return sums;
}

// The ring's table for one world size. Rows are added by rank 0's thread only.
absl::Status RunWorld(int n, const std::vector<size_t>& sizes, Table* table, const AuthConfig& auth = {}) {
  ring::ProcessGroupOptions options = ring::LoopbackOptions(
      static_cast<size_t>(absl::GetFlag(FLAGS_segment_bytes)), absl::Seconds(absl::GetFlag(FLAGS_timeout)));
  options.tcp.auth = auth;
  options.tcp.socket_buffer_bytes = absl::GetFlag(FLAGS_socket_buffer_bytes);
  options.tcp.blocking_io = absl::GetFlag(FLAGS_blocking_io);
  options.tcp.store_prefix = absl::StrCat("bench", n);
  const bool phases = absl::GetFlag(FLAGS_phases);
  std::vector<absl::Status> results =
      ring::RunRanks(n, options, [&](int rank, ProcessGroup* g) -> absl::Status {
        std::vector<float> buf(sizes.back() / sizeof(float));
        for (size_t bytes : sizes) {
          const size_t count = bytes / sizeof(float);
          ASSIGN_OR_RETURN(std::vector<double> sums,
                           MeasureRow(rank, g, buf, count, ItersFor(bytes, absl::GetFlag(FLAGS_iters)),
                                      absl::GetFlag(FLAGS_warmup_iters)));
          if (rank != 0) continue;
          Row row = MakeRow(count * sizeof(float), count, sums[0] / n, AllReduceBusFactor(n),
                            static_cast<int64_t>(sums[3]));
          if (phases) row.extra = {sums[1] / n * 1e6, sums[2] / n * 1e6};
          // All ranks' CPU per byte each rank contributes (N * S per call).
          row.extra.push_back(sums[4] * 1e9 / (static_cast<double>(count * sizeof(float)) * n *
                                               ItersFor(bytes, absl::GetFlag(FLAGS_iters))));
          table->Add(row);
        }
        return absl::OkStatus();
      });
  for (int r = 0; r < n; ++r) {
    if (!results[r].ok())
      return absl::Status(results[r].code(), absl::StrCat("rank ", r, ": ", results[r].message()));
  }
  return absl::OkStatus();
}

// The helper programs the Gloo comparison runs: from the flags, else from this binary's runfiles.
struct Programs {
  std::string ring_worker;
  std::string gloo_script;
};

absl::StatusOr<Programs> FindPrograms(const char* argv0) {
  const std::string hint = "run through `bazel run`";
  Programs p;
  ASSIGN_OR_RETURN(p.ring_worker, FindRunfile(argv0, {absl::GetFlag(FLAGS_ring_worker), "psring/ring/ring_worker",
                                                      "--ring_worker", hint}));
  ASSIGN_OR_RETURN(p.gloo_script, FindRunfile(argv0, {absl::GetFlag(FLAGS_gloo_script),
                                                      "psring/bench/tools/gloo_allreduce.py", "--gloo_script", hint}));
  return p;
}

// psring's busbw (GB/s) at `bytes` for `n` ranks as processes: ring_worker's gradient-only mode, the slowest
// rank's mean step. CPU ranks (--device=cpu), like Gloo's: on a host with one GPU, --device=auto would stop
// rank 1 with "has no GPU of its own".
absl::StatusOr<double> RunRingProcesses(const Programs& programs, int n, size_t bytes) {
  ASSIGN_OR_RETURN(int port, FreeLoopbackPort());
  std::vector<ProcessSpec> specs;
  for (int r = 0; r < n; ++r) {
    specs.push_back({absl::StrCat("ring rank ", r),
                     {programs.ring_worker, absl::StrCat("--rank=", r), absl::StrCat("--world_size=", n),
                      "--master_addr=127.0.0.1", absl::StrCat("--master_port=", port), "--device=cpu",
                      absl::StrCat("--model_bytes=", bytes),
                      absl::StrCat("--max_steps=", ItersFor(bytes, absl::GetFlag(FLAGS_iters))),
                      absl::StrCat("--warmup_steps=", absl::GetFlag(FLAGS_warmup_iters)),
                      absl::StrCat("--segment_bytes=", absl::GetFlag(FLAGS_segment_bytes)),
                      absl::StrCat("--socket_buffer_bytes=", absl::GetFlag(FLAGS_socket_buffer_bytes)),
                      absl::StrCat("--timeout=", absl::GetFlag(FLAGS_timeout))}});
  }
  JobOptions job;
  job.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout));
  ASSIGN_OR_RETURN(std::vector<ProcessResult> results, RunJob(specs, job));
  RETURN_IF_ERROR(JobStatus(results));
  double step_s = 0;
  for (const ProcessResult& p : results) {
    ASSIGN_OR_RETURN(ResultLines lines, ExtractResults(p.stdout_text));
    if (lines.workers.size() != 1 || lines.workers[0].wrong() != 0) {
      return absl::InternalError(absl::StrCat(p.name, " did not report one correct result: ", p.stdout_text));
    }
    step_s = std::max(step_s, lines.workers[0].step_s());
  }
  if (step_s <= 0) return absl::InternalError("ring_worker reported no step time");
  return static_cast<double>(bytes) / step_s / 1e9 * AllReduceBusFactor(n);
}

// Gloo's {time_s, busbw GB/s} at `bytes` for `n` ranks: one script process per rank, rank 0 reports.
absl::StatusOr<std::pair<double, double>> RunGloo(const Programs& programs, int n, size_t bytes) {
  ASSIGN_OR_RETURN(int port, FreeLoopbackPort());
  std::vector<ProcessSpec> specs;
  for (int r = 0; r < n; ++r) {
    specs.push_back({absl::StrCat("gloo rank ", r),
                     {absl::GetFlag(FLAGS_python), programs.gloo_script, absl::StrCat("--rank=", r),
                      absl::StrCat("--world_size=", n), "--master_addr=127.0.0.1",
                      absl::StrCat("--master_port=", port), absl::StrCat("--bytes=", bytes),
                      absl::StrCat("--steps=", ItersFor(bytes, absl::GetFlag(FLAGS_iters))),
                      absl::StrCat("--warmup=", absl::GetFlag(FLAGS_warmup_iters)), "--ifname=lo"}});
  }
  JobOptions job;
  job.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout));
  ASSIGN_OR_RETURN(std::vector<ProcessResult> results, RunJob(specs, job));
  RETURN_IF_ERROR(JobStatus(results));
  // "gloo allreduce N=2 S=67108864 time_s=0.0627 algbw_MBps=1070.3 busbw_MBps=1070.3"
  double time_s = 0, busbw_mbps = 0;
  for (absl::string_view field : absl::StrSplit(results[0].stdout_text, absl::ByAnyChar(" \n"))) {
    if (absl::ConsumePrefix(&field, "time_s=")) (void)absl::SimpleAtod(field, &time_s);
    if (absl::ConsumePrefix(&field, "busbw_MBps=")) (void)absl::SimpleAtod(field, &busbw_mbps);
  }
  if (time_s <= 0 || busbw_mbps <= 0) {
    return absl::InternalError(absl::StrCat(
        "no result from the Gloo script; its output: ", results[0].stdout_text, results[0].stderr_tail));
  }
  return std::make_pair(time_s, busbw_mbps / 1e3);
}

// The "# integrity" lines of --integrity_compare.
absl::Status CompareIntegrity() {
  ASSIGN_OR_RETURN(std::vector<int> worlds,
                   ParseInts(absl::GetFlag(FLAGS_integrity_ranks), "integrity_ranks"));
  const size_t bytes = ParseSize(absl::GetFlag(FLAGS_integrity_bytes));
  const int reps = absl::GetFlag(FLAGS_integrity_reps);
  if (bytes < sizeof(float) || reps < 1) {
    return absl::InvalidArgumentError("need --integrity_bytes >= 4 and --integrity_reps >= 1");
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  std::cout
      << "# integrity: ranks as threads, TCP on 127.0.0.1, with a token; busbw (GB/s) of " << bytes
      << " B with --data_integrity=off and =on, runs interleaved; cost = 1 - median(on) / median(off)\n";
  for (int n : worlds) {
    std::vector<double> busbw[2];
    for (int rep = 0; rep < reps; ++rep) {
      for (int on = 0; on < 2; ++on) {
        std::ostringstream discard;
        Table table(&discard, {});
        RETURN_IF_ERROR(
            RunWorld(n, {bytes}, &table, AuthConfig{"allreduce-bench-token", "allreduce-bench", on == 1}));
        if (table.rows().size() != 1 || table.rows()[0].wrong != 0) {
          return absl::InternalError(absl::StrCat("N=", n, ": the integrity run gave wrong results"));
        }
        busbw[on].push_back(table.rows()[0].busbw_gbs);
      }
    }
    const double off = median(busbw[0]), on = median(busbw[1]);
    std::cout << absl::StrFormat(
        "# integrity N=%d S=%d off %s (median %.3f) on %s (median %.3f) cost %.1f %%\n", n, bytes,
        absl::StrJoin(busbw[0], ",", absl::StreamFormatter()), off,
        absl::StrJoin(busbw[1], ",", absl::StreamFormatter()), on, 100.0 * (1.0 - on / off));
  }
  return absl::OkStatus();
}

absl::Status Run(const char* argv0) {
  if (absl::GetFlag(FLAGS_integrity_compare)) return CompareIntegrity();
  ASSIGN_OR_RETURN(std::vector<int> worlds, ParseInts(absl::GetFlag(FLAGS_ranks), "ranks"));
  const size_t min_bytes = ParseSize(absl::GetFlag(FLAGS_min_bytes));
  const size_t max_bytes = ParseSize(absl::GetFlag(FLAGS_max_bytes));
  const std::vector<size_t> sizes = SizeSweep(min_bytes, max_bytes, absl::GetFlag(FLAGS_factor));
  if (sizes.empty() || min_bytes < sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min_bytes=", absl::GetFlag(FLAGS_min_bytes), " --max_bytes=", absl::GetFlag(FLAGS_max_bytes),
        " --factor=", absl::GetFlag(FLAGS_factor),
        ": need sizes in bytes with an optional K/M/G suffix, 4 <= min <= max, and factor >= 2"));
  }
  if (absl::GetFlag(FLAGS_iters) < 1 || absl::GetFlag(FLAGS_warmup_iters) < 0) {
    return absl::InvalidArgumentError("need --iters >= 1 and --warmup_iters >= 0");
  }
  if (absl::GetFlag(FLAGS_gloo_rounds) < 1) return absl::InvalidArgumentError("--gloo_rounds must be >= 1");
  const bool phases = absl::GetFlag(FLAGS_phases);
  std::vector<std::string> extra;
  if (phases) extra = {"rs_us", "ag_us"};
  extra.push_back("cpu_ns/B");

  std::string json = "{\"ring\":{";
  std::map<int, std::map<size_t, double>> busbw;  // world -> bytes -> busbw, for the Gloo ratio
  for (size_t w = 0; w < worlds.size(); ++w) {
    const int n = worlds[w];
    Table table(&std::cout, extra);
    table.Comment(absl::StrCat("nranks ", n,
                               "  exchange ring-tcp  ranks as threads of one process, TCP on "
                               "127.0.0.1  segment ",
                               absl::GetFlag(FLAGS_segment_bytes), " B"));
    table.Header();
    RETURN_IF_ERROR(RunWorld(n, sizes, &table));
    table.Footer();
    std::cout << "\n";
    for (const Row& r : table.rows()) busbw[n][r.bytes] = r.busbw_gbs;
    json += absl::StrCat(w ? "," : "", "\"", n, "\":", table.ToJson());
  }
  json += "}";

  if (absl::GetFlag(FLAGS_gloo)) {
    ASSIGN_OR_RETURN(const Programs programs, FindPrograms(argv0));
    ASSIGN_OR_RETURN(std::vector<int> gloo_worlds, ParseInts(absl::GetFlag(FLAGS_gloo_ranks), "gloo_ranks"));
    const size_t bytes = ParseSize(absl::GetFlag(FLAGS_gloo_bytes));
    if (bytes < sizeof(float)) return absl::InvalidArgumentError("--gloo_bytes must be >= 4");
    std::cout
        << "# gloo: Gloo's allreduce (torch.distributed gloo backend, one process per rank, loopback) at "
        << bytes
        << " B in this run; ratio = psring busbw / Gloo busbw, psring ranks as threads (the "
           "table) and as processes (ring_worker)\n";
    json += ",\"gloo\":[";
    for (size_t i = 0; i < gloo_worlds.size(); ++i) {
      const int n = gloo_worlds[i];
      auto it = busbw[n].find(bytes);
      double ours = 0;
      if (it != busbw[n].end()) {
        ours = it->second;
      } else {  // not in the sweep: measure it now
        std::cout << "# psring nranks " << n << " at " << bytes << " B (not in the sweep above):\n";
        Table own(&std::cout, {});
        RETURN_IF_ERROR(RunWorld(n, {bytes}, &own));
        ours = own.rows().back().busbw_gbs;
      }
      // Rounds of (psring as processes, Gloo) back to back, so each ratio is taken under one machine load;
      // the round with the median processes ratio counts (a lone pair swung 0.6-2.4x at load 15).
      std::vector<std::tuple<double, double, std::pair<double, double>>> rounds;  // ratio, ours, gloo
      for (int round = 0; round < absl::GetFlag(FLAGS_gloo_rounds); ++round) {
        ASSIGN_OR_RETURN(double ours_round, RunRingProcesses(programs, n, bytes));
        ASSIGN_OR_RETURN(auto gloo_round, RunGloo(programs, n, bytes));
        rounds.emplace_back(ours_round / gloo_round.second, ours_round, gloo_round);
        std::cout << absl::StrFormat("# gloo nranks %d round %d: Gloo busbw %.4f GB/s | psring processes %.4f GB/s, "
                                     "ratio %.3f\n",
                                     n, round, gloo_round.second, ours_round, ours_round / gloo_round.second);
      }
      std::sort(rounds.begin(), rounds.end());
      const auto& [ratio_processes, ours_processes, gloo] = rounds[rounds.size() / 2];
      const double ratio = ours / gloo.second;
      std::cout << absl::StrFormat(
          "# gloo nranks %d (median round): Gloo busbw %.4f GB/s (%.0f us) | psring threads %.4f GB/s, ratio "
          "%.3f | psring processes %.4f GB/s, ratio %.3f\n",
          n, gloo.second, gloo.first * 1e6, ours, ratio, ours_processes, ratio_processes);
      json += absl::StrCat(i ? "," : "", "{\"nranks\":", n, ",\"bytes\":", bytes,
                           ",\"gloo_busbw\":", gloo.second, ",\"psring_threads_busbw\":", ours,
                           ",\"ratio_threads\":", ratio, ",\"psring_processes_busbw\":", ours_processes,
                           ",\"ratio_processes\":", ratio_processes, "}");
    }
    json += "]";
  }
  json += "}\n";
  const std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << json;
    if (!f.good()) return absl::UnavailableError(absl::StrCat("cannot write --json file ", json_path));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Ring allreduce (TCP, loopback, ranks as threads) from --min_bytes to --max_bytes for each world size "
      "in "
      "--ranks, as an nccl-tests table, then the busbw ratio against Gloo.\n"
      "  bazel run //bench:allreduce_bench -- --ranks=2,4,8 --phases --json=/tmp/allreduce.json",
      {"bench/", "common/", "ring/"});
  psring::ParseFlags(argc, argv);
  absl::Status status = psring::bench::Run(argv[0]);
  if (!status.ok()) {
    std::fprintf(stderr, "allreduce_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
