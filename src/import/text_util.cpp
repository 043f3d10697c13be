// Message and YAML/JSON scalar helpers of src/import.
#include <cctype>
#include <cstdint>
#include <cstdio>

#include "import/import_internal.hpp"

namespace shardc::imp {

std::string printable(std::string_view text) {
  std::string out;
  for (const char character : text.substr(0, 200)) {
    const auto byte = static_cast<unsigned char>(character);
    if (byte < 0x20 || byte >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", byte);
      out += buf;
    } else {
      out.push_back(character);
    }
  }
  if (text.size() > 200) out += "...";
  return out;
}

std::string comment_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    char buf[8];
    if (byte < 0x20 || byte == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", byte);
      out += buf;
    } else if (byte == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) == 0x85) {
      out += "\\u0085";
      ++i;
    } else if (byte == 0xe2 && i + 2 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(text[i + 2]) == 0xa8 ||
                static_cast<unsigned char>(text[i + 2]) == 0xa9)) {
      out += static_cast<unsigned char>(text[i + 2]) == 0xa8 ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::string bytes_text(std::int64_t numel, std::int64_t element_size) {
  const std::string factors = std::to_string(numel) + " x " + std::to_string(element_size);
  if (element_size > 0 && numel > INT64_MAX / element_size) return factors + " bytes (>= 2^63)";
  return factors + " = " + std::to_string(numel * element_size) + " bytes";
}

namespace {

bool plain_word(std::string_view text) {
  if (text.empty()) return false;
  const auto first = static_cast<unsigned char>(text[0]);
  if (!(std::isalpha(first) || text[0] == '_')) return false;
  for (const char character : text) {
    const auto byte = static_cast<unsigned char>(character);
    if (!(std::isalnum(byte) || character == '_' || character == '.' || character == '-'))
      return false;
  }
  std::string lower(text);
  for (char& character : lower)
    character = static_cast<char>(std::tolower(static_cast<unsigned char>(character)));
  static constexpr std::string_view kWords[] = {"true", "false", "null", "yes", "no",
                                                "on",   "off",   "y",    "n",   "~"};
  for (std::string_view word : kWords) {
    if (lower == word) return false;
  }
  return true;
}

void append_u(std::string& out, unsigned code_unit) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", code_unit & 0xffffU);
  out += buf;
}

// Decodes one UTF-8 sequence at text[i]; returns the code point (or the byte for invalid input).
unsigned decode(std::string_view text, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  int len = b0 >= 0xf0 ? 4 : b0 >= 0xe0 ? 3 : b0 >= 0xc0 ? 2 : 1;
  if (i + static_cast<std::size_t>(len) > text.size()) len = 1;
  unsigned cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1fU) : len == 3 ? (b0 & 0x0fU) : (b0 & 0x07U);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3fU);
  i += static_cast<std::size_t>(len);
  return cp;
}

}  // namespace

// A double-quoted scalar: JSON's escapes, which are also YAML's, except above U+FFFF,
// where JSON needs a UTF-16 surrogate pair and YAML its `\U` escape (yaml-cpp refuses a
// `\u` surrogate: "invalid unicode"; found by fuzz_import).
static std::string quoted(std::string_view text, bool yaml) {
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size();) {
    const char character = text[i];
    const auto byte = static_cast<unsigned char>(character);
    if (byte >= 0x80) {
      const unsigned cp = decode(text, i);
      if (cp >= 0x10000 && yaml) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "\\U%08x", cp);
        out += buf;
      } else if (cp >= 0x10000) {
        append_u(out, 0xd800 + ((cp - 0x10000) >> 10));
        append_u(out, 0xdc00 + ((cp - 0x10000) & 0x3ff));
      } else {
        append_u(out, cp);
      }
      continue;
    }
    ++i;
    switch (character) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          if (byte == 0x7f) {
            out.push_back(character);
          } else {
            append_u(out, byte);
          }
        } else {
          out.push_back(character);
        }
    }
  }
  return out + "\"";
}

std::string json_string(std::string_view text) { return quoted(text, false); }

std::string yaml_string(std::string_view text) {
  return plain_word(text) ? std::string(text) : quoted(text, true);
}

}  // namespace shardc::imp
