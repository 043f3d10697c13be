#include "backend/json_writer.hpp"

#include <array>
#include <charconv>

namespace shardc::json {
namespace {

constexpr std::string_view kReplacement = "\\ufffd";

// Length of the valid UTF-8 sequence starting at s[i], or 0 when invalid.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  std::size_t len = 0;
  unsigned min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  unsigned cp = b0 & (0x7Fu >> len);
  for (std::size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

void append_control(std::string& out, unsigned char c) {
  switch (c) {
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    default:
      break;
  }
  constexpr std::string_view hex = "0123456789abcdef";
  out += "\\u00";
  out += hex[c >> 4];
  out += hex[c & 0xF];
}

}  // namespace

// Bytes that can be copied as they are: printable ASCII except `"` and `\`.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x7F; ++c) t[static_cast<std::size_t>(c)] = c != '"' && c != '\\';
  return t;
}();

void append_string(std::string& out, std::string_view s) {
  out += '"';
  std::size_t i = 0;
  while (i < s.size()) {
    // Fast path: copy the longest plain run in one append.
    std::size_t j = i;
    while (j < s.size() && kPlain[static_cast<unsigned char>(s[j])]) ++j;
    if (j > i) {
      out.append(s.data() + i, j - i);
      i = j;
      if (i == s.size()) break;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      append_control(out, c);
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if (const std::size_t len = utf8_sequence_length(s, i); len > 0) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  out += '"';
}

void append_int(std::string& out, std::int64_t v) {
  std::array<char, 24> buf{};
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  out.append(buf.data(), res.ptr);
}

void Writer::separate() {
  if (suppress_) {
    suppress_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
  flush_newline();
}

void Writer::flush_newline() {
  if (newline_) out_ += '\n';
  newline_ = false;
}

Writer& Writer::begin_object() {
  separate();
  out_ += '{';
  first_.push_back(true);
  return *this;
}

Writer& Writer::end_object() {
  flush_newline();
  out_ += '}';
  first_.pop_back();
  suppress_ = false;
  return *this;
}

Writer& Writer::begin_array() {
  separate();
  out_ += '[';
  first_.push_back(true);
  return *this;
}

Writer& Writer::end_array() {
  flush_newline();
  out_ += ']';
  first_.pop_back();
  suppress_ = false;
  return *this;
}

Writer& Writer::key(std::string_view k) {
  separate();
  append_string(out_, k);
  out_ += ':';
  suppress_ = true;
  return *this;
}

Writer& Writer::value(std::string_view s) {
  separate();
  append_string(out_, s);
  return *this;
}

Writer& Writer::value(std::int64_t v) {
  separate();
  append_int(out_, v);
  return *this;
}

Writer& Writer::value(bool b) {
  separate();
  out_ += b ? "true" : "false";
  return *this;
}

Writer& Writer::null() {
  separate();
  out_ += "null";
  return *this;
}

Writer& Writer::ints(std::span<const std::int64_t> v) {
  separate();
  // Format into a stack buffer and append once (shapes are short).
  constexpr std::size_t kPerInt = 21;  // sign + 19 digits + comma
  std::array<char, 8 * kPerInt + 2> buf{};
  if (v.size() > 8) {
    out_ += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out_ += ',';
      append_int(out_, v[i]);
    }
    out_ += ']';
    return *this;
  }
  char* p = buf.data();
  *p++ = '[';
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) *p++ = ',';
    p = std::to_chars(p, buf.data() + buf.size(), v[i]).ptr;
  }
  *p++ = ']';
  out_.append(buf.data(), p);
  return *this;
}

Writer& Writer::raw(std::string_view json_text) {
  separate();
  out_ += json_text;
  return *this;
}

Writer& Writer::raw_members(std::string_view members_text) {
  separate();
  out_ += members_text;
  return *this;
}

Writer& Writer::line_break() {
  newline_ = true;
  return *this;
}

}  // namespace shardc::json
