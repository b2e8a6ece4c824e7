// Checks of generated text the bench's tests share: occurrence counts and SVG well-formedness.
#ifndef PSRING_TESTS_BENCH_SVG_CHECKS_H_
#define PSRING_TESTS_BENCH_SVG_CHECKS_H_

#include <string>
#include <vector>

namespace psring::bench {

inline int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

// Well-formed enough for any SVG viewer: every element opened is closed in order (self-closing ones aside),
// no stray '<' or '&' in text.
inline bool WellFormed(const std::string& xml, std::string* why) {
  std::vector<std::string> open;
  for (size_t i = 0; i < xml.size(); ++i) {
    if (xml[i] == '&') {
      const size_t semi = xml.find(';', i);
      if (semi == std::string::npos || semi - i > 6) {
        *why = "bare & at " + std::to_string(i);
        return false;
      }
      continue;
    }
    if (xml[i] != '<') continue;
    const size_t close = xml.find('>', i);
    if (close == std::string::npos) {
      *why = "unclosed tag at " + std::to_string(i);
      return false;
    }
    const std::string tag = xml.substr(i + 1, close - i - 1);
    if (tag.find('<') != std::string::npos) {
      *why = "'<' inside a tag at " + std::to_string(i);
      return false;
    }
    if (tag[0] == '?' || tag[0] == '!') {  // the XML declaration, comments
      i = close;
      continue;
    }
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) {
        *why = "</" + tag.substr(1) + "> closes " + (open.empty() ? "nothing" : open.back());
        return false;
      }
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find(' ')));
    }
    i = close;
  }
  if (!open.empty()) *why = "<" + open.back() + "> never closed";
  return open.empty();
}

}  // namespace psring::bench

#endif  // PSRING_TESTS_BENCH_SVG_CHECKS_H_
