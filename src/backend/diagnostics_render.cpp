// Diagnostics renderers: compiler-style text with a source excerpt, a JSON
// array, and GitHub workflow commands (contract §5.7).
#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "backend/json_writer.hpp"
#include "backend/render_util.hpp"
#include "support/utf8.hpp"

namespace shardc {
namespace {

constexpr std::size_t kMaxExcerpt = 160;  // characters of a source line shown
constexpr std::size_t kContext = 60;      // characters kept left of the caret when cut

// Start offsets of every line of a text, built once per file.
class LineIndex {
 public:
  explicit LineIndex(std::string_view text) : text_(text) {
    starts_.push_back(0);
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') starts_.push_back(i + 1);
    }
  }
  // 1-based line, without its line terminator; empty when out of range.
  [[nodiscard]] std::string_view line(int line_no) const {
    if (line_no < 1 || static_cast<std::size_t>(line_no) > starts_.size()) return {};
    const std::size_t begin = starts_[static_cast<std::size_t>(line_no) - 1];
    std::size_t end = text_.find('\n', begin);
    if (end == std::string_view::npos) end = text_.size();
    std::string_view line_text = text_.substr(begin, end - begin);
    if (!line_text.empty() && line_text.back() == '\r') line_text.remove_suffix(1);
    return line_text;
  }

 private:
  std::string_view text_;
  std::vector<std::size_t> starts_;
};

std::string location_prefix(const SourceLoc& loc) {
  if (loc.file.empty()) return "shardc: ";
  std::string prefix = printable(loc.file.str());
  if (loc.line > 0) {
    prefix += ':' + std::to_string(loc.line);
    if (loc.column > 0) prefix += ':' + std::to_string(loc.column);
  }
  return prefix + ": ";
}

std::string headline(const Diagnostic& diag) {
  return location_prefix(diag.loc) + severity_name(diag.severity) + "[" +
         std::string(code_name(diag.code)) + "]: " + printable(diag.message);
}

bool continuation_byte(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

// Terminal columns of valid UTF-8 text: one per code point.
std::size_t columns(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char byte) { return !continuation_byte(byte); }));
}

// The source line and a caret under the column, with a `NN | ` gutter.
// Long lines are cut to a window around the column. The line is shown through
// printable() like the message (control characters and malformed UTF-8 as
// `\xNN`), and the caret sits under the escaped rendering of its byte.
std::string excerpt(std::string_view line, int line_no, int column) {
  std::size_t caret = column > 0 ? static_cast<std::size_t>(column) - 1 : 0;
  caret = std::min(caret, line.size());
  // Cuts fall on character boundaries, so escaping the pieces apart equals
  // escaping the whole.
  while (caret > 0 && caret < line.size() && continuation_byte(line[caret])) --caret;
  std::size_t begin = 0;
  std::size_t end = line.size();
  std::string prefix;
  std::string suffix;
  if (line.size() > kMaxExcerpt) {
    begin = caret > kContext ? caret - kContext : 0;
    while (begin > 0 && continuation_byte(line[begin])) --begin;
    end = std::min(line.size(), begin + kMaxExcerpt);
    while (end < line.size() && end > caret && continuation_byte(line[end])) --end;
    if (begin > 0) prefix = "...";
    if (end < line.size()) suffix = "...";
  }
  const std::string before = prefix + printable(line.substr(begin, caret - begin));
  const std::string shown = before + printable(line.substr(caret, end - caret)) + suffix;
  const std::string number = std::to_string(line_no);
  const std::string gutter(number.size(), ' ');
  return " " + number + " | " + shown + "\n " + gutter + " | " + std::string(columns(before), ' ') +
         "^\n";
}

std::string plural(std::size_t count, std::string_view word) {
  return std::to_string(count) + " " + std::string(word) + (count == 1 ? "" : "s");
}

std::string count_line(const DiagnosticSink& sink) {
  std::string line =
      plural(sink.error_count(), "error") + ", " + plural(sink.warning_count(), "warning");
  if (sink.dropped() > 0) line += " (and " + std::to_string(sink.dropped()) + " more not shown)";
  return line + "\n";
}

// GitHub workflow command escaping: data escapes %, CR, LF; property values
// also escape ':' and ','.
std::string gh_escape(std::string_view text, bool property) {
  std::string out;
  out.reserve(text.size());
  for (const char character : text) {
    switch (character) {
      case '%':
        out += "%25";
        break;
      case '\r':
        out += "%0D";
        break;
      case '\n':
        out += "%0A";
        break;
      case ':':
        out += property ? "%3A" : ":";
        break;
      case ',':
        out += property ? "%2C" : ",";
        break;
      default:
        out += character;
    }
  }
  return out;
}

// printable() of each line, the line breaks kept.
std::string printable_lines(std::string_view text) {
  std::string out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find('\n', start);
    out += printable(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    out += '\n';
    start = end + 1;
  }
}

// GitHub's workflow commands are severity_name's words but for a note: `::notice`.
const char* gh_command(Severity severity) {
  return severity == Severity::Note ? "notice" : severity_name(severity);
}

std::string gh_properties(const Diagnostic& diag) {
  std::vector<std::string> props;
  if (!diag.loc.file.empty()) props.push_back("file=" + gh_escape(diag.loc.file.str(), true));
  if (diag.loc.line > 0) props.push_back("line=" + std::to_string(diag.loc.line));
  if (diag.loc.column > 0) props.push_back("col=" + std::to_string(diag.loc.column));
  props.push_back("title=" + gh_escape(code_name(diag.code), true));
  std::string joined;
  for (std::size_t i = 0; i < props.size(); ++i) joined += (i > 0 ? "," : "") + props[i];
  return joined;
}

}  // namespace

std::string render_diagnostics_text(const DiagnosticSink& sink, const SourceMap& sources) {
  std::unordered_map<std::string, LineIndex> indexes;
  std::string out;
  for (const Diagnostic& diag : sink.items()) {
    out += headline(diag) + "\n";
    const auto src = sources.find(diag.loc.file);
    if (src != sources.end() && diag.loc.line > 0) {
      auto it = indexes.try_emplace(diag.loc.file, src->second).first;
      const std::string_view line = it->second.line(diag.loc.line);
      if (!line.empty()) out += excerpt(line, diag.loc.line, diag.loc.column);
    }
    if (!diag.hint.empty()) out += "  hint: " + printable(diag.hint) + "\n";
  }
  if (!sink.items().empty() || sink.dropped() > 0) out += count_line(sink);
  return out;
}

std::string render_diagnostics_json(const DiagnosticSink& sink) {
  std::string out;
  json::Writer writer(out);
  writer.begin_array();
  for (const Diagnostic& diag : sink.items()) {
    writer.line_break();
    backend::write_diagnostic(writer, diag);
  }
  if (!sink.items().empty()) writer.line_break();
  writer.end_array();
  out += '\n';
  return out;
}

std::string render_diagnostics_github(const DiagnosticSink& sink) {
  std::string out;
  for (const Diagnostic& diag : sink.items()) {
    // Text from inputs (names, config strings) stays data: control characters as \xNN,
    // line breaks kept (gh_escape writes them as %0A, so they start no workflow command).
    std::string message = printable_lines(diag.message);
    if (!diag.hint.empty()) message += "\nhint: " + printable_lines(diag.hint);
    out += "::" + std::string(gh_command(diag.severity)) + " " + gh_properties(diag) +
           "::" + gh_escape(message, false) + "\n";
  }
  if (sink.dropped() > 0) {
    out += "::notice title=shardc::" + std::to_string(sink.dropped()) +
           " more diagnostics not shown\n";
  }
  return out;
}

}  // namespace shardc
