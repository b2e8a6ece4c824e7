#include "bench/report/gantt.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/report/plot.h"

namespace psring::bench {
namespace {

constexpr int kWidth = 1100;
constexpr int kLabelWidth = 230;
constexpr int kMarginRight = 30;
constexpr int kRowHeight = 22;
constexpr int kTitleHeight = 40;
constexpr int kSectionHeader = 26;
constexpr int kAxisHeight = 34;
constexpr int kLegendRowHeight = 20;
constexpr int kLegendColumns = 5;

// A row: one thread of one rank.
using TrackKey = std::pair<int, int>;  // pid, tid

double NiceStep(double range) {
  const double raw = range / 8;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

// Kinds in first-seen order over all sections, so one kind has one colour in the whole figure.
std::vector<std::string> Kinds(const std::vector<GanttSection>& sections) {
  std::vector<std::string> kinds;
  for (const GanttSection& section : sections) {
    for (const TraceSpan& span : section.spans) {
      const std::string kind = SpanKind(span);
      if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
    }
  }
  return kinds;
}

std::vector<std::pair<TrackKey, std::string>> Tracks(const GanttSection& section) {
  std::map<TrackKey, std::string> tracks;
  for (const TraceSpan& span : section.spans) tracks.emplace(TrackKey{span.pid, span.tid}, span.track);
  return {tracks.begin(), tracks.end()};
}

int SectionHeight(const GanttSection& section) {
  return kSectionHeader + static_cast<int>(Tracks(section).size()) * kRowHeight + kAxisHeight;
}

void DrawSection(const GanttSection& section, const std::vector<std::string>& kinds, int top,
                 std::string* svg) {
  const auto tracks = Tracks(section);
  double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
  for (const TraceSpan& span : section.spans) {
    t0 = std::min(t0, span.start_us);
    t1 = std::max(t1, span.end_us());
  }
  if (section.spans.empty()) t0 = t1 = 0;
  const double range_ms = std::max((t1 - t0) / 1e3, 1e-3);
  const double x0 = kLabelWidth, x1 = kWidth - kMarginRight;
  auto px = [&](double us) { return x0 + (us - t0) / 1e3 / range_ms * (x1 - x0); };
  absl::StrAppendFormat(svg, "<text x=\"10\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">%s</text>\n",
                        top + 18, XmlEscape(section.label));
  const int rows_top = top + kSectionHeader;
  std::map<TrackKey, int> row_of;
  for (size_t i = 0; i < tracks.size(); ++i) {
    const int y = rows_top + static_cast<int>(i) * kRowHeight;
    row_of[tracks[i].first] = static_cast<int>(i);
    absl::StrAppendFormat(svg,
                          "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n"
                          "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" text-anchor=\"end\">%s</text>\n",
                          x0, y + kRowHeight, x1, y + kRowHeight, x0 - 8, y + 15,
                          XmlEscape(absl::StrCat("rank ", tracks[i].first.first, " · ", tracks[i].second)));
  }
  for (const TraceSpan& span : section.spans) {
    const int y = rows_top + row_of[{span.pid, span.tid}] * kRowHeight + 3;
    const double left = px(span.start_us);
    const double width = std::max(0.5, px(span.end_us()) - left);
    const int color = static_cast<int>(std::find(kinds.begin(), kinds.end(), SpanKind(span)) - kinds.begin());
    absl::StrAppendFormat(svg,
                          "<rect class=\"span\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
                          "stroke=\"white\" stroke-width=\"0.5\"><title>%s %.3f ms</title></rect>\n",
                          left, y, width, kRowHeight - 6, PaletteColor(color), XmlEscape(span.name),
                          span.duration_us / 1e3);
  }
  // Time axis under the rows.
  const int axis_y = rows_top + static_cast<int>(tracks.size()) * kRowHeight + 4;
  absl::StrAppendFormat(svg, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>\n", x0,
                        axis_y, x1, axis_y);
  const double step = NiceStep(range_ms);
  for (double ms = 0; ms <= range_ms + step * 1e-6; ms += step) {
    const double x = x0 + ms / range_ms * (x1 - x0);
    absl::StrAppendFormat(svg,
                          "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>"
                          "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
                          x, axis_y, x, axis_y + 4, x, axis_y + 16, ms);
  }
  absl::StrAppendFormat(svg, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">ms</text>\n", x1,
                        axis_y + 28);
}

}  // namespace

std::string SpanKind(const TraceSpan& span) {
  if (!span.category.empty()) return span.category;
  return span.name.substr(0, span.name.find_first_of(" :[/"));
}

std::string RenderGantt(const std::string& title, const std::vector<GanttSection>& sections) {
  const std::vector<std::string> kinds = Kinds(sections);
  const int legend_rows = (static_cast<int>(kinds.size()) + kLegendColumns - 1) / kLegendColumns;
  int height = kTitleHeight + legend_rows * kLegendRowHeight + 10;
  for (const GanttSection& section : sections) height += SectionHeight(section);
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%d\" y=\"26\" font-size=\"17\" text-anchor=\"middle\">%s</text>\n",
      kWidth, height, kWidth, height, kWidth / 2, XmlEscape(title));
  int top = kTitleHeight;
  for (size_t i = 0; i < kinds.size(); ++i) {
    const int x = 20 + static_cast<int>(i % kLegendColumns) * ((kWidth - 40) / kLegendColumns);
    const int y = top + static_cast<int>(i / kLegendColumns) * kLegendRowHeight;
    absl::StrAppendFormat(&svg,
                          "<rect class=\"legend\" x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"%s\"/>"
                          "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>\n",
                          x, y, PaletteColor(static_cast<int>(i)), x + 20, y + 11, XmlEscape(kinds[i]));
  }
  top += legend_rows * kLegendRowHeight + 10;
  for (const GanttSection& section : sections) {
    DrawSection(section, kinds, top, &svg);
    top += SectionHeight(section);
  }
  svg += "</svg>\n";
  return svg;
}

std::vector<TraceSpan> OneStep(const std::vector<TraceSpan>& spans, int index) {
  if (spans.empty()) return {};
  int first_pid = spans.front().pid;
  for (const TraceSpan& span : spans) first_pid = std::min(first_pid, span.pid);
  std::vector<std::pair<double, double>> steps;  // [start, end) per step of rank 0
  std::map<int, std::pair<double, double>> by_arg;
  for (const TraceSpan& span : spans) {
    if (span.pid != first_pid || span.step < 0) continue;
    auto [it, fresh] = by_arg.emplace(span.step, std::make_pair(span.start_us, span.end_us()));
    if (!fresh)
      it->second = {std::min(it->second.first, span.start_us), std::max(it->second.second, span.end_us())};
  }
  // A step's forward pass may carry no step argument: start the window at the last forward span of rank 0
  // since the previous step's window began.
  std::vector<double> forwards;
  for (const TraceSpan& span : spans) {
    if (span.pid == first_pid && SpanKind(span) == "forward") forwards.push_back(span.start_us);
  }
  std::sort(forwards.begin(), forwards.end());
  double previous_begin = -std::numeric_limits<double>::infinity();
  for (auto [step, window] : by_arg) {
    auto after = std::upper_bound(forwards.begin(), forwards.end(), window.first);
    const double own_begin = window.first;
    if (after != forwards.begin() && *(after - 1) > previous_begin) window.first = *(after - 1);
    previous_begin = own_begin;
    steps.push_back(window);
  }
  for (const TraceSpan& span : spans) {
    if (by_arg.empty() && span.pid == first_pid && span.name == "step")
      steps.push_back({span.start_us, span.end_us()});
  }
  if (steps.empty()) {
    std::vector<double> starts;
    for (const TraceSpan& span : spans) {
      if (span.pid == first_pid && span.name == "forward") starts.push_back(span.start_us);
    }
    std::sort(starts.begin(), starts.end());
    double last_end = 0;
    for (const TraceSpan& span : spans) last_end = std::max(last_end, span.end_us());
    for (size_t i = 0; i < starts.size(); ++i) {
      steps.push_back({starts[i], i + 1 < starts.size() ? starts[i + 1] : last_end});
    }
  }
  if (steps.empty()) return spans;
  std::sort(steps.begin(), steps.end());
  const auto [begin, end] = steps[std::clamp(index, 0, static_cast<int>(steps.size()) - 1)];
  std::vector<TraceSpan> out;
  for (TraceSpan span : spans) {
    if (span.end_us() <= begin || span.start_us >= end) continue;
    const double clipped_start = std::max(span.start_us, begin);
    span.duration_us = std::min(span.end_us(), end) - clipped_start;
    span.start_us = clipped_start;
    out.push_back(std::move(span));
  }
  return out;
}

}  // namespace psring::bench
