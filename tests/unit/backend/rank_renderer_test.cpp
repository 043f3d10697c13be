// RankRenderer memoizes sections per shard class: every rank file it renders
// must equal the unmemoized rendering (render_rank_json) byte for byte, in
// any order the writer threads take ranks.
#include <doctest/doctest.h>

#include "../planner/fixtures.hpp"
#include "backend/backend.hpp"

using namespace shardc;
using namespace shardc::test;

namespace {

Plan plan_of(const Model& model, const Recipe& recipe) {
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  for (const Diagnostic& diag : sink.items()) MESSAGE(diag.message);
  REQUIRE(plan);
  return *plan;
}

// Mixed dtypes interleaved (bf16, fp32, bf16: batches are not in group
// order), 1-D norms (not communicated), uneven rows, tied embeddings.
Model small_model() {
  Model model;
  model.attributes.tie_word_embeddings = true;
  model.params = {param("model.embed_tokens.weight", {10, 6})};
  for (int i = 0; i < 4; ++i) {
    const std::string prefix = "model.layers." + std::to_string(i) + ".";
    model.params.push_back(param(prefix + "q.weight", {12, 6}, DType::Float32));
    model.params.push_back(param(prefix + "o.weight", {6, 12}));
    model.params.push_back(param(prefix + "norm.weight", {6}));
    model.params.push_back(param(prefix + "up.weight", {9, 6}));
  }
  model.params.push_back(param("model.norm.weight", {6}));
  model.params.push_back(param("lm_head.weight", {10, 6}));
  return model;
}

std::vector<Rule> small_rules() {
  return {rule("**.o.weight", {{"tp", shard(1)}}), rule("**.norm.weight", {}),
          rule("**", {{"tp", shard(0)}})};
}

void check_all_ranks(const Plan& plan) {
  const std::vector<PlannedBuffer> buffers = plan_buffers(plan);
  const MemoryReport memory = compute_memory(plan, buffer_rank_bytes(plan, buffers));
  const RankRenderer renderer(plan, buffers);
  std::string out;
  // Descending, then ascending: the second pass reads every class back.
  for (int pass = 0; pass < 2; ++pass)
    for (std::int64_t i = 0; i < plan.world_size; ++i) {
      const std::int64_t rank = pass == 0 ? plan.world_size - 1 - i : i;
      const RankMemory& rm = memory.ranks[static_cast<std::size_t>(rank)];
      renderer.render(rank, rm, out);
      CAPTURE(rank);
      CHECK(out == render_rank_json(plan, buffers, rank, rm));
    }
}

}  // namespace

TEST_CASE("memoized rank files equal the unmemoized ones: dp x tp with muon") {
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 4}, {"tp", 2}});
  recipe.rules = small_rules();
  recipe.buffers = {BufferSpec{}};
  check_all_ranks(plan_of(small_model(), recipe));
}

TEST_CASE("memoized rank files equal the unmemoized ones: pp x HSDP x tp, muon and FSDP2") {
  Recipe recipe;
  recipe.mesh = mesh({{"pp", 2}, {"dp", 2}, {"dp_shard", 2}, {"tp", 2}});
  recipe.rules = small_rules();
  recipe.pipeline = PipelineSpec{};
  recipe.pipeline->axis = "pp";
  recipe.fsdp = FsdpSpec{};
  recipe.fsdp->shard = {"dp_shard"};
  recipe.fsdp->replicate = "dp";
  BufferSpec fsdp2;
  fsdp2.kind = BufferKind::Fsdp2AllGather;
  BufferSpec muon;
  muon.max_batch_numel = 100;  // several batches per group
  recipe.buffers = {muon, fsdp2};
  check_all_ranks(plan_of(small_model(), recipe));
}
