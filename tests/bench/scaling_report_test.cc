// The reporting half of the bench on records synthesised from a known calibrated model, which the report then
// predicts them with (the end-to-end test with real workers is scaling_e2e_test).
#include "bench/report/scaling_report.h"

#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "bench/model/collective.h"
#include "bench/model/exchange_topology.h"
#include "bench/model/sweep_model.h"
#include "bench/report/table.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/bench_report.pb.h"
#include "tests/bench/model/synthetic_runs.h"

namespace psring::bench {
namespace {

constexpr double kLink = 12.5e6;

// 1 ms per message, the whole link, no window or CPU limit: T = messages * 1 ms + link_bytes / B.
const model::ExchangeParams kParams = {1e-3, 1, 0, 0};

ScalingResult Synthetic() {
  ScalingResult result;
  result.model = model::ModelFileOf({kParams, kParams, kParams, kParams});
  result.options.model_path = "synthetic.json";
  result.options.nodes = {1, 2, 4, 8};  // N = 8 only has a failed ps-1 run
  result.options.model_bytes = {4u << 20};
  result.options.extrapolate_nodes = {16, 1024};
  result.emulated = true;
  result.link_bytes_per_second = kLink;
  for (int n : {1, 2, 4}) {
    for (Exchange e : AllExchanges()) {
      RunRecord r;
      r.exchange = e;
      r.nodes = n;
      r.servers = PluginFor(e).Servers(n, result.options.ps_servers);
      r.bytes = 4u << 20;
      r.steps = 10;
      model::Conditions at{n, r.servers, static_cast<double>(r.bytes), kLink, 0};
      r.exchange_s = model::PredictCollectiveUnchecked(TopologyOf(e), kParams, at).seconds;
      r.step_s = r.exchange_s + 0.001;
      r.algbw = r.bytes / r.exchange_s;
      r.busbw = r.algbw * AllReduceBusFactor(n);
      result.records.push_back(r);
    }
  }
  RunRecord failed;
  failed.exchange = Exchange::kPsOne;
  failed.nodes = 8;
  failed.bytes = 4u << 20;
  failed.error = "ps-1 rank 3 exited with code 1; \"quoted\"\nsecond line";
  result.records.push_back(failed);
  return result;
}

TEST(ScalingReportTest, PredictsEveryRunFromTheModelFile) {
  ScalingResult result = Synthetic();
  for (const RunRecord& r : result.records) {
    if (!r.ok() || !CrossesLink(r)) continue;
    EXPECT_NEAR(RecordModelSeconds(result, r), r.exchange_s, 1e-9) << ExchangeName(r.exchange) << " N=" << r.nodes;
    EXPECT_NEAR(ModelRelativeError(result, r), 0, 1e-9);
  }
  // ps-1 at N = 1024: 2N messages, N * S through the server's link.
  EXPECT_NEAR(ExtrapolatedSeconds(result, Exchange::kPsOne, 1024, 4u << 20), 2048e-3 + 1024.0 * (4 << 20) / kLink,
              1e-6);
  // Without a model file there is nothing to predict with.
  result.model.reset();
  EXPECT_EQ(ModelSeconds(result, Exchange::kRing, 4, 4u << 20), -1);
  EXPECT_TRUE(Extrapolation(result).empty());
}

TEST(ScalingReportTest, CsvHasOneRowPerRunAndModelPoint) {
  ScalingResult result = Synthetic();
  const std::string csv = ToCsv(result);
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  // Header + 12 measured + 1 failed + 4 exchanges x 2 extrapolated N.
  ASSERT_EQ(lines.size(), 1u + 13u + 8u);
  const size_t columns = std::count(lines[0].begin(), lines[0].end(), ',');
  for (const auto& line : lines) {
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), columns) << line;
  }
  EXPECT_EQ(lines[1].rfind("measured,gradient,ring,1,", 0), 0u) << lines[1];
  EXPECT_EQ(lines.back().rfind("model,gradient,ps-dedicated,1024,2,", 0), 0u) << lines.back();
}

// One column table: the CSV's header is its names, and every JSON name is a field of RunReport (a typo would
// silently drop the column from scaling.json).
TEST(ScalingReportTest, OneColumnTableNamesRealFields) {
  const std::string csv = ToCsv(Synthetic());
  EXPECT_EQ(csv.substr(0, csv.find('\n')), absl::StrJoin(CsvColumnNames(), ","));
  const std::vector<std::string> json = JsonRunFields();
  EXPECT_GE(json.size(), 30u);
  for (const std::string& name : json) {
    EXPECT_NE(proto::RunReport::descriptor()->FindFieldByName(name), nullptr) << name;
  }
}

TEST(ScalingReportTest, CsvRoundTripsThroughRecordsFromCsv) {
  ScalingResult result = Synthetic();
  auto records = RecordsFromCsv(ToCsv(result));
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), result.records.size());  // model rows are skipped
  for (size_t i = 0; i < records->size(); ++i) {
    const RunRecord& a = result.records[i];
    const RunRecord& b = (*records)[i];
    EXPECT_EQ(a.exchange, b.exchange);
    EXPECT_EQ(a.nodes, b.nodes);
    EXPECT_EQ(a.servers, b.servers);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_NEAR(a.exchange_s, b.exchange_s, 1e-5 * a.exchange_s);
    EXPECT_EQ(a.ok(), b.ok());
  }
  EXPECT_EQ(records->back().error, "ps-1 rank 3 exited with code 1; 'quoted'");
  EXPECT_FALSE(RecordsFromCsv("a,b\n1,2\n").ok());
  EXPECT_FALSE(RecordsFromCsv("").ok());
}

// scaling.json reads back into its message strictly, with today's keys and plain numbers for byte counts.
TEST(ScalingReportTest, JsonReadsBackAsTheReportMessage) {
  absl::StatusOr<std::string> json = ToJson(Synthetic());
  ASSERT_TRUE(json.ok()) << json.status();
  proto::ScalingReport report;
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &report, strict).ok()) << *json;
  EXPECT_EQ(report.config().mode(), "gradient");
  EXPECT_EQ(report.config().nodes_size(), 4);
  EXPECT_TRUE(report.cluster().emulated());
  EXPECT_TRUE(report.fits().empty());  // one model: no per-sweep fit
  EXPECT_NE(report.model_source().find("testhost"), std::string::npos) << report.model_source();
  ASSERT_EQ(report.runs_size(), 13);
  EXPECT_EQ(report.runs(0).exchange(), "ring");
  EXPECT_FALSE(report.runs(12).ok());
  EXPECT_EQ(report.runs(12).error(), "ps-1 rank 3 exited with code 1; \"quoted\"\nsecond line");
  EXPECT_EQ(report.model_size(), 8);
  for (const char* key : {"\"algbw_Bps\"", "\"step_s\"", "\"steps\"", "\"model_source\"", "\"model\""}) {
    EXPECT_NE(json->find(key), std::string::npos) << key;
  }
  EXPECT_NE(json->find("\"bytes\": 4194304"), std::string::npos) << "a byte count printed as a string";
  EXPECT_EQ(json->find("inf"), std::string::npos);
  EXPECT_EQ(json->find("nan"), std::string::npos);
  EXPECT_FALSE(report.config().has_project_port_buffer_bytes());  // no projection target given
  // A projection's target, its switch ports included, is recorded with the sweep.
  ScalingResult projected = Synthetic();
  projected.options.projection.link_bytes_per_second = 3.125e9;
  projected.options.projection.latency_s = 5e-6;
  projected.options.projection.port_buffer_bytes = 2e6;
  json = ToJson(projected);
  ASSERT_TRUE(json.ok()) << json.status();
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &report, strict).ok()) << *json;
  EXPECT_DOUBLE_EQ(report.config().project_link_bytes_per_second(), 3.125e9);
  EXPECT_DOUBLE_EQ(report.config().project_port_buffer_bytes(), 2e6);
}

TEST(ScalingReportTest, ReportAndVerdict) {
  ScalingResult result = Synthetic();
  std::ostringstream report, verdict;
  PrintReport(result, report);
  PrintVerdict(result, verdict);
  EXPECT_NE(report.str().find("# exchange ring"), std::string::npos);
  EXPECT_NE(report.str().find("MODEL extrapolation (NOT measured)"), std::string::npos);
  EXPECT_NE(report.str().find("N=8 S=4 MiB FAILED: ps-1 rank 3 exited with code 1"), std::string::npos);
  EXPECT_NE(report.str().find("info model ring S>=4 MiB (the calibrated model's prediction, not fitted on these "
                              "runs): max |error| 0.0%"),
            std::string::npos)
      << report.str();
  EXPECT_NE(report.str().find("# model: the frozen model of testhost, 2026-12-01 (synthetic.json)"),
            std::string::npos);
  // N=4: the ring and ps-colocated move the same bytes, the co-located PS pays 4N messages against 2(N-1)
  // (the model's counts): 10 ms more; ps-1 moves 4 MiB * 4 against 2 * 3/4 * 4 MiB and pays 8 messages against
  // 6: 2.6x slower.
  std::string v = verdict.str();
  EXPECT_NE(v.find("     4  ring                0.510 (1.0x)       1.351 (2.6x)       0.520 (1.0x)"),
            std::string::npos)
      << v;
  EXPECT_NE(v.find("failed/not run"), std::string::npos) << v;
  EXPECT_EQ(report.str().find("hosts' TCP"), std::string::npos) << "neither TCP known: no line";
}

// A sweep whose transport is not the calibrated one says so beside the model's figures: --ps_chunks=bdp on
// the PS's lines only (the ring's runs are those the model describes), a transport flag in --worker_args on
// all.
TEST(ScalingReportTest, MarksTheModelNotComparableWhereTheTransportChanged) {
  const auto line_of = [](const std::string& report, const std::string& exchange) {
    const size_t at = report.find("# info model " + exchange + " S>=4 MiB");
    return at == std::string::npos ? std::string() : report.substr(at, report.find('\n', at) - at);
  };
  constexpr char kMark[] = "MODEL NOT COMPARABLE";
  ScalingResult result = Synthetic();
  std::ostringstream plain;
  PrintReport(result, plain);
  EXPECT_EQ(plain.str().find(kMark), std::string::npos) << plain.str();

  // --ps_chunks=bdp: the rule gave every PS run but ps-1's at N = 4 a chunk of its own (there it kept the
  // harness's, RunRecord::ps_chunk_bytes 0).
  result.options.ps_chunks = PsChunks::kBdp;
  for (RunRecord& r : result.records) {
    if (PluginFor(r.exchange).family() == Family::kParameterServer &&
        !(r.exchange == Exchange::kPsOne && r.nodes == 4)) {
      r.ps_chunk_bytes = 128 << 10;
      r.ps_chunk_rule = "bdp";
    }
  }
  std::ostringstream bdp;
  PrintReport(result, bdp);
  EXPECT_NE(bdp.str().find("# MODEL NOT COMPARABLE: these runs pass --ps_chunks=bdp"), std::string::npos)
      << bdp.str();
  EXPECT_EQ(line_of(bdp.str(), "ring").find(kMark), std::string::npos) << line_of(bdp.str(), "ring");
  // Runs that cross a link: the co-located PS's at N = 2 and 4, the others' at N = 1 too.
  EXPECT_NE(
      line_of(bdp.str(), "ps-colocated").find("no comparable run; 2 runs left out (MODEL NOT COMPARABLE"),
      std::string::npos)
      << line_of(bdp.str(), "ps-colocated");
  EXPECT_NE(
      line_of(bdp.str(), "ps-dedicated").find("no comparable run; 3 runs left out (MODEL NOT COMPARABLE"),
      std::string::npos)
      << line_of(bdp.str(), "ps-dedicated");
  // ps-1's N = 4 run kept the model's transport: it is judged, its N = 1 and 2 runs are left out.
  EXPECT_NE(
      line_of(bdp.str(), "ps-1").find("max |error| 0.0% over 1 runs; 2 runs left out (MODEL NOT COMPARABLE"),
      std::string::npos)
      << line_of(bdp.str(), "ps-1");
  // Each row the rule changed says so after its columns; the ring's rows and ps-1's N = 4 row do not.
  int marked_rows = 0;
  for (absl::string_view line : absl::StrSplit(bdp.str(), '\n')) {
    if (absl::EndsWith(line, "  MODEL NOT COMPARABLE (chunk 128 KiB by --ps_chunks=bdp)")) ++marked_rows;
  }
  EXPECT_EQ(marked_rows, 3 * 3 - 1) << bdp.str();  // three PS exchanges at N = 1, 2, 4, less ps-1's N = 4

  // scaling --from_csv of such a sweep marks it again without the flag: the CSV keeps each run's chunk.
  absl::StatusOr<std::vector<RunRecord>> read = RecordsFromCsv(ToCsv(result));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), result.records.size());
  for (size_t i = 0; i < read->size(); ++i) {
    EXPECT_EQ((*read)[i].ps_chunk_bytes, result.records[i].ps_chunk_bytes);
    EXPECT_EQ((*read)[i].ps_chunk_rule, result.records[i].ps_chunk_rule);
  }
  // A file from before the rule column: its chunks were bdp's, the only rule then.
  std::string old_csv = ToCsv(result);
  const size_t header_end = old_csv.find('\n');
  ASSERT_NE(old_csv.substr(0, header_end).find(",ps_chunk_rule,"), std::string::npos);
  absl::StrReplaceAll({{",bdp,", ",,"}}, &old_csv);
  absl::StatusOr<std::vector<RunRecord>> old_read = RecordsFromCsv(old_csv);
  ASSERT_TRUE(old_read.ok()) << old_read.status();
  for (size_t i = 0; i < old_read->size(); ++i) {
    EXPECT_EQ((*old_read)[i].ps_chunk_rule, result.records[i].ps_chunk_bytes > 0 ? "bdp" : "") << i;
  }

  // --ps_chunks=capped: its rows name it, and the intro cites where it was measured.
  result.options.ps_chunks = PsChunks::kCapped;
  for (RunRecord& r : result.records) {
    if (r.ps_chunk_bytes > 0) r.ps_chunk_rule = "capped";
  }
  std::ostringstream capped;
  PrintReport(result, capped);
  EXPECT_NE(capped.str().find("# MODEL NOT COMPARABLE: these runs pass --ps_chunks=capped"),
            std::string::npos)
      << capped.str();
  EXPECT_NE(capped.str().find("  MODEL NOT COMPARABLE (chunk 128 KiB by --ps_chunks=capped)\n"),
            std::string::npos)
      << capped.str();
  for (RunRecord& r : result.records) {
    r.ps_chunk_bytes = 0;
    r.ps_chunk_rule.clear();
  }

  result.options.ps_chunks = PsChunks::kHarness;
  result.options.worker_args = {"--chunk_bytes=65536"};
  std::ostringstream flag;
  PrintReport(result, flag);
  for (const char* e : {"ring", "ps-1"}) {
    EXPECT_NE(line_of(flag.str(), e).find(kMark), std::string::npos) << e << ": " << line_of(flag.str(), e);
  }
  // The CSV keeps the flags each run got, quoted, so a re-rendered report can mark them.
  for (RunRecord& r : result.records) {
    r.worker_args = "--chunk_bytes=65536 --lr=0.1";
    r.server_args = "--chunk_bytes=65536";
  }
  absl::StatusOr<std::vector<RunRecord>> flags_read = RecordsFromCsv(ToCsv(result));
  ASSERT_TRUE(flags_read.ok()) << flags_read.status();
  for (const RunRecord& r : *flags_read) {
    if (r.source != "measured") continue;
    EXPECT_EQ(r.worker_args, "--chunk_bytes=65536 --lr=0.1");
    EXPECT_EQ(r.server_args, "--chunk_bytes=65536");
  }
}

// The report says which TCP the model was fitted under against the hosts', and warns where they differ.
TEST(ScalingReportTest, SaysWhetherTheHostsRunTheModelsTcp) {
  ScalingResult result = Synthetic();
  result.hosts_tcp = "cubic, slow start after idle off";
  result.model->set_hosts_tcp("cubic, slow start after idle off");
  std::ostringstream same;
  PrintReport(result, same);
  EXPECT_NE(
      same.str().find("# the model was fitted with the hosts' TCP cubic, slow start after idle off (as these "
                      "hosts)"),
      std::string::npos)
      << same.str();
  result.model->set_hosts_tcp("bbr, slow start after idle on");
  std::ostringstream other;
  PrintReport(result, other);
  EXPECT_NE(
      other.str().find("# WARNING: the model was fitted with the hosts' TCP bbr, slow start after idle on; "
                       "these hosts run cubic, slow start after idle off"),
      std::string::npos)
      << other.str();
}

// An EMULATOR-BOUND cell is marked and never named fastest: the ring's N = 4 run bound by the box leaves the
// fastest to the co-located PS (measured 0.520 s), and the ring's ratio is against it.
// The # MODEL lines say how far beyond the model file's calibration each N lies (here calibrated at N = 2-8 on
// these links with 4 MiB).
TEST(ScalingReportTest, ExtrapolationLinesAreMarkedBeyondTheCalibration) {
  ScalingResult result = Synthetic();
  for (proto::ExchangeModel& e : *result.model->mutable_exchanges()) {
    proto::Coverage* c = e.mutable_coverage();
    for (int n : {2, 4, 8}) c->add_nodes(n);
    c->add_link_bytes_per_second(kLink);
    c->add_latency_s(0);
    c->add_bytes(4u << 20);
  }
  std::ostringstream report;
  PrintReport(result, report);
  const std::string text = report.str();
  EXPECT_NE(text.find("  EXTRAPOLATED x128 (N)\n"), std::string::npos) << text;  // N = 1024
  const size_t n16 = text.find("# MODEL       16");
  ASSERT_NE(n16, std::string::npos) << text;
  EXPECT_EQ(text.substr(n16, text.find('\n', n16) - n16).find("EXTRAPOLATED"), std::string::npos)
      << "16 is 2x beyond 8: not marked";
}

TEST(ScalingReportTest, VerdictMarksEmulatorBoundCellsAndNeverNamesThemFastest) {
  ScalingResult result = Synthetic();
  for (RunRecord& r : result.records) {
    if (r.exchange == Exchange::kRing && r.nodes == 4) r.emulator_bound = true;
  }
  std::ostringstream verdict;
  PrintVerdict(result, verdict);
  const std::string v = verdict.str();
  EXPECT_NE(v.find("     4  ps-colocated       0.510 (1.0x)*       1.351 (2.6x)       0.520 (1.0x)"),
            std::string::npos)
      << v;
  EXPECT_NE(v.find("# * EMULATOR-BOUND"), std::string::npos) << v;
}

// Issue 24: with S < 4 MiB the report printed a bare "# Acceptance checks" heading.
TEST(ScalingReportTest, NoApplicableCheckSaysWhichSizesTheChecksNeed) {
  ScalingResult result = Synthetic();
  for (RunRecord& r : result.records) r.bytes = 1u << 20;
  result.options.model_bytes = {1u << 20};
  std::ostringstream report;
  PrintReport(result, report);
  EXPECT_NE(report.str().find("# Acceptance checks (bench/PERFORMANCE.md): none applies to this sweep. The ring "
                              "busbw and ps-1 checks need S >= 16 MiB, the model line S >= 4 MiB"),
            std::string::npos)
      << report.str();
  EXPECT_NE(report.str().find("the largest S here is 1 MiB"), std::string::npos) << report.str();
  EXPECT_EQ(report.str().find("# check "), std::string::npos) << report.str();
}

TEST(ScalingReportTest, FigureHasMeasuredAndModelSeriesPerExchange) {
  ScalingResult result = Synthetic();
  Figure figure = MakeFigure(result, 4u << 20);
  ASSERT_EQ(figure.panels.size(), 2u);
  EXPECT_NE(figure.title.find("S = 4 MiB"), std::string::npos);
  EXPECT_NE(figure.title.find("100 Mbit/s"), std::string::npos);
  EXPECT_EQ(figure.panels[0].series.size(), 8u);
  EXPECT_EQ(figure.panels[0].series[0].points.size(), 2u);  // ring measured at N = 2, 4 (N = 1 moves nothing)
  EXPECT_EQ(figure.panels[0].series[2].points.size(), 3u);  // ps-1 at N = 1, 2, 4 (server on its own host)
  EXPECT_EQ(figure.panels[1].series[0].points.size(), 2u);  // busbw is undefined at N = 1
  EXPECT_EQ(figure.panels[0].series[1].points.back().first, 1024);
  const std::string svg = RenderSvg(figure);
  EXPECT_NE(svg.find("ps-dedicated model"), std::string::npos);
}

}  // namespace
}  // namespace psring::bench
