#include "trainer/timeline.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"

namespace psring::trainer {
namespace {

// A JSON string literal of `text` (quotes, backslashes and control characters escaped).
std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

// Doubles as JSON numbers (JSON has no NaN or infinity: those become 0, which only args can hold).
std::string JsonNumber(double value) {
  if (!(value == value) || value > 1.7e308 || value < -1.7e308) return "0";
  return absl::StrFormat("%.17g", value);
}

}  // namespace

Timeline::Timeline(int rank) : Timeline(rank, /*enabled=*/true) {}
Timeline::Timeline(int rank, bool enabled) : rank_(rank), enabled_(enabled) {}

Timeline* Timeline::Disabled() {
  static Timeline* const disabled = new Timeline(0, /*enabled=*/false);
  return disabled;
}

int64_t Timeline::NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Timeline::Record(absl::string_view name, int track, int64_t start_us, int64_t duration_us,
                      std::vector<SpanArg> args) {
  if (!enabled_) return;
  SpanRecord span{std::string(name), track, start_us, duration_us, std::move(args)};
  absl::MutexLock lock(&mu_);
  spans_.push_back(std::move(span));
}

void Timeline::NameTrack(int track, absl::string_view name) {
  if (!enabled_) return;
  absl::MutexLock lock(&mu_);
  for (auto& named : track_names_) {
    if (named.first == track) {
      named.second = std::string(name);
      return;
    }
  }
  track_names_.emplace_back(track, std::string(name));
}

Timeline::Span::Span(Timeline* timeline, absl::string_view name, int track)
    : timeline_(timeline),
      name_(timeline->enabled() ? std::string(name) : std::string()),
      track_(track),
      start_us_(timeline->enabled() ? NowMicros() : 0) {}

Timeline::Span::~Span() {
  if (!timeline_->enabled()) return;
  timeline_->Record(name_, track_, start_us_, NowMicros() - start_us_, std::move(args_));
}

void Timeline::Span::AddArg(absl::string_view key, double value) {
  if (timeline_->enabled()) args_.emplace_back(std::string(key), value);
}

std::vector<SpanRecord> Timeline::spans() const {
  absl::MutexLock lock(&mu_);
  return spans_;
}

std::string Timeline::ToJson() const {
  absl::MutexLock lock(&mu_);
  std::string out = "{\"traceEvents\":[";
  bool first = true;
  auto separate = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (const auto& [track, name] : track_names_) {
    separate();
    absl::StrAppend(&out, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", rank_, ",\"tid\":", track,
                    ",\"args\":{\"name\":", JsonString(name), "}}");
  }
  for (const SpanRecord& s : spans_) {
    separate();
    absl::StrAppend(&out, "{\"name\":", JsonString(s.name), ",\"ph\":\"X\",\"ts\":", s.start_us,
                    ",\"dur\":", s.duration_us, ",\"pid\":", rank_, ",\"tid\":", s.track, ",\"args\":{");
    for (size_t i = 0; i < s.args.size(); ++i) {
      absl::StrAppend(&out, i > 0 ? "," : "", JsonString(s.args[i].first), ":", JsonNumber(s.args[i].second));
    }
    out += "}}";
  }
  out += "],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

absl::Status Timeline::WriteJson(const std::string& path) const {
  return WriteFileAtomically(path, ToJson());
}

}  // namespace psring::trainer
