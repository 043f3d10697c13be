// Typed access to Node values with diagnostics.
#include "frontend/reader.hpp"

#include <algorithm>
#include <charconv>
#include <unordered_map>

#include "support/utf8.hpp"

namespace shardc::fe {

std::string join(std::initializer_list<std::string_view> items) {
  std::string out;
  for (std::string_view item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

std::string describe(const Node& node) {
  switch (node.kind) {
    case Node::Kind::Null:
      return "null";
    case Node::Kind::Seq:
      return "a list";
    case Node::Kind::Map:
      return "a mapping";
    case Node::Kind::Scalar:
      break;
  }
  std::string text(node.text().substr(0, 40));
  if (node.text().size() > 40) text += "...";
  return (node.quoted ? "the string \"" : "`") + text + (node.quoted ? "\"" : "`");
}

bool is_identifier(std::string_view text) {
  if (text.empty() || (text[0] >= '0' && text[0] <= '9')) return false;
  return std::all_of(text.begin(), text.end(), [](char character) {
    return (character >= 'a' && character <= 'z') || (character >= 'A' && character <= 'Z') ||
           (character >= '0' && character <= '9') || character == '_';
  });
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  std::int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string Reader::default_hint() const {
  // Every diagnostic carries a hint (docs/diagnostics.md); this one points
  // at the reference for whatever the caller did not explain itself.
  return code_ == DiagCode::EModel
             ? "see docs/formats.md or `shardc schema model` for the model format"
             : "see docs/formats.md or `shardc schema recipe` for the recipe format";
}

void Reader::error(DiagCode code, const SourceLoc& at, std::string message, std::string hint) {
  ++errors_;
  if (hint.empty()) hint = default_hint();
  sink_.error(code, at, printable(message), printable(hint));
}

bool Reader::expect_map(const Node& node, std::string_view what) {
  if (node.is_map()) return true;
  error(node, std::string(what) + " must be a mapping, got " + describe(node),
        "write `key: value` pairs (block style) or `{key: value, ...}` (flow style) here");
  return false;
}

bool Reader::expect_seq(const Node& node, std::string_view what) {
  if (node.is_seq()) return true;
  error(node, std::string(what) + " must be a list, got " + describe(node),
        "write `- item` lines (block style) or `[item, ...]` (flow style) here");
  return false;
}

bool Reader::check_duplicates(const Node& map, std::string_view what) {
  // Small maps (param entries have 2-4 keys) compare pairwise; larger ones hash.
  constexpr std::size_t kLinear = 8;
  std::unordered_map<std::string_view, std::size_t> seen;
  if (map.items().size() > kLinear) seen.reserve(map.items().size());
  bool ok = true;
  for (std::size_t i = 0; i < map.items().size(); ++i) {
    const Node& entry = map.items()[i];
    std::size_t first_index = i;
    if (map.items().size() > kLinear) {
      first_index = seen.emplace(entry.key(), i).first->second;
    } else {
      for (std::size_t j = 0; j < i && first_index == i; ++j) {
        if (map.items()[j].key() == entry.key()) first_index = j;
      }
    }
    if (first_index == i) continue;
    const Node& first = map.items()[first_index];
    error(key_loc(entry),
          "duplicate key `" + std::string(entry.key()) + "` in " + std::string(what),
          "first given at line " + std::to_string(first.key_line) + ", column " +
              std::to_string(first.key_col));
    ok = false;
  }
  return ok;
}

bool Reader::check_keys(const Node& map, std::initializer_list<std::string_view> valid,
                        std::string_view what) {
  bool ok = true;
  for (const Node& entry : map.items()) {
    bool known = false;
    for (std::string_view key : valid) known = known || entry.key() == key;
    if (known) continue;
    error(key_loc(entry), "unknown key `" + std::string(entry.key()) + "` in " + std::string(what),
          "valid keys: " + join(valid));
    ok = false;
  }
  return check_duplicates(map, what) && ok;
}

std::optional<std::string> Reader::get_string(const Node& node, std::string_view what) {
  if (node.is_scalar()) return std::string(node.text());
  error(node, std::string(what) + " must be a string, got " + describe(node),
        "write a plain or quoted string here");
  return std::nullopt;
}

std::optional<std::int64_t> Reader::get_int(const Node& node, std::string_view what) {
  if (node.is_scalar() && !node.quoted) {
    if (std::optional<std::int64_t> value = parse_int(node.text())) return value;
  }
  bool digits = node.is_scalar() && !node.text().empty() &&
                node.text().find_first_not_of("+-0123456789") == std::string_view::npos;
  std::string why = digits && !node.quoted ? " (out of the 64-bit range)" : "";
  error(node, std::string(what) + " must be an integer, got " + describe(node) + why,
        "write an unquoted decimal integer (64-bit signed)");
  return std::nullopt;
}

std::optional<bool> Reader::get_bool(const Node& node, std::string_view what) {
  if (node.is_scalar() && !node.quoted) {
    for (std::string_view spelling : {"true", "True", "TRUE"}) {
      if (node.text() == spelling) return true;
    }
    for (std::string_view spelling : {"false", "False", "FALSE"}) {
      if (node.text() == spelling) return false;
    }
  }
  error(node, std::string(what) + " must be true or false, got " + describe(node),
        "write true or false (unquoted)");
  return std::nullopt;
}

std::optional<std::vector<std::string>> Reader::get_string_list(const Node& node,
                                                                std::string_view what) {
  if (node.is_scalar()) return std::vector<std::string>{std::string(node.text())};
  if (!node.is_seq() || node.items().empty()) {
    error(node,
          std::string(what) + " must be a string or a non-empty list of strings, got " +
              describe(node),
          "write one string, or a list such as `[a, b]`");
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (const Node& item : node.items()) {
    std::optional<std::string> text = get_string(item, what);
    ok = ok && text.has_value();
    if (text) out.push_back(std::move(*text));
  }
  if (!ok) return std::nullopt;
  return out;
}

void check_format(const Node& root, std::string_view expected, std::string_view what,
                  std::string_view hint, Reader& reader) {
  const Node* format = root.find("format");
  if (format == nullptr) return;
  std::optional<std::string> text = reader.get_string(*format, "`format`");
  if (text && *text != expected) {
    reader.error(*format, "unsupported " + std::string(what) + " format " + describe(*format),
                 std::string(hint));
  }
}

std::optional<std::pair<std::string, std::string>> parse_tied_pair(const Node& pair,
                                                                   std::string_view hint,
                                                                   Reader& reader) {
  if (!pair.is_seq() || pair.items().size() != 2) {
    reader.error(pair, "a `tied` entry must be [source, alias], got " + describe(pair),
                 std::string(hint));
    return std::nullopt;
  }
  std::optional<std::string> source = reader.get_string(pair.items()[0], "a tied name");
  std::optional<std::string> alias = reader.get_string(pair.items()[1], "a tied name");
  if (!source || !alias) return std::nullopt;
  return std::make_pair(std::move(*source), std::move(*alias));
}

}  // namespace shardc::fe
