// Typed access to Node values with diagnostics.
#include "frontend/reader.hpp"

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

std::string describe(const Node& n) {
  switch (n.kind) {
    case Node::Kind::Null:
      return "null";
    case Node::Kind::Seq:
      return "a list";
    case Node::Kind::Map:
      return "a mapping";
    case Node::Kind::Scalar:
      break;
  }
  std::string text(n.text().substr(0, 40));
  if (n.text().size() > 40) text += "...";
  return (n.quoted ? "the string \"" : "`") + text + (n.quoted ? "\"" : "`");
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

bool Reader::expect_map(const Node& n, std::string_view what) {
  if (n.is_map()) return true;
  error(n, std::string(what) + " must be a mapping, got " + describe(n),
        "write `key: value` pairs (block style) or `{key: value, ...}` (flow style) here");
  return false;
}

bool Reader::expect_seq(const Node& n, std::string_view what) {
  if (n.is_seq()) return true;
  error(n, std::string(what) + " must be a list, got " + describe(n),
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
    for (std::string_view v : valid) known = known || entry.key() == v;
    if (known) continue;
    error(key_loc(entry), "unknown key `" + std::string(entry.key()) + "` in " + std::string(what),
          "valid keys: " + join(valid));
    ok = false;
  }
  return check_duplicates(map, what) && ok;
}

std::optional<std::string> Reader::get_string(const Node& n, std::string_view what) {
  if (n.is_scalar()) return std::string(n.text());
  error(n, std::string(what) + " must be a string, got " + describe(n),
        "write a plain or quoted string here");
  return std::nullopt;
}

std::optional<std::int64_t> Reader::get_int(const Node& n, std::string_view what) {
  if (n.is_scalar() && !n.quoted) {
    if (std::optional<std::int64_t> v = parse_int(n.text())) return v;
  }
  bool digits = n.is_scalar() && !n.text().empty() &&
                n.text().find_first_not_of("+-0123456789") == std::string_view::npos;
  std::string why = digits && !n.quoted ? " (out of the 64-bit range)" : "";
  error(n, std::string(what) + " must be an integer, got " + describe(n) + why,
        "write an unquoted decimal integer (64-bit signed)");
  return std::nullopt;
}

std::optional<bool> Reader::get_bool(const Node& n, std::string_view what) {
  if (n.is_scalar() && !n.quoted) {
    for (std::string_view t : {"true", "True", "TRUE"}) {
      if (n.text() == t) return true;
    }
    for (std::string_view f : {"false", "False", "FALSE"}) {
      if (n.text() == f) return false;
    }
  }
  error(n, std::string(what) + " must be true or false, got " + describe(n),
        "write true or false (unquoted)");
  return std::nullopt;
}

std::optional<std::vector<std::string>> Reader::get_string_list(const Node& n,
                                                                std::string_view what) {
  if (n.is_scalar()) return std::vector<std::string>{std::string(n.text())};
  if (!n.is_seq() || n.items().empty()) {
    error(
        n,
        std::string(what) + " must be a string or a non-empty list of strings, got " + describe(n),
        "write one string, or a list such as `[a, b]`");
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (const Node& item : n.items()) {
    std::optional<std::string> s = get_string(item, what);
    ok = ok && s.has_value();
    if (s) out.push_back(std::move(*s));
  }
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace shardc::fe
