#include "trainer/workload.h"

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace psring::trainer {
namespace {

// torchvision's counts (and BERT-base's, 109,482,240 with its pooler): the presets are the real models.
TEST(WorkloadTest, PresetsHaveTheRealModelsParameterCounts) {
  const std::pair<const char*, int64_t> expected[] = {
      {"resnet50", 25557032}, {"vgg16", 138357544}, {"bert_base", 109482240}, {"mlp", 269322}};
  for (const auto& [name, params] : expected) {
    absl::StatusOr<proto::Workload> w = LoadWorkload(name);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(WorkloadParameters(*w), params) << name;
    EXPECT_EQ(w->name(), name);
    EXPECT_FALSE(w->source().empty()) << name;
    double step_ms = 0;
    for (const proto::WorkloadLayer& l : w->layers()) step_ms += l.forward_ms() + l.backward_ms();
    EXPECT_NEAR(step_ms, w->step_ms(), 1e-3 * w->step_ms()) << name;
  }
  EXPECT_EQ(PresetWorkloadNames().size(), 4u);
}

TEST(WorkloadTest, ResNetLayersAreInForwardOrder) {
  absl::StatusOr<proto::Workload> w = LoadWorkload("resnet50");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->layers(0).name(), "conv1");
  EXPECT_EQ(w->layers(0).params(), 64 * 3 * 7 * 7);
  EXPECT_EQ(w->layers(w->layers_size() - 1).name(), "fc");
  EXPECT_EQ(w->layers(w->layers_size() - 1).params(), 2048 * 1000 + 1000);
}

std::string ErrorOf(const std::string& json) {
  absl::StatusOr<proto::Workload> w = ParseWorkload(json, "test.json");
  EXPECT_FALSE(w.ok()) << json;
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(w.status().message());
}

TEST(WorkloadTest, BadProfilesNameTheFieldAndLayer) {
  EXPECT_TRUE(absl::StrContains(ErrorOf("{\"name\": \"x\"}"), "no layers"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("not json"), "not a profile"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("{\"layers\": [{\"name\": \"a\", \"params\": 1, \"forward_ms\": 1, "
                                        "\"backward_ms\": 1, \"colour\": 3}]}"),
                                "not a profile"));
  EXPECT_TRUE(
      absl::StrContains(ErrorOf("{\"layers\": [{\"params\": 1, \"forward_ms\": 1, \"backward_ms\": 1}]}"),
                        "layer 0 has no name"));
  EXPECT_TRUE(
      absl::StrContains(ErrorOf("{\"layers\": [{\"name\": \"fc\", \"forward_ms\": 1, \"backward_ms\": 1}]}"),
                        "'fc' has no params"));
  EXPECT_TRUE(absl::StrContains(
      ErrorOf("{\"layers\": [{\"name\": \"fc\", \"params\": -4, \"forward_ms\": 1, \"backward_ms\": 1}]}"),
      "'fc' has params = -4"));
  EXPECT_TRUE(
      absl::StrContains(ErrorOf("{\"layers\": [{\"name\": \"fc\", \"params\": 4, \"backward_ms\": 1}]}"),
                        "'fc' has no forward_ms"));
  EXPECT_TRUE(absl::StrContains(
      ErrorOf("{\"layers\": [{\"name\": \"fc\", \"params\": 4, \"forward_ms\": 1, \"backward_ms\": -2}]}"),
      "'fc' has backward_ms = -2"));
  EXPECT_TRUE(
      absl::StrContains(ErrorOf("{\"layers\": [{\"name\": \"a\", \"params\": 17179869184, "
                                "\"forward_ms\": 1, \"backward_ms\": 1}, {\"name\": \"b\", \"params\": 1, "
                                "\"forward_ms\": 1, \"backward_ms\": 1}]}"),
                        "parameters in all"));
  const std::string layer = "[{\"name\": \"fc\", \"params\": 4, \"forward_ms\": 1, \"backward_ms\": 1}]";
  EXPECT_TRUE(absl::StrContains(ErrorOf("{\"batch_size\": 0, \"layers\": " + layer + "}"), "batch_size = 0"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("{\"step_ms\": -3, \"layers\": " + layer + "}"), "step_ms = -3"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("{\"layers\": [{\"name\": \"fc\", \"params\": 0, "
                                        "\"forward_ms\": 1, \"backward_ms\": 1}]}"),
                                "'fc' has params = 0"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("{\"layers\": [{\"name\": \"fc\", \"params\": 4, "
                                        "\"forward_ms\": \"NaN\", \"backward_ms\": 1}]}"),
                                "'fc' has forward_ms = nan"));
}

TEST(WorkloadTest, LoadsAProfileFileAndNamesUnknownOnes) {
  const std::string path = testing::FreshTempPath("my_model.json");
  std::ofstream(path) << "{\"name\": \"mine\", \"layers\": [{\"name\": \"fc\", \"params\": 10, "
                         "\"forward_ms\": 0.5, \"backward_ms\": 1}]}";
  absl::StatusOr<proto::Workload> w = LoadWorkload(path);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->name(), "mine");
  EXPECT_EQ(WorkloadParameters(*w), 10);
  absl::StatusOr<proto::Workload> missing = LoadWorkload("resnet51");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "resnet50")) << missing.status();
}

}  // namespace
}  // namespace psring::trainer
