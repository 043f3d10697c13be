// Document loading: picks the JSON or YAML reader.
#include "frontend/doc.hpp"

namespace shardc::fe {

const Node* Node::find(std::string_view k) const {
  if (kind != Kind::Map) return nullptr;
  for (const Node& entry : items) {
    if (entry.key == k) return &entry;
  }
  return nullptr;
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

std::optional<Node> load_document(const SourceFile& file, const char* code, DiagnosticSink& sink,
                                  const DocLimits& limits) {
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
