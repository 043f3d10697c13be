// Shapes, dtypes and duplicate names of model parameters (SPEC §3).
#include <string>
#include <unordered_map>

#include "frontend/model_internal.hpp"

namespace shardc::fe {

std::optional<Shape> parse_shape(const Node& n, Reader& r) {
  if (!r.expect_seq(n, "`shape`")) return std::nullopt;
  Shape shape;
  shape.reserve(n.items.size());
  bool ok = true;
  std::int64_t product = 1;
  for (const Node& item : n.items) {
    std::optional<std::int64_t> extent = r.get_int(item, "a shape extent");
    if (!extent) {
      ok = false;
      continue;
    }
    if (*extent < 0) {
      r.error(item, "shape extent " + std::to_string(*extent) + " is negative",
              "extents are non-negative integers; a scalar has `shape: []`");
      ok = false;
      continue;
    }
    shape.push_back(*extent);
    std::int64_t factor = *extent == 0 ? 1 : *extent;
    if (ok && (__builtin_mul_overflow(product, factor, &product) || product >= kMaxNumel)) {
      r.error(n, "shape has 2^62 or more elements", "shapes must have fewer than 2^62 elements");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return shape;
}

std::optional<DType> parse_dtype_node(const Node& n, Reader& r) {
  std::optional<std::string> text = r.get_string(n, "`dtype`");
  if (!text) return std::nullopt;
  if (std::optional<DType> t = parse_dtype(*text)) return t;
  r.error(n, "unknown dtype " + describe(n),
          "valid dtypes: " + std::string(dtype_names_list()) +
              " (aliases: bf16, fp32, fp16, F32, BF16, F8_E4M3, torch.<name>)");
  return std::nullopt;
}

bool check_duplicate_names(const std::vector<Param>& params, Reader& r) {
  constexpr std::size_t kMaxReported = 100;
  std::unordered_map<std::string_view, std::size_t> seen;
  seen.reserve(params.size());
  std::size_t duplicates = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto [it, inserted] = seen.emplace(params[i].name, i);
    if (inserted) continue;
    if (++duplicates > kMaxReported) continue;
    const SourceLoc& first = params[it->second].loc;
    r.error(params[i].loc, "duplicate parameter name `" + params[i].name + "`",
            "first defined at " + first.file + ":" + std::to_string(first.line) + ":" +
                std::to_string(first.column));
  }
  if (duplicates > kMaxReported) {
    r.error(params.front().loc,
            std::to_string(duplicates - kMaxReported) + " more duplicate parameter names",
            "every parameter name must be unique after `repeat` expansion");
  }
  return duplicates == 0;
}

}  // namespace shardc::fe
