#include "bench/report/table.h"

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace psring::bench {

Row MakeRow(size_t bytes, size_t count, double seconds, double bus_factor, int64_t wrong) {
  Row row;
  row.bytes = bytes;
  row.count = count;
  row.time_us = seconds * 1e6;
  row.algbw_gbs = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  row.busbw_gbs = row.algbw_gbs * bus_factor;
  row.wrong = wrong;
  return row;
}

Table::Table(std::ostream* out, std::vector<std::string> extra_columns)
    : out_(out), extra_columns_(std::move(extra_columns)) {}

void Table::Comment(const std::string& line) { *out_ << "# " << line << "\n" << std::flush; }

void Table::Header() {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "#%12s %12s %6s %6s %12s %12s %12s %7s", "size", "count", "type", "redop",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  *out_ << buf;
  for (const auto& c : extra_columns_) {
    std::snprintf(buf, sizeof(buf), " %12s", c.c_str());
    *out_ << buf;
  }
  *out_ << "\n" << std::flush;
}

void Table::Add(const Row& row) {
  rows_.push_back(row);
  char buf[256];
  std::snprintf(buf, sizeof(buf), " %12zu %12zu %6s %6s %12.2f %12.4f %12.4f %7lld", row.bytes, row.count,
                row.type.c_str(), row.redop.c_str(), row.time_us, row.algbw_gbs, row.busbw_gbs,
                static_cast<long long>(row.wrong));
  *out_ << buf;
  for (double v : row.extra) {
    std::snprintf(buf, sizeof(buf), " %12.3f", v);
    *out_ << buf;
  }
  if (row.emulator_bound) *out_ << "  EMULATOR-BOUND";
  if (!row.note.empty()) *out_ << "  " << row.note;
  *out_ << "\n" << std::flush;
}

int64_t Table::total_wrong() const {
  int64_t w = 0;
  for (const auto& r : rows_) w += r.wrong;
  return w;
}

double Table::avg_busbw() const {
  double s = 0;
  int n = 0;
  for (const auto& r : rows_) {
    if (r.emulator_bound) continue;
    s += r.busbw_gbs;
    ++n;
  }
  return n == 0 ? 0 : s / n;
}

void Table::Footer() {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "# Out of bounds values : %lld %s\n", static_cast<long long>(total_wrong()),
                total_wrong() == 0 ? "OK" : "FAILED");
  *out_ << buf;
  std::snprintf(buf, sizeof(buf), "# Avg bus bandwidth    : %.4f\n", avg_busbw());
  *out_ << buf;
  const auto bound = std::count_if(rows_.begin(), rows_.end(), [](const Row& r) { return r.emulator_bound; });
  if (bound > 0) {
    *out_ << "# EMULATOR-BOUND rows  : " << bound
          << " (the emulating box, not the network, bound them; not in fits, checks or the average)\n";
  }
  *out_ << std::flush;
}

std::string Table::ToJson() const {
  std::ostringstream js;
  js << "{\"rows\":[";
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    js << (i ? "," : "") << "{\"size\":" << r.bytes << ",\"count\":" << r.count << ",\"type\":\"" << r.type
       << "\",\"redop\":\"" << r.redop << "\",\"time_us\":" << r.time_us << ",\"algbw\":" << r.algbw_gbs
       << ",\"busbw\":" << r.busbw_gbs << ",\"wrong\":" << r.wrong
       << ",\"emulator_bound\":" << (r.emulator_bound ? "true" : "false");
    for (size_t c = 0; c < extra_columns_.size() && c < r.extra.size(); ++c) {
      js << ",\"" << extra_columns_[c] << "\":" << r.extra[c];
    }
    js << "}";
  }
  js << "],\"avg_busbw\":" << avg_busbw() << ",\"wrong\":" << total_wrong() << "}";
  return js.str();
}

CheckOutcome JudgeCheck(double value, double bound, bool at_most, double noise) {
  if (at_most ? value <= bound : value >= bound) return CheckOutcome::kPass;
  return bound != 0 && std::abs(value / bound - 1) <= noise ? CheckOutcome::kWithinNoise : CheckOutcome::kFail;
}

CheckOutcome Combine(std::initializer_list<CheckOutcome> outcomes) {
  CheckOutcome combined = CheckOutcome::kPass;
  for (CheckOutcome o : outcomes) {
    if (o == CheckOutcome::kFail) return CheckOutcome::kFail;
    if (o == CheckOutcome::kWithinNoise) combined = CheckOutcome::kWithinNoise;
  }
  return combined;
}

std::string CheckLine(const std::string& what, CheckOutcome outcome, double noise) {
  switch (outcome) {
    case CheckOutcome::kPass: return "# check " + what + ": PASS\n";
    case CheckOutcome::kFail: return "# check " + what + ": FAIL\n";
    case CheckOutcome::kWithinNoise: break;
  }
  char buffer[160];
  std::snprintf(buffer, sizeof(buffer), ": misses by less than the measured step-to-step noise %.1f %%: no verdict\n",
                100 * noise);
  return "# info " + what + buffer;
}

size_t ParseSize(const std::string& text) {
  if (text.empty()) return 0;
  size_t pos = 0;
  unsigned long long value = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    value = value * 10 + (text[pos] - '0');
    ++pos;
  }
  if (pos == 0) return 0;
  if (pos == text.size()) return value;
  if (pos + 1 != text.size() && !(pos + 2 == text.size() && (text[pos + 1] == 'B' || text[pos + 1] == 'b'))) {
    return 0;
  }
  switch (std::toupper(static_cast<unsigned char>(text[pos]))) {
    case 'K': return value << 10;
    case 'M': return value << 20;
    case 'G': return value << 30;
    case 'B': return value;
    default: return 0;
  }
}

std::vector<size_t> SizeSweep(size_t min_bytes, size_t max_bytes, int factor) {
  std::vector<size_t> sizes;
  if (factor < 2 || min_bytes == 0) return sizes;
  for (size_t s = min_bytes; s <= max_bytes; s *= factor) sizes.push_back(s);
  return sizes;
}

double ProcessCpuSeconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;  // cannot fail for RUSAGE_SELF
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

}  // namespace psring::bench
