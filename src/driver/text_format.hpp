// Small text formatting helpers for human-readable driver output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.hpp"
#include "core/recipe.hpp"
#include "support/byte_size.hpp"  // binary_bytes_text: sizes in tables

namespace shardc::driver {

/// "[4096, 4096]", "[]" (support/shape.hpp).
using shardc::shape_text;
/// 8030261248 -> "8,030,261,248".
std::string group_digits(std::int64_t value);
/// "pp=2 x tp=8".
std::string mesh_text(const Mesh& mesh);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
/// "recompute none" or, with per-layer ranges, "recompute none, full for 56 layers in 16
/// ranges" (the ranges' layers counted by mode): what the training shape recomputes.
std::string recompute_text(const TrainingShape& shape);

/// A plain text table: left-aligned columns separated by two spaces;
/// columns listed in `right_aligned` are right-aligned.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, std::vector<bool> right_aligned = {});
  void add_row(std::vector<std::string> row);
  [[nodiscard]] std::string render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

}  // namespace shardc::driver
