#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "shardc/backend.hpp"

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
        "  hint: see W-UNUSED-RULE in the Diagnostics table of README.md\n"
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
