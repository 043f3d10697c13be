// The front end's document tree: YAML and JSON both load into Node values
// that remember where each node (and each map key) was written, so every
// semantic pass reports file:line:col the same way for both syntaxes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardc/diagnostics.hpp"
#include "shardc/frontend.hpp"

namespace shardc::fe {

struct Node {
  enum class Kind : std::uint8_t { Null, Scalar, Seq, Map };
  Kind kind = Kind::Null;
  bool quoted = false;  ///< scalar written as a quoted string
  int line = 0;         ///< 1-based
  int col = 0;          ///< 1-based
  int key_line = 0;     ///< map entries: where the key was written
  int key_col = 0;
  std::string key;          ///< map entries: the key
  std::string text;         ///< scalars: the text (JSON numbers/bools as written)
  std::vector<Node> items;  ///< sequence items, or map entries in written order

  [[nodiscard]] bool is_map() const { return kind == Kind::Map; }
  [[nodiscard]] bool is_seq() const { return kind == Kind::Seq; }
  [[nodiscard]] bool is_scalar() const { return kind == Kind::Scalar; }
  [[nodiscard]] bool is_null() const { return kind == Kind::Null; }
  /// First entry of a map with this key, or nullptr.
  [[nodiscard]] const Node* find(std::string_view k) const;
};

/// Limits against hostile input (README "Input limits").
struct DocLimits {
  std::size_t max_nodes = 8'000'000;  ///< nodes after YAML alias expansion
  int max_depth = 512;                ///< nesting of lists/maps
};

/// Loads `file`: JSON (nlohmann) when the first non-blank byte is `{`, else
/// YAML (yaml-cpp). Reports `code` with file:line:col on malformed text or a
/// broken limit; nullopt then.
std::optional<Node> load_document(const SourceFile& file, const char* code, DiagnosticSink& sink,
                                  const DocLimits& limits = {});

std::optional<Node> load_json(const SourceFile& file, const char* code, DiagnosticSink& sink,
                              const DocLimits& limits);
std::optional<Node> load_yaml(const SourceFile& file, const char* code, DiagnosticSink& sink,
                              const DocLimits& limits);

/// 1-based line and column of byte `offset` in `text` (columns count bytes).
std::pair<int, int> line_col(std::string_view text, std::size_t offset);

}  // namespace shardc::fe
