// Biases against their weights (W-ACTIVATION-SPLIT) and 1-D q_norm / k_norm splits
// (E-HEADS): what a rank adds or normalises with must be its own output's entries
// (docs/contract.md §5.13; tests/bad bias_*, norm_head_dim_split_qwen3).
#include <doctest/doctest.h>

#include <string>

#include "frontend/frontend.hpp"
#include "planner/planner.hpp"

using namespace shardc;

namespace {

// Llama-style attention with biases (Qwen2 / gpt-oss), per-head_dim norms (Qwen3) and
// full-width norms (OLMo-2), and a GPT-2 Conv1D MLP ([in, out] weights).
const std::string kModel = R"(format: shardc.model/v1
name: tiny
dtype: bfloat16
attributes: {num_attention_heads: 4, num_key_value_heads: 4, head_dim: 8, hidden_size: 32}
params:
  - {name: a.q_proj.weight, shape: [32, 32]}
  - {name: a.q_proj.bias, shape: [32]}
  - {name: a.o_proj.weight, shape: [32, 32]}
  - {name: a.o_proj.bias, shape: [32]}
  - {name: a.q_norm.weight, shape: [8]}
  - {name: a.k_norm.weight, shape: [32]}
  - {name: h.mlp.c_fc.weight, shape: [32, 128]}
  - {name: h.mlp.c_fc.bias, shape: [128]}
  - {name: h.mlp.c_proj.weight, shape: [128, 32]}
  - {name: h.mlp.c_proj.bias, shape: [32]}
)";

struct Result {
  DiagnosticSink sink;
  bool planned = false;
};

// `rules` are the recipe's rule lines after `rules:`; a last `**` rule replicates the rest.
Result plan_with(const std::string& rules, const std::string& extra = "") {
  Result out;
  const std::string recipe =
      "format: shardc.recipe/v1\nmesh:\n  - {name: dp, size: 2}\n"
      "  - {name: tp, size: 4}\nrules:\n" +
      rules + "  - match: \"**\"\n    placements: {}\n" + extra;
  auto model = parse_model({"tiny.model.yaml", kModel}, out.sink);
  auto parsed = parse_recipe({"r.recipe.yaml", recipe}, out.sink);
  REQUIRE(model);
  REQUIRE(parsed);
  out.planned = build_plan(*model, *parsed, out.sink).has_value();
  return out;
}

std::vector<std::string> messages(const DiagnosticSink& sink, DiagCode code) {
  std::vector<std::string> out;
  for (const Diagnostic& d : sink.items())
    if (d.code == code) out.push_back(d.message);
  return out;
}

}  // namespace

TEST_CASE("a colwise weight with its bias split alike, a rowwise one with its bias whole: clean") {
  const Result result = plan_with(
      "  - match: [a.q_proj.weight, a.q_proj.bias]\n    placements: {tp: Shard(0)}\n"
      "  - match: a.o_proj.weight\n    placements: {tp: Shard(1)}\n");
  CHECK(result.planned);
  CHECK(messages(result.sink, DiagCode::WActivationSplit).empty());
}

TEST_CASE("a colwise weight with a whole bias: W-ACTIVATION-SPLIT on the bias") {
  const Result result = plan_with("  - match: a.q_proj.weight\n    placements: {tp: Shard(0)}\n");
  const auto found = messages(result.sink, DiagCode::WActivationSplit);
  REQUIRE(found.size() == 1);
  CHECK(found[0].find("a.q_proj.bias is added to the output of a.q_proj.weight") == 0);
  CHECK(found[0].find("split over 'tp' as 8, 8, 8, 8 (chunk)") != std::string::npos);
  CHECK(found[0].find("the bias is not split") != std::string::npos);
}

TEST_CASE("a rowwise weight's bias split: W-ACTIVATION-SPLIT (it is added after the reduce)") {
  const Result result = plan_with(
      "  - match: a.o_proj.weight\n    placements: {tp: Shard(1)}\n"
      "  - match: a.o_proj.bias\n    placements: {tp: Shard(0)}\n");
  const auto found = messages(result.sink, DiagCode::WActivationSplit);
  REQUIRE(found.size() == 1);
  CHECK(found[0].find("a.o_proj.bias") == 0);
  CHECK(found[0].find("which is not split") != std::string::npos);
}

TEST_CASE("a bias split over another axis, or another rule, than its weight's output") {
  SUBCASE("other axis") {
    const Result result = plan_with(
        "  - match: a.q_proj.weight\n    placements: {tp: Shard(0)}\n"
        "  - match: a.q_proj.bias\n    placements: {dp: Shard(0)}\n");
    CHECK(messages(result.sink, DiagCode::WActivationSplit).size() == 1);
  }
  SUBCASE("the FSDP split is storage only") {
    const Result result =
        plan_with("  - match: [a.q_proj.weight, a.q_proj.bias]\n    placements: {tp: Shard(0)}\n",
                  "fsdp: {shard: dp}\n");
    CHECK(messages(result.sink, DiagCode::WActivationSplit).empty());
  }
}

TEST_CASE("GPT-2 Conv1D: output and bias on dim 1 / 0, c_fc's output is c_proj's dim 0") {
  SUBCASE("colwise c_fc Shard(1) + bias Shard(0), rowwise c_proj Shard(0): clean") {
    const Result result = plan_with(
        "  - match: h.mlp.c_fc.weight\n    placements: {tp: Shard(1)}\n"
        "  - match: h.mlp.c_fc.bias\n    placements: {tp: Shard(0)}\n"
        "  - match: h.mlp.c_proj.weight\n    placements: {tp: Shard(0)}\n");
    CHECK(messages(result.sink, DiagCode::WActivationSplit).empty());
  }
  SUBCASE("c_fc Shard(1) with its bias whole") {
    const Result result = plan_with(
        "  - match: h.mlp.c_fc.weight\n    placements: {tp: Shard(1)}\n"
        "  - match: h.mlp.c_proj.weight\n    placements: {tp: Shard(0)}\n");
    const auto found = messages(result.sink, DiagCode::WActivationSplit);
    REQUIRE(found.size() == 1);
    CHECK(found[0].find("h.mlp.c_fc.bias") == 0);
    CHECK(found[0].find("(its dim 1, 128)") != std::string::npos);
  }
  SUBCASE("c_fc's output over tp, c_proj's input over dp: the activation does not line up") {
    const Result result = plan_with(
        "  - match: [h.mlp.c_fc.weight]\n    placements: {tp: Shard(1)}\n"
        "  - match: h.mlp.c_fc.bias\n    placements: {tp: Shard(0)}\n"
        "  - match: h.mlp.c_proj.weight\n    placements: {dp: Shard(0)}\n");
    const auto found = messages(result.sink, DiagCode::WActivationSplit);
    REQUIRE(found.size() == 1);
    CHECK(found[0].find("h.mlp.c_fc.weight (colwise)") == 0);
    CHECK(found[0].find("over 'tp' against 'dp'") != std::string::npos);
  }
}

TEST_CASE("E-HEADS: a 1-D q_norm or k_norm split by a rule, FSDP alone is fine") {
  SUBCASE("[head_dim]: shared by every head") {
    const Result result = plan_with("  - match: a.q_norm.weight\n    placements: {tp: Shard(0)}\n");
    const auto found = messages(result.sink, DiagCode::EHeads);
    REQUIRE(found.size() == 1);
    CHECK(found[0].find("a.q_norm.weight [8] is split on dim 0 over 4 ways") == 0);
    CHECK(found[0].find("shared by every head") != std::string::npos);
  }
  SUBCASE("[heads x head_dim]: a norm over the whole projection") {
    const Result result = plan_with("  - match: a.k_norm.weight\n    placements: {tp: Shard(0)}\n");
    const auto found = messages(result.sink, DiagCode::EHeads);
    REQUIRE(found.size() == 1);
    CHECK(found[0].find("the whole projection output (4 heads x 8") != std::string::npos);
  }
  SUBCASE("fsdp only") {
    const Result result = plan_with("", "fsdp: {shard: dp}\n");
    CHECK(messages(result.sink, DiagCode::EHeads).empty());
  }
}
