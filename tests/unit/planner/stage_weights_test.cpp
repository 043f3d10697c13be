// `pipeline: {stages: auto, first_stage_less_layers, last_stage_less_layers}`:
// torchtitan's weighted cut (generate_llm_fqn_per_model_part), core/pipeline_chunks.hpp.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "core/pipeline_chunks.hpp"
#include "frontend/frontend.hpp"
#include "planner/planner.hpp"

#include "../source_text.hpp"

using namespace shardc;
using shardc::test::slurp;

namespace {

std::vector<std::int64_t> sizes(const std::vector<ChunkBlocks>& cut) {
  std::vector<std::int64_t> out;
  for (const ChunkBlocks& chunk : cut) out.push_back(chunk.size());
  return out;
}

// Each param's stage under `recipe_text` for the torchtitan Llama-3 8B inventory.
std::map<std::string, int> stages_of(const std::string& recipe_text, DiagnosticSink& sink) {
  const std::string model_path = "plans/torchtitan-llama3-8b.model.yaml";
  auto model = parse_model({model_path, slurp(model_path)}, sink);
  auto recipe = parse_recipe({"recipe.yaml", recipe_text}, sink);
  REQUIRE(model);
  REQUIRE(recipe);
  const std::optional<Plan> plan = build_plan(*model, *recipe, sink);
  std::map<std::string, int> out;
  if (plan)
    for (const PlannedParam& param : plan->params) out[param.name] = param.stage;
  return out;
}

// The shipped recipe with its explicit stage list replaced by `pipeline_text`.
std::string with_pipeline(const std::string& pipeline_text) {
  std::string text = slurp("plans/torchtitan-llama3-8b-pp-fsdp-tp.recipe.yaml");
  const std::size_t begin = text.find("\npipeline:\n");
  const std::size_t end = text.find("\nfsdp:", begin);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  return text.substr(0, begin + 1) + pipeline_text + text.substr(end + 1);
}

}  // namespace

TEST_CASE("the weighted cut is torchtitan's generate_llm_fqn_per_model_part") {
  // torchtitan's docstring case and docs/torchtitan.md: 32 layers, 4 stages, weights 1 and 1:
  // 34 effective layers, 9 9 8 8, so layers 0-7 | 8-16 | 17-24 | 25-31.
  CHECK(sizes(auto_chunk_blocks(32, 4, 1, 1)) == std::vector<std::int64_t>{8, 9, 8, 7});
  // Weights 0: the even cut, extra blocks to the earlier chunks.
  CHECK(sizes(auto_chunk_blocks(10, 4, 0, 0)) == std::vector<std::int64_t>{3, 3, 2, 2});
  // DeepSeek-V3's 61 layers over 16 stages: 63 effective, 4 each but the last 3:
  // stage 0 embedding + 3, stages 1-14 four, stage 15 two + the output.
  const std::vector<std::int64_t> ds = sizes(auto_chunk_blocks(61, 16, 1, 1));
  CHECK(ds.front() == 3);
  CHECK(ds.back() == 2);
  CHECK(ds[7] == 4);
  // Llama 3 405B, 126 layers over 16 x 4 chunks: one layer fewer on the first and last
  // chunk (the Llama 3 paper's balance, Sec. 3.3.2).
  const std::vector<std::int64_t> llama = sizes(auto_chunk_blocks(126, 64, 1, 1));
  CHECK(llama.front() == 1);
  CHECK(llama.back() == 1);
  CHECK(llama[1] == 2);
  // One chunk holds everything; torchtitan's refusals.
  CHECK(sizes(auto_chunk_blocks(5, 1, 2, 2)) == std::vector<std::int64_t>{5});
  CHECK(auto_chunk_blocks(4, 7, 1, 1).empty());  // 7 chunks > 6 effective layers
  CHECK(auto_chunk_blocks(4, 3, 3, 0).empty());  // weight 3 > 7 / 3 = 2 per chunk
  CHECK(weighted_cut_error(4, 3, 3, 0).find("exceeds the 2 effective layers") != std::string::npos);
  CHECK(weighted_cut_error(32, 4, 1, 1).empty());
}

TEST_CASE("stages: auto with first/last_stage_less_layers 1 plans torchtitan's default split") {
  // The shipped recipe lists torchtitan's stages by hand; the weighted auto cut must put
  // every param on the same stage.
  DiagnosticSink explicit_sink;
  const auto explicit_stages =
      stages_of(slurp("plans/torchtitan-llama3-8b-pp-fsdp-tp.recipe.yaml"), explicit_sink);
  DiagnosticSink auto_sink;
  const auto weighted = stages_of(
      with_pipeline("pipeline:\n  axis: pp\n  stages: auto\n  first_stage_less_layers: 1\n"
                    "  last_stage_less_layers: 1\n"),
      auto_sink);
  CHECK_FALSE(explicit_sink.has_errors());
  CHECK_FALSE(auto_sink.has_errors());
  REQUIRE(explicit_stages.size() == 227);
  CHECK(weighted == explicit_stages);
  CHECK(weighted.at("layers.7.attention.wo.weight") == 0);
  CHECK(weighted.at("layers.16.attention.wo.weight") == 1);
  CHECK(weighted.at("layers.25.attention.wo.weight") == 3);
  // Without the weights, auto is the even 8/8/8/8 cut (contract §5.6).
  DiagnosticSink even_sink;
  const auto even = stages_of(with_pipeline("pipeline:\n  axis: pp\n  stages: auto\n"), even_sink);
  CHECK(even.at("layers.16.attention.wo.weight") == 2);
}

TEST_CASE("a weighted cut torchtitan refuses is E-PIPELINE at the weight") {
  DiagnosticSink sink;
  (void)stages_of(with_pipeline("pipeline:\n  axis: pp\n  stages: auto\n"
                                "  first_stage_less_layers: 11\n"),
                  sink);
  REQUIRE(sink.has_errors());
  const Diagnostic& d = sink.items().front();
  CHECK(d.code == DiagCode::EPipeline);
  CHECK(d.loc.line > 0);
  CHECK(d.message.find("exceeds the 10 effective layers per model chunk") != std::string::npos);
}

TEST_CASE("V schedules place chunk c on rank c, then back up: torch's style \"v\"") {
  // torch generate_stage_to_rank_mapping(4, 8, style="v"): stages 0-3 on ranks 0-3, 4-7 on
  // ranks 3-0; looped ("loop"): stage s on rank s % 4.
  const std::vector<int> v_ranks = {0, 1, 2, 3, 3, 2, 1, 0};
  for (std::int64_t chunk = 0; chunk < 8; ++chunk) {
    const ChunkPlace v_place = chunk_place(chunk, 4, true);
    CHECK(v_place.stage == v_ranks[static_cast<std::size_t>(chunk)]);
    CHECK(v_place.virtual_stage == chunk / 4);
    CHECK(chunk_at(v_place, 4, true) == chunk);
    const ChunkPlace loop_place = chunk_place(chunk, 4, false);
    CHECK(loop_place.stage == chunk % 4);
    CHECK(chunk_at(loop_place, 4, false) == chunk);
  }
}

TEST_CASE("the shipped zbv plan puts the embedding and the output on rank 0") {
  DiagnosticSink sink;
  const std::map<std::string, int> stage =
      stages_of(slurp("plans/torchtitan-llama3-8b-pp-zbv-fsdp-tp.recipe.yaml"), sink);
  REQUIRE_FALSE(sink.has_errors());
  CHECK(stage.at("tok_embeddings.weight") == 0);
  CHECK(stage.at("layers.3.attention.wo.weight") == 0);
  CHECK(stage.at("layers.29.attention.wo.weight") == 0);
  CHECK(stage.at("lm_head.weight") == 0);
  CHECK(stage.at("layers.4.attention.wo.weight") == 1);
  CHECK(stage.at("layers.28.attention.wo.weight") == 1);
  CHECK(stage.at("layers.16.attention.wo.weight") == 3);
  CHECK(stage.at("layers.17.attention.wo.weight") == 3);
}

TEST_CASE("schedules and virtual stages that torch refuses are E-TRAINING") {
  const std::string base = slurp("plans/torchtitan-llama3-8b-pp-zbv-fsdp-tp.recipe.yaml");
  auto with = [&base](const std::string& from, const std::string& to) {
    std::string text = base;
    const std::size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  struct Row {
    std::string text;
    std::string message;
  };
  const std::vector<Row> rows = {
      {with("virtual_stages: 2", "virtual_stages: 4"), "exactly two model chunks per stage"},
      {with("{kind: zbv}", "{kind: 1f1b}"), "runs one model chunk per stage"},
      {with("{kind: zbv}", "{kind: gpipe}"), "runs one model chunk per stage"},
      {with("{kind: zbv}", "{kind: dualpipev, microbatches: 4}"), "fewer than its 8 stages"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.message);
    DiagnosticSink sink;
    (void)stages_of(row.text, sink);
    REQUIRE(sink.has_errors());
    bool found = false;
    for (const Diagnostic& d : sink.items()) {
      if (d.code == DiagCode::ETraining && d.message.find(row.message) != std::string::npos) {
        found = true;
        CHECK(d.loc.line > 0);
      }
    }
    CHECK(found);
  }
}

TEST_CASE("stages: auto reads GPT-2's `transformer.h.N` as layer blocks") {
  // The planner's block list was `layers` alone: "stages: auto found 0 layer blocks" for every
  // pipelined GPT-2 layout the search ranked (its activation model read `h` already).
  DiagnosticSink sink;
  const std::string model_path = "plans/gpt2.model.yaml";
  auto model = parse_model({model_path, slurp(model_path)}, sink);
  auto recipe = parse_recipe({"recipe.yaml", R"(format: shardc.recipe/v1
mesh:
  - {name: pp, size: 2}
  - {name: dp, size: 4}
pipeline:
  axis: pp
  stages: auto
rules:
  - match: "**"
    placements: {}
)"},
                             sink);
  REQUIRE(model);
  REQUIRE(recipe);
  const std::optional<Plan> plan = build_plan(*model, *recipe, sink);
  REQUIRE(plan);
  CHECK_FALSE(sink.has_errors());
  std::map<std::string, int> stage;
  for (const PlannedParam& param : plan->params) stage[param.name] = param.stage;
  CHECK(stage.at("transformer.h.0.attn.c_attn.weight") == 0);
  CHECK(stage.at("transformer.h.5.mlp.c_proj.weight") == 0);
  CHECK(stage.at("transformer.h.6.attn.c_attn.weight") == 1);
  CHECK(stage.at("transformer.h.11.ln_2.weight") == 1);
}
