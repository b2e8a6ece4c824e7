// The measured CPU ceilings (bench/model/cpu_model.h): the model's CPU term inverted per run (closed form and
// round trips through PredictCollective), the plan of loopback runs per core count, the summary, the file's
// checks and errors, and a projection with a host's file.
#include "bench/model/cpu_model.h"

#include <fstream>
#include <string>
#include <vector>

#include "bench/model/project.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"
#include "tests/testing/temp_dir.h"

namespace psring::bench::model {
namespace {

using ::testing::HasSubstr;

// A loopback run: unlimited links, no latency, every process on a box of `cores` cores.
Conditions Loopback(int nodes, int servers, double bytes, double cores) {
  Conditions c;
  c.nodes = nodes;
  c.servers = servers;
  c.bytes = bytes;
  c.box_cores = cores;
  return c;
}

TEST(CpuCeilingTest, ClosedForm) {
  // Ring N = 2, S = 64 MB: cpu_bytes = 2 (N-1)/N S = 64 MB; 2 messages of 100 us off 0.2002 s leave 0.2 s.
  ExchangeParams ring{100e-6, 1, 0, 0};
  absl::StatusOr<double> c = CpuCeilingOf(Topology::kRing, ring, Loopback(2, 0, 64e6, 2), 0.2002);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NEAR(*c, 64e6 / 0.2, 1e-3);
  // ps-colocated N = 2 on one core: 4 processes, share 1/4, cpu_bytes = 2 S = 16 MB in 0.1 s -> C = 640 MB/s.
  c = CpuCeilingOf(Topology::kPsColocated, {0, 1, 0, 0}, Loopback(2, 0, 8e6, 1), 0.1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NEAR(*c, 16e6 / (0.1 * 0.25), 1e-3);
}

TEST(CpuCeilingTest, InvertsTheModelsOwnTermForEveryExchange) {
  for (Topology t : AllTopologies()) {
    for (int nodes : {1, 2, 3, 4}) {
      for (double cores : {1.0, 2.0, 16.0}) {
        if (t == Topology::kRing && nodes == 1) continue;
        const ExchangeParams truth = TruthFor(t);
        const Conditions at = Loopback(nodes, 2, 48e6 + 1, cores);  // a size no N divides
        absl::StatusOr<CollectiveTime> measured = PredictCollective(t, truth, at);
        ASSERT_TRUE(measured.ok()) << measured.status();
        ExchangeParams others = truth;
        others.cpu_bytes_per_second = 123;  // ignored
        absl::StatusOr<double> c = CpuCeilingOf(t, others, at, measured->seconds);
        ASSERT_TRUE(c.ok()) << TopologyName(t) << " N=" << nodes << ": " << c.status();
        EXPECT_NEAR(*c / truth.cpu_bytes_per_second, 1, 1e-9) << TopologyName(t) << " N=" << nodes;
      }
    }
  }
}

TEST(CpuCeilingTest, Errors) {
  const ExchangeParams p{1e-3, 1, 0, 0};
  EXPECT_EQ(CpuCeilingOf(Topology::kRing, p, Loopback(1, 0, 1e6, 2), 0.1).status().code(),
            absl::StatusCode::kInvalidArgument);  // moves nothing
  EXPECT_EQ(CpuCeilingOf(Topology::kPsOne, p, Loopback(1, 0, 1e6, 2), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CpuCeilingOf(Topology::kPsOne, p, Loopback(0, 0, 1e6, 2), 0.1).status().code(),
            absl::StatusCode::kInvalidArgument);  // ValidateConditions
  // Two messages of 1 ms take the whole 2 ms: nothing is left for the CPU.
  absl::Status s = CpuCeilingOf(Topology::kPsOne, p, Loopback(1, 0, 1e6, 2), 2e-3).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not CPU-bound"));
  // A link-bound run: 1 MB at 1 MB/s takes 1 s on the wire; 0.5 s cannot be the CPU's.
  Conditions linked = Loopback(2, 0, 1e6, 0);
  linked.link_bytes_per_second = 1e6;
  EXPECT_EQ(CpuCeilingOf(Topology::kRing, {0, 1, 0, 0}, linked, 0.5).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PlanCpuRunsTest, TwoCoresRunOneProcessPerCore) {
  const CpuPlan plan = PlanCpuRuns(AllTopologies(), 2, 4, 2);
  ASSERT_EQ(plan.runs.size(), 4u);
  EXPECT_EQ(plan.runs[0].topology, Topology::kRing);
  EXPECT_EQ(plan.runs[0].nodes, 2);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(plan.runs[i].nodes, 1);
  EXPECT_EQ(plan.runs[3].topology, Topology::kPsDedicated);
  EXPECT_EQ(plan.runs[3].servers, 1);  // K = 2 would need 3 processes
  for (const CpuRunPlan& r : plan.runs) EXPECT_EQ(r.processes, 2);
  ASSERT_EQ(plan.notes.size(), 4u);
  EXPECT_EQ(plan.notes[0], std::vector<std::string>{"N=1 skipped: a ring of one moves nothing"});
  EXPECT_EQ(plan.notes[1], std::vector<std::string>{"N=2 skipped: 3 processes > 2 cores"});
  EXPECT_EQ(plan.notes[2], std::vector<std::string>{"N=2 skipped: 4 processes > 2 cores"});
}

TEST(PlanCpuRunsTest, MoreCoresMoreNodesAndOneCoreOversubscribes) {
  const CpuPlan eight = PlanCpuRuns({Topology::kRing, Topology::kPsDedicated}, 8, 4, 2);
  std::vector<int> ring, dedicated;
  for (const CpuRunPlan& r : eight.runs) {
    (r.topology == Topology::kRing ? ring : dedicated).push_back(r.nodes);
    if (r.topology == Topology::kPsDedicated) {
      EXPECT_EQ(r.servers, 2);
    }
  }
  EXPECT_EQ(ring, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(dedicated, (std::vector<int>{1, 2, 3, 4}));
  const CpuPlan one = PlanCpuRuns({Topology::kRing}, 1, 4, 2);
  ASSERT_EQ(one.runs.size(), 1u);
  EXPECT_EQ(one.runs[0].nodes, 2);
  EXPECT_THAT(one.notes[0].back(), HasSubstr("2 processes on 1 cores"));
}

// Loopback runs of the plan timed by the model with TruthFor's parameters.
std::vector<MeasuredRun> TruthRuns(const CpuPlan& plan, double cores) {
  std::vector<MeasuredRun> runs;
  for (const CpuRunPlan& r : plan.runs) {
    for (double bytes : {16.0 * (1 << 20), 64.0 * (1 << 20)}) {
      const Conditions at = Loopback(r.nodes, r.servers, bytes, cores);
      runs.push_back(
          {r.topology, at, PredictCollectiveUnchecked(r.topology, TruthFor(r.topology), at).seconds});
    }
  }
  return runs;
}

proto::CostModelFile TruthModel() {
  std::vector<ExchangeParams> params;
  for (Topology t : AllTopologies()) params.push_back(TruthFor(t));
  return ModelFileOf(params);
}

proto::CpuModelFile Measured() {
  const CpuPlan plan = PlanCpuRuns(AllTopologies(), 2, 4, 2);
  const proto::CostModelFile model = TruthModel();
  absl::StatusOr<proto::CpuModelFile> file =
      SummarizeCpuRuns(TruthRuns(plan, 2), &model, plan, {"box", "2026-11-27", 2, "test"});
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *file : proto::CpuModelFile();
}

TEST(SummarizeCpuRunsTest, MedianOfEveryRunsCeiling) {
  const proto::CpuModelFile file = Measured();
  ASSERT_EQ(file.exchanges_size(), 4);
  for (int i = 0; i < 4; ++i) {
    const proto::CpuExchange& e = file.exchanges(i);
    const double truth = TruthFor(AllTopologies()[i]).cpu_bytes_per_second;
    EXPECT_EQ(e.exchange(), TopologyName(AllTopologies()[i]));
    EXPECT_NEAR(e.cpu_bytes_per_second() / truth, 1, 1e-9);
    EXPECT_NEAR(e.min_bytes_per_second() / truth, 1, 1e-9);
    ASSERT_EQ(e.runs_size(), 2);
    EXPECT_EQ(e.runs(0).processes(), 2);
    EXPECT_DOUBLE_EQ(e.runs(0).share(), 1);
  }
  EXPECT_EQ(file.exchanges(1).skipped(0), "N=2 skipped: 3 processes > 2 cores");
  const std::string table = FormatCpuModel(file);
  EXPECT_THAT(table, HasSubstr("this host's CPU: box, 2 cores"));
  EXPECT_THAT(table, HasSubstr("N=2 64MiB 0.60 (2)"));  // the ring's 600 MB/s
  EXPECT_THAT(table, HasSubstr("ps-1 N=2 skipped"));
}

TEST(SummarizeCpuRunsTest, AnExchangeWithoutAUsableRunIsNamed) {
  const CpuPlan plan = PlanCpuRuns(AllTopologies(), 2, 4, 2);
  std::vector<MeasuredRun> runs = TruthRuns(plan, 2);
  for (MeasuredRun& r : runs) {
    if (r.topology == Topology::kPsOne) r.seconds = 1e-6;  // shorter than its software term
  }
  const proto::CostModelFile model = TruthModel();
  absl::Status s = SummarizeCpuRuns(runs, &model, plan, {"box", "2026-11-27", 2, ""}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("ps-1: no loopback run gives a CPU ceiling"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("not CPU-bound"));
}

TEST(CpuModelFileTest, WritesAndReadsBack) {
  const proto::CpuModelFile file = Measured();
  const std::string path = testing::FreshTempPath("cpu.json");
  ASSERT_TRUE(WriteCpuModelFile(path, file).ok());
  absl::StatusOr<proto::CpuModelFile> back = ReadCpuModelFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), file.SerializeAsString());
  EXPECT_EQ(ReadCpuModelFile(testing::FreshTempPath("absent.json")).status().code(),
            absl::StatusCode::kNotFound);
}

// ParseCpuModelFile's message for `file` changed by `edit`.
template <typename Edit>
std::string ErrorAfter(Edit edit) {
  proto::CpuModelFile file = Measured();
  edit(&file);
  const std::string path = testing::FreshTempPath("edited.json");
  // Written without validation: the file a user could have edited by hand.
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(file, &json, options).ok());
  std::ofstream(path) << json;
  absl::StatusOr<proto::CpuModelFile> read = ReadCpuModelFile(path);
  EXPECT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path));
  return std::string(read.status().message());
}

TEST(CpuModelFileTest, ErrorsNameTheFileAndField) {
  EXPECT_THAT(
      ErrorAfter([](proto::CpuModelFile* f) { f->mutable_exchanges(0)->set_cpu_bytes_per_second(0); }),
      HasSubstr("ring.cpu_bytes_per_second: = 0: must be finite and > 0"));
  EXPECT_THAT(
      ErrorAfter([](proto::CpuModelFile* f) { f->mutable_exchanges(2)->clear_cpu_bytes_per_second(); }),
      HasSubstr("ps-colocated.cpu_bytes_per_second: missing"));
  EXPECT_THAT(ErrorAfter([](proto::CpuModelFile* f) { f->mutable_exchanges()->RemoveLast(); }),
              HasSubstr("ps-dedicated: missing"));
  EXPECT_THAT(ErrorAfter([](proto::CpuModelFile* f) { f->mutable_exchanges(1)->set_exchange("ps-2"); }),
              HasSubstr("unknown exchange 'ps-2'"));
  EXPECT_THAT(ErrorAfter([](proto::CpuModelFile* f) { f->mutable_exchanges(1)->set_exchange("ring"); }),
              HasSubstr("ring: appears twice"));
  EXPECT_THAT(ErrorAfter([](proto::CpuModelFile* f) { f->clear_host(); }), HasSubstr("host: missing"));
  EXPECT_THAT(ErrorAfter([](proto::CpuModelFile* f) { f->set_cores(0); }), HasSubstr("cores: = 0"));
  EXPECT_THAT(ErrorAfter([](proto::CpuModelFile* f) { f->set_version(2); }), HasSubstr("version: 2"));
  EXPECT_THAT(ErrorAfter([](proto::CpuModelFile* f) {
                f->mutable_exchanges(3)->mutable_runs(1)->set_cpu_bytes_per_second(-1);
              }),
              HasSubstr("ps-dedicated.runs[1].cpu_bytes_per_second"));
  absl::Status unknown = ParseCpuModelFile(R"({"version": 1, "ceiling": 3})", "x.json").status();
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("x.json: not a CPU model file"));
}

TEST(CpuModelFileTest, ProjectionUsesTheFilesCeilingsAndSaysSo) {
  // Links only, the ring's ceiling 0.5 GB/s: at 25 Gbit/s the CPU binds; the file's 600 MB/s replaces it.
  const proto::CostModelFile model =
      ModelFileOf({{0, 1, 0, 0.5e9}, {0, 1, 0, 0}, {0, 1, 0, 0}, {0, 1, 0, 0}});
  const proto::CpuModelFile cpu = Measured();
  absl::StatusOr<proto::CostModelFile> target = WithCpuCeilings(model, cpu);
  ASSERT_TRUE(target.ok()) << target.status();
  absl::StatusOr<ExchangeParams> ring = ParamsOf(*target, Topology::kRing);
  ASSERT_TRUE(ring.ok());
  EXPECT_NEAR(ring->cpu_bytes_per_second, 600e6, 1e-3);
  EXPECT_FALSE(target->exchanges(0).cpu_bytes_per_second().has_std_error());
  EXPECT_DOUBLE_EQ(ParamsOf(*target, Topology::kRing)->software_s, 0);  // the rest is the model's
  const Conditions at{4, 2, 0, 3.125e9, 5e-6};
  absl::StatusOr<Projection> p = Project(*target, at, FlatStep(0, 0, 8e6));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->exchanges[0].step.bound, Bound::kCpu);
  EXPECT_NEAR(p->exchanges[0].step.step_s, 6 * 5e-6 + 12e6 / 600e6, 1e-12);
  const std::string with = FormatProjection(*target, at, *p, "flat", CpuModelSource("cpu.json", cpu));
  EXPECT_THAT(with, HasSubstr("# CPU ceilings from cpu.json (box, 2026-11-27)"));
  EXPECT_THAT(with, HasSubstr("0.60 GB/s"));
  const std::string without = FormatProjection(model, at, *p, "flat");
  EXPECT_THAT(without, HasSubstr("as measured on testhost (2026-12-01), the calibration host"));

  proto::CpuModelFile lacking = cpu;
  lacking.mutable_exchanges()->RemoveLast();
  EXPECT_EQ(WithCpuCeilings(model, lacking).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace psring::bench::model
