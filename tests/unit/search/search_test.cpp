// Layout search (src/search/search.hpp, src/search/cost.cpp, docs/search.md): the
// cost model's rules pinned on the shipped Llama-3.1-8B and DeepSeek-V3 inventories
// (interleaved bubble / v, a shared link hides at most the compute in all), the
// screen (an expert FSDP axis), and the exact phase's order (in-budget estimates first).
#include <doctest/doctest.h>

#include <algorithm>

#include "../source_text.hpp"
#include "core/pipeline_chunks.hpp"
#include "frontend/frontend.hpp"
#include "memory/memory.hpp"
#include "planner/planner.hpp"
#include "search/cost.hpp"
#include "search/model_stats.hpp"
#include "search/search.hpp"

using namespace shardc;

namespace {

using test::slurp;

struct Fixture {
  Model model;
  Recipe rules;
  SearchRequest request;
};

// The model and the rule set of its shipped plan, with a training shape.
Fixture fixture(const std::string& model_path, const std::string& recipe_path, std::int64_t world,
                const char* preset, std::int64_t seq_len, std::int64_t global_batch) {
  DiagnosticSink sink;
  auto model = parse_model({model_path, slurp(model_path)}, sink);
  const std::string rules_text = rule_set_text(slurp(recipe_path));
  auto rules = parse_recipe({recipe_path, slurp(recipe_path)}, sink, false);
  REQUIRE(model);
  REQUIRE(rules);
  Fixture out{std::move(*model), std::move(*rules), {}};
  out.request.rules_text = rules_text;
  out.request.world = world;
  out.request.hardware = *hardware_preset(preset);
  out.request.budget = static_cast<std::int64_t>(out.request.hardware.hbm_bytes);
  out.request.training.shape.seq_len = seq_len;
  out.request.training.shape.global_batch_size = global_batch;
  return out;
}

Layout layout_of(std::int64_t pp, std::int64_t dp_replicate, std::int64_t dp_shard,
                 std::int64_t tp) {
  Layout l;
  l.pp = pp;
  l.dp_replicate = dp_replicate;
  l.dp_shard = dp_shard;
  l.tp = tp;
  l.sequence_parallel = tp > 1;
  return l;
}

// The layout's recipe (what --emit-recipe writes) planned as `validate` plans it.
std::optional<Plan> plan_of(const Fixture& f, const Layout& layout) {
  DiagnosticSink sink;
  const std::optional<Recipe> recipe =
      parse_recipe({"<layout>", layout_recipe_text(f.request, layout)}, sink, false);
  REQUIRE_MESSAGE(recipe.has_value(), layout_recipe_text(f.request, layout));
  std::optional<Plan> plan = build_plan(f.model, *recipe, sink);
  for (const Diagnostic& d : sink.items()) {
    if (d.severity == Severity::Error) MESSAGE(d.message);
  }
  return plan;
}

}  // namespace

TEST_CASE("search cost: the interleaved bubble is the 1F1B bubble over v") {
  Fixture f = fixture("plans/llama-3.1-8b.model.yaml", "plans/llama-3.1-8b-dp8-tp8.recipe.yaml", 64,
                      "h100", 8192, 256);
  f.request.model = &f.model;
  f.request.rules = &f.rules;
  const search::ModelStats st = search::model_stats(f.model);
  Layout one = layout_of(4, 2, 1, 8);  // 256 sequences / dp 2 = 128 micro-batches
  const StepCost base = search::step_cost(st, f.request, one, false);
  CHECK(base.bubble > 0);
  for (const std::int64_t v : {2, 4, 8}) {
    Layout interleaved = one;
    interleaved.schedule = PipelineScheduleKind::Interleaved;
    interleaved.virtual_stages = v;
    const StepCost c = search::step_cost(st, f.request, interleaved, false);
    CHECK(c.bubble == doctest::Approx(base.bubble / static_cast<double>(v)));
    CHECK(c.compute == doctest::Approx(base.compute));
  }
}

TEST_CASE("search cost: overlapped terms on one link hide at most the compute in all") {
  // DeepSeek-V3 on 2,048 H800s, pp2 with FSDP over 1,024 ranks and ep 128: FSDP's and
  // EP's traffic both cross nodes, and together they exceed the step's compute.
  Fixture f = fixture("plans/deepseek-v3.model.yaml", "plans/deepseek-v3-pp16-ep64.recipe.yaml",
                      2048, "h800", 4096, 15360);
  f.request.model = &f.model;
  f.request.rules = &f.rules;
  const search::ModelStats st = search::model_stats(f.model);
  Layout l = layout_of(2, 1, 1024, 1);
  l.ep = 128;
  l.efsdp = 8;
  l.recompute = Recompute::Full;
  l.schedule = PipelineScheduleKind::ZeroBubble;
  const StepCost c = search::step_cost(st, f.request, l, true);
  const double work = c.compute + c.recompute;
  double overlapped = 0;
  double hidden = 0;
  for (const AxisCommTime& t : c.comm) {
    if (t.axis != "ep" && t.axis != "dp_shard") continue;
    CHECK(t.inter_node);
    CHECK(t.overlap.find("sharing the link") != std::string::npos);
    overlapped += t.seconds;
    hidden += t.seconds - t.exposed;
  }
  REQUIRE(overlapped > work);  // the case the rule is for
  CHECK(hidden == doctest::Approx(work));
  CHECK(c.exposed_comm >= overlapped - work);
  CHECK(c.step == doctest::Approx(work + c.bubble + c.exposed_comm + c.optimizer));
}

TEST_CASE("search: FSDP with efsdp 1 is screened (E-FSDP), and the ranked layouts fit" *
          doctest::test_suite("models")) {
  Fixture f = fixture("plans/deepseek-v3.model.yaml", "plans/deepseek-v3-pp16-ep64.recipe.yaml",
                      2048, "h800", 4096, 15360);
  f.request.model = &f.model;
  f.request.rules = &f.rules;
  f.request.top = 3;
  f.request.moe_node_limit = 4;
  const SearchResult r = run_search(f.request);
  REQUIRE(r.error.empty());
  CHECK(r.pruned[static_cast<std::size_t>(ScreenReason::ExpertFsdpAxis)] > 0);
  REQUIRE(r.ranked.size() == 3);
  for (const CheckedLayout& c : r.checked) {
    CHECK_FALSE((c.layout.dp_shard > 1 && c.layout.efsdp == 1));
    CHECK(c.first_code != "E-FSDP");
  }
  // In-budget estimates are checked first: nothing estimated over the budget is
  // planned while fewer than --top layouts are ranked and in-budget ones remain.
  bool over_seen = false;
  for (const CheckedLayout& c : r.checked) {
    const bool over = c.estimated_memory > static_cast<double>(f.request.budget);
    CHECK_FALSE((over_seen && !over));
    over_seen = over_seen || over;
  }
  for (const CheckedLayout& c : r.ranked) CHECK(c.fits);
}

TEST_CASE("search: interleaved layouts with v = 4 are enumerated while pp x v blocks exist" *
          doctest::test_suite("models")) {
  Fixture f = fixture("plans/llama-3.1-8b.model.yaml", "plans/llama-3.1-8b-dp8-tp8.recipe.yaml", 64,
                      "h100", 8192, 256);
  f.request.model = &f.model;
  f.request.rules = &f.rules;
  f.request.fixed = {4, 2, 1, 1, 8, 0};  // pp4 dp_replicate2 tp8: 32 layers = 4 x 8 blocks
  f.request.top = 64;                    // every layout of the fixed degrees (60) is planned
  f.request.max_exact = 64;
  const SearchResult r = run_search(f.request);
  REQUIRE(r.error.empty());
  std::vector<std::int64_t> seen;
  for (const CheckedLayout& c : r.checked) {
    if (c.layout.schedule == PipelineScheduleKind::Interleaved)
      seen.push_back(c.layout.virtual_stages);
  }
  CHECK(std::find(seen.begin(), seen.end(), 4) != seen.end());
  CHECK(std::find(seen.begin(), seen.end(), 8) != seen.end());
  CHECK(std::find(seen.begin(), seen.end(), 16) == seen.end());  // 4 x 16 > 32 layers
}

TEST_CASE("pipeline chunks: stages: auto's cut is the one the planner makes") {
  // Llama-3.1-8B's 32 layer blocks on pp x v model chunks, even and uneven: the
  // planner's model_chunks (stages.cpp) equal auto_chunk_blocks, which the search's
  // block recompute ranges and stage layer counts use.
  Fixture f = fixture("plans/llama-3.1-8b.model.yaml", "plans/llama-3.1-8b-dp8-tp8.recipe.yaml", 64,
                      "h100", 8192, 256);
  f.request.model = &f.model;
  f.request.rules = &f.rules;
  for (const std::pair<std::int64_t, std::int64_t>& degrees :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{2, 2}, {4, 2}, {2, 4}, {4, 4}, {2, 8}}) {
    const std::int64_t pp = degrees.first;
    const std::int64_t v = degrees.second;
    CAPTURE(pp);
    CAPTURE(v);
    Layout l = layout_of(pp, 64 / pp / 8, 1, 8);
    l.schedule = PipelineScheduleKind::Interleaved;
    l.virtual_stages = v;
    const std::optional<Plan> plan = plan_of(f, l);
    REQUIRE(plan);
    const std::vector<ChunkBlocks> chunks = auto_chunk_blocks(32, pp * v);
    REQUIRE(plan->model_chunks.size() == chunks.size());
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      CHECK(plan->model_chunks[c].first_block == chunks[c].first);
      CHECK(plan->model_chunks[c].end_block == chunks[c].end);
      CHECK(auto_chunk_of_block(chunks[c].first, 32, pp * v) == static_cast<std::int64_t>(c));
    }
  }
  // Uneven: 10 blocks in 4 chunks are 3, 3, 2, 2 (the extra blocks to the earlier chunks).
  const std::vector<ChunkBlocks> uneven = auto_chunk_blocks(10, 4);
  REQUIRE(uneven.size() == 4);
  CHECK(uneven[0].size() == 3);
  CHECK(uneven[1].size() == 3);
  CHECK(uneven[2].size() == 2);
  CHECK(uneven[3].end == 10);
  for (std::int64_t block = 0; block < 10; ++block) {
    const std::int64_t chunk = auto_chunk_of_block(block, 10, 4);
    CHECK(block >= uneven[static_cast<std::size_t>(chunk)].first);
    CHECK(block < uneven[static_cast<std::size_t>(chunk)].end);
  }
}

TEST_CASE("search: block recompute keeps the activations of all but the first layers of a chunk" *
          doctest::test_suite("models")) {
  // DeepSeek-V3 on 2,048 H800s at DeepSeek's degrees (pp16, ep64, ZeRO-1 data
  // parallel): keeping every layer's activations is over 80 GB, recomputing every layer
  // is not needed. The search offers the fewest recomputed blocks per model chunk that
  // fit; its recipe lists them as per-layer ranges, the planner counts them, and the
  // cost charges only their share of a forward.
  Fixture f = fixture("plans/deepseek-v3.model.yaml", "plans/deepseek-v3-pp16-ep64.recipe.yaml",
                      2048, "h800", 4096, 15360);
  f.request.model = &f.model;
  f.request.rules = &f.rules;
  f.request.moe_node_limit = 4;
  f.request.fixed = {16, 128, 1, 1, 1, 64};
  f.request.top = 40;
  f.request.max_exact = 40;
  const SearchResult r = run_search(f.request);
  REQUIRE(r.error.empty());
  const CheckedLayout* block = nullptr;
  for (const CheckedLayout& c : r.ranked) {
    if (c.layout.recompute_block > 0 && c.layout.zero1) block = &c;
    CHECK_FALSE((c.layout.zero1 && c.layout.dp_shard > 1));  // E-ZERO: never enumerated
  }
  REQUIRE(block != nullptr);
  const Layout& l = block->layout;
  CHECK(l.recompute == Recompute::Full);
  CHECK(layout_name(l).find("recompute=block" + std::to_string(l.recompute_block)) !=
        std::string::npos);
  const search::ModelStats st = search::model_stats(f.model);
  // 61 blocks over 16 chunks: 13 chunks of 4 and 3 of 3 (auto_chunk_blocks).
  std::int64_t recomputed = 0;
  for (const ChunkBlocks& chunk : auto_chunk_blocks(61, 16))
    recomputed += std::min(chunk.size(), l.recompute_block);
  CHECK(search::recomputed_fraction(st, l) ==
        doctest::Approx(static_cast<double>(recomputed) / 61));
  // The recipe's ranges, as the planner resolves them: on every stage, the first
  // recompute_block blocks of each chunk are `full`, the rest `none`.
  const std::optional<Plan> plan = plan_of(f, l);
  REQUIRE(plan);
  const std::vector<ChunkBlocks> chunks = auto_chunk_blocks(61, 16);
  for (std::size_t stage = 0; stage < plan->training_layout.stages.size(); ++stage) {
    const StageLayers& counts = plan->training_layout.stages[stage];
    const std::int64_t full = counts.count[0][2] + counts.count[1][2];
    const std::int64_t none = counts.count[0][0] + counts.count[1][0];
    CHECK(full == std::min(chunks[stage].size(), l.recompute_block));
    CHECK(full + none == chunks[stage].size());
    const StageLayers searched = search::stage_layers(st, l, static_cast<std::int64_t>(stage));
    for (int kind = 0; kind < 2; ++kind) {
      for (int mode = 0; mode < 3; ++mode)
        CHECK(searched.count[kind][mode] == counts.count[kind][mode]);
    }
  }
  // Its exact peak is what `memory` gives the recipe, within the budget; the cost
  // charges the recomputed share of a forward.
  const std::optional<MemoryReport> memory = memory_classes(*plan);
  REQUIRE(memory);
  CHECK(memory->peak == block->peak);
  CHECK(block->peak <= f.request.budget);
  Layout full = l;
  full.recompute_block = 0;
  const StepCost all = search::step_cost(st, f.request, full, false);
  const StepCost some = search::step_cost(st, f.request, l, false);
  CHECK(some.recompute == doctest::Approx(all.recompute * search::recomputed_fraction(st, l)));
  CHECK(some.step < all.step);
}
