// Line/scatter charts as a standalone SVG document (no plotting library): panels side by side, each with
// its own axes (linear, log2 or log10), labelled ticks, a legend, and a title over the figure.
//
//   Figure figure;
//   figure.title = "Step time, S = 16 MiB, B = 100 Mbit/s";
//   Panel& panel = figure.panels.emplace_back();
//   panel.x_label = "nodes N"; panel.y_label = "step time (s)"; panel.x_scale = Scale::kLog2;
//   panel.series.push_back({"ring measured", "#1f77b4", {{2, 0.3}, {4, 0.5}}, Style::kMarkers});
//   std::string svg = RenderSvg(figure);
//
// Points with non-positive coordinates on a log axis are skipped. Thread-safety: pure functions.
#ifndef PSRING_BENCH_PLOT_H_
#define PSRING_BENCH_PLOT_H_

#include <string>
#include <utility>
#include <vector>

namespace psring::bench {

enum class Scale { kLinear, kLog2, kLog10 };
// kHollowMarkers: measured points the figure shows but does not vouch for (EMULATOR-BOUND runs).
enum class Style { kMarkers, kHollowMarkers, kLine, kDashedLine };

struct Series {
  std::string name;   // legend text ("" keeps it out of the legend)
  std::string color;  // any SVG colour, e.g. "#1f77b4"
  std::vector<std::pair<double, double>> points;
  Style style = Style::kLine;
};

struct Panel {
  std::string title;
  std::string x_label;
  std::string y_label;
  Scale x_scale = Scale::kLinear;
  Scale y_scale = Scale::kLinear;
  // Fixed y range when y_max > y_min (e.g. 0..100 %); otherwise from the data.
  double y_min = 0;
  double y_max = 0;
  std::vector<Series> series;
};

struct Figure {
  std::string title;
  std::string subtitle;
  std::vector<Panel> panels;
  int panel_width = 560;
  int panel_height = 420;
};

std::string RenderSvg(const Figure& figure);

// A distinct colour per index (a colour-blind-safe palette), cycling.
std::string PaletteColor(int index);

// An estimate of how wide `text` is drawn at `font_size` px (layout of titles and legends; no font metrics).
double TextWidth(const std::string& text, double font_size);

// The opening of an SVG document of this size on white, with the title (and the subtitle when not empty)
// centred at the top, in the style of RenderSvg; the caller appends elements and "</svg>\n".
std::string SvgDocumentStart(int width, int height, const std::string& title, const std::string& subtitle);

// Escapes &, <, >, " for SVG text.
std::string XmlEscape(const std::string& text);

}  // namespace psring::bench

#endif  // PSRING_BENCH_PLOT_H_
