// UTF-8 validation.
#include "support/utf8.hpp"

#include <cstddef>

namespace shardc {
namespace {

// Length of the sequence starting with `lead`, 0 if `lead` cannot start one.
std::size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

bool continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Second-byte bounds that exclude overlongs, surrogates and > U+10FFFF.
bool second_byte_ok(unsigned char lead, unsigned char second) {
  if (lead == 0xE0) return second >= 0xA0;
  if (lead == 0xED) return second <= 0x9F;
  if (lead == 0xF0) return second >= 0x90;
  if (lead == 0xF4) return second <= 0x8F;
  return true;
}

// Length of the well-formed sequence at text[i], 0 if malformed.
std::size_t valid_sequence_at(std::string_view text, std::size_t i) {
  auto lead = static_cast<unsigned char>(text[i]);
  std::size_t len = sequence_length(lead);
  if (len == 0 || i + len > text.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if (!continuation(static_cast<unsigned char>(text[i + k]))) return 0;
  }
  if (len > 1 && !second_byte_ok(lead, static_cast<unsigned char>(text[i + 1]))) return 0;
  return len;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t len = valid_sequence_at(text, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    auto byte = static_cast<unsigned char>(text[i]);
    std::size_t len = valid_sequence_at(text, i);
    if (len == 0 || byte < 0x20 || byte == 0x7F) {
      out += "\\x";
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
      ++i;
      continue;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace shardc
