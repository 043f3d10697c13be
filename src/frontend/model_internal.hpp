// Shared pieces of the model reader (model_parse.cpp, model_params.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/model.hpp"
#include "frontend/doc.hpp"
#include "frontend/reader.hpp"
#include "support/limits.hpp"

namespace shardc::fe {

/// Input limits (docs/limits.md).
using limits::kMaxExpandedParams;
using limits::kMaxNumel;
using limits::kMaxRepeatDepth;

/// Parses the `params` list, expanding `repeat` groups, into `out` (module
/// order). false when any error was reported.
bool parse_params(const Node& params, Reader& reader, DType default_dtype, std::vector<Param>& out);

/// A list of non-negative extents whose product (zeros counted as 1) is < 2^62.
std::optional<Shape> parse_shape(const Node& node, Reader& reader);

/// `fused:` of a param entry of `shape` (model_fused.cpp, contract §5.12).
std::optional<FusedLayout> parse_fused(const Node& node, const Shape& shape, Reader& reader);

/// `head_indexed: {dim: 0, heads: q | kv}` of a param entry (model_fused.cpp);
/// E-MODEL when the dim is out of range.
std::optional<HeadIndexed> parse_head_indexed(const Node& node, const Shape& shape, Reader& reader);

/// A dtype name or alias (contract §3).
std::optional<DType> parse_dtype_node(const Node& node, Reader& reader);

/// parse_model with every param read from the Node tree (no ParamsShortcut):
/// the reference the shortcut is tested against.
std::optional<Model> parse_model_tree(const SourceFile& file, DiagnosticSink& sink);

/// Reports names that occur twice (naming both locations). false if any.
bool check_duplicate_names(const std::vector<Param>& params, Reader& reader);

}  // namespace shardc::fe
