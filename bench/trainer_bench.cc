// //bench:trainer_bench: one training step (forward + backward + SGD update) of the MLP, per device and size.
//
//   bazel run //bench:trainer_bench                                  # all cases, then the PyTorch comparison
//   bazel run //bench:trainer_bench -- --benchmark_filter=cpu/256    # Google Benchmark flags work as usual
//
// Google Benchmark prints its table; then the nccl-tests-style table (bench/report.h) follows, with
//   size = gradient bytes, count = parameters, time = one step,
//   algbw = busbw = gradient bytes produced per second (the bandwidth an exchange must sustain to keep up),
//   #wrong = non-finite parameters/gradients, plus 1 when repeated steps on one batch did not lower its loss,
// and, for CPU cases, PyTorch eager's throughput on the same model and batch (bench/torch_mlp_step.py, run with
// the same thread count) and our ratio to it. CUDA cases skip themselves without a usable GPU.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "benchmark/benchmark.h"
#include "bench/report.h"
#include "trainer/cpu_kernels.h"
#include "trainer/cuda_engine.h"
#include "trainer/engine.h"
#include "trainer/mlp.h"
#include "trainer/random.h"

ABSL_FLAG(bool, torch_compare, true,
          "After the benchmarks, run bench/torch_mlp_step.py (PyTorch eager, same model, batch, device and "
          "thread count) for every case that ran and print our throughput ratio to it.");
ABSL_FLAG(std::string, python, "/usr/bin/python3", "Python interpreter with PyTorch for --torch_compare.");
ABSL_FLAG(std::string, torch_script, "bench/torch_mlp_step.py",
          "Path of the PyTorch reference script (relative to the runfiles root under bazel run).");
ABSL_FLAG(int, threads, 1, "BLAS threads for the CPU cases (and torch.set_num_threads for the comparison).");
ABSL_FLAG(int, torch_timeout_s, 120, "Seconds before one PyTorch comparison run is abandoned.");

namespace psring::bench {
namespace {

using trainer::BatchStats;
using trainer::Engine;
using trainer::MlpLayout;

struct Case {
  std::string device;
  std::vector<int> hidden;
  int batch;

  std::string Name() const { return absl::StrCat(device, "/", absl::StrJoin(hidden, ","), "/b", batch); }
};

int64_t CountNonFinite(Engine* engine, absl::Status (Engine::*get)(absl::Span<float>)) {
  std::vector<float> v(engine->layout().num_params());
  if (!(engine->*get)(absl::MakeSpan(v)).ok()) return static_cast<int64_t>(v.size());
  int64_t bad = 0;
  for (float x : v) bad += !std::isfinite(x);
  return bad;
}

void TrainStep(benchmark::State& state, const Case& c) {
  if (c.device == "cuda") {
    const absl::Status probe = trainer::ProbeCuda();
    if (!probe.ok()) {
      state.SkipWithError(absl::StrCat("no usable GPU: ", probe.message()).c_str());
      return;
    }
  }
  trainer::cpu::SetBlasThreads(absl::GetFlag(FLAGS_threads));
  absl::StatusOr<MlpLayout> layout = MlpLayout::Create(784, c.hidden, 10);
  if (!layout.ok()) return state.SkipWithError(std::string(layout.status().message()).c_str());
  absl::StatusOr<std::unique_ptr<Engine>> engine = trainer::CreateEngine(c.device, *layout, c.batch);
  if (!engine.ok()) return state.SkipWithError(std::string(engine.status().message()).c_str());
  std::vector<float> params(layout->num_params());
  trainer::InitParameters(*layout, 1, absl::MakeSpan(params));
  if (!(*engine)->SetParams(params).ok()) return state.SkipWithError("SetParams failed");
  trainer::Rng rng(2);
  std::vector<float> images(static_cast<size_t>(c.batch) * 784);
  std::vector<int32_t> labels(c.batch);
  for (float& v : images) v = rng.Normal();
  for (int32_t& y : labels) y = static_cast<int32_t>(rng.Below(10));
  const trainer::SgdOptions sgd;  // the training defaults

  double first_loss = -1, last_loss = 0;
  for (auto _ : state) {
    absl::StatusOr<BatchStats> s = (*engine)->ForwardBackward(images.data(), labels.data(), c.batch);
    if (!s.ok() || !(*engine)->SgdStep(sgd).ok() || !(*engine)->Synchronize().ok()) {
      state.SkipWithError(s.ok() ? "SgdStep failed" : std::string(s.status().message()).c_str());
      break;
    }
    last_loss = s->loss_sum / c.batch;
    if (first_loss < 0) first_loss = last_loss;
  }
  state.SetItemsProcessed(state.iterations() * c.batch);
  int64_t wrong = CountNonFinite(engine->get(), &Engine::GetParams) +
                  CountNonFinite(engine->get(), &Engine::GetGrads);
  if (state.iterations() > 1 && !(last_loss < first_loss)) ++wrong;
  state.counters["params"] = static_cast<double>(layout->num_params());
  state.counters["batch"] = c.batch;
  state.counters["wrong"] = static_cast<double>(wrong);
}

// Keeps every run for the closing table while printing as usual.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) runs_.push_back(r);
  }
  const std::vector<Run>& runs() const { return runs_; }

 private:
  std::vector<Run> runs_;
};

// Runs the PyTorch reference for one case; returns samples/s, or a negative value with *why set.
double TorchSamplesPerSecond(const Case& c, std::string* why) {
  const std::string command = absl::StrCat(
      "timeout ", absl::GetFlag(FLAGS_torch_timeout_s), " ", absl::GetFlag(FLAGS_python), " ",
      absl::GetFlag(FLAGS_torch_script), " --hidden=", absl::StrJoin(c.hidden, ","), " --batch=", c.batch,
      " --device=", c.device, " --threads=", absl::GetFlag(FLAGS_threads), " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *why = "cannot start " + command;
    return -1;
  }
  std::string output;
  char buf[512];
  while (fgets(buf, sizeof(buf), pipe) != nullptr) output += buf;
  const int rc = pclose(pipe);
  const std::string key = "samples_per_second=";
  const size_t at = output.rfind(key);
  double sps = -1;
  if (rc != 0 || at == std::string::npos ||
      !absl::SimpleAtod(output.substr(at + key.size(), output.find_first_of(" \n", at) - at - key.size()), &sps)) {
    *why = absl::StrCat("`", command, "` exited with status ", rc, ": ", output.substr(0, 300));
    return -1;
  }
  return sps;
}

int Main(int argc, char** argv) {
  // Google Benchmark's own flags go to benchmark::Initialize, the rest to Abseil (which handles --help).
  std::vector<char*> bench_args = {argv[0]};
  std::vector<char*> other_args = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    (absl::StartsWith(argv[i], "--benchmark_") || absl::StartsWith(argv[i], "--v=") ? bench_args : other_args)
        .push_back(argv[i]);
  }
  absl::SetProgramUsageMessage(
      "One MLP training step (forward + backward + SGD) per device and size, and the ratio to PyTorch eager.\n"
      "Also takes Google Benchmark's flags: --benchmark_filter=REGEX, --benchmark_min_time=SECONDS,\n"
      "--benchmark_repetitions=N, --benchmark_format=console|json|csv, --benchmark_out=FILE.");
  absl::ParseCommandLine(static_cast<int>(other_args.size()), other_args.data());
  int bench_argc = static_cast<int>(bench_args.size());
  benchmark::Initialize(&bench_argc, bench_args.data());

  const std::vector<Case> cases = {
      {"cpu", {256, 256}, 128},   {"cpu", {4096, 4096}, 128},   {"cuda", {256, 256}, 128},
      {"cuda", {4096, 4096}, 128}, {"cuda", {4096, 4096}, 1024},
  };
  for (const Case& c : cases) {
    benchmark::RegisterBenchmark(("TrainStep/" + c.Name()).c_str(), TrainStep, c)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  Table table(&std::cout, {"batch", "samples/s", "torch_sps", "vs_torch"});
  table.Comment("trainer step: size = gradient bytes, time = forward + backward + SGD update of one batch;");
  table.Comment("algbw = busbw = gradient bytes produced per second; vs_torch = samples/s over PyTorch eager's");
  table.Comment(absl::StrCat("BLAS threads ", absl::GetFlag(FLAGS_threads)));
  table.Header();
  for (const benchmark::BenchmarkReporter::Run& run : reporter.runs()) {
    const std::string name = run.benchmark_name();
    const Case* c = nullptr;
    for (const Case& candidate : cases) {
      if (absl::StrContains(name, candidate.Name())) c = &candidate;
    }
    if (c == nullptr || run.run_type != benchmark::BenchmarkReporter::Run::RT_Iteration) continue;
    if (run.error_occurred) {
      table.Comment(absl::StrCat("skipped ", c->Name(), ": ", run.error_message));
      continue;
    }
    const double seconds = run.real_accumulated_time / static_cast<double>(run.iterations);
    const size_t params = static_cast<size_t>(run.counters.at("params").value);
    Row row = MakeRow(params * sizeof(float), params, seconds, /*bus_factor=*/1.0,
                      static_cast<int64_t>(run.counters.at("wrong").value));
    row.redop = "step";
    const double sps = c->batch / seconds;
    double torch_sps = 0;
    if (absl::GetFlag(FLAGS_torch_compare)) {
      std::string why;
      torch_sps = TorchSamplesPerSecond(*c, &why);
      if (torch_sps < 0) {
        table.Comment(absl::StrCat("PyTorch comparison for ", c->Name(), " unavailable: ", why));
        torch_sps = 0;
      }
    }
    row.extra = {static_cast<double>(c->batch), sps, torch_sps, torch_sps > 0 ? sps / torch_sps : 0};
    table.Add(row);
  }
  table.Footer();
  benchmark::Shutdown();
  return table.total_wrong() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) { return psring::bench::Main(argc, argv); }
