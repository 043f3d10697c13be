// See yaml_errors.hpp.
#include "frontend/yaml_errors.hpp"

#include <vector>

namespace shardc::fe {
namespace {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      out.push_back(text.substr(start));
      break;
    }
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A line as YAML block structure sees it: where its key starts (after any
// `- ` sequence markers), the key, and whether it opens a sequence entry.
struct LineShape {
  bool blank = true;
  int indent = 0;   ///< spaces before the first non-space character
  int key_col = 0;  ///< 0-based column of the key (after `- ` markers)
  std::string key;  ///< "" when the line has no `key:`
  bool entry = false;
};

LineShape shape_of(std::string_view line) {
  LineShape shape;
  std::size_t i = line.find_first_not_of(' ');
  if (i == std::string_view::npos || line[i] == '#' || line[i] == '\r') return shape;
  shape.blank = false;
  shape.indent = static_cast<int>(i);
  while (i + 1 < line.size() && line[i] == '-' && line[i + 1] == ' ') {
    shape.entry = true;
    i = line.find_first_not_of(' ', i + 1);
    if (i == std::string_view::npos) return shape;
  }
  shape.key_col = static_cast<int>(i);
  const std::size_t colon = line.find(':', i);
  if (colon == std::string_view::npos || line[i] == '{' || line[i] == '[' || line[i] == '"')
    return shape;
  if (colon + 1 < line.size() && line[colon + 1] != ' ' && line[colon + 1] != '\r') return shape;
  shape.key = std::string(line.substr(i, colon - i));
  return shape;
}

std::string spaces(int count) {
  return std::to_string(count) + (count == 1 ? " space" : " spaces");
}

std::optional<YamlErrorHelp> tab_in_indent(const std::vector<std::string_view>& lines, int last) {
  for (int n = 0; n <= last && n < static_cast<int>(lines.size()); ++n) {
    const std::string_view line = lines[static_cast<std::size_t>(n)];
    const std::size_t i = line.find_first_not_of(" -");
    if (i == std::string_view::npos || line[i] != '\t') continue;
    return YamlErrorHelp{n + 1, static_cast<int>(i) + 1,
                         "malformed YAML: a tab in the indentation of line " +
                             std::to_string(n + 1) + " (YAML forbids tabs for indentation)",
                         "indent with spaces only (replace the tab by spaces)"};
  }
  return std::nullopt;
}

// The parent of the block that contains line `prev`: the nearest line above
// with a smaller key column (a `- ` entry counts as the entry itself).
std::string parent_of(const std::vector<LineShape>& shapes, int prev) {
  const LineShape& prev_shape = shapes[static_cast<std::size_t>(prev)];
  if (prev_shape.entry) return "the entry at line " + std::to_string(prev + 1);
  for (int n = prev - 1; n >= 0; --n) {
    const LineShape& shape = shapes[static_cast<std::size_t>(n)];
    if (shape.blank || shape.key_col >= prev_shape.key_col) continue;
    if (shape.entry) return "the entry at line " + std::to_string(n + 1);
    if (!shape.key.empty()) return "`" + shape.key + "` (line " + std::to_string(n + 1) + ")";
    return "line " + std::to_string(n + 1);
  }
  return "the top level";
}

std::optional<YamlErrorHelp> dedent_slip(const std::vector<std::string_view>& lines, int line) {
  if (line <= 0 || line >= static_cast<int>(lines.size())) return std::nullopt;
  std::vector<LineShape> shapes;
  for (int n = 0; n <= line; ++n) shapes.push_back(shape_of(lines[static_cast<std::size_t>(n)]));
  const LineShape& bad = shapes.back();
  if (bad.blank || bad.key.empty()) return std::nullopt;
  int prev = line - 1;
  while (prev >= 0 && shapes[static_cast<std::size_t>(prev)].blank) --prev;
  if (prev < 0) return std::nullopt;
  const LineShape& above = shapes[static_cast<std::size_t>(prev)];
  if (bad.key_col >= above.key_col || bad.entry) return std::nullopt;
  const std::string parent = parent_of(shapes, prev);
  return YamlErrorHelp{
      line + 1, bad.key_col + 1,
      "malformed YAML: `" + bad.key + "` on line " + std::to_string(line + 1) + " is indented " +
          spaces(bad.key_col) + ", less than " +
          (above.key.empty() ? "line " + std::to_string(prev + 1)
                             : "`" + above.key + "` on line " + std::to_string(prev + 1)) +
          " (" + std::to_string(above.key_col) +
          "), and matches no enclosing block: it lost its "
          "parent " +
          parent,
      "indent `" + bad.key + "` by " + std::to_string(above.key_col) + " spaces to keep it in " +
          parent + ", or to the column of the block it belongs to"};
}

bool generic(std::string_view what) {
  for (std::string_view message : {"end of map not found", "end of sequence not found",
                                   "illegal block entry", "illegal map value", "bad indentation"})
    if (what.find(message) != std::string_view::npos) return true;
  return false;
}

}  // namespace

std::optional<YamlErrorHelp> explain_yaml_error(std::string_view text, int line, int column,
                                                std::string_view what) {
  (void)column;
  const std::vector<std::string_view> lines = split_lines(text);
  if (auto tab = tab_in_indent(lines, line)) return tab;
  if (!generic(what)) return std::nullopt;
  return dedent_slip(lines, line);
}

}  // namespace shardc::fe
