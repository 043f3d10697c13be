// The simdjson reader (load_json) must build the same tree, with the same
// positions, as the nlohmann byte-tracking reader (load_json_tracking), and
// report exactly its diagnostics; the positions and texts are also checked
// against hand-counted values.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/doc.hpp"

namespace shardc::fe {
namespace {

std::string where(const Node& node) {
  return std::string(node.key()) + "@" + std::to_string(node.line) + ":" + std::to_string(node.col);
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
  for (const Diagnostic& diag : sink.items()) {
    out += diag.loc.file.str() + ":" + std::to_string(diag.loc.line) + ":" +
           std::to_string(diag.loc.column) + ": " + std::string(code_name(diag.code)) + ": " +
           diag.message + " [" + diag.hint + "]\n";
  }
  return out;
}

// Both paths on `text`: same tree on success, same diagnostics on failure.
void check_paths_agree(const std::string& text, const DocLimits& limits = {}) {
  INFO(text.substr(0, 200));
  SourceFile file{"t.json", text};
  DiagnosticSink fast_sink;
  DiagnosticSink ref_sink;
  std::optional<Document> fast = load_json(file, DiagCode::EModel, fast_sink, limits);
  std::optional<Document> ref = load_json_tracking(file, DiagCode::EModel, ref_sink, limits);
  REQUIRE(fast.has_value() == ref.has_value());
  CHECK(render(fast_sink) == render(ref_sink));
  if (fast) check_same(fast->root, ref->root);
}

TEST_CASE("JSON simdjson path: same tree and positions as the tracking path") {
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

TEST_CASE("JSON simdjson path: malformed text and limits report the tracking diagnostics") {
  check_paths_agree("{\"params\": [");
  check_paths_agree("{\"a\": tru}");
  check_paths_agree("{\"a\": 1,}");
  check_paths_agree("{\"a\": \"unterminated}");
  check_paths_agree("{\"a\": \"ctl\x01\"}");
  check_paths_agree("{\"a\": 1e999}");
  check_paths_agree("{\"a\": 1} trailing");
  check_paths_agree("{\"a\": [1, 2 3]}");
  check_paths_agree("{\n \"a\": \"\xff\"\n}");
  // On-Demand skips an unconsumed value by counting brackets: these pass
  // unless the reader consumes every string (found by mutating inputs).
  check_paths_agree(R"({"params": ["name": "w",T"shape": [4],}]})");
  check_paths_agree(R"({"a": ["x": "w"]})");
  check_paths_agree(R"({"a": ["x": {"b": [}]]})");
  DocLimits few;
  few.max_nodes = 5;
  check_paths_agree("{\"a\": [1, 2, 3, 4, 5, 6]}", few);
  DocLimits shallow;
  shallow.max_depth = 3;
  check_paths_agree("{\"a\": [[[1]]]}", shallow);
  check_paths_agree("{\"a\": [[1]]}", shallow);
}

// `file` must outlive the result, which views its text.
Document load_ok(const SourceFile& file) {
  DiagnosticSink sink;
  std::optional<Document> doc = load_json(file, DiagCode::EModel, sink, DocLimits{});
  REQUIRE(doc.has_value());
  CHECK(sink.items().empty());
  return std::move(*doc);
}

// The one diagnostic load_json reports for `text`, rendered.
std::string load_error(const std::string& text, const DocLimits& limits = {}) {
  SourceFile file{"t.json", text};
  DiagnosticSink sink;
  CHECK_FALSE(load_json(file, DiagCode::EModel, sink, limits).has_value());
  REQUIRE(sink.items().size() == 1);
  return render(sink);
}

TEST_CASE("JSON simdjson path: nested positions are byte columns, keys where written") {
  SourceFile file{"t.json",
                  "{\n  \"a\": [1, {\"b\": \"\xC3\xA9\", \"c\": null}],\n\t\"d\": true\n}"};
  Document doc = load_ok(file);
  CHECK(where(doc.root) == "@1:1");
  const Node& first = doc.root.items()[0];
  CHECK(where(first) == "a@2:8");
  CHECK(first.key_line == 2);
  CHECK(first.key_col == 3);
  CHECK(where(first.items()[0]) == "@2:9");
  const Node& inner = first.items()[1];
  CHECK(where(inner) == "@2:12");
  CHECK(where(inner.items()[0]) == "b@2:18");
  CHECK(inner.items()[0].key_col == 13);
  // The column counts bytes: "é" is two.
  CHECK(where(inner.items()[1]) == "c@2:29");
  CHECK(inner.items()[1].key_col == 24);
  CHECK(inner.items()[1].is_null());
  const Node& d = doc.root.items()[1];
  CHECK(where(d) == "d@3:7");
  CHECK(d.key_col == 2);
  CHECK(d.text() == "true");
}

TEST_CASE("JSON simdjson path: escapes are unescaped, plain strings view the source") {
  SourceFile file{"t.json",
                  R"({"k\"ey": "a\\b\"c\n\u00e9\ud83d\ude00", "plain": "x y", "\u0041": ""})"};
  Document doc = load_ok(file);
  const std::string& text = file.text;
  const Node& first = doc.root.items()[0];
  CHECK(first.key() == "k\"ey");
  CHECK(first.text() == "a\\b\"c\n\xC3\xA9\xF0\x9F\x98\x80");
  CHECK(first.quoted);
  const Node& plain = doc.root.items()[1];
  CHECK(plain.text() == "x y");
  CHECK(plain.text().data() == text.data() + text.find("x y"));
  CHECK(plain.key().data() == text.data() + text.find("plain"));
  CHECK(doc.root.items()[2].key() == "A");
  CHECK(doc.root.items()[2].text().empty());
}

TEST_CASE("JSON simdjson path: numbers keep their written text, big ones included") {
  SourceFile file{
      "t.json",
      R"({"n": [18446744073709551616, -9223372036854775809, 123456789012345678901234567890,)"
      " 1.50, -2.5E+3 , -0, -0.0, 1e-999]}"};
  Document doc = load_ok(file);
  std::vector<std::string> texts;
  for (const Node& item : doc.root.items()[0].items()) {
    CHECK_FALSE(item.quoted);
    texts.emplace_back(item.text());
  }
  CHECK(texts == std::vector<std::string>{"18446744073709551616", "-9223372036854775809",
                                          "123456789012345678901234567890", "1.50", "-2.5E+3", "0",
                                          "-0.0", "1e-999"});
}

TEST_CASE("JSON simdjson path: duplicate keys stay, in written order, for the reader to report") {
  SourceFile file{"t.json", "{\"a\": 1,\n \"a\": 2}"};
  Document doc = load_ok(file);
  REQUIRE(doc.root.items().size() == 2);
  CHECK(where(doc.root.items()[0]) == "a@1:7");
  CHECK(where(doc.root.items()[1]) == "a@2:7");
  CHECK(doc.root.items()[1].key_col == 2);
  CHECK(doc.root.find("a")->text() == "1");
}

TEST_CASE("JSON simdjson path: errors carry the tracking reader's file:line:col") {
  CHECK(load_error("{\"a\": [1,\n 2 3]}").starts_with("t.json:2:4: E-MODEL: malformed JSON: "));
  CHECK(load_error("{\"params\": [\n").starts_with("t.json:2:1: E-MODEL: malformed JSON: "));
  CHECK(load_error("{\"a\":\n  1} x").starts_with("t.json:2:6: E-MODEL: malformed JSON: "));
  CHECK(load_error("{\"a\": \"\xC3\xA9\xff\"}").starts_with("t.json:1:10: E-MODEL:"));
  CHECK(load_error("{\"a\": \"\\q\"}").starts_with("t.json:1:9: E-MODEL:"));
  // nlohmann stops on the last byte of a number it cannot hold.
  CHECK(load_error("{\"a\": 1e999}").starts_with("t.json:1:11: E-MODEL:"));
  std::string deep = "{\"a\": " + std::string(600, '[') + std::string(600, ']') + "}";
  CHECK(load_error(deep) ==
        "t.json:1:518: E-MODEL: malformed JSON: nesting deeper than 512 levels "
        "[fix the JSON syntax at this position]\n");
  DocLimits few;
  few.max_nodes = 3;
  CHECK(load_error("{\"a\": [1, 2, 3]}", few).find("more than 3 nodes") != std::string::npos);
}

TEST_CASE("JSON simdjson path: invalid UTF-8, NUL and truncation are errors at any cut") {
  const std::string good =
      "{\"params\": [{\"name\": \"w\\u00e9\", \"shape\": [2, 30]}], \"x\": null}";
  for (std::size_t cut = 1; cut < good.size(); ++cut) check_paths_agree(good.substr(0, cut));
  // Overlong, surrogate, past U+10FFFF, lone continuation byte, raw NUL.
  for (const std::string& bad :
       {std::string("\xC0\xAF"), std::string("\xED\xA0\x80"), std::string("\xF4\x90\x80\x80"),
        std::string("\x80"), std::string(1, '\0')}) {
    std::string text = "{\"k\": \"" + bad + "\"}";
    check_paths_agree(text);
    SourceFile file{"t.json", text};
    DiagnosticSink sink;
    CHECK_FALSE(load_json(file, DiagCode::EModel, sink, DocLimits{}).has_value());
  }
}

TEST_CASE("LineCursor gives line_col's line and byte column at every offset") {
  for (const std::string& text : {std::string(""), std::string("\n"), std::string("ab"),
                                  std::string("a\n\nbc\r\nd\n"), std::string("\n\n\xC3\xA9x\n")}) {
    for (std::size_t step : {1, 2, 3}) {
      LineCursor cursor(text);
      for (std::size_t offset = 0; offset <= text.size() + 1; offset += step) {
        INFO(offset);
        CHECK(cursor.at(offset) == line_col(text, offset));
      }
    }
  }
}

TEST_CASE("JSON simdjson path: every JSON file under tests/ agrees with the tracking path") {
  const std::filesystem::path root = std::filesystem::path(SHARDC_SOURCE_DIR) / "tests";
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    std::string contents = text.str();
    if (contents.find_first_not_of(" \t\r\n") == std::string::npos ||
        contents[contents.find_first_not_of(" \t\r\n")] != '{') {
      continue;
    }
    INFO(entry.path().string());
    check_paths_agree(contents);
    ++files;
  }
  CHECK(files > 5);
}

}  // namespace
}  // namespace shardc::fe
