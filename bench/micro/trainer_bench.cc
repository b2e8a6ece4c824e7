// //bench:trainer_bench: one training step (forward + backward + SGD update) of the MLP, per device and size.
//
//   bazel run //bench:trainer_bench                                  # all cases, then the PyTorch comparison
//   bazel run //bench:trainer_bench -- --benchmark_filter=cpu/256    # Google Benchmark flags work as usual
//
// Google Benchmark prints its table; then the nccl-tests-style table (bench/report.h) follows, with
//   size = gradient bytes, count = parameters, time = one step,
//   algbw = busbw = gradient bytes produced per second (the bandwidth an exchange must sustain to keep up),
//   #wrong = non-finite parameters/gradients, plus 1 when repeated steps on one batch did not lower its loss,
// and, for CPU cases, PyTorch eager's throughput on the same model and batch (bench/micro/torch_mlp_step.py, run
// with the same thread count) and our ratio to it. CUDA cases skip themselves without a usable GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/report/table.h"
#include "benchmark/benchmark.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"
#include "trainer/cpu_kernels.h"
#include "trainer/cuda_engine.h"
#include "trainer/engine.h"
#include "trainer/mlp.h"
#include "trainer/random.h"

ABSL_FLAG(bool, torch_compare, true,
          "After the benchmarks, run bench/micro/torch_mlp_step.py (PyTorch eager, same model, batch, device and "
          "thread count) for every case that ran and print our throughput ratio to it.");
ABSL_FLAG(std::string, python, "/usr/bin/python3", "Python interpreter with PyTorch for --torch_compare.");
ABSL_FLAG(std::string, torch_script, "bench/micro/torch_mlp_step.py",
          "Path of the PyTorch reference script (relative to the runfiles root under bazel run).");
ABSL_FLAG(int, threads, 1, "BLAS threads for the CPU cases (and torch.set_num_threads for the comparison).");
ABSL_FLAG(int, torch_timeout_s, 120, "Seconds before one PyTorch comparison run is abandoned.");
ABSL_FLAG(int, torch_rounds, 3,
          "Alternating rounds (ours ~2 s, PyTorch ~2 s) per case for --torch_compare; the table shows the "
          "medians.");

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

// One case's engine with initialised parameters and a fixed random batch; Step() trains on that batch.
class StepRunner {
 public:
  static absl::StatusOr<std::unique_ptr<StepRunner>> Create(const Case& c) {
    if (c.device == "cuda") {
      const absl::Status probe = trainer::ProbeCuda();
      // No driver or no device (kNotFound) is a CPU host, not an error worth CUDA's text (trainer/engine.cc).
      if (absl::IsNotFound(probe)) return absl::UnavailableError("no GPU on this host: CUDA case not run");
      if (!probe.ok()) return absl::UnavailableError(absl::StrCat("no usable GPU: ", probe.message()));
    }
    trainer::cpu::SetBlasThreads(absl::GetFlag(FLAGS_threads));
    ASSIGN_OR_RETURN(MlpLayout layout, MlpLayout::Create(784, c.hidden, 10));
    ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, trainer::CreateEngine(c.device, layout, c.batch));
    std::vector<float> params(layout.num_params());
    trainer::InitParameters(layout, 1, absl::MakeSpan(params));
    RETURN_IF_ERROR(engine->SetParams(params));
    auto runner = std::unique_ptr<StepRunner>(new StepRunner(c.batch, std::move(engine)));
    trainer::Rng rng(2);
    for (float& v : runner->images_) v = rng.Normal();
    for (int32_t& y : runner->labels_) y = static_cast<int32_t>(rng.Below(10));
    return runner;
  }

  // Forward + backward + SGD update, waited for. Returns the batch's mean loss before the update.
  absl::StatusOr<double> Step() {
    ASSIGN_OR_RETURN(BatchStats s, engine_->ForwardBackward(images_.data(), labels_.data(), batch_));
    RETURN_IF_ERROR(engine_->SgdStep(sgd_));
    RETURN_IF_ERROR(engine_->Synchronize());
    return s.loss_sum / batch_;
  }

  // Steps for at least `seconds`; returns samples per second.
  absl::StatusOr<double> Throughput(double seconds) {
    const absl::Time start = absl::Now();
    int64_t steps = 0;
    do {
      RETURN_IF_ERROR(Step().status());
      ++steps;
    } while (absl::ToDoubleSeconds(absl::Now() - start) < seconds);
    return steps * batch_ / absl::ToDoubleSeconds(absl::Now() - start);
  }

  Engine* engine() { return engine_.get(); }

 private:
  StepRunner(int batch, std::unique_ptr<Engine> engine)
      : batch_(batch),
        engine_(std::move(engine)),
        images_(static_cast<size_t>(batch) * 784),
        labels_(batch) {}

  const int batch_;
  std::unique_ptr<Engine> engine_;
  std::vector<float> images_;
  std::vector<int32_t> labels_;
  const trainer::SgdOptions sgd_;  // the training defaults
};

void TrainStep(benchmark::State& state, const Case& c) {
  absl::StatusOr<std::unique_ptr<StepRunner>> runner = StepRunner::Create(c);
  if (!runner.ok()) {
    state.SkipWithError(std::string(runner.status().message()).c_str());
    return;
  }
  double first_loss = -1, last_loss = 0;
  for (auto _ : state) {
    absl::StatusOr<double> loss = (*runner)->Step();
    if (!loss.ok()) {
      state.SkipWithError(std::string(loss.status().message()).c_str());
      break;
    }
    last_loss = *loss;
    if (first_loss < 0) first_loss = last_loss;
  }
  Engine* engine = (*runner)->engine();
  state.SetItemsProcessed(state.iterations() * c.batch);
  int64_t wrong = CountNonFinite(engine, &Engine::GetParams) + CountNonFinite(engine, &Engine::GetGrads);
  if (state.iterations() > 1 && !(last_loss < first_loss)) ++wrong;
  state.counters["params"] = static_cast<double>(engine->layout().num_params());
  state.counters["batch"] = c.batch;
  state.counters["wrong"] = static_cast<double>(wrong);
}

// Keeps every run for the closing table while printing as usual.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  // Google Benchmark's context, less its "***WARNING*** Library was built as DEBUG" line: Debian builds
  // libbenchmark without NDEBUG, so the line speaks of the library's own asserts, not of this binary (built
  // with -O2, .bazelrc) or of the steps it times, which never call into the library.
  bool ReportContext(const Context& context) override {
    std::ostream& err = GetErrorStream();
    std::ostringstream text;
    SetErrorStream(&text);
    const bool ok = ConsoleReporter::ReportContext(context);
    SetErrorStream(&err);
    for (absl::string_view line : absl::StrSplit(text.str(), '\n', absl::SkipEmpty())) {
      if (!absl::StrContains(line, "Library was built as DEBUG")) err << line << "\n";
    }
    return ok;
  }

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
      !absl::SimpleAtod(output.substr(at + key.size(), output.find_first_of(" \n", at) - at - key.size()),
                        &sps)) {
    *why = absl::StrCat("`", command, "` exited with status ", rc, ": ", output.substr(0, 300));
    return -1;
  }
  return sps;
}

struct Comparison {
  double ours = 0;   // samples/s, median of the rounds
  double torch = 0;  // samples/s, median of the rounds
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Alternates our step and PyTorch's (--torch_rounds rounds, about 2 s each), so both see the same machine
// load (other processes on a shared machine come and go), and takes the median of each.
absl::StatusOr<Comparison> CompareWithTorch(const Case& c) {
  ASSIGN_OR_RETURN(std::unique_ptr<StepRunner> runner, StepRunner::Create(c));
  std::vector<double> ours, torch;
  for (int round = 0; round < absl::GetFlag(FLAGS_torch_rounds); ++round) {
    ASSIGN_OR_RETURN(double sps, runner->Throughput(2.0));
    ours.push_back(sps);
    std::string why;
    const double theirs = TorchSamplesPerSecond(c, &why);
    if (theirs < 0) return absl::UnavailableError(why);
    torch.push_back(theirs);
  }
  return Comparison{Median(ours), Median(torch)};
}

int Main(int argc, char** argv) {
  // Google Benchmark's own flags go to benchmark::Initialize, the rest to Abseil (which handles --help).
  std::vector<char*> bench_args = {argv[0]};
  std::vector<char*> other_args = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    (absl::StartsWith(argv[i], "--benchmark_") || absl::StartsWith(argv[i], "--v=") ? bench_args : other_args)
        .push_back(argv[i]);
  }
  psring::InitFlagsUsage(
      "One MLP training step (forward + backward + SGD) per device and size, and the ratio to PyTorch "
      "eager.\n"
      "Also takes Google Benchmark's flags: --benchmark_filter=REGEX, --benchmark_min_time=SECONDS,\n"
      "--benchmark_repetitions=N, --benchmark_format=console|json|csv, --benchmark_out=FILE.",
      {"bench/", "common/", "trainer/"});
  psring::ParseFlags(static_cast<int>(other_args.size()), other_args.data());
  if (absl::GetFlag(FLAGS_torch_rounds) < 1) {  // the medians need a round
    std::fprintf(stderr, "trainer_bench: --torch_rounds=%d: must be >= 1 (--torch_compare=false skips the "
                 "PyTorch comparison)\n", absl::GetFlag(FLAGS_torch_rounds));
    return 1;
  }
  int bench_argc = static_cast<int>(bench_args.size());
  benchmark::Initialize(&bench_argc, bench_args.data());

  const std::vector<Case> cases = {
      {"cpu", {256, 256}, 128},    {"cpu", {4096, 4096}, 128},   {"cuda", {256, 256}, 128},
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
  table.Comment(
      "algbw = busbw = gradient bytes produced per second; vs_torch = samples/s over PyTorch eager's");
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
    double sps = c->batch / seconds;
    double torch_sps = 0;
    if (absl::GetFlag(FLAGS_torch_compare)) {
      absl::StatusOr<Comparison> cmp = CompareWithTorch(*c);
      if (cmp.ok()) {
        sps = cmp->ours;
        torch_sps = cmp->torch;
      } else {
        table.Comment(
            absl::StrCat("PyTorch comparison for ", c->Name(), " unavailable: ", cmp.status().message()));
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
