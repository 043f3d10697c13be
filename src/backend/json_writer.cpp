#include "backend/json_writer.hpp"

#include <array>
#include <charconv>

namespace shardc::json {
namespace {

constexpr std::string_view kReplacement = "\\ufffd";

// Length of the valid UTF-8 sequence starting at s[i], or 0 when invalid.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
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
  if (i + len > text.size()) return 0;
  unsigned cp = b0 & (0x7Fu >> len);
  for (std::size_t k = 1; k < len; ++k) {
    const auto byte = static_cast<unsigned char>(text[i + k]);
    if ((byte & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

void append_control(std::string& out, unsigned char control) {
  switch (control) {
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
  out += hex[control >> 4];
  out += hex[control & 0xF];
}

}  // namespace

// Bytes that can be copied as they are: printable ASCII except `"` and `\`.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x7F; ++c) plain[static_cast<std::size_t>(c)] = c != '"' && c != '\\';
  return plain;
}();

void append_string(std::string& out, std::string_view text) {
  out += '"';
  std::size_t i = 0;
  while (i < text.size()) {
    // Fast path: copy the longest plain run in one append.
    std::size_t j = i;
    while (j < text.size() && kPlain[static_cast<unsigned char>(text[j])]) ++j;
    if (j > i) {
      out.append(text.data() + i, j - i);
      i = j;
      if (i == text.size()) break;
    }
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == '"' || byte == '\\') {
      out += '\\';
      out += static_cast<char>(byte);
      ++i;
    } else if (byte < 0x20 || byte == 0x7F) {
      append_control(out, byte);
      ++i;
    } else if (byte < 0x80) {
      out += static_cast<char>(byte);
      ++i;
    } else if (const std::size_t len = utf8_sequence_length(text, i); len > 0) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  out += '"';
}

void append_int(std::string& out, std::int64_t value) {
  std::array<char, 24> buf{};
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), value);
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

Writer& Writer::open(char bracket) {
  separate();
  out_ += bracket;
  first_.push_back(true);
  return *this;
}

Writer& Writer::close(char bracket) {
  flush_newline();
  out_ += bracket;
  first_.pop_back();
  suppress_ = false;
  return *this;
}

Writer& Writer::begin_object() { return open('{'); }

Writer& Writer::end_object() { return close('}'); }

Writer& Writer::begin_array() { return open('['); }

Writer& Writer::end_array() { return close(']'); }

Writer& Writer::key(std::string_view name) {
  separate();
  append_string(out_, name);
  out_ += ':';
  suppress_ = true;
  return *this;
}

Writer& Writer::value(std::string_view text) {
  separate();
  append_string(out_, text);
  return *this;
}

Writer& Writer::value(std::int64_t number) {
  separate();
  append_int(out_, number);
  return *this;
}

Writer& Writer::value(bool flag) {
  separate();
  out_ += flag ? "true" : "false";
  return *this;
}

Writer& Writer::null() {
  separate();
  out_ += "null";
  return *this;
}

Writer& Writer::ints(std::span<const std::int64_t> values) {
  separate();
  // Format into a stack buffer and append once (shapes are short).
  constexpr std::size_t kPerInt = 21;  // sign + 19 digits + comma
  std::array<char, 8 * kPerInt + 2> buf{};
  if (values.size() > 8) {
    out_ += '[';
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out_ += ',';
      append_int(out_, values[i]);
    }
    out_ += ']';
    return *this;
  }
  char* cursor = buf.data();
  *cursor++ = '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) *cursor++ = ',';
    cursor = std::to_chars(cursor, buf.data() + buf.size(), values[i]).ptr;
  }
  *cursor++ = ']';
  out_.append(buf.data(), cursor);
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
