// Document loading: picks the JSON or YAML reader; the Document's arenas.
#include "frontend/doc.hpp"

#include <algorithm>
#include <cstring>

namespace shardc::fe {

const Node* Node::find(std::string_view k) const {
  if (kind != Kind::Map) return nullptr;
  for (const Node& entry : items) {
    if (entry.key == k) return &entry;
  }
  return nullptr;
}

template <typename T>
T* Document::Arena<T>::allocate(std::size_t n, std::size_t chunk) {
  if (capacity - used < n) {
    std::size_t size = std::max(n, chunk);
    chunks.push_back(std::make_unique<T[]>(size));
    capacity = size;
    used = 0;
  }
  T* out = chunks.back().get() + used;
  used += n;
  return out;
}

std::span<const Node> Document::store(std::span<const Node> nodes) {
  if (nodes.empty()) return {};
  Node* out = nodes_.allocate(nodes.size(), 8192);
  std::copy(nodes.begin(), nodes.end(), out);
  return {out, nodes.size()};
}

std::string_view Document::save(std::string_view s) {
  if (s.empty()) return {};
  char* out = chars_.allocate(s.size(), 64 * 1024);
  std::memcpy(out, s.data(), s.size());
  return {out, s.size()};
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
  offset = std::min(offset, text_.size());
  while (pos_ < offset) {
    const void* nl = std::memchr(text_.data() + pos_, '\n', offset - pos_);
    if (nl == nullptr) {
      pos_ = offset;
      break;
    }
    pos_ = static_cast<std::size_t>(static_cast<const char*>(nl) - text_.data()) + 1;
    ++line_;
    line_start_ = pos_;
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

std::optional<Document> load_document(const SourceFile& file, const char* code,
                                      DiagnosticSink& sink, const DocLimits& limits) {
  std::size_t first = first_content_byte(file.text);
  if (first == file.text.size()) {
    sink.error(code, SourceLoc{file.path, 1, 1}, "the file is empty",
               code == std::string_view("E-MODEL") ? "write a model description (SPEC §3)"
                                                   : "write a shardc.recipe/v1 recipe (SPEC §4)");
    return std::nullopt;
  }
  if (file.text[first] == '{') return load_json(file, code, sink, limits);
  return load_yaml(file, code, sink, limits);
}

}  // namespace shardc::fe
