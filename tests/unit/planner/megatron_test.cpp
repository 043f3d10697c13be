// Megatron-Core users (issue 29): messages in Megatron's words (query groups)
// and hints that never lead to a plan a check would then skip.
#include <doctest/doctest.h>

#include <optional>

#include "frontend/frontend.hpp"
#include "planner/planner.hpp"

#include "../source_text.hpp"

using namespace shardc;
using shardc::test::replace_all;
using shardc::test::slurp;

namespace {

std::vector<Diagnostic> diagnostics(const std::string& folder) {
  DiagnosticSink sink;
  const std::string model = folder + "/model.yaml";
  auto parsed_model = parse_model({model, slurp(model)}, sink);
  auto parsed_recipe = parse_recipe({"recipe.yaml", slurp(folder + "/recipe.yaml")}, sink);
  REQUIRE(parsed_model);
  REQUIRE(parsed_recipe);
  (void)build_plan(*parsed_model, *parsed_recipe, sink);
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
  auto parsed_model = parse_model({"m.yaml",
                                   "format: shardc.model/v1\nname: t\ndtype: bfloat16\n"
                                   "attributes: {num_attention_heads: 8, num_key_value_heads: 2}\n"
                                   "params:\n  - {name: a.k_proj.weight, shape: [256, 64]}\n"},
                                  sink);
  auto parsed_recipe = parse_recipe({"r.yaml",
                                     "mesh: [{name: tp, size: 4}]\n"
                                     "rules: [{match: '**', placements: {tp: Shard(0)}}]\n"},
                                    sink);
  REQUIRE(parsed_model);
  REQUIRE(parsed_recipe);
  (void)build_plan(*parsed_model, *parsed_recipe, sink);
  const Diagnostic* heads = find(sink.items(), DiagCode::EHeads);
  REQUIRE(heads != nullptr);
  CHECK(heads->message.find("2 KV heads do not divide") != std::string::npos);
  CHECK(heads->message.find("query groups") == std::string::npos);
}

namespace {

struct Planned {
  DiagnosticSink sink;
  std::optional<Plan> plan;
};

void plan_into(Planned& out, const std::string& model_path, const std::string& recipe_text) {
  auto parsed_model = parse_model({model_path, slurp(model_path)}, out.sink);
  auto parsed_recipe = parse_recipe({"recipe.yaml", recipe_text}, out.sink);
  REQUIRE(parsed_model);
  REQUIRE(parsed_recipe);
  out.plan = build_plan(*parsed_model, *parsed_recipe, out.sink);
}

const PlannedParam& param_named(const Plan& plan, const std::string& name) {
  for (const PlannedParam& param : plan.params)
    if (param.name == name) return param;
  FAIL("no param " << name);
  return plan.params.front();
}

const std::string kModel = "plans/megatron-llama-3-70b.model.yaml";
const std::string kRecipe = "plans/megatron-llama-3-70b-tp8-pp8-dp8.recipe.yaml";

// The recipe with `virtual_stages: v` (or none for v = 0).
std::string with_virtual(int virtual_stages, const std::string& pp = "8") {
  std::string text = replace_all(slurp(kRecipe), "virtual_stages: 5",
                                 "virtual_stages: " + std::to_string(virtual_stages));
  if (virtual_stages == 0) text = replace_all(text, ", virtual_stages: 0", "");
  return replace_all(text, "{name: pp, size: 8}", "{name: pp, size: " + pp + "}");
}

int count(const DiagnosticSink& sink, DiagCode code) {
  int count = 0;
  for (const Diagnostic& d : sink.items()) count += d.code == code ? 1 : 0;
  return count;
}

}  // namespace

// Megatron-Core's interleaved schedule (transformer_layer.py
// get_transformer_layer_offset): with L layers, pp P and vp V, pipeline rank p
// runs V model chunks of L / (P V) layers; chunk vp_stage starts at layer
// vp_stage * L / V + p * L / (P V).
TEST_CASE("virtual_stages: Megatron's round-robin model chunks, layer by layer") {
  Planned pl;
  plan_into(pl, kModel, with_virtual(5));
  REQUIRE(pl.plan);
  const Plan& plan = *pl.plan;
  CHECK(count(pl.sink, DiagCode::WPipelineSplit) == 0);
  CHECK(plan.virtual_stages == 5);
  REQUIRE(plan.model_chunks.size() == 40);
  const int layers = 80;
  const int pp = 8;
  const int vp = 5;
  for (int vp_stage = 0; vp_stage < vp; ++vp_stage) {
    for (int rank = 0; rank < pp; ++rank) {
      const int offset = vp_stage * (layers / vp) + rank * (layers / (pp * vp));
      for (int l = offset; l < offset + layers / (pp * vp); ++l) {
        CAPTURE(l);
        const PlannedParam& param = param_named(
            plan, "decoder.layers." + std::to_string(l) + ".self_attention.linear_qkv.weight");
        CHECK(param.stage == rank);
        CHECK(param.virtual_stage == vp_stage);
      }
      const ModelChunk& chunk = plan.model_chunks[static_cast<std::size_t>(vp_stage * pp + rank)];
      CHECK(chunk.stage == rank);
      CHECK(chunk.virtual_stage == vp_stage);
      CHECK(chunk.first_block == offset);
      CHECK(chunk.end_block == offset + 2);
    }
  }
  // The embedding runs in the first model chunk, the final norm and output layer in the last.
  CHECK(param_named(plan, "embedding.word_embeddings.weight").stage == 0);
  CHECK(param_named(plan, "embedding.word_embeddings.weight").virtual_stage == 0);
  CHECK(param_named(plan, "output_layer.weight").stage == 7);
  CHECK(param_named(plan, "output_layer.weight").virtual_stage == 4);
  CHECK(param_named(plan, "decoder.final_layernorm.weight").virtual_stage == 4);
}

TEST_CASE("W-PIPELINE-SPLIT: chunks Megatron would refuse, named with its options") {
  {
    // pp 6 over 80 layers: 14/14/13/13/13/13 (issue 29).
    std::string recipe = replace_all(with_virtual(0, "6"), "world_size: 512", "world_size: 384");
    Planned six;
    plan_into(six, kModel, recipe);
    REQUIRE(count(six.sink, DiagCode::WPipelineSplit) == 1);
    for (const Diagnostic& d : six.sink.items()) {
      if (d.code != DiagCode::WPipelineSplit) continue;
      CHECK(d.message.find("80 layer blocks into 6 model chunks (6 stages) of unequal sizes: "
                           "14/14/13/13/13/13") != std::string::npos);
      CHECK(d.hint.find("pp sizes that divide 80 layers: 1, 2, 4, 5, 8, 10, 16, 20, 40, 80") == 0);
      CHECK(d.hint.find("num_layers_in_first_pipeline_stage") != std::string::npos);
      CHECK(d.hint.find("account_for_embedding_in_pipeline_split") != std::string::npos);
    }
  }
  {
    // pp 8 x vp 3: 80 layers into 24 chunks. Past 16 chunks the sizes are listed by runs,
    // so the unequal ones show (the list stopped at 16 chunks of 4: "4/4/.../4/...").
    Planned pl;
    plan_into(pl, kModel, with_virtual(3));
    REQUIRE(pl.plan);
    CHECK(count(pl.sink, DiagCode::WPipelineSplit) == 1);
    for (const Diagnostic& d : pl.sink.items()) {
      if (d.code != DiagCode::WPipelineSplit) continue;
      CHECK(d.message.find("of unequal sizes: chunks 0-7: 4 blocks, chunks 8-23: 3 blocks;") !=
            std::string::npos);
    }
  }
  {
    // Hugging Face names, no virtual stages: torchtitan-style uneven stages stay quiet.
    Planned pl;
    plan_into(pl, "plans/llama-3.1-70b.model.yaml",
              "mesh: [{name: pp, size: 6}, {name: tp, size: 8}]\n"
              "pipeline: {axis: pp}\n"
              "rules: [{match: '**', placements: {}}]\n");
    REQUIRE(pl.plan);
    CHECK(count(pl.sink, DiagCode::WPipelineSplit) == 0);
  }
  {
    // Hugging Face names with virtual stages (an interleaved layout `search --emit-recipe`
    // writes, FSDP2 style): torchtitan cuts unequal chunks itself, so no Megatron warning.
    Planned pl;
    plan_into(pl, "plans/llama-3.1-70b.model.yaml",
              "mesh: [{name: pp, size: 8}, {name: tp, size: 8}]\n"
              "pipeline: {axis: pp, stages: auto, virtual_stages: 3}\n"
              "rules: [{match: '**', placements: {}}]\n");
    REQUIRE(pl.plan);
    CHECK(pl.plan->model_chunks.size() == 24);
    CHECK(count(pl.sink, DiagCode::WPipelineSplit) == 0);
  }
}

TEST_CASE("virtual_stages with explicit stages: one glob list per model chunk") {
  const std::string base =
      "mesh: [{name: pp, size: 2}]\n"
      "rules: [{match: '**', placements: {}}]\n";
  const std::string model = "plans/megatron-llama-3-70b.model.yaml";
  Planned bad;
  plan_into(bad, model,
            base + "pipeline: {axis: pp, virtual_stages: 2, stages: [['**'], ['x']]}\n");
  CHECK(!bad.plan);
  CHECK(count(bad.sink, DiagCode::EPipeline) == 1);
  Planned ok;
  plan_into(ok, model,
            base +
                "pipeline:\n  axis: pp\n  virtual_stages: 2\n  stages:\n"
                "    - [embedding.**, 'decoder.layers.[0-9].**']\n"
                "    - ['decoder.layers.[1-3][0-9].**']\n"
                "    - ['decoder.layers.[4-6][0-9].**']\n"
                "    - ['decoder.layers.[7-9][0-9].**', decoder.final_layernorm.*, "
                "output_layer.*]\n");
  REQUIRE(ok.plan);
  CHECK(param_named(*ok.plan, "decoder.layers.45.mlp.linear_fc1.weight").stage == 0);
  CHECK(param_named(*ok.plan, "decoder.layers.45.mlp.linear_fc1.weight").virtual_stage == 1);
  CHECK(param_named(*ok.plan, "output_layer.weight").stage == 1);
  CHECK(param_named(*ok.plan, "output_layer.weight").virtual_stage == 1);
  CHECK(ok.plan->model_chunks.size() == 4);
  CHECK(ok.plan->model_chunks[3].first_block == -1);
}
