// The JSON fast path (pointer input, positions from a cursor that follows
// the SAX events) must build the same tree, with the same positions, as the
// byte-tracking path, and report exactly its diagnostics.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "frontend/doc.hpp"

namespace shardc::fe {
namespace {

std::string where(const Node& n) {
  return std::string(n.key()) + "@" + std::to_string(n.line) + ":" + std::to_string(n.col);
}

void check_same(const Node& fast, const Node& ref) {
  INFO(where(ref));
  REQUIRE(fast.kind == ref.kind);
  CHECK(fast.quoted == ref.quoted);
  CHECK(fast.line == ref.line);
  CHECK(fast.col == ref.col);
  CHECK(fast.key_line == ref.key_line);
  CHECK(fast.key_col == ref.key_col);
  CHECK(fast.key() == ref.key());
  CHECK(fast.text() == ref.text());
  REQUIRE(fast.items().size() == ref.items().size());
  for (std::size_t i = 0; i < ref.items().size(); ++i) check_same(fast.items()[i], ref.items()[i]);
}

std::string render(const DiagnosticSink& sink) {
  std::string out;
  for (const Diagnostic& d : sink.items()) {
    out += d.loc.file + ":" + std::to_string(d.loc.line) + ":" + std::to_string(d.loc.column) +
           ": " + d.code + ": " + d.message + " [" + d.hint + "]\n";
  }
  return out;
}

// Both paths on `text`: same tree on success, same diagnostics on failure.
void check_paths_agree(const std::string& text, const DocLimits& limits = {}) {
  INFO(text.substr(0, 200));
  SourceFile file{"t.json", text};
  DiagnosticSink fast_sink;
  DiagnosticSink ref_sink;
  std::optional<Document> fast = load_json(file, "E-MODEL", fast_sink, limits);
  std::optional<Document> ref = load_json_tracking(file, "E-MODEL", ref_sink, limits);
  REQUIRE(fast.has_value() == ref.has_value());
  CHECK(render(fast_sink) == render(ref_sink));
  if (fast) check_same(fast->root, ref->root);
}

TEST_CASE("JSON fast path: same tree and positions as the tracking path") {
  check_paths_agree(R"({"a": 1, "b": [true, false, null], "c": {"d": "e"}})");
  check_paths_agree(
      "{\n  \"params\": [\n    {\"name\": \"w\", \"shape\": [2, 3]},\n"
      "    {\"name\": \"x\",\n     \"shape\": []}\n  ]\n}\n");
  check_paths_agree("{\r\n\t\"k\"\t:\t[ 1 ,2,\t3 ]\r\n}");
  check_paths_agree(R"({"esc\"aped": "a\\b\"c\n\u00e9\ud83d\ude00", "q": "\\", "e": ""})");
  check_paths_agree(R"({"s": "\\\"", "t": "x\\", "u": "\/", "k\\": "\\\\"})");
  check_paths_agree(
      R"({"n": [-0, 0, -1, 12, 1.5, -2.5e3, 1E2, 9223372036854775807, -9223372036854775808]})");
  check_paths_agree(
      R"({"big": [18446744073709551615, 18446744073709551616, -9223372036854775809]})");
  check_paths_agree(R"({"empty": {}, "list": [], "nested": [[[]], [{}], {"a": [{}]}]})");
  check_paths_agree("\xEF\xBB\xBF{\"bom\": 1}");
  check_paths_agree("\xEF\xBB\xBF \n {\"bom\": [1]}");
  check_paths_agree(R"({"utf8": "h\u00e9llo wörld ✓", "ключ": "значение"})");
  check_paths_agree("{\"a\":1}   \n\n");
}

TEST_CASE("JSON fast path: malformed text and limits report the tracking diagnostics") {
  check_paths_agree("{\"params\": [");
  check_paths_agree("{\"a\": tru}");
  check_paths_agree("{\"a\": 1,}");
  check_paths_agree("{\"a\": \"unterminated}");
  check_paths_agree("{\"a\": \"ctl\x01\"}");
  check_paths_agree("{\"a\": 1e999}");
  check_paths_agree("{\"a\": 1} trailing");
  check_paths_agree("{\"a\": [1, 2 3]}");
  check_paths_agree("{\n \"a\": \"\xff\"\n}");
  DocLimits few;
  few.max_nodes = 5;
  check_paths_agree("{\"a\": [1, 2, 3, 4, 5, 6]}", few);
  DocLimits shallow;
  shallow.max_depth = 3;
  check_paths_agree("{\"a\": [[[1]]]}", shallow);
  check_paths_agree("{\"a\": [[1]]}", shallow);
}

TEST_CASE("JSON fast path: every JSON file under tests/ agrees with the tracking path") {
  const std::filesystem::path root = std::filesystem::path(SHARDC_SOURCE_DIR) / "tests";
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    if (s.find_first_not_of(" \t\r\n") == std::string::npos ||
        s[s.find_first_not_of(" \t\r\n")] != '{') {
      continue;
    }
    INFO(entry.path().string());
    check_paths_agree(s);
    ++files;
  }
  CHECK(files > 5);
}

}  // namespace
}  // namespace shardc::fe
