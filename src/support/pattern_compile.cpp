// Pattern compilation and `{name}` substitution (contract §4 "Patterns", §5.8).
#include <algorithm>
#include <cstddef>

#include "support/limits.hpp"
#include "support/pattern.hpp"
#include "support/pattern_glob.hpp"

namespace shardc {
namespace {

using limits::kMaxCaptureNames;
using limits::kMaxPatternBytes;
constexpr std::size_t kMaxSegments = limits::kMaxPatternSegments;

bool is_identifier(std::string_view text) {
  if (text.empty()) return false;
  auto ident_char = [](char ch, bool first) {
    bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
    return alpha || (!first && ch >= '0' && ch <= '9');
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!ident_char(text[i], i == 0)) return false;
  }
  return true;
}

std::vector<std::string_view> split_segments(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = text.find('.', start);
    if (dot == std::string_view::npos) {
      out.push_back(text.substr(start));
      return out;
    }
    out.push_back(text.substr(start, dot - start));
    start = dot + 1;
  }
}

// Validates a glob segment (no `**`, balanced classes, no braces).
bool check_glob(std::string_view seg, std::string& error) {
  if (seg.find("**") != std::string_view::npos) {
    error = "`**` must be a whole segment (`a.**.b`), not part of `" + std::string(seg) + "`";
    return false;
  }
  if (seg.find_first_of("{}") != std::string_view::npos) {
    error =
        "`{name}` must be a whole segment or end one after a literal prefix (`weight{E}`), "
        "not part of `" +
        std::string(seg) + "`";
    return false;
  }
  for (std::size_t i = 0; i < seg.size(); ++i) {
    if (seg[i] != '[') continue;
    std::size_t end = 0;
    if (!glob_class_end(seg, i, end, error)) return false;
    i = end - 1;
  }
  return true;
}

// Where the `{` of a capture segment is: 0 for `{name}`, the prefix length
// for `literal{name}` (letters, digits, `_`, `-` before it); npos otherwise.
std::size_t capture_start(std::string_view part) {
  if (part.size() < 2 || part.back() != '}') return std::string_view::npos;
  const std::size_t open = part.rfind('{');
  if (open == std::string_view::npos) return open;
  for (std::size_t i = 0; i < open; ++i) {
    const char ch = part[i];
    const bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                       (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    if (!plain) return std::string_view::npos;
  }
  return open;
}

}  // namespace

std::optional<Pattern> Pattern::compile(std::string_view text, std::string& error) {
  if (text.empty()) {
    error = "empty pattern";
    return std::nullopt;
  }
  if (text.size() > kMaxPatternBytes) {
    error = "pattern longer than 4096 characters";
    return std::nullopt;
  }
  std::vector<std::string_view> parts = split_segments(text);
  if (parts.size() > kMaxSegments) {
    error = "pattern has more than 256 segments";
    return std::nullopt;
  }
  Pattern pattern;
  pattern.text_ = std::string(text);
  for (std::string_view part : parts) {
    if (part.empty()) {
      error = "empty segment in pattern `" + std::string(text) +
              "` (two dots, or a leading or "
              "trailing dot)";
      return std::nullopt;
    }
    Segment seg;
    if (part == "**") {
      if (!pattern.segments_.empty() && pattern.segments_.back().kind == Segment::Kind::DoubleStar)
        continue;
      seg.kind = Segment::Kind::DoubleStar;
      ++pattern.double_stars_;
    } else if (const std::size_t open = capture_start(part); open != std::string_view::npos) {
      std::string_view name = part.substr(open + 1, part.size() - open - 2);
      seg.prefix = std::string(part.substr(0, open));
      if (!is_identifier(name)) {
        error = "capture name `" + std::string(name) + "` is not an identifier";
        return std::nullopt;
      }
      seg.kind = Segment::Kind::Capture;
      seg.text = std::string(name);
      auto it = std::find(pattern.names_.begin(), pattern.names_.end(), seg.text);
      seg.bound_before = it != pattern.names_.end();
      if (it == pattern.names_.end()) {
        if (pattern.names_.size() == kMaxCaptureNames) {
          error = "pattern has more than 16 capture names";
          return std::nullopt;
        }
        pattern.names_.push_back(seg.text);
        it = pattern.names_.end() - 1;
      }
      seg.slot = static_cast<int>(it - pattern.names_.begin());
    } else {
      if (!check_glob(part, error)) return std::nullopt;
      seg.text = std::string(part);
      seg.literal = part.find_first_of("*?[") == std::string_view::npos;
    }
    pattern.segments_.push_back(std::move(seg));
  }
  // A `**` can memoize failures unless a later capture repeats a name bound before it.
  for (std::size_t i = 0; i < pattern.segments_.size(); ++i) {
    if (pattern.segments_[i].kind != Segment::Kind::DoubleStar) continue;
    for (std::size_t j = i + 1; j < pattern.segments_.size(); ++j) {
      const Segment& later = pattern.segments_[j];
      if (later.kind != Segment::Kind::Capture || !later.bound_before) continue;
      for (std::size_t k = 0; k < i; ++k) {
        if (pattern.segments_[k].kind == Segment::Kind::Capture &&
            pattern.segments_[k].slot == later.slot) {
          pattern.segments_[i].memo_ok = false;
        }
      }
    }
  }
  return pattern;
}

std::optional<std::string> Pattern::substitute(std::string_view templ, const Captures& captures) {
  std::string out;
  out.reserve(templ.size() + 16);
  std::size_t i = 0;
  while (i < templ.size()) {
    char ch = templ[i];
    if (ch == '}') return std::nullopt;
    if (ch != '{') {
      out.push_back(ch);
      ++i;
      continue;
    }
    std::size_t close = templ.find('}', i);
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view name = templ.substr(i + 1, close - i - 1);
    auto it = std::find_if(captures.begin(), captures.end(),
                           [&](const auto& kv) { return kv.first == name; });
    if (it == captures.end()) return std::nullopt;
    out += it->second;
    i = close + 1;
  }
  return out;
}

}  // namespace shardc
