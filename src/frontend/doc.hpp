// The front end's document tree: YAML and JSON both load into Node values
// that remember where each node (and each map key) was written, so every
// semantic pass reports file:line:col the same way for both syntaxes.
//
// Nodes are small trivially-copyable values: `key` and `text` view either the
// source text (JSON strings without escapes, JSON numbers) or the Document's
// string arena, and `items` views one contiguous block of the Document's node
// arena. A Node is valid as long as its Document and the SourceFile's text live.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostics.hpp"
#include "frontend/frontend.hpp"
#include "support/limits.hpp"

namespace shardc::fe {

// 48 bytes: a scalar's text and a container's items share one pointer.
struct Node {
  enum class Kind : std::uint8_t { Null, Scalar, Seq, Map };
  Kind kind = Kind::Null;
  bool quoted = false;  ///< scalar written as a quoted string
  int line = 0;         ///< 1-based
  int col = 0;          ///< 1-based
  int key_line = 0;     ///< map entries: where the key was written
  int key_col = 0;

  /// Map entries: the key.
  [[nodiscard]] std::string_view key() const { return {key_, key_size_}; }
  /// Scalars: the text (JSON numbers/bools as written); empty for other kinds.
  [[nodiscard]] std::string_view text() const {
    return kind == Kind::Scalar ? std::string_view(static_cast<const char*>(data_), size_)
                                : std::string_view();
  }
  /// Sequence items, or map entries in written order; empty for other kinds.
  [[nodiscard]] std::span<const Node> items() const {
    return kind == Kind::Seq || kind == Kind::Map
               ? std::span<const Node>(static_cast<const Node*>(data_), size_)
               : std::span<const Node>();
  }
  void set_key(std::string_view key) {
    key_ = key.data();
    key_size_ = static_cast<std::uint32_t>(key.size());
  }
  void set_text(std::string_view text) {
    data_ = text.data();
    size_ = static_cast<std::uint32_t>(text.size());
  }
  void set_items(std::span<const Node> items) {
    data_ = items.data();
    size_ = static_cast<std::uint32_t>(items.size());
  }

  [[nodiscard]] bool is_map() const { return kind == Kind::Map; }
  [[nodiscard]] bool is_seq() const { return kind == Kind::Seq; }
  [[nodiscard]] bool is_scalar() const { return kind == Kind::Scalar; }
  [[nodiscard]] bool is_null() const { return kind == Kind::Null; }
  /// First entry of a map with this key, or nullptr.
  [[nodiscard]] const Node* find(std::string_view k) const;

 private:
  // Sizes fit 32 bits: inputs are limited to 256 MiB (docs/limits.md).
  std::uint32_t key_size_ = 0;
  std::uint32_t size_ = 0;
  const char* key_ = nullptr;
  const void* data_ = nullptr;
};

/// Owns the storage Nodes point into: blocks of child nodes and the strings
/// that are not views of the source text. Movable; moving keeps every view.
class Document {
 public:
  Node root;

  /// Copies `nodes` into one contiguous arena block.
  std::span<const Node> store(std::span<const Node> nodes);
  /// Copies `text` into the string arena.
  std::string_view save(std::string_view text);
  /// Sets `bytes` of arena aside in one block (huge pages where the kernel
  /// allows) before a large document is built; past it, blocks come from
  /// 64 KiB chunks again. Ignored when the memory is not available.
  void reserve(std::size_t bytes);

 private:
  /// Uninitialized, `align`-aligned storage (align <= alignof(max_align_t)).
  void* allocate(std::size_t bytes, std::size_t align);

  std::vector<std::unique_ptr<std::byte[]>> chunks_;
  std::byte* next_ = nullptr;
  std::size_t left_ = 0;
};

/// An inventory's top-level `params` list read straight into Params, without
/// Nodes (doc_json.cpp). load_json fills it when every entry is canonical
/// ({name, shape, dtype} in any order, each once: a quoted name without
/// backslash, brace or anything check_name_text would question; a list of
/// unsigned decimal extents whose product is < 2^62; a known quoted dtype);
/// the tree then holds an empty list in its place. On anything else it builds
/// the whole tree as without it (`taken` false), so every diagnostic is the
/// tree path's.
struct ParamsShortcut {
  SourcePath file;  ///< for each Param's loc
  bool taken = false;
  std::vector<Param> params;
};

/// Limits against hostile input (docs/limits.md).
struct DocLimits {
  std::size_t max_nodes = limits::kMaxDocNodes;  ///< nodes after YAML alias expansion
  int max_depth = limits::kMaxDocDepth;          ///< nesting of lists/maps
};

/// Loads `file`: JSON (simdjson) when the first non-blank byte is `{`, else
/// YAML (yaml-cpp). Reports `code` with file:line:col on malformed text or a
/// broken limit; nullopt then. The result views `file.text`.
std::optional<Document> load_document(const SourceFile& file, DiagCode code, DiagnosticSink& sink,
                                      const DocLimits& limits = {},
                                      ParamsShortcut* shortcut = nullptr);

/// JSON: simdjson On-Demand on a padded copy of the text (doc_json.cpp);
/// node positions from each token's byte offset. On malformed text or a
/// broken limit it re-parses with load_json_tracking, whose diagnostics it
/// reports (simdjson gives an error code, not a position).
/// With `shortcut`, a canonical top-level `params` list goes there (above).
std::optional<Document> load_json(const SourceFile& file, DiagCode code, DiagnosticSink& sink,
                                  const DocLimits& limits, ParamsShortcut* shortcut = nullptr);
/// JSON through nlohmann's SAX parser and a byte-tracking input iterator
/// (slower): the reference for the tree and positions, and the producer of
/// every JSON syntax/limit diagnostic (doc_json_tracking.cpp).
std::optional<Document> load_json_tracking(const SourceFile& file, DiagCode code,
                                           DiagnosticSink& sink, const DocLimits& limits);
std::optional<Document> load_yaml(const SourceFile& file, DiagCode code, DiagnosticSink& sink,
                                  const DocLimits& limits);

/// 1-based line and column of byte `offset` in `text` (columns count bytes).
std::pair<int, int> line_col(std::string_view text, std::size_t offset);

/// Advances a (offset, line, col) cursor monotonically: total cost O(bytes).
class LineCursor {
 public:
  explicit LineCursor(std::string_view text) : text_(text) {}
  std::pair<int, int> at(std::size_t offset);
  /// Moves to `offset` (>= the last one) over bytes known to hold no newline.
  void skip_to(std::size_t offset) { pos_ = std::max(pos_, std::min(offset, text_.size())); }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t line_start_ = 0;
  int line_ = 1;
};

}  // namespace shardc::fe
