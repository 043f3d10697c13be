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

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Second-byte bounds that exclude overlongs, surrogates and > U+10FFFF.
bool second_byte_ok(unsigned char lead, unsigned char second) {
  if (lead == 0xE0) return second >= 0xA0;
  if (lead == 0xED) return second <= 0x9F;
  if (lead == 0xF0) return second >= 0x90;
  if (lead == 0xF4) return second <= 0x8F;
  return true;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    auto lead = static_cast<unsigned char>(text[i]);
    std::size_t len = sequence_length(lead);
    if (len == 0 || i + len > text.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if (!continuation(static_cast<unsigned char>(text[i + k]))) return false;
    }
    if (len > 1 && !second_byte_ok(lead, static_cast<unsigned char>(text[i + 1]))) return false;
    i += len;
  }
  return true;
}

}  // namespace shardc
