#include "bench/report/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psring::bench {
namespace {

constexpr int kTitleHeight = 56;
constexpr int kLegendRowHeight = 22;
constexpr int kLegendColumns = 4;  // at most
constexpr double kLegendSwatch = 36 + 16;  // the marker or line before a label, and the gap after it
constexpr double kMarginLeft = 80, kMarginRight = 20, kMarginTop = 36, kMarginBottom = 56;

bool Valid(Scale scale, double v) { return std::isfinite(v) && (scale == Scale::kLinear || v > 0); }

double Transform(Scale scale, double v) {
  switch (scale) {
    case Scale::kLinear: return v;
    case Scale::kLog2: return std::log2(v);
    case Scale::kLog10: return std::log10(v);
  }
  return v;
}

double Untransform(Scale scale, double t) {
  switch (scale) {
    case Scale::kLinear: return t;
    case Scale::kLog2: return std::exp2(t);
    case Scale::kLog10: return std::pow(10.0, t);
  }
  return t;
}

std::string FormatTick(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 1e5 || a < 1e-3) return absl::StrFormat("%.0e", v);
  return absl::StrFormat("%g", v);
}

// An axis in transformed units: [lo, hi] and the tick positions.
struct Axis {
  Scale scale = Scale::kLinear;
  double lo = 0, hi = 1;
  std::vector<double> ticks;  // transformed
};

Axis MakeAxis(Scale scale, double lo, double hi, bool fixed) {
  Axis axis;
  axis.scale = scale;
  if (!(lo <= hi)) lo = hi = (scale == Scale::kLinear ? 0 : 1);
  double tlo = Transform(scale, lo), thi = Transform(scale, hi);
  if (scale == Scale::kLinear) {
    if (thi - tlo < 1e-12) {
      tlo -= 0.5 * std::max(1.0, std::abs(tlo));
      thi += 0.5 * std::max(1.0, std::abs(thi));
      if (lo >= 0 && tlo < 0) tlo = 0;
    }
    const double raw = (thi - tlo) / 5;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
      step = m * mag;
      if (step >= raw) break;
    }
    if (!fixed) {
      tlo = std::floor(tlo / step) * step;
      thi = std::ceil(thi / step) * step;
    }
    for (double t = tlo; t <= thi + step * 1e-6; t += step) axis.ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  } else {
    tlo = std::floor(tlo + 1e-9);
    thi = std::ceil(thi - 1e-9);
    if (thi <= tlo) thi = tlo + 1;
    const int every = std::max(1, static_cast<int>(std::ceil((thi - tlo) / 11)));
    for (double t = tlo; t <= thi + 1e-9; t += every) axis.ticks.push_back(t);
  }
  axis.lo = tlo;
  axis.hi = thi;
  return axis;
}

std::string Dash(Style style) { return style == Style::kDashedLine ? " stroke-dasharray=\"7,5\"" : ""; }

}  // namespace

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string PaletteColor(int index) {
  static const char* kColors[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                  "#e69f00", "#56b4e9", "#000000", "#f0e442"};
  return kColors[index % 8];
}

double TextWidth(const std::string& text, double font_size) {
  // DejaVu Sans averages about 0.6 em per character over digits, lower case and spaces; wide enough for the
  // labels this code writes (no font metrics in a header-only SVG writer).
  return 0.6 * font_size * static_cast<double>(text.size());
}

std::string SvgDocumentStart(int width, int height, const std::string& title, const std::string& subtitle) {
  std::string svg = absl::StrFormat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
      "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
      width, height, width, height, width, height);
  absl::StrAppendFormat(&svg, "<text x=\"%d\" y=\"24\" font-size=\"18\" text-anchor=\"middle\">%s</text>\n",
                        width / 2, XmlEscape(title));
  if (!subtitle.empty()) {
    absl::StrAppendFormat(&svg,
                          "<text x=\"%d\" y=\"44\" font-size=\"12\" fill=\"#444\" text-anchor=\"middle\">%s</text>\n",
                          width / 2, XmlEscape(subtitle));
  }
  return svg;
}

std::string RenderSvg(const Figure& figure) {
  // Legend entries: one per distinct (name, colour, style), in order of appearance.
  std::vector<const Series*> legend;
  std::set<std::string> seen;
  for (const Panel& panel : figure.panels) {
    for (const Series& s : panel.series) {
      if (s.name.empty()) continue;
      std::string key = absl::StrCat(s.name, "|", s.color, "|", static_cast<int>(s.style));
      if (seen.insert(key).second) legend.push_back(&s);
    }
  }
  // The document is as wide as the panels, or as the title or subtitle if they are wider (the panels are
  // then centred); the legend takes as many columns as its longest label leaves room for.
  const int panels = std::max<int>(1, figure.panels.size());
  const int panels_width = panels * figure.panel_width;
  const int width = static_cast<int>(std::ceil(std::max({static_cast<double>(panels_width),
                                                         TextWidth(figure.title, 18) + 40,
                                                         TextWidth(figure.subtitle, 12) + 40})));
  double label_width = 0;
  for (const Series* s : legend) label_width = std::max(label_width, TextWidth(s->name, 12));
  const double column_width = label_width + kLegendSwatch;
  const int columns = std::clamp(static_cast<int>((width - 20) / column_width), 1,
                                 std::max(1, std::min<int>(kLegendColumns, legend.size())));
  const int legend_rows = (static_cast<int>(legend.size()) + columns - 1) / columns;
  const int height = kTitleHeight + figure.panel_height + legend_rows * kLegendRowHeight + 12;

  std::string svg = SvgDocumentStart(width, height, figure.title, figure.subtitle);

  const double panels_left = (width - panels_width) / 2.0;
  for (size_t p = 0; p < figure.panels.size(); ++p) {
    const Panel& panel = figure.panels[p];
    const double ox = panels_left + p * figure.panel_width, oy = kTitleHeight;
    const double x0 = ox + kMarginLeft, x1 = ox + figure.panel_width - kMarginRight;
    const double y0 = oy + kMarginTop, y1 = oy + figure.panel_height - kMarginBottom;

    double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
    for (const Series& s : panel.series) {
      for (auto [x, y] : s.points) {
        if (!Valid(panel.x_scale, x) || !Valid(panel.y_scale, y)) continue;
        xmin = std::min(xmin, x);
        xmax = std::max(xmax, x);
        ymin = std::min(ymin, y);
        ymax = std::max(ymax, y);
      }
    }
    const bool fixed_y = panel.y_max > panel.y_min;
    if (fixed_y) {
      ymin = panel.y_min;
      ymax = panel.y_max;
    }
    if (panel.y_scale == Scale::kLinear && !fixed_y && ymin > 0) ymin = 0;
    const Axis xa = MakeAxis(panel.x_scale, xmin, xmax, false);
    const Axis ya = MakeAxis(panel.y_scale, ymin, ymax, fixed_y);
    auto px = [&](double x) { return x0 + (Transform(xa.scale, x) - xa.lo) / (xa.hi - xa.lo) * (x1 - x0); };
    auto py = [&](double y) {
      double t = std::clamp(Transform(ya.scale, y), ya.lo, ya.hi);
      return y1 - (t - ya.lo) / (ya.hi - ya.lo) * (y1 - y0);
    };

    absl::StrAppendFormat(&svg, "<g>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" text-anchor=\"middle\">%s</text>\n",
                          (x0 + x1) / 2, oy + 22, XmlEscape(panel.title));
    // Grid and tick labels.
    for (double t : xa.ticks) {
      const double x = x0 + (t - xa.lo) / (xa.hi - xa.lo) * (x1 - x0);
      absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, y0,
                            x, y1);
      absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n",
                            x, y1 + 16, FormatTick(Untransform(xa.scale, t)));
    }
    for (double t : ya.ticks) {
      const double y = y1 - (t - ya.lo) / (ya.hi - ya.lo) * (y1 - y0);
      absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, y,
                            x1, y);
      absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
                            x0 - 6, y + 4, FormatTick(Untransform(ya.scale, t)));
    }
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                          "stroke=\"#333\"/>\n",
                          x0, y0, x1 - x0, y1 - y0);
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\">%s</text>\n",
                          (x0 + x1) / 2, y1 + 40, XmlEscape(panel.x_label));
    absl::StrAppendFormat(&svg,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\" "
                          "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
                          ox + 22, (y0 + y1) / 2, ox + 22, (y0 + y1) / 2, XmlEscape(panel.y_label));
    // Data.
    for (const Series& s : panel.series) {
      std::vector<std::pair<double, double>> pts;
      for (auto [x, y] : s.points) {
        if (Valid(panel.x_scale, x) && Valid(panel.y_scale, y)) pts.push_back({px(x), py(y)});
      }
      if (pts.empty()) continue;
      if (s.style == Style::kMarkers || s.style == Style::kHollowMarkers) {
        const bool hollow = s.style == Style::kHollowMarkers;
        for (auto [x, y] : pts) {
          absl::StrAppendFormat(&svg,
                                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\" stroke=\"%s\" "
                                "stroke-width=\"%d\"/>\n",
                                x, y, hollow ? "white" : s.color, hollow ? s.color : "white", hollow ? 2 : 1);
        }
      } else {
        std::string path;
        for (auto [x, y] : pts) absl::StrAppendFormat(&path, "%s%.1f,%.1f", path.empty() ? "" : " ", x, y);
        absl::StrAppendFormat(&svg,
                              "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", path,
                              s.color, Dash(s.style));
      }
    }
    svg += "</g>\n";
  }

  // Legend under the panels.
  const double legend_top = kTitleHeight + figure.panel_height + 4;
  const double legend_left = std::max(20.0, (width - columns * column_width) / 2);
  for (size_t i = 0; i < legend.size(); ++i) {
    const Series& s = *legend[i];
    const double x = legend_left + (i % columns) * column_width;
    const double y = legend_top + (i / columns) * kLegendRowHeight + 10;
    if (s.style == Style::kMarkers) {
      absl::StrAppendFormat(&svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"/>\n", x + 14, y, s.color);
    } else if (s.style == Style::kHollowMarkers) {
      absl::StrAppendFormat(&svg,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"white\" stroke=\"%s\" "
                            "stroke-width=\"2\"/>\n",
                            x + 14, y, s.color);
    } else {
      absl::StrAppendFormat(&svg,
                            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                            "stroke-width=\"2\"%s/>\n",
                            x, y, x + 28, y, s.color, Dash(s.style));
    }
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n", x + 36, y + 4,
                          XmlEscape(s.name));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace psring::bench
