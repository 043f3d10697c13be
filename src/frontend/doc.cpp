// Document loading: picks the JSON or YAML reader; the Document's arenas.
#include "frontend/doc.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "support/large_buffer.hpp"

namespace shardc::fe {

const Node* Node::find(std::string_view k) const {
  if (kind != Kind::Map) return nullptr;
  for (const Node& entry : items()) {
    if (entry.key() == k) return &entry;
  }
  return nullptr;
}

void* Document::allocate(std::size_t bytes, std::size_t align) {
  constexpr std::size_t kChunk = 64 * 1024;
  std::size_t pad = (align - reinterpret_cast<std::uintptr_t>(next_) % align) % align;
  if (left_ < pad || left_ - pad < bytes) {
    if (bytes > kChunk / 4) {
      // A large block gets a chunk of its own; the current chunk stays open.
      chunks_.push_back(std::make_unique_for_overwrite<std::byte[]>(bytes));
      return chunks_.back().get();
    }
    chunks_.push_back(std::make_unique_for_overwrite<std::byte[]>(kChunk));
    next_ = chunks_.back().get();
    left_ = kChunk;
    pad = 0;
  }
  std::byte* out = next_ + pad;
  next_ = out + bytes;
  left_ -= pad + bytes;
  return out;
}

void Document::reserve(std::size_t bytes) {
  if (bytes <= left_) return;
  std::unique_ptr<std::byte[]> chunk = allocate_large(bytes);
  if (!chunk) return;
  chunks_.push_back(std::move(chunk));
  next_ = chunks_.back().get();
  left_ = bytes;
}

std::span<const Node> Document::store(std::span<const Node> nodes) {
  static_assert(std::is_trivially_copyable_v<Node> && std::is_trivially_destructible_v<Node>);
  if (nodes.empty()) return {};
  auto* out = static_cast<Node*>(allocate(nodes.size_bytes(), alignof(Node)));
  std::uninitialized_copy(nodes.begin(), nodes.end(), out);
  return {out, nodes.size()};
}

std::string_view Document::save(std::string_view text) {
  if (text.empty()) return {};
  auto* out = static_cast<char*>(allocate(text.size(), 1));
  std::memcpy(out, text.data(), text.size());
  return {out, text.size()};
}

std::pair<int, int> line_col(std::string_view text, std::size_t offset) {
  if (offset > text.size()) offset = text.size();
  int line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {line, static_cast<int>(offset - line_start) + 1};
}

std::pair<int, int> LineCursor::at(std::size_t offset) {
  // Nodes are a few bytes apart: a plain loop beats memchr's call overhead.
  offset = std::min(offset, text_.size());
  for (; pos_ < offset; ++pos_) {
    if (text_[pos_] == '\n') {
      ++line_;
      line_start_ = pos_ + 1;
    }
  }
  return {line_, static_cast<int>(pos_ - line_start_) + 1};
}

namespace {

std::size_t first_content_byte(std::string_view text) {
  std::size_t i = 0;
  if (text.starts_with("\xEF\xBB\xBF")) i = 3;
  while (i < text.size() &&
         (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) {
    ++i;
  }
  return i;
}

}  // namespace

std::optional<Document> load_document(const SourceFile& file, DiagCode code, DiagnosticSink& sink,
                                      const DocLimits& limits, ParamsShortcut* shortcut) {
  std::size_t first = first_content_byte(file.text);
  if (first == file.text.size()) {
    sink.error(code, SourceLoc{file.path, 1, 1}, "the file is empty",
               code == DiagCode::EModel ? "write a model description (contract §3)"
                                        : "write a shardc.recipe/v1 recipe (contract §4)");
    return std::nullopt;
  }
  if (file.text[first] == '{') return load_json(file, code, sink, limits, shortcut);
  return load_yaml(file, code, sink, limits);
}

}  // namespace shardc::fe
