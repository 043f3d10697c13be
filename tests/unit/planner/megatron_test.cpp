// Megatron-Core users (issue 29): messages in Megatron's words (query groups)
// and hints that never lead to a plan a check would then skip.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "shardc/frontend.hpp"
#include "shardc/planner.hpp"

using namespace shardc;

namespace {

std::string slurp(const std::string& rel) {
  std::ifstream in(std::filesystem::path(SHARDC_SOURCE_DIR) / rel, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<Diagnostic> diagnostics(const std::string& folder) {
  DiagnosticSink sink;
  const std::string model = folder + "/model.yaml";
  auto m = parse_model({model, slurp(model)}, sink);
  auto r = parse_recipe({"recipe.yaml", slurp(folder + "/recipe.yaml")}, sink);
  REQUIRE(m);
  REQUIRE(r);
  (void)build_plan(*m, *r, sink);
  return sink.items();
}

const Diagnostic* find(const std::vector<Diagnostic>& ds, DiagCode code) {
  for (const Diagnostic& d : ds)
    if (d.code == code) return &d;
  return nullptr;
}

}  // namespace

TEST_CASE("linear_qkv over tp 16 with 8 query groups: Megatron's words, no misleading hint") {
  const auto ds = diagnostics("tests/bad/heads_megatron_tp16_even_hint");
  const Diagnostic* even = find(ds, DiagCode::EEven);
  REQUIRE(even != nullptr);
  CHECK(even->hint.find("balanced (whole units per rank)") == std::string::npos);
  CHECK(even->hint.find("would leave 8 ranks with nothing") != std::string::npos);
  const Diagnostic* heads = find(ds, DiagCode::EHeads);
  REQUIRE(heads != nullptr);
  CHECK(heads->message.find("its 8 query groups (KV heads) do not divide by 16") !=
        std::string::npos);
}

TEST_CASE("following the old hint (uneven: balanced) is refused, not planned with empty ranks") {
  const auto ds = diagnostics("tests/bad/heads_megatron_tp16_balanced");
  const Diagnostic* heads = find(ds, DiagCode::EHeads);
  REQUIRE(heads != nullptr);
  CHECK(heads->message.find("only 8 query groups: 8 of 16 tp ranks would hold no attention rows") !=
        std::string::npos);
  CHECK(heads->hint.find("num_query_groups % tp == 0") != std::string::npos);
}

TEST_CASE("a Hugging Face k_proj keeps saying KV heads") {
  DiagnosticSink sink;
  auto m = parse_model({"m.yaml",
                        "format: shardc.model/v1\nname: t\ndtype: bfloat16\n"
                        "attributes: {num_attention_heads: 8, num_key_value_heads: 2}\n"
                        "params:\n  - {name: a.k_proj.weight, shape: [256, 64]}\n"},
                       sink);
  auto r = parse_recipe({"r.yaml",
                         "mesh: [{name: tp, size: 4}]\n"
                         "rules: [{match: '**', placements: {tp: Shard(0)}}]\n"},
                        sink);
  REQUIRE(m);
  REQUIRE(r);
  (void)build_plan(*m, *r, sink);
  const Diagnostic* heads = find(sink.items(), DiagCode::EHeads);
  REQUIRE(heads != nullptr);
  CHECK(heads->message.find("2 KV heads do not divide") != std::string::npos);
  CHECK(heads->message.find("query groups") == std::string::npos);
}
