#include "driver/text_format.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

namespace shardc::driver {

std::string group_digits(std::int64_t value) {
  const std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

std::string mesh_text(const Mesh& mesh) {
  std::vector<std::string> parts;
  for (const auto& axis : mesh.axes) parts.push_back(axis.name + "=" + std::to_string(axis.size));
  return join(parts, " x ");
}

TextTable::TextTable(std::vector<std::string> header, std::vector<bool> right_aligned)
    : right_(std::move(right_aligned)) {
  right_.resize(header.size(), false);
  rows_.push_back(std::move(header));
}

void TextTable::add_row(std::vector<std::string> row) {
  row.resize(rows_.front().size());
  rows_.push_back(std::move(row));
}

std::string TextTable::render() const {
  std::vector<std::size_t> width(rows_.front().size(), 0);
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c > 0) line += "  ";
      line += right_[c] ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : "");
    }
    out += line + "\n";
  }
  return out;
}

std::string recompute_text(const TrainingShape& shape) {
  std::string out = std::string("recompute ") + recompute_name(shape.recompute);
  if (shape.recompute_ranges.empty()) return out;
  for (const Recompute mode : {Recompute::None, Recompute::Selective, Recompute::Full}) {
    std::int64_t layers = 0;
    std::int64_t ranges = 0;
    for (const RecomputeRange& range : shape.recompute_ranges) {
      if (range.mode != mode) continue;
      layers += range.end_layer - range.first_layer;
      ++ranges;
    }
    if (ranges == 0) continue;
    out += std::string(", ") + recompute_name(mode) + " for " + std::to_string(layers) +
           (layers == 1 ? " layer in " : " layers in ") + std::to_string(ranges) +
           (ranges == 1 ? " range" : " ranges");
  }
  return out;
}

}  // namespace shardc::driver
