#include "bench/result_line.h"

#include <cctype>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace psring::bench {
namespace {

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<ResultLine> Object() {
    ResultLine result;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    SkipSpace();
    if (Consume('}')) return Finish(result);
    while (true) {
      SkipSpace();
      absl::StatusOr<std::string> key = String();
      if (!key.ok()) return key.status();
      SkipSpace();
      if (!Consume(':')) return Error("expected ':'");
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '"') {
        absl::StatusOr<std::string> value = String();
        if (!value.ok()) return value.status();
        result.strings[*key] = *value;
      } else if (ConsumeWord("true")) {
        result.numbers[*key] = 1;
      } else if (ConsumeWord("false")) {
        result.numbers[*key] = 0;
      } else if (ConsumeWord("null")) {
        // Absent value: leave the key out.
      } else {
        size_t end = pos_;
        while (end < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[end])) ||
                                      std::strchr("+-.eE", text_[end]) != nullptr)) {
          ++end;
        }
        double value = 0;
        if (end == pos_ || !absl::SimpleAtod(text_.substr(pos_, end - pos_), &value)) {
          return Error("expected a string, number, true, false or null");
        }
        result.numbers[*key] = value;
        pos_ = end;
      }
      SkipSpace();
      if (Consume('}')) return Finish(result);
      if (!Consume(',')) return Error("expected ',' or '}'");
    }
  }

 private:
  absl::StatusOr<ResultLine> Finish(const ResultLine& result) {
    SkipSpace();
    if (pos_ != text_.size()) return Error("trailing characters");
    return result;
  }

  absl::StatusOr<std::string> String() {
    if (!Consume('"')) return Error("expected '\"'");
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\') {
        if (pos_ >= text_.size()) break;
        char e = text_[pos_++];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'u':  // Non-ASCII escapes are not expected in results; keep them verbatim.
            out += "\\u";
            break;
          default: out += e;
        }
      } else {
        out += c;
      }
    }
    if (!Consume('"')) return Error("unterminated string");
    return out;
  }

  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool ConsumeWord(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("bad result JSON at offset ", pos_, ": ", what, " in '",
                                                   text_.substr(0, 300), "'"));
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

double ResultLine::Number(const std::string& key, double fallback) const {
  auto it = numbers.find(key);
  return it == numbers.end() ? fallback : it->second;
}

std::string ResultLine::String(const std::string& key) const {
  auto it = strings.find(key);
  return it == strings.end() ? "" : it->second;
}

absl::StatusOr<ResultLine> ParseFlatJson(absl::string_view json) { return Parser(json).Object(); }

absl::StatusOr<std::vector<ResultLine>> ExtractResults(absl::string_view output) {
  std::vector<ResultLine> results;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, kResultPrefix)) continue;
    absl::StatusOr<ResultLine> parsed = ParseFlatJson(line);
    if (!parsed.ok()) return parsed.status();
    results.push_back(*std::move(parsed));
  }
  return results;
}

}  // namespace psring::bench
