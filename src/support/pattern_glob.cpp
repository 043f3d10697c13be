// Single-segment glob matching.
#include "support/pattern_glob.hpp"

namespace shardc {
namespace {

// Whether `c` is in the class starting at glob[open] == '['; `end` receives
// the index after ']'. The class was validated at compile time.
bool class_contains(std::string_view glob, std::size_t open, char ch, std::size_t& end) {
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
    if (ch >= lo && ch <= hi) found = true;
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
  std::size_t glob_pos = 0;
  std::size_t text_pos = 0;
  std::size_t star_p = std::string_view::npos;
  std::size_t star_t = 0;
  while (text_pos < text.size()) {
    if (glob_pos < glob.size()) {
      char glob_char = glob[glob_pos];
      if (glob_char == '*') {
        star_p = ++glob_pos;
        star_t = text_pos;
        continue;
      }
      std::size_t next = glob_pos + 1;
      bool ok = glob_char == '?' ||
                (glob_char == '[' ? class_contains(glob, glob_pos, text[text_pos], next)
                                  : glob_char == text[text_pos]);
      if (ok) {
        glob_pos = next;
        ++text_pos;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    glob_pos = star_p;
    text_pos = ++star_t;
  }
  while (glob_pos < glob.size() && glob[glob_pos] == '*') ++glob_pos;
  return glob_pos == glob.size();
}

}  // namespace shardc
