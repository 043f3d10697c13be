// Byte sizes as people write them: `80GiB`, `80 GB`, `1.5TiB`, `123456`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace shardc {

/// Parses a non-negative byte size: a decimal number (digits, optionally
/// one `.` and more digits) followed, after optional spaces, by a unit:
/// none or `B` (bytes), `KB MB GB TB PB` (powers of 1000), `KiB MiB GiB TiB
/// PiB` (powers of 1024); units are case-insensitive except that `b` alone
/// is not accepted (bits are not bytes). Fractions are rounded down to whole
/// bytes; blanks before and after are ignored. nullopt on anything else, on a
/// negative value, or above 2^62 bytes.
std::optional<std::int64_t> parse_byte_size(std::string_view text);

/// "80 GiB" for a whole number below 1024 of a binary unit (exact, the
/// inverse of `parse_byte_size`), else `binary_bytes_text` ("74.51 GiB" for
/// 80 GB, never "78125000 KiB"): for messages.
std::string byte_size_text(std::int64_t bytes);

/// "512 B", "1.50 KiB", "17.24 GiB": binary units up to PiB with two decimals (rounded), for
/// tables and reports.
std::string binary_bytes_text(std::int64_t bytes);

}  // namespace shardc
