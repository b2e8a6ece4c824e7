#include "bench/report/plot.h"

#include <algorithm>
#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"
#include "tests/bench/svg_checks.h"

namespace psring::bench {
namespace {

Figure TwoPanels() {
  Figure figure;
  figure.title = "Step time & efficiency, S = 16 MiB, B = 100 Mbit/s";
  Panel time;
  time.title = "step time";
  time.x_label = "nodes N";
  time.y_label = "time per step (s)";
  time.x_scale = Scale::kLog2;
  time.y_scale = Scale::kLog10;
  time.series.push_back({"ring measured", PaletteColor(0), {{2, 1.4}, {4, 2.1}, {8, 2.4}}, Style::kMarkers});
  time.series.push_back({"ring model", PaletteColor(0), {{2, 1.4}, {1024, 2.8}}, Style::kDashedLine});
  time.series.push_back({"ps-1 measured", PaletteColor(1), {{1, 2.8}, {2, 5.6}, {0, 1}}, Style::kMarkers});
  Panel eff;
  eff.title = "scaling efficiency";
  eff.x_label = "nodes N";
  eff.y_label = "efficiency (%)";
  eff.x_scale = Scale::kLog2;
  eff.y_min = 0;
  eff.y_max = 100;
  eff.series.push_back({"ring measured", PaletteColor(0), {{2, 80}, {4, 70}}, Style::kMarkers});
  figure.panels = {time, eff};
  return figure;
}

TEST(PlotTest, WritesWellFormedSvgWithLabelsAndLegend) {
  const std::string svg = RenderSvg(TwoPanels());
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(Count(svg, "<g>"), Count(svg, "</g>"));
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
  // Title escaped, axis labels present.
  EXPECT_NE(svg.find("Step time &amp; efficiency, S = 16 MiB"), std::string::npos);
  EXPECT_NE(svg.find(">time per step (s)<"), std::string::npos);
  EXPECT_NE(svg.find(">efficiency (%)<"), std::string::npos);
  EXPECT_EQ(Count(svg, ">nodes N<"), 2);
  // Legend: three distinct entries (ring measured appears in both panels but once in the legend).
  EXPECT_EQ(Count(svg, ">ring measured<"), 1);
  EXPECT_EQ(Count(svg, ">ring model<"), 1);
  EXPECT_EQ(Count(svg, ">ps-1 measured<"), 1);
  // Markers: 3 + 2 valid ps-1 points (x = 0 skipped on the log axis) + 2 efficiency + 2 legend glyphs.
  EXPECT_EQ(Count(svg, "<circle"), 3 + 2 + 2 + 2);
  EXPECT_EQ(Count(svg, "stroke-dasharray"), 2);  // the model line and its legend glyph
  // Log2 x axis reaches 1024; fixed y axis reaches 100.
  EXPECT_NE(svg.find(">1024<"), std::string::npos);
  EXPECT_NE(svg.find(">100<"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

// Issue 21 item 7: the one-panel projection figure cut its title off and drew its eight legend labels over
// each other. Title and subtitle must fit the document, legend labels of one row must not overlap.
TEST(PlotTest, TitleAndLegendFitOnePanel) {
  Figure figure;
  figure.title = "PROJECTION (model, NOT measured): resnet50 on 25 Gbit/s links, 5 us per message";
  figure.subtitle = "the profile's own compute and gradient size; exchanges fitted on the emulated 100 Mbit/s links";
  Panel panel;
  panel.title = "Projected step time vs nodes";
  panel.x_scale = Scale::kLog2;
  for (const char* e : {"ring", "ps-1", "ps-colocated", "ps-dedicated"}) {
    for (const char* b : {"flat", "25 MB"}) {
      panel.series.push_back({absl::StrCat(e, " ", b, " projection"), PaletteColor(panel.series.size()),
                              {{1, 1}, {8, 2}}, Style::kLine});
    }
  }
  figure.panels = {panel};
  const std::string svg = RenderSvg(figure);
  std::string why;
  ASSERT_TRUE(WellFormed(svg, &why)) << why;
  const std::regex size_re("<svg [^>]*width=\"([0-9]+)\" height=\"([0-9]+)\"");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, size_re)) << svg;
  const double width = std::stod(m[1]), height = std::stod(m[2]);
  EXPECT_GE(width, TextWidth(figure.title, 18) + 20);
  EXPECT_GE(width, TextWidth(figure.subtitle, 12) + 20);
  // Legend labels: <text x=".." y=".." font-size="12">name projection</text>, grouped by row.
  const std::regex label_re("<text x=\"([0-9.]+)\" y=\"([0-9.]+)\" font-size=\"12\">([^<]*projection)</text>");
  std::map<double, std::vector<std::pair<double, std::string>>> rows;
  int labels = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), label_re); it != std::sregex_iterator(); ++it) {
    rows[std::stod((*it)[2])].push_back({std::stod((*it)[1]), (*it)[3]});
    ++labels;
  }
  EXPECT_EQ(labels, 8);
  for (auto& [y, row] : rows) {
    std::sort(row.begin(), row.end());
    for (size_t i = 0; i < row.size(); ++i) {
      EXPECT_LE(row[i].first + TextWidth(row[i].second, 12), width) << row[i].second;
      EXPECT_LE(y, height);
      if (i + 1 < row.size()) {
        EXPECT_GE(row[i + 1].first, row[i].first + TextWidth(row[i].second, 12)) << row[i].second << " overlaps";
      }
    }
  }
}

TEST(PlotTest, EmptyPanelStillRenders) {
  Figure figure;
  figure.title = "nothing";
  figure.panels.push_back(Panel{});
  const std::string svg = RenderSvg(figure);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(PlotTest, EscapesXml) { EXPECT_EQ(XmlEscape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;"); }

}  // namespace
}  // namespace psring::bench
