// Typed access to Node values with diagnostics: every helper reports the
// reader's code (E-MODEL or E-RECIPE) at the offending node and returns
// nullopt/false, so callers keep going and report several problems per run.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "core/diagnostics.hpp"
#include "frontend/doc.hpp"

namespace shardc::fe {

class Reader {
 public:
  Reader(const std::string& file, DiagnosticSink& sink, DiagCode code)
      : file_(file), sink_(sink), code_(code) {}

  [[nodiscard]] SourceLoc loc(const Node& n) const { return SourceLoc{file_, n.line, n.col}; }
  [[nodiscard]] SourceLoc key_loc(const Node& n) const {
    return SourceLoc{file_, n.key_line, n.key_col};
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
  void error(const Node& n, std::string message, std::string hint = {}) {
    error(code_, loc(n), std::move(message), std::move(hint));
  }

  bool expect_map(const Node& n, std::string_view what);
  bool expect_seq(const Node& n, std::string_view what);
  /// Reports keys given twice; false when there was any.
  bool check_duplicates(const Node& map, std::string_view what);
  /// Reports unknown and duplicate keys; false when there was any.
  bool check_keys(const Node& map, std::initializer_list<std::string_view> valid,
                  std::string_view what);

  std::optional<std::string> get_string(const Node& n, std::string_view what);
  std::optional<std::int64_t> get_int(const Node& n, std::string_view what);
  std::optional<bool> get_bool(const Node& n, std::string_view what);
  /// A string, or a list of strings (a single string becomes a one-element list).
  std::optional<std::vector<std::string>> get_string_list(const Node& n, std::string_view what);

 private:
  [[nodiscard]] std::string default_hint() const;

  SourcePath file_;  // interned once: every loc() copies a pointer
  DiagnosticSink& sink_;
  DiagCode code_;
  std::size_t errors_ = 0;
};

/// "a mapping", "a list", "null", "the string \"4\"", "the number 1.5", ...
std::string describe(const Node& n);

/// Comma-separated list for hints: "a, b, c".
std::string join(std::initializer_list<std::string_view> items);

/// Parses a decimal integer (optional sign). nullopt on anything else or overflow.
std::optional<std::int64_t> parse_int(std::string_view text);

}  // namespace shardc::fe
