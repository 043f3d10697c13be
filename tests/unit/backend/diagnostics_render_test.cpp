#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "backend/backend.hpp"

using namespace shardc;

namespace {

DiagnosticSink sample_sink() {
  DiagnosticSink sink;
  sink.error(DiagCode::EHeads, {"recipe.yaml", 2, 5},
             "num_attention_heads 30 not divisible by tp 8", "valid tp sizes: 1, 2, 3");
  sink.warning(DiagCode::WUnusedRule, {"recipe.yaml", 3, 0}, "rule matches nothing");
  return sink;
}

const SourceMap kSources = {{"recipe.yaml", "mesh:\n  - {name: tp, size: 8}\nrules: []\n"}};

}  // namespace

TEST_CASE("text diagnostics quote the source line with a caret and a hint") {
  const std::string text = render_diagnostics_text(sample_sink(), kSources);
  CHECK(text ==
        "recipe.yaml:2:5: error[E-HEADS]: num_attention_heads 30 not divisible by tp 8\n"
        " 2 |   - {name: tp, size: 8}\n"
        "   |     ^\n"
        "  hint: valid tp sizes: 1, 2, 3\n"
        "recipe.yaml:3: warning[W-UNUSED-RULE]: rule matches nothing\n"
        " 3 | rules: []\n"
        "   | ^\n"
        "  hint: see W-UNUSED-RULE in docs/diagnostics.md\n"
        "1 error, 1 warning\n");
}

TEST_CASE("text diagnostics without a file or source print the headline and hint only") {
  DiagnosticSink sink;
  sink.error(DiagCode::EModel, {}, "cannot read", "check the path");
  CHECK(render_diagnostics_text(sink, {}) ==
        "shardc: error[E-MODEL]: cannot read\n  hint: check the path\n1 error, 0 warnings\n");
  CHECK(render_diagnostics_text(DiagnosticSink{}, {}).empty());
}

TEST_CASE("text diagnostics say how many were dropped") {
  DiagnosticSink sink(1);
  sink.error(DiagCode::EModel, {"m.yaml", 1, 1}, "a");
  sink.error(DiagCode::EModel, {"m.yaml", 2, 1}, "b");
  sink.error(DiagCode::EModel, {"m.yaml", 3, 1}, "c");
  const std::string text = render_diagnostics_text(sink, {});
  CHECK(text.ends_with("3 errors, 0 warnings (and 2 more not shown)\n"));
}

TEST_CASE("long source lines are cut around the column") {
  DiagnosticSink sink;
  sink.error(DiagCode::EModel, {"m.json", 1, 500}, "bad");
  const std::string line(1000, 'x');
  const std::string text = render_diagnostics_text(sink, {{"m.json", line}});
  CHECK(text.find(" 1 | ...") != std::string::npos);
  CHECK(text.find(std::string(1000, 'x')) == std::string::npos);
}

TEST_CASE("json diagnostics are an array of objects with every field") {
  const auto j = nlohmann::json::parse(render_diagnostics_json(sample_sink()));
  REQUIRE(j.size() == 2);
  CHECK(j[0]["code"] == "E-HEADS");
  CHECK(j[0]["severity"] == "error");
  CHECK(j[0]["file"] == "recipe.yaml");
  CHECK(j[0]["line"] == 2);
  CHECK(j[0]["column"] == 5);
  CHECK(j[0]["hint"] == "valid tp sizes: 1, 2, 3");
  CHECK(j[1]["severity"] == "warning");
  CHECK(j[1].contains("param"));
  CHECK(j[1].contains("rule"));
  CHECK(nlohmann::json::parse(render_diagnostics_json(DiagnosticSink{})).empty());
}

TEST_CASE("github annotations escape percent, newlines and property separators") {
  DiagnosticSink sink;
  sink.error(DiagCode::EHeads, {"a,b:c.yaml", 4, 2}, "100% bad\nreally", "fix it");
  sink.warning(DiagCode::WVocab, {}, "w", "h");
  CHECK(
      render_diagnostics_github(sink) ==
      "::error file=a%2Cb%3Ac.yaml,line=4,col=2,title=E-HEADS::100%25 bad%0Areally%0Ahint: fix it\n"
      "::warning title=W-VOCAB::w%0Ahint: h\n");
}

TEST_CASE("source excerpts escape control characters and malformed UTF-8 like the message") {
  // `name: "tp<ESC>[2J<ESC>[31m"` with the column on the closing quote, and a
  // line with a bad byte and a two-byte character before the column.
  const std::string hostile = "  - {name: \"tp\x1b[2J\x1b[31m\", size: 8}";
  const std::string mixed = "a\xff\xc3\xa9\tb: x";
  DiagnosticSink sink;
  sink.error(DiagCode::ERecipe, {"r.yaml", 1, 24}, "bad name");
  sink.error(DiagCode::ERecipe, {"r.yaml", 2, 7}, "m");
  const std::string text = render_diagnostics_text(sink, {{"r.yaml", hostile + "\n" + mixed}});
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\xff') == std::string::npos);
  CHECK(text ==
        "r.yaml:1:24: error[E-RECIPE]: bad name\n"
        " 1 |   - {name: \"tp\\x1B[2J\\x1B[31m\", size: 8}\n"
        "   | " +
            std::string(29, ' ') +
            "^\n"
            "  hint: see E-RECIPE in docs/diagnostics.md\n"
            "r.yaml:2:7: error[E-RECIPE]: m\n"
            " 2 | a\\xFF\xc3\xa9\\x09b: x\n"
            "   | " +
            std::string(11, ' ') +
            "^\n"
            "  hint: see E-RECIPE in docs/diagnostics.md\n"
            "2 errors, 0 warnings\n");
}

TEST_CASE("a cut excerpt of escaped bytes keeps the caret on its character") {
  DiagnosticSink sink;
  sink.error(DiagCode::EModel, {"m.json", 1, 301}, "bad");
  // 300 ESC bytes, then the caret's `X`.
  const std::string line = std::string(300, '\x1b') + "X" + std::string(300, 'y');
  const std::string text = render_diagnostics_text(sink, {{"m.json", line}});
  const std::size_t row = text.find(" 1 | ...");
  REQUIRE(row != std::string::npos);
  const std::size_t shown_at = row + 5;  // after " 1 | "
  const std::size_t caret_row = text.find('\n', row) + 1;
  const std::size_t caret_at = text.find('^', caret_row) - (caret_row + 5);
  CHECK(text.substr(shown_at + caret_at, 1) == "X");
  CHECK(text.find('\x1b') == std::string::npos);
}
