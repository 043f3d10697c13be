// Typed access to Node values with diagnostics: every helper reports the
// reader's code (E-MODEL or E-RECIPE) at the offending node and returns
// nullopt/false, so callers keep going and report several problems per run.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/diagnostics.hpp"
#include "frontend/doc.hpp"

namespace shardc::fe {

class Reader {
 public:
  Reader(const std::string& file, DiagnosticSink& sink, DiagCode code)
      : file_(file), sink_(sink), code_(code) {}

  [[nodiscard]] SourceLoc loc(const Node& node) const {
    return SourceLoc{file_, node.line, node.col};
  }
  [[nodiscard]] SourceLoc key_loc(const Node& node) const {
    return SourceLoc{file_, node.key_line, node.key_col};
  }
  [[nodiscard]] const std::string& file() const { return file_.str(); }
  [[nodiscard]] DiagnosticSink& sink() const { return sink_; }
  [[nodiscard]] std::size_t errors() const { return errors_; }

  /// Reports `message` at `at` under `code` (the sink's argument order).
  /// An empty `hint` is replaced by a pointer to the format's reference, so
  /// every front-end diagnostic has a hint.
  void error(DiagCode code, const SourceLoc& at, std::string message, std::string hint = {});
  /// The same under the reader's own code (E-MODEL or E-RECIPE).
  void error(const SourceLoc& at, std::string message, std::string hint = {}) {
    error(code_, at, std::move(message), std::move(hint));
  }
  void error(const Node& node, std::string message, std::string hint = {}) {
    error(code_, loc(node), std::move(message), std::move(hint));
  }

  bool expect_map(const Node& node, std::string_view what);
  bool expect_seq(const Node& node, std::string_view what);
  /// Reports keys given twice; false when there was any.
  bool check_duplicates(const Node& map, std::string_view what);
  /// Reports unknown and duplicate keys; false when there was any.
  bool check_keys(const Node& map, std::initializer_list<std::string_view> valid,
                  std::string_view what);

  std::optional<std::string> get_string(const Node& node, std::string_view what);
  std::optional<std::int64_t> get_int(const Node& node, std::string_view what);
  std::optional<bool> get_bool(const Node& node, std::string_view what);
  /// A string, or a list of strings (a single string becomes a one-element list).
  std::optional<std::vector<std::string>> get_string_list(const Node& node, std::string_view what);

 private:
  [[nodiscard]] std::string default_hint() const;

  SourcePath file_;  // interned once: every loc() copies a pointer
  DiagnosticSink& sink_;
  DiagCode code_;
  std::size_t errors_ = 0;
};

/// "a mapping", "a list", "null", "the string \"4\"", "the number 1.5", ...
std::string describe(const Node& node);

/// Comma-separated list for hints: "a, b, c".
std::string join(std::initializer_list<std::string_view> items);

/// True for an identifier: letters, digits and `_`, not starting with a digit (mesh axis
/// names, repeat variables).
bool is_identifier(std::string_view text);

/// Parses a decimal integer (optional sign). nullopt on anything else or overflow.
std::optional<std::int64_t> parse_int(std::string_view text);

/// The top-level `format` of `root`, when given, must be the string `expected`; else
/// "unsupported `what` format ..." with `hint` (the model's and the recipe's format key).
void check_format(const Node& root, std::string_view expected, std::string_view what,
                  std::string_view hint, Reader& reader);

/// A `tied` entry `[source, alias]` (model `tied:` and recipe `tied:`): both names, or nullopt
/// when one is no string (reported) or the entry is no pair (reported with `hint`).
std::optional<std::pair<std::string, std::string>> parse_tied_pair(const Node& pair,
                                                                   std::string_view hint,
                                                                   Reader& reader);

}  // namespace shardc::fe
