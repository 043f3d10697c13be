// Single-segment glob matching.
#include "support/pattern_glob.hpp"

namespace shardc {
namespace {

// Whether `c` is in the class starting at glob[open] == '['; `end` receives
// the index after ']'. The class was validated at compile time.
bool class_contains(std::string_view glob, std::size_t open, char c, std::size_t& end) {
  std::size_t i = open + 1;
  bool negate = i < glob.size() && (glob[i] == '!' || glob[i] == '^');
  if (negate) ++i;
  bool found = false;
  bool first = true;
  while (i < glob.size() && (glob[i] != ']' || first)) {
    first = false;
    char lo = glob[i];
    char hi = lo;
    if (i + 2 < glob.size() && glob[i + 1] == '-' && glob[i + 2] != ']') {
      hi = glob[i + 2];
      i += 2;
    }
    if (c >= lo && c <= hi) found = true;
    ++i;
  }
  end = i + 1;
  return found != negate;
}

}  // namespace

bool glob_class_end(std::string_view glob, std::size_t open, std::size_t& end, std::string& error) {
  std::size_t i = open + 1;
  if (i < glob.size() && (glob[i] == '!' || glob[i] == '^')) ++i;
  bool first = true;
  while (i < glob.size() && (glob[i] != ']' || first)) {
    first = false;
    if (i + 2 < glob.size() && glob[i + 1] == '-' && glob[i + 2] != ']') {
      if (glob[i] > glob[i + 2]) {
        error = "inverted range `" + std::string(glob.substr(i, 3)) + "` in a character class";
        return false;
      }
      i += 2;
    }
    ++i;
  }
  if (i >= glob.size()) {
    error = "unclosed `[` in `" + std::string(glob) + "`";
    return false;
  }
  end = i + 1;
  return true;
}

bool glob_match(std::string_view glob, std::string_view text) {
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star_p = std::string_view::npos;
  std::size_t star_t = 0;
  while (t < text.size()) {
    if (p < glob.size()) {
      char g = glob[p];
      if (g == '*') {
        star_p = ++p;
        star_t = t;
        continue;
      }
      std::size_t next = p + 1;
      bool ok = g == '?' || (g == '[' ? class_contains(glob, p, text[t], next) : g == text[t]);
      if (ok) {
        p = next;
        ++t;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p;
    t = ++star_t;
  }
  while (p < glob.size() && glob[p] == '*') ++p;
  return p == glob.size();
}

}  // namespace shardc
