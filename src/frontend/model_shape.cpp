// Shapes, dtypes and duplicate names of model parameters (contract §3).
#include <bit>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/model_internal.hpp"

namespace shardc::fe {

std::optional<Shape> parse_shape(const Node& node, Reader& reader) {
  if (!reader.expect_seq(node, "`shape`")) return std::nullopt;
  Shape shape;
  shape.reserve(node.items().size());
  bool ok = true;
  std::int64_t product = 1;
  for (const Node& item : node.items()) {
    std::optional<std::int64_t> extent = reader.get_int(item, "a shape extent");
    if (!extent) {
      ok = false;
      continue;
    }
    if (*extent < 0) {
      reader.error(item, "shape extent " + std::to_string(*extent) + " is negative",
                   "extents are non-negative integers; a scalar has `shape: []`");
      ok = false;
      continue;
    }
    shape.push_back(*extent);
    std::int64_t factor = *extent == 0 ? 1 : *extent;
    if (ok && (__builtin_mul_overflow(product, factor, &product) || product >= kMaxNumel)) {
      reader.error(node, "shape has 2^62 or more elements",
                   "shapes must have fewer than 2^62 elements");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return shape;
}

std::optional<DType> parse_dtype_node(const Node& node, Reader& reader) {
  if (!node.is_scalar()) {
    reader.get_string(node, "`dtype`");  // reports the wrong kind
    return std::nullopt;
  }
  if (std::optional<DType> dtype = parse_dtype(node.text())) return dtype;
  reader.error(node, "unknown dtype " + describe(node),
               "valid dtypes: " + std::string(dtype_names_list()) +
                   " (aliases: bf16, fp32, fp16, F32, BF16, F8_E4M3, torch.<name>)");
  return std::nullopt;
}

bool check_duplicate_names(const std::vector<Param>& params, Reader& reader) {
  constexpr std::size_t kMaxReported = 100;
  // Open addressing over param indices (+1; 0 = empty), load factor <= 1/2.
  std::size_t capacity = std::bit_ceil(2 * params.size() + 2);
  std::vector<std::uint32_t> table(capacity, 0);
  std::hash<std::string_view> hash;
  std::size_t duplicates = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::string_view name = params[i].name;
    std::size_t slot = hash(name) & (capacity - 1);
    while (table[slot] != 0 && params[table[slot] - 1].name != name) {
      slot = (slot + 1) & (capacity - 1);
    }
    if (table[slot] == 0) {
      table[slot] = static_cast<std::uint32_t>(i + 1);
      continue;
    }
    if (++duplicates > kMaxReported) continue;
    const SourceLoc& first = params[table[slot] - 1].loc;
    reader.error(params[i].loc, "duplicate parameter name `" + params[i].name + "`",
                 "first defined at " + first.file.str() + ":" + std::to_string(first.line) + ":" +
                     std::to_string(first.column));
  }
  if (duplicates > kMaxReported) {
    reader.error(params.front().loc,
                 std::to_string(duplicates - kMaxReported) + " more duplicate parameter names",
                 "every parameter name must be unique after `repeat` expansion");
  }
  return duplicates == 0;
}

}  // namespace shardc::fe
