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
