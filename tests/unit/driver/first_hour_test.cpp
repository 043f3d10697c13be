// Issue 14, "the first hour": each misleading input a new user hit, through
// the real driver, with the message now given.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "driver_fixture.hpp"

using namespace shardc;
using nlohmann::json;

namespace {

// A 2-layer MoE (4 experts per layer) shaped like Qwen3-MoE.
const char* const kMoeModel = R"(format: shardc.model/v1
name: tiny-moe
dtype: bfloat16
attributes: {num_attention_heads: 4, num_key_value_heads: 2, num_experts: 4}
params:
  - {name: model.embed_tokens.weight, shape: [64, 16]}
  - repeat: {i: [0, 2]}
    params:
      - {name: "model.layers.{i}.self_attn.q_proj.weight", shape: [16, 16]}
      - {name: "model.layers.{i}.self_attn.k_proj.weight", shape: [8, 16]}
      - {name: "model.layers.{i}.self_attn.v_proj.weight", shape: [8, 16]}
      - {name: "model.layers.{i}.input_layernorm.weight", shape: [16]}
      - {name: "model.layers.{i}.mlp.gate.weight", shape: [4, 16]}
      - repeat: {e: [0, 4]}
        params:
          - {name: "model.layers.{i}.mlp.experts.{e}.gate_proj.weight", shape: [8, 16]}
          - {name: "model.layers.{i}.mlp.experts.{e}.down_proj.weight", shape: [16, 8]}
  - {name: model.norm.weight, shape: [16]}
)";

// FSDP 2 x TP 2 dense, efsdp 2 x EP 2 experts, FSDP2 units per layer.
const char* const kMoeRecipe = R"(format: shardc.recipe/v1
world_size: 4
mesh:
  - {name: dp_shard, size: 2}
  - {name: tp, size: 2}
expert_mesh:
  - {name: efsdp, size: 2}
  - {name: ep, size: 2}
experts:
  - match: "model.layers.{L}.mlp.experts.{E}.{P}.weight"
    stack: "model.layers.{L}.mlp.experts.{P}"
    placements: {ep: Shard(0)}
rules:
  - match: ["model.layers.*.self_attn.q_proj.weight",
            "model.layers.*.self_attn.k_proj.weight",
            "model.layers.*.self_attn.v_proj.weight"]
    placements: {tp: Shard(0)}
  - match: ["model.embed_tokens.weight", "**.*norm.weight", "model.layers.*.mlp.gate.weight"]
    placements: {}
fsdp: {shard: dp_shard, expert_shard: efsdp}
buffers:
  - {kind: fsdp2_allgather, units: ["model.layers.{i}.mlp.experts", "model.layers.{i}", "**"]}
)";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

struct MoeFixture : test::DriverFixture {
  MoeFixture() {
    fs.files["m.yaml"] = kMoeModel;
    fs.files["r.yaml"] = kMoeRecipe;
  }
  // validate --format json on `recipe`: the diagnostics.
  json diagnostics(const std::string& recipe, ExitCode want, bool strict = false) {
    fs.files["x.yaml"] = recipe;
    CommonOptions options = common("x.yaml");
    options.diag_format = DiagFormat::Json;
    options.strict = strict;
    out.str("");
    CHECK(run_validate(options, fs, out, err) == want);
    return json::parse(out.str());
  }
};

const json* find(const json& diags, const std::string& code) {
  for (const json& d : diags)
    if (d["code"] == code) return &d;
  return nullptr;
}

}  // namespace

TEST_CASE_FIXTURE(MoeFixture, "the MoE recipe is valid and states its world size") {
  CHECK(run_validate(common(), fs, out, err) == ExitCode::Ok);
}

TEST_CASE_FIXTURE(MoeFixture,
                  "a typo in an experts pattern is blamed on that entry, no catch-all") {
  const json diags =
      diagnostics(replaced(kMoeRecipe, "mlp.experts.{E}.{P}.weight", "mlp.expert.{E}.{P}.weight"),
                  ExitCode::Invalid);
  REQUIRE(!diags.empty());
  // The first diagnostic is about the experts entry, at its match (line 10, col 12).
  const json& d = diags[0];
  CHECK(d["code"] == "E-UNCOVERED");
  CHECK(d["line"] == 10);
  CHECK(d["column"] == 12);
  CHECK(d["message"] ==
        "parameter model.layers.0.mlp.experts.0.gate_proj.weight is matched by no rule: it looks "
        "like expert 0 of a MoE layer, and experts entry 1 (line 10) "
        "`model.layers.{L}.mlp.expert.{E}.{P}.weight` matched no parameter (a typo in its "
        "pattern?) (and 15 more like it)");
  CHECK(d["hint"] ==
        "fix that entry's `match` so it stacks these experts, e.g. {match: "
        "\"model.layers.{L}.mlp.experts.{E}.{P}.weight\", stack: "
        "\"model.layers.{L}.mlp.experts.{P}\", placements: {ep: Shard(0)}}; do not add a "
        "catch-all rule or `placements: {}` for them: it would replicate every expert on every "
        "rank (no expert parallelism)");
  for (const json& diag : diags)
    CHECK(diag["hint"].get<std::string>().find("match: \"**\"") == std::string::npos);
}

TEST_CASE_FIXTURE(MoeFixture, "a catch-all hiding unstacked experts fails --strict and says so") {
  std::string recipe =
      replaced(kMoeRecipe, "mlp.experts.{E}.{P}.weight", "mlp.expert.{E}.{P}.weight");
  recipe = replaced(
      recipe,
      R"(["model.embed_tokens.weight", "**.*norm.weight", "model.layers.*.mlp.gate.weight"])",
      R"("**")");
  const json diags = diagnostics(recipe, ExitCode::Invalid, true);
  const json* d = find(diags, "W-UNUSED-RULE");
  REQUIRE(d != nullptr);
  CHECK((*d)["line"] == 10);
  CHECK((*d)["message"] ==
        "experts entry 1 (line 10) `model.layers.{L}.mlp.expert.{E}.{P}.weight` matches no "
        "parameter; 16 expert-looking parameter(s) such as "
        "model.layers.0.mlp.experts.0.gate_proj.weight are placed by rule 2 (line 18) (**) "
        "instead, without expert parallelism");
}

TEST_CASE_FIXTURE(MoeFixture, "an uncovered dense param still gets a narrow rule hint") {
  const json diags = diagnostics(
      replaced(kMoeRecipe, R"(, "model.layers.*.mlp.gate.weight"])", "]"), ExitCode::Invalid);
  const json* d = find(diags, "E-UNCOVERED");
  REQUIRE(d != nullptr);
  CHECK((*d)["message"] ==
        "parameter model.layers.0.mlp.gate.weight is matched by no rule (and 1 more like it)");
  CHECK((*d)["hint"] ==
        "add a rule whose match covers it, e.g. `- {match: \"model.layers.*.mlp.gate.weight\", "
        "placements: {}}`, or a catch-all `match: \"**\"` last");
}

TEST_CASE_FIXTURE(MoeFixture, "uncovered params of several name patterns are all named") {
  const json diags =
      diagnostics(replaced(kMoeRecipe, R"("**.*norm.weight", )", ""), ExitCode::Invalid);
  const json* d = find(diags, "E-UNCOVERED");
  REQUIRE(d != nullptr);
  CHECK((*d)["message"] ==
        "parameter model.layers.0.input_layernorm.weight is matched by no rule (and 2 more like "
        "it)");
  CHECK((*d)["hint"].get<std::string>().ends_with(
      "; uncovered names: model.layers.*.input_layernorm.weight, model.norm.weight"));
}

TEST_CASE_FIXTURE(MoeFixture, "every pattern of a match list must match something") {
  const json diags =
      diagnostics(replaced(kMoeRecipe, "self_attn.v_proj.weight\"]", "self_attn.v_porj.weight\"]"),
                  ExitCode::Invalid);  // v_proj is then uncovered too
  const json* d = find(diags, "W-UNUSED-RULE");
  REQUIRE(d != nullptr);
  CHECK((*d)["line"] == 16);
  CHECK((*d)["column"] == 13);
  CHECK((*d)["message"] ==
        "rule 1 (line 14): pattern 3 of its match list (model.layers.*.self_attn.v_porj.weight) "
        "matches no parameter");
}

TEST_CASE_FIXTURE(MoeFixture, "E-MESH names the mesh whose product differs from world_size") {
  SUBCASE("expert_mesh") {
    const json diags = diagnostics(
        replaced(kMoeRecipe, "{name: ep, size: 2}", "{name: ep, size: 4}"), ExitCode::Invalid);
    REQUIRE(diags.size() == 1);
    CHECK(diags[0]["line"] == 7);
    CHECK(diags[0]["message"] == "expert_mesh has efsdp 2 x ep 4 = 8 ranks but world_size is 4");
  }
  SUBCASE("without world_size: both products, and how to find out") {
    std::string recipe = replaced(kMoeRecipe, "world_size: 4\n", "");
    const json diags = diagnostics(replaced(recipe, "{name: ep, size: 2}", "{name: ep, size: 4}"),
                                   ExitCode::Invalid);
    REQUIRE(diags.size() == 1);
    CHECK(diags[0]["message"] ==
          "expert_mesh has efsdp 2 x ep 4 = 8 ranks but mesh has dp_shard 2 x tp 2 = 4 ranks");
    CHECK(diags[0]["hint"].get<std::string>().find("world_size: N") != std::string::npos);
  }
}

TEST_CASE_FIXTURE(MoeFixture, "explain on a source expert lists only the shards holding it") {
  ExplainOptions options;
  options.common = common();
  options.fqn = "model.layers.1.mlp.experts.3.down_proj.weight";
  CHECK(run_explain(options, fs, out, err) == ExitCode::Ok);
  const std::string text = out.str();
  CHECK(
      text.starts_with("model.layers.1.mlp.experts.3.down_proj.weight is expert 3 of stacked "
                       "param model.layers.1.mlp.experts.down_proj (row 3 of dim 0)\n"));
  // ep 2 -> experts 2-3 on ep = 1 (ranks 1 and 3); efsdp 2 splits them on dim 0 (4 experts
  // over efsdp x ep = 4 ranks): rank 3 (efsdp 1, ep 1) holds expert 3 alone.
  CHECK(text.find("expert 3 is held by 1 rank (3), in 1 distinct shards:") != std::string::npos);
  CHECK(text.find("rule") != std::string::npos);
  CHECK(text.find("experts entry 1 (line 10)") != std::string::npos);
}

TEST_CASE_FIXTURE(MoeFixture, "inspect --match accepts source expert names") {
  InspectOptions options;
  options.common = common();
  options.rank = 3;
  options.match = "model.layers.1.mlp.experts.3.**";
  CHECK(run_inspect(options, fs, out, err) == ExitCode::Ok);
  const std::string text = out.str();
  CHECK(text.find("model.layers.1.mlp.experts.down_proj (expert 3 = local row 0)") !=
        std::string::npos);
  CHECK(text.find("matched: 2 params") != std::string::npos);
  out.str("");
  options.rank = 0;  // holds expert 0 only
  CHECK(run_inspect(options, fs, out, err) == ExitCode::Ok);
  CHECK(out.str().find("matched: 0 params") != std::string::npos);
  CHECK(out.str().find("no parameter held by rank 0 matches") != std::string::npos);
}

TEST_CASE_FIXTURE(MoeFixture, "inspect --summary prints totals per kind and the FSDP2 peak") {
  InspectOptions options;
  options.common = common();
  options.rank = 0;
  options.summary = true;
  CHECK(run_inspect(options, fs, out, err) == ExitCode::Ok);
  const std::string text = out.str();
  CHECK(text.find("FQN") == std::string::npos);  // no table
  CHECK(text.find("  dense    ") != std::string::npos);
  // 4 stacked params ([4, 8, 16] / [4, 16, 8] bf16), 1 expert each on rank 0: 4 x 256 B.
  CHECK(text.find("  experts  4 params, 1.00 KiB (1024)") != std::string::npos);
  CHECK(text.find("fsdp2_allgather: pack ") != std::string::npos);
  CHECK(text.find("gathered peak ") != std::string::npos);
  CHECK(text.find("(largest unit + the next one prefetched), sum over units ") !=
        std::string::npos);
  // fsdp.reshard_after_forward: false keeps every unit gathered: the peak is their sum.
  fs.files["r.yaml"] =
      replaced(kMoeRecipe, "fsdp: {shard: dp_shard, expert_shard: efsdp}",
               "fsdp: {shard: dp_shard, expert_shard: efsdp, reshard_after_forward: false}");
  out.str("");
  CHECK(run_inspect(options, fs, out, err) == ExitCode::Ok);
  CHECK(out.str().find("(every unit: docs/memory.md)") != std::string::npos);
  out.str("");
  options.summary = false;
  CHECK(run_inspect(options, fs, out, err) == ExitCode::Ok);
  CHECK(out.str().find("(every unit: reshard_after_forward: false; docs/memory.md)") !=
        std::string::npos);
}

TEST_CASE_FIXTURE(MoeFixture, "verify on a partial compile: not verifiable, and the fix") {
  CompileOptions compile = compile_opts();
  compile.ranks = "0";
  REQUIRE(run_compile(compile, fs, out, err) == ExitCode::Ok);
  VerifyOptions verify;
  verify.out_dir = "out";
  verify.ranks = "0";
  out.str("");
  CHECK(run_verify(verify, fs, out, err) == ExitCode::Invalid);
  const std::string text = out.str();
  CHECK(text.find("mismatch(es)") == std::string::npos);
  CHECK(text.find("not verifiable: the rank files of some members are absent (not a mismatch)") !=
        std::string::npos);
  // Rank 0's dense FSDP group is dp_shard {0, 2}, its expert FSDP group efsdp {0, 2}.
  CHECK(text.find("to verify ranks 0, compile (at least) --ranks 0,2 (2 of 4 ranks;") !=
        std::string::npos);
  // compile --with-groups writes exactly that set, and verify then passes.
  compile.with_groups = true;
  out.str("");
  REQUIRE(run_compile(compile, fs, out, err) == ExitCode::Ok);
  CHECK(out.str().find("--with-groups: 1 rank(s) added") != std::string::npos);
  CHECK(out.str().find("--ranks 0,2\n") != std::string::npos);
  out.str("");
  CHECK(run_verify(verify, fs, out, err) == ExitCode::Ok);
  CHECK(out.str().find("all buffer layouts round-trip") != std::string::npos);
}
