// Differential tests of the params shortcut (doc_json.cpp, ParamsShortcut):
// parse_model (canonical `params` entries read without Nodes) must give what
// parse_model_tree (every entry through the Node tree) gives: the same Model,
// locations included, and the same diagnostics in the same order.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "frontend/doc.hpp"
#include "frontend/model_internal.hpp"
#include "model_compare.hpp"

namespace fs = std::filesystem;

namespace shardc::test {
namespace {

std::string read_text(const fs::path& path) {
  if (path.extension() == ".gz") {
    std::string out;
    std::string command = "gzip -dc '" + path.string() + "'";
    FILE* pipe = popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buf[1 << 16];
    std::size_t n = 0;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    REQUIRE(pclose(pipe) == 0);
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Both ways; true when the shortcut took the params.
bool check_same(const std::string& path, const std::string& text) {
  DiagnosticSink fast_sink;
  DiagnosticSink tree_sink;
  std::optional<Model> fast = parse_model(SourceFile{path, text}, fast_sink);
  std::optional<Model> tree = fe::parse_model_tree(SourceFile{path, text}, tree_sink);
  INFO(path);
  CHECK(same_model(fast, tree));
  CHECK(render_diagnostics_json(fast_sink) == render_diagnostics_json(tree_sink));
  fe::ParamsShortcut shortcut{SourcePath(path), false, {}};
  DiagnosticSink sink;
  (void)fe::load_document(SourceFile{path, text}, DiagCode::EModel, sink, fe::DocLimits{},
                          &shortcut);
  return shortcut.taken;
}

std::vector<fs::path> inventories() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(SHARDC_SOURCE_DIR) / "tests/data/models")) {
    std::string name = e.path().filename().string();
    if (name.find(".params.json") != std::string::npos) out.push_back(e.path());
  }
  for (const auto& e : fs::directory_iterator(fs::path(SHARDC_SOURCE_DIR) / "tests/cases")) {
    if (fs::exists(e.path() / "model.json")) out.push_back(e.path() / "model.json");
  }
  std::sort(out.begin(), out.end());
  return out;
}

constexpr const char* kHead = R"({
 "model": "m",
 "dtype": "bfloat16",
 "attributes": {"vocab_size": 8, "num_attention_heads": 2},
 "tied_weights": {"lm_head.weight": "a.weight"},
 "params": [
)";

std::string doc(const std::string& entries, const std::string& tail = "") {
  return kHead + entries + "\n ]" + tail + "\n}\n";
}

}  // namespace

TEST_CASE("params shortcut: every inventory and case model.json reads the same both ways" *
          doctest::test_suite("models")) {
  std::vector<fs::path> paths = inventories();
  CHECK(paths.size() >= 11);
  for (const fs::path& path : paths) {
    INFO(path.string());
    CHECK(check_same(path.filename().string(), read_text(path)));
  }
}

TEST_CASE("params shortcut: canonical entries take it") {
  const std::string ok = R"(  {"name": "a.weight", "shape": [8, 4], "dtype": "float32"},
  {"dtype": "F32", "shape": [], "name": "b"},
  {"shape": [0, 3], "name": "c.d_e", "dtype": "torch.bfloat16"},
  {"name": "lm_head.weight", "shape": [8, 4], "dtype": "bf16"})";
  CHECK(check_same("m.json", doc(ok)));
  CHECK(check_same("m.json",
                   doc(R"({"name": "a", "shape": [1, 2, 3, 4, 5, 6, 7, 8], "dtype": "f32"})")));
  CHECK(check_same("m.json", doc("")));
  CHECK(check_same("m.json", doc(ok, ",\n \"params\": 3")));       // duplicate key
  CHECK(check_same("m.json", "\xEF\xBB\xBF" + doc(ok)));           // BOM
  CHECK(check_same("m.json", doc(ok + std::string(",\n") + ok)));  // duplicate names
  CHECK(check_same("m.json",
                   doc(R"({"name": "x", "shape": [4611686018427387903], "dtype": "f32"})")));
}

TEST_CASE("params shortcut: anything else takes the tree, with its diagnostics") {
  const std::vector<std::string> entries = {
      R"({"name": "a", "shape": [2], "dtype": "float32", "requires_grad": false})",
      R"({"name": "a", "shape": [2]})",
      R"({"name": "a", "shape": [2], "dtype": "float32", "extra": 1})",
      R"({"name": "a", "shape": [2], "dtype": "float32", "name": "b"})",
      R"({"name": "a\u0041", "shape": [2], "dtype": "float32"})",
      R"({"name": "a.{i}", "shape": [2], "dtype": "float32"})",
      R"({"name": "a..b", "shape": [2], "dtype": "float32"})",
      R"({"name": "", "shape": [2], "dtype": "float32"})",
      R"({"name": "a b", "shape": [2], "dtype": "float32"})",
      "{\"name\": \"caf\xC3\xA9\", \"shape\": [2], \"dtype\": \"float32\"}",
      R"({"name": 12, "shape": [2], "dtype": "float32"})",
      R"({"name": "a", "shape": [-2], "dtype": "float32"})",
      R"({"name": "a", "shape": [-0], "dtype": "float32"})",
      R"({"name": "a", "shape": [2.0], "dtype": "float32"})",
      R"({"name": "a", "shape": [2e3], "dtype": "float32"})",
      R"({"name": "a", "shape": ["2"], "dtype": "float32"})",
      R"({"name": "a", "shape": [99999999999999999999], "dtype": "float32"})",
      R"({"name": "a", "shape": [9223372036854775807], "dtype": "float32"})",
      R"({"name": "a", "shape": [4611686018427387904], "dtype": "float32"})",
      R"({"name": "a", "shape": [4294967296, 4294967296], "dtype": "float32"})",
      R"({"name": "a", "shape": 2, "dtype": "float32"})",
      R"({"name": "a", "shape": [1, 2, 3, 4, 5, 6, 7, 8, 9], "dtype": "float32"})",
      R"({"name": "a", "shape": [[2]], "dtype": "float32"})",
      R"({"name": "a", "shape": [2], "dtype": "float33"})",
      R"({"name": "a", "shape": [2], "dtype": null})",
      R"({"name": "a", "shape": [2], "dtype": "float32")",
      R"({"name": "a", "shape": [2] "dtype": "float32"})",
      R"({"repeat": {"i": [0, 2]}, "params": [{"name": "l.{i}", "shape": [2]}]})",
      R"([1, 2])",
      R"(null)",
  };
  for (const std::string& e : entries) {
    INFO(e);
    const std::string good = R"({"name": "g", "shape": [1], "dtype": "f32"})";
    CHECK_FALSE(check_same("m.json", doc(e)));
    CHECK_FALSE(check_same("m.json", doc(good + ",\n  " + e + ",\n  " + good)));
  }
  CHECK_FALSE(check_same("m.json", R"({"params": {"name": "a"}})"));
  CHECK_FALSE(check_same(
      "m.json", R"({"params": 3, "params": [{"name": "a", "shape": [], "dtype": "f32"}]})"));
  CHECK(check_same("m.json",
                   R"({"params": [{"name": "a", "shape": [], "dtype": "f32"}], "params": 3})"));
  // Limits: the same diagnostics (from the tree reader) both ways.
  std::string many;
  for (int i = 0; i < 3; ++i)
    many += R"({"name": "n)" + std::to_string(i) + R"(", "shape": [1], "dtype": "f32"},)";
  many.pop_back();
  DiagnosticSink sink;
  fe::ParamsShortcut shortcut{SourcePath("m.json"), false, {}};
  fe::DocLimits tight;
  tight.max_nodes = 12;
  CHECK_FALSE(
      fe::load_json(SourceFile{"m.json", doc(many)}, DiagCode::EModel, sink, tight, &shortcut));
  CHECK_FALSE(shortcut.taken);
  DiagnosticSink ref;
  CHECK_FALSE(fe::load_json(SourceFile{"m.json", doc(many)}, DiagCode::EModel, ref, tight));
  CHECK(render_diagnostics_json(sink) == render_diagnostics_json(ref));
}

}  // namespace shardc::test
