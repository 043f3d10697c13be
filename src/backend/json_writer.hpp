// A minimal streaming JSON writer: appends to a std::string, tracks commas,
// writes integers with std::to_chars. Used for every JSON the back end emits
// so large outputs (plan.json with ~1M shard entries) are written without a
// DOM. Output is compact; `line_break()` inserts a newline between elements
// so files read one item per line.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardc::json {

/// Appends `text` as a quoted JSON string. Control characters are escaped;
/// invalid UTF-8 bytes become U+FFFD so the output always parses.
void append_string(std::string& out, std::string_view text);
/// Appends a decimal integer.
void append_int(std::string& out, std::int64_t value);

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}

  Writer& begin_object();
  Writer& end_object();
  Writer& begin_array();
  Writer& end_array();
  /// Writes the key of the next member (inside an object).
  Writer& key(std::string_view name);

  Writer& value(std::string_view text);
  Writer& value(const char* text) { return value(std::string_view(text)); }
  Writer& value(const std::string& text) { return value(std::string_view(text)); }
  Writer& value(std::int64_t number);
  Writer& value(int number) { return value(static_cast<std::int64_t>(number)); }
  Writer& value(bool flag);
  Writer& null();
  /// An array of integers, e.g. a shape.
  Writer& ints(std::span<const std::int64_t> values);
  /// Splices pre-rendered JSON text as the next value.
  Writer& raw(std::string_view json_text);
  /// Splices pre-rendered members (`"k":v`, comma-separated, as a Writer
  /// renders them after an object's `{`) as the next members of the open
  /// object; the object then counts as having members.
  Writer& raw_members(std::string_view members_text);

  /// The next element (or the closing bracket) starts on a new line, after
  /// its comma.
  Writer& line_break();

  /// Shorthands for `key(name).value(item)`.
  template <typename T>
  Writer& member(std::string_view name, const T& item) {
    key(name);
    return value(item);
  }
  Writer& member_null(std::string_view name) { return key(name).null(); }
  Writer& member_ints(std::string_view name, std::span<const std::int64_t> values) {
    return key(name).ints(values);
  }

 private:
  void separate();
  void flush_newline();
  /// Opens a container: `{` or `[` after the separator the element needs.
  Writer& open(char bracket);
  /// Closes the innermost container with `}` or `]` (after a pending line break).
  Writer& close(char bracket);

  std::string& out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool suppress_ = false;    // the next element needs no separator (after a key)
  bool newline_ = false;     // a line break is pending
};

}  // namespace shardc::json
