// The real-hosts path as on a real cluster: //bench:scaling with --launcher=mpirun-emulated starts every rank
// and server with mpirun over ssh into the emulated hosts (an sshd per network namespace), and the same sweep
// with the namespace placement (the default) runs beside it. Both must finish every run with 0 wrong, and the
// launcher must not change what is measured: each run's processes must sit on the same hosts and move the
// same traffic, so the workers' payload per step must be equal and the busiest host link's bytes per step
// (the switch's port counters over the whole job) must agree within kLinkAgreement. Step times are printed,
// not compared: on this 2-core box two 5-step runs of the same sweep differ by 8-19 % (ring N = 2), which is
// the bench's business (bench/PERFORMANCE.md), not a test's. Skips without root (namespaces), sshd or mpirun.
//
// kLinkAgreement, fixed before its data: mpirun's own traffic (ssh, the daemons' control connections) is tens
// of KB per job against 7 steps x 4 MiB, under 1 %; frames and headers are otherwise the same, so 5 %.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/bench_report.pb.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace psring::bench {
namespace {

using ::bazel::tools::cpp::runfiles::Runfiles;

constexpr double kLinkAgreement = 0.05;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string MissingPrerequisite() {
  if (geteuid() != 0) return "needs root (network namespaces)";
  if (access("/usr/sbin/sshd", X_OK) != 0) return "needs sshd: apt-get install openssh-server";
  if (FindExecutable("mpirun").find('/') == std::string::npos) return "needs mpirun: apt-get install openmpi-bin";
  return "";
}

// Runs the sweep with `launcher_flags` and returns its report; fails the test on any error.
proto::ScalingReport Sweep(const Runfiles& runfiles, const std::string& name,
                           const std::vector<std::string>& launcher_flags) {
  const std::string out_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::vector<std::string> argv = {
      runfiles.Rlocation("psring/bench/scaling"),
      "--ring_worker=" + runfiles.Rlocation("psring/ring/ring_worker"),
      "--ps_server=" + runfiles.Rlocation("psring/ps/server"),
      "--ps_worker=" + runfiles.Rlocation("psring/ps/worker"),
      "--link_probe=" + runfiles.Rlocation("psring/bench/hosts/link_probe"),
      "--netdelay=" + runfiles.Rlocation("psring/bench/emulator/netdelay"),
      "--model=none",
      "--exchanges=ring,ps-1,ps-colocated,ps-dedicated",
      "--ps_servers=2",
      "--nodes=2,4",
      "--mode=gradient",
      "--model_bytes=4194304",
      "--steps=5",
      "--link=200mbit",
      "--worker_timeout=60",
      "--job_timeout=120",
      "--out_dir=" + out_dir,
  };
  argv.insert(argv.end(), launcher_flags.begin(), launcher_flags.end());
  JobOptions options;
  options.timeout = absl::Seconds(400);
  absl::StatusOr<std::vector<ProcessResult>> results = RunJob({{name, argv}}, options);
  proto::ScalingReport report;
  EXPECT_TRUE(results.ok()) << results.status();
  if (!results.ok()) return report;
  const ProcessResult& r = (*results)[0];
  EXPECT_EQ(r.exit_code, 0) << name << ":\n" << r.stderr_tail << "\n" << r.stdout_text;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(ReadFile(out_dir + "/scaling.json"), &report).ok())
      << name << ": no scaling.json; stdout:\n" << r.stdout_text;
  return report;
}

TEST(MpirunRigTest, SameSweepThroughMpirunOverSshAgreesWithNamespacePlacement) {
  const std::string missing = MissingPrerequisite();
  if (!missing.empty()) GTEST_SKIP() << missing;
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;

  const proto::ScalingReport rig = Sweep(*runfiles, "rig", {"--launcher=mpirun-emulated"});
  const proto::ScalingReport namespaces = Sweep(*runfiles, "namespaces", {});
  if (!namespaces.cluster().emulated()) GTEST_SKIP() << "no network namespaces: " << namespaces.cluster().fallback_reason();
  // The rig really went through mpirun: the report names the hosts it reached.
  EXPECT_NE(rig.cluster().hosts().find("through mpirun"), std::string::npos) << rig.cluster().hosts();
  EXPECT_TRUE(namespaces.cluster().hosts().empty());

  std::map<std::pair<std::string, int>, proto::RunReport> by_run;
  for (const proto::RunReport& run : namespaces.runs()) by_run[{run.exchange(), run.nodes()}] = run;
  ASSERT_EQ(rig.runs_size(), 8);
  ASSERT_EQ(namespaces.runs_size(), 8);
  int compared = 0;
  for (const proto::RunReport& run : rig.runs()) {
    const std::string label = absl::StrCat(run.exchange(), " N=", run.nodes());
    ASSERT_TRUE(run.ok()) << label << " through mpirun: " << run.error();
    EXPECT_EQ(run.wrong(), 0) << label;
    const proto::RunReport& reference = by_run.at({run.exchange(), run.nodes()});
    ASSERT_TRUE(reference.ok()) << label << " in the namespaces: " << reference.error();
    EXPECT_EQ(reference.wrong(), 0) << label;
    // Bytes do not depend on what bound the run, so EMULATOR-BOUND runs are compared too (and said).
    if (run.emulator_bound() || reference.emulator_bound()) std::cout << label << ": EMULATOR-BOUND\n";
    const double link_ratio = run.link_bytes_per_step() / reference.link_bytes_per_step();
    std::cout << label << ": mpirun " << run.step_s() << " s/step, namespaces " << reference.step_s()
              << " s/step (ratio " << run.step_s() / reference.step_s() << "); busiest link "
              << run.link_bytes_per_step() << " vs " << reference.link_bytes_per_step() << " B/step (ratio "
              << link_ratio << "); payload " << run.bytes_sent_per_step() << " vs "
              << reference.bytes_sent_per_step() << " B/step\n";
    EXPECT_EQ(run.bytes_sent_per_step(), reference.bytes_sent_per_step()) << label;
    EXPECT_GT(reference.link_bytes_per_step(), 0) << label;
    EXPECT_LE(std::abs(link_ratio - 1), kLinkAgreement)
        << label << ": the busiest link carried " << run.link_bytes_per_step() << " B/step through mpirun against "
        << reference.link_bytes_per_step() << " B/step with the namespace placement";
    ++compared;
  }
  EXPECT_EQ(compared, 8);
}

}  // namespace
}  // namespace psring::bench
