// Helpers for front-end tests: parse in-memory text and look at diagnostics.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "frontend/frontend.hpp"

namespace shardc::test {

struct ParseResult {
  DiagnosticSink sink;
  std::optional<Model> model;
  std::optional<Recipe> recipe;

  /// The first stored diagnostic with `code`, or nullptr.
  [[nodiscard]] const Diagnostic* find(const std::string& code) const {
    for (const Diagnostic& diag : sink.items()) {
      if (code_name(diag.code) == code) return &diag;
    }
    return nullptr;
  }
  [[nodiscard]] std::string all_messages() const {
    std::string out;
    for (const Diagnostic& diag : sink.items()) {
      out += diag.loc.file.str() + ":" + std::to_string(diag.loc.line) + ":" +
             std::to_string(diag.loc.column) + ": " + std::string(code_name(diag.code)) + ": " +
             diag.message + " [" + diag.hint + "]\n";
    }
    return out;
  }
};

inline ParseResult model_from(const std::string& text, const std::string& path = "model.yaml") {
  ParseResult parsed;
  parsed.model = parse_model(SourceFile{path, text}, parsed.sink);
  return parsed;
}

inline ParseResult recipe_from(const std::string& text, const std::string& path = "recipe.yaml") {
  ParseResult parsed;
  parsed.recipe = parse_recipe(SourceFile{path, text}, parsed.sink);
  return parsed;
}

/// Checks that parsing failed with a diagnostic `code` at line:col.
inline void check_error_at(const ParseResult& parsed, const std::string& code, int line, int col) {
  INFO(parsed.all_messages());
  CHECK_FALSE((parsed.model.has_value() || parsed.recipe.has_value()));
  const Diagnostic* diag = parsed.find(code);
  REQUIRE(diag != nullptr);
  CHECK(diag->loc.line == line);
  CHECK(diag->loc.column == col);
}

}  // namespace shardc::test
