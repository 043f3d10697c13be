// Levenshtein distance for "did you mean" suggestions (no domain knowledge).
#pragma once

#include <cstddef>
#include <string_view>

namespace shardc {

/// Levenshtein distance (insert, delete, substitute one character), giving up
/// (returning limit + 1) once it exceeds `limit`. Cost O(|source| x |target|).
std::size_t edit_distance(std::string_view source, std::string_view target, std::size_t limit);

}  // namespace shardc
