#include "bench/report/crossover_svg.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/model/model_file.h"
#include "bench/model/project.h"
#include "bench/report/plot.h"

namespace psring::bench::model {
namespace {

constexpr double kTitleHeight = 60, kLeft = 90, kBottom = 56, kLegendWidth = 230, kPlotWidth = 620,
                 kPlotHeight = 440;
constexpr char kTieColor[] = "#bbbbbb";

std::string AxisLabel(AxisQuantity q) {
  switch (q) {
    case AxisQuantity::kLinkRate: return "link rate per host and direction (log)";
    case AxisQuantity::kLatency: return "one-way latency (log)";
    case AxisQuantity::kNodes: return "workers N";
    case AxisQuantity::kStragglerFactor: return "one rank's compute factor (straggler)";
  }
  return "";
}

std::string TickText(AxisQuantity q, double v) {
  switch (q) {
    case AxisQuantity::kLinkRate: return FormatLinkRate(v);
    case AxisQuantity::kLatency: return FormatLatency(v);
    case AxisQuantity::kNodes: return absl::StrCat(std::lround(v));
    case AxisQuantity::kStragglerFactor: return absl::StrFormat("x%g", v);
  }
  return "";
}

// The fractional cell index of `v` (cell i is centred on values[i]), interpolated in log between neighbours
// and extrapolated half a cell past either end; NaN outside.
double IndexOf(const std::vector<double>& values, double v) {
  if (!(v > 0)) return NAN;
  const size_t n = values.size();
  if (n == 1) return std::abs(std::log(v / values[0])) < 1e-9 ? 0 : NAN;
  auto between = [&](size_t i) { return i + std::log(v / values[i]) / std::log(values[i + 1] / values[i]); };
  double index;
  if (v <= values[0]) {
    index = between(0);
  } else if (v >= values[n - 1]) {
    index = between(n - 2);
  } else {
    size_t i = std::upper_bound(values.begin(), values.end(), v) - values.begin() - 1;
    index = between(std::min(i, n - 2));
  }
  return index >= -0.5 - 1e-9 && index <= n - 0.5 + 1e-9 ? index : NAN;
}

// Tick values: 1-2-5 per decade for log quantities, the grid's own values (at most ~12) for nodes.
std::vector<double> Ticks(const MapAxis& axis) {
  std::vector<double> ticks;
  if (axis.quantity == AxisQuantity::kNodes || axis.quantity == AxisQuantity::kStragglerFactor) {
    const size_t every = (axis.values.size() + 11) / 12;
    for (size_t i = 0; i < axis.values.size(); i += every) ticks.push_back(axis.values[i]);
    return ticks;
  }
  const double lo = axis.values.front(), hi = axis.values.back();
  const int decades = static_cast<int>(std::ceil(std::log10(hi / lo)));
  const std::vector<double> mantissas = decades > 4 ? std::vector<double>{1} : std::vector<double>{1, 2, 5};
  for (double decade = std::pow(10, std::floor(std::log10(lo))); decade <= hi * 10; decade *= 10) {
    for (double m : mantissas) {
      if (std::isfinite(IndexOf(axis.values, m * decade))) ticks.push_back(m * decade);
    }
  }
  return ticks;
}

double Opacity(double margin) { return 0.3 + 0.7 * std::min(1.0, margin / 0.5); }

}  // namespace

std::string RenderCrossoverSvg(const CrossoverMap& map, const std::string& title, const std::string& subtitle,
                               const std::vector<MeasuredPoint>& measured) {
  const double width = kLeft + kPlotWidth + kLegendWidth, height = kTitleHeight + kPlotHeight + kBottom;
  const size_t nx = map.x.values.size(), ny = map.y.values.size();
  const double cw = kPlotWidth / std::max<size_t>(nx, 1), ch = kPlotHeight / std::max<size_t>(ny, 1);
  const double x0 = kLeft, y1 = kTitleHeight + kPlotHeight;  // bottom-left corner of the plot
  auto px = [&](double index) { return x0 + (index + 0.5) * cw; };
  auto py = [&](double index) { return y1 - (index + 0.5) * ch; };

  std::string svg = SvgDocumentStart(static_cast<int>(width), static_cast<int>(height),
                                     absl::StrCat("MODEL, not measured: ", title), subtitle);

  // Cells beyond the calibration (kExtrapolationMarkFactor) are hatched: a model run far from its data.
  svg += "<defs><pattern id=\"extrapolated\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#000\" "
         "stroke-opacity=\"0.35\" stroke-width=\"1.5\"/></pattern></defs>\n";
  svg += "<g class=\"cells\">\n";
  for (size_t iy = 0; iy < ny; ++iy) {
    for (size_t ix = 0; ix < nx; ++ix) {
      const CrossoverCell& cell = map.At(ix, iy);
      // Undetermined (the intervals overlap) is drawn like a tie: no winner claimed.
      const bool tie = cell.margin < kMapTieMargin || !cell.determined;
      const std::string name = TopologyName(map.topologies[cell.winner]);
      const std::string claim = !cell.determined ? "undetermined, point prediction " + name
                                : cell.margin < kMapTieMargin ? "tie, " + name
                                                              : name;
      absl::StrAppendFormat(
          &svg,
          "<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
          "fill-opacity=\"%.2f\"><title>%s, %s: %s by %.1f %% (%s-bound)</title></rect>\n",
          x0 + ix * cw, y1 - (iy + 1) * ch, cw + 0.3, ch + 0.3, tie ? kTieColor : PaletteColor(cell.winner),
          tie ? 1.0 : Opacity(cell.margin), XmlEscape(TickText(map.x.quantity, map.x.values[ix])),
          XmlEscape(TickText(map.y.quantity, map.y.values[iy])), claim, 100 * cell.margin,
          BoundName(cell.winner_bound));
      if (cell.extrapolation > kExtrapolationMarkFactor) {
        absl::StrAppendFormat(&svg,
                              "<rect class=\"extrapolated\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                              "fill=\"url(#extrapolated)\"><title>EXTRAPOLATED x%.0f</title></rect>\n",
                              x0 + ix * cw, y1 - (iy + 1) * ch, cw + 0.3, ch + 0.3, cell.extrapolation);
      }
      if (cell.incast) {
        absl::StrAppendFormat(&svg,
                              "<rect class=\"incast\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                              "fill=\"none\" stroke=\"#c00\" stroke-width=\"1.5\"><title>INCAST: the fastest "
                              "PS's window burst exceeds the port buffer</title></rect>\n",
                              x0 + ix * cw + 1, y1 - (iy + 1) * ch + 1, cw - 2, ch - 2);
      }
      if (cell.round_decides) {
        absl::StrAppendFormat(
            &svg,
            "<circle class=\"round\" cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"#000\">"
            "<title>ROUND: with PS window rounds of 0 another exchange is fastest (the window "
            "round decides this cell)</title></circle>\n",
            px(ix), py(iy), std::max(1.0, std::min(cw, ch) / 6));
      }
    }
  }
  svg += "</g>\n";
  absl::StrAppendFormat(&svg,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
                        x0, kTitleHeight, kPlotWidth, kPlotHeight);
  for (double t : Ticks(map.x)) {
    const double x = px(IndexOf(map.x.values, t));
    absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", x, y1,
                          x, y1 + 5);
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", x,
                          y1 + 18, XmlEscape(TickText(map.x.quantity, t)));
  }
  for (double t : Ticks(map.y)) {
    const double y = py(IndexOf(map.y.values, t));
    absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", x0 - 5,
                          y, x0, y);
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
                          x0 - 8, y + 4, XmlEscape(TickText(map.y.quantity, t)));
  }
  absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\">%s</text>\n",
                        x0 + kPlotWidth / 2, y1 + 42, XmlEscape(AxisLabel(map.x.quantity)));
  const double ly = kTitleHeight + kPlotHeight / 2;
  absl::StrAppendFormat(&svg,
                        "<text x=\"18\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\" "
                        "transform=\"rotate(-90 18 %.1f)\">%s</text>\n",
                        ly, ly, XmlEscape(AxisLabel(map.y.quantity)));

  svg += "<g class=\"measured\">\n";
  for (const MeasuredPoint& p : measured) {
    const double ix = IndexOf(map.x.values, p.x), iy = IndexOf(map.y.values, p.y);
    if (!std::isfinite(ix) || !std::isfinite(iy)) continue;
    const int color = static_cast<int>(std::find(map.topologies.begin(), map.topologies.end(), p.winner) -
                                       map.topologies.begin());
    absl::StrAppendFormat(&svg,
                          "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"%s\" stroke=\"black\" "
                          "stroke-width=\"1.5\"/>\n",
                          px(ix), py(iy), PaletteColor(color));
  }
  svg += "</g>\n";

  // Legend to the right of the map, one row each: exchanges, tie, measured point, how to read the shading.
  const double lx = x0 + kPlotWidth + 20;
  double row = kTitleHeight + 10;
  auto legend_text = [&](const std::string& text) {
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n", lx + 24, row + 11,
                          XmlEscape(text));
    row += 22;
  };
  absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" font-weight=\"bold\">predicted winner</text>\n",
                        lx, row + 11);
  row += 22;
  for (size_t i = 0; i < map.topologies.size(); ++i) {
    absl::StrAppendFormat(&svg, "<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"14\" fill=\"%s\"/>\n",
                          lx, row, PaletteColor(i));
    legend_text(TopologyName(map.topologies[i]));
  }
  absl::StrAppendFormat(&svg, "<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"14\" fill=\"%s\"/>\n",
                        lx, row, kTieColor);
  legend_text(absl::StrFormat("tie (within %.0f %%) or undetermined", 100 * kMapTieMargin));
  legend_text("(90 % intervals overlap)");
  absl::StrAppendFormat(&svg,
                        "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"white\" stroke=\"black\" stroke-width=\"1.5\"/>\n",
                        lx + 8, row + 7);
  legend_text("measured winner (a run)");
  legend_text("paler: smaller margin");
  legend_text("(full colour at >= 50 %)");
  absl::StrAppendFormat(&svg,
                        "<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"14\" "
                        "fill=\"url(#extrapolated)\" stroke=\"#999\"/>\n",
                        lx, row);
  legend_text(absl::StrFormat("hatched: > %.0fx outside calibration", kExtrapolationMarkFactor));
  if (std::any_of(map.cells.begin(), map.cells.end(), [](const CrossoverCell& c) { return c.incast; })) {
    absl::StrAppendFormat(&svg,
                          "<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"14\" "
                          "fill=\"none\" stroke=\"#c00\" stroke-width=\"1.5\"/>\n",
                          lx, row);
    legend_text("red outline: a PS fastest, but its");
    legend_text("incast exceeds the port buffer");
  }
  if (std::any_of(map.cells.begin(), map.cells.end(),
                  [](const CrossoverCell& c) { return c.round_decides; })) {
    absl::StrAppendFormat(&svg, "<circle class=\"legend\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#000\"/>\n",
                          lx + 8, row + 7);
    legend_text("dot: the PS window round decides");
    legend_text("(with d = 0 another is fastest)");
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace psring::bench::model
