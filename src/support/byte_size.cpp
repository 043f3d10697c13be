// Byte sizes with units (`--budget 80GiB`, recipe `training.budget`).
#include "support/byte_size.hpp"

#include <array>
#include <cctype>
#include <cstdio>

#include "support/limits.hpp"

namespace shardc {
namespace {

struct Unit {
  std::string_view name;  // lower case
  std::int64_t factor;
};

constexpr std::int64_t kKi = 1024;
constexpr std::int64_t kK = 1000;
constexpr std::array<Unit, 11> kUnits{{
    {"b", 1},
    {"kb", kK},
    {"mb", kK* kK},
    {"gb", kK* kK* kK},
    {"tb", kK* kK* kK* kK},
    {"pb", kK* kK* kK* kK* kK},
    {"kib", kKi},
    {"mib", kKi* kKi},
    {"gib", kKi* kKi* kKi},
    {"tib", kKi* kKi* kKi* kKi},
    {"pib", kKi* kKi* kKi* kKi* kKi},
}};

constexpr std::int64_t kMax = limits::kMaxByteSize;

std::optional<std::int64_t> unit_factor(std::string_view text) {
  if (text.empty()) return 1;
  if (text == "b") return std::nullopt;  // bits
  std::string lower;
  for (char ch : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const Unit& unit : kUnits)
    if (lower == unit.name) return unit.factor;
  return std::nullopt;
}

}  // namespace

std::optional<std::int64_t> parse_byte_size(std::string_view text) {
  // Blanks around the size ("80gib " from a shell variable) are not part of it.
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  std::size_t i = 0;
  std::int64_t whole = 0;
  std::size_t digits = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
    // Checked before the multiply: `whole * 10 + digit` must stay <= 2^62 (no int64 wrap).
    const int digit = text[i] - '0';
    if (whole > (kMax - digit) / 10) return std::nullopt;
    whole = whole * 10 + digit;
  }
  // Fraction as numerator / 10^k, at most 9 digits kept (sub-byte precision is noise).
  std::int64_t frac = 0;
  std::int64_t scale = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    std::size_t fdigits = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++fdigits) {
      if (fdigits < 9) {
        frac = frac * 10 + (text[i] - '0');
        scale *= 10;
      }
    }
    if (fdigits == 0) return std::nullopt;
  }
  if (digits == 0) return std::nullopt;
  while (i < text.size() && text[i] == ' ') ++i;
  const std::optional<std::int64_t> factor = unit_factor(text.substr(i));
  if (!factor) return std::nullopt;
  if (whole > kMax / *factor) return std::nullopt;
  // frac / scale * factor without overflow: frac < scale <= 10^9, so
  // frac * (factor / scale) < factor and frac * (factor % scale) < 10^18.
  const std::int64_t part = frac * (*factor / scale) + frac * (*factor % scale) / scale;
  const std::int64_t total = whole * *factor + part;
  if (total > kMax) return std::nullopt;
  return total;
}

std::string byte_size_text(std::int64_t bytes) {
  constexpr std::array<std::string_view, 5> names = {"PiB", "TiB", "GiB", "MiB", "KiB"};
  std::int64_t factor = kKi * kKi * kKi * kKi * kKi;
  for (std::string_view name : names) {
    // Whole in the unit and below 1024 of it ("80 GiB"); 80 GB (78,125,000 KiB) is
    // no such number and reads as the tables do ("74.51 GiB").
    if (bytes > 0 && bytes % factor == 0 && bytes / factor < kKi)
      return std::to_string(bytes / factor) + " " + std::string(name);
    factor /= kKi;
  }
  return binary_bytes_text(bytes);
}

std::string binary_bytes_text(std::int64_t bytes) {
  constexpr std::array<const char*, 6> units = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < kKi) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < units.size()) {
    value /= 1024.0;
    ++unit;
  }
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.2f %s", value, units[unit]);
  return text.data();
}

}  // namespace shardc
