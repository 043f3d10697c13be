// Layout search (src/search/search.hpp, src/search/cost.cpp, docs/search.md): the
// cost model's rules pinned on the shipped Llama-3.1-8B and DeepSeek-V3 inventories
// (interleaved bubble / v, a shared link hides at most the compute in all), the
// screen (an expert FSDP axis), and the exact phase's order (in-budget estimates first).
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "../source_text.hpp"
#include "core/layer_blocks.hpp"
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
  Layout layout;
  layout.pp = pp;
  layout.dp_replicate = dp_replicate;
  layout.dp_shard = dp_shard;
  layout.tp = tp;
  layout.sequence_parallel = tp > 1;
  return layout;
}

// The layout's recipe (what --emit-recipe writes) planned as `validate` plans it.
std::optional<Plan> plan_of(const Fixture& setup, const Layout& layout) {
  DiagnosticSink sink;
  const std::optional<Recipe> recipe =
      parse_recipe({"<layout>", layout_recipe_text(setup.request, layout)}, sink, false);
  REQUIRE_MESSAGE(recipe.has_value(), layout_recipe_text(setup.request, layout));
  std::optional<Plan> plan = build_plan(setup.model, *recipe, sink);
  for (const Diagnostic& diagnostic : sink.items()) {
    if (diagnostic.severity == Severity::Error) MESSAGE(diagnostic.message);
  }
  return plan;
}

}  // namespace

TEST_CASE("search cost: the interleaved bubble is the 1F1B bubble over v") {
  Fixture llama = fixture("plans/llama-3.1-8b.model.yaml", "plans/llama-3.1-8b-dp8-tp8.recipe.yaml",
                          64, "h100", 8192, 256);
  llama.request.model = &llama.model;
  llama.request.rules = &llama.rules;
  const search::ModelStats st = search::model_stats(llama.model);
  Layout one = layout_of(4, 2, 1, 8);  // 256 sequences / dp 2 = 128 micro-batches
  const StepCost base = search::step_cost(st, llama.request, one, false);
  CHECK(base.bubble > 0);
  for (const std::int64_t virtual_stages : {2, 4, 8}) {
    Layout interleaved = one;
    interleaved.schedule = PipelineScheduleKind::Interleaved;
    interleaved.virtual_stages = virtual_stages;
    const StepCost cost = search::step_cost(st, llama.request, interleaved, false);
    CHECK(cost.bubble == doctest::Approx(base.bubble / static_cast<double>(virtual_stages)));
    CHECK(cost.compute == doctest::Approx(base.compute));
  }
}

TEST_CASE("search cost: overlapped terms on one link hide at most the compute in all") {
  // DeepSeek-V3 on 2,048 H800s, pp2 under dualpipev (EP and PP hidden behind the
  // overlapped chunks) with FSDP over 1,024 ranks and ep 128: FSDP's, EP's and PP's
  // traffic all cross nodes, and together they exceed the step's compute.
  Fixture deepseek = fixture("plans/deepseek-v3.model.yaml",
                             "plans/deepseek-v3-pp16-ep64.recipe.yaml", 2048, "h800", 4096, 15360);
  deepseek.request.model = &deepseek.model;
  deepseek.request.rules = &deepseek.rules;
  const search::ModelStats st = search::model_stats(deepseek.model);
  Layout layout = layout_of(2, 1, 1024, 1);
  layout.ep = 128;
  layout.efsdp = 8;
  layout.recompute = Recompute::Full;
  layout.schedule = PipelineScheduleKind::DualPipeV;
  layout.virtual_stages = 2;
  const StepCost cost = search::step_cost(st, deepseek.request, layout, true);
  const double work = cost.compute + cost.recompute + cost.imbalance;
  double overlapped = 0;
  double hidden = 0;
  for (const AxisCommTime& axis_time : cost.comm) {
    if (axis_time.axis != "ep" && axis_time.axis != "dp_shard" && axis_time.axis != "pp") continue;
    CHECK(axis_time.inter_node);
    CHECK(axis_time.overlap.find("sharing the link") != std::string::npos);
    overlapped += axis_time.seconds;
    hidden += axis_time.seconds - axis_time.exposed;
  }
  REQUIRE(overlapped > work);  // the case the rule is for
  CHECK(hidden == doctest::Approx(work));
  CHECK(cost.exposed_comm >= overlapped - work - 1e-9);
  CHECK(cost.step == doctest::Approx(work + cost.bubble + cost.exposed_comm + cost.optimizer));
}

TEST_CASE("search cost: FSDP under a pipeline reduce-scatters after the last backward, exposed") {
  // Llama-3.1-405B on 16,384 H100s at 8K, the paper's layout: pp16 x dp_shard128 x tp8.
  // torch.distributed.pipelining's REDUCE_GRAD runs FSDP's reduce-scatters after the
  // stage's last backward and the compute stream waits for them; the all-gathers run once,
  // in the first micro-batch's forward (a third of one micro-batch's work).
  Fixture llama = fixture("plans/llama-3.1-405b.model.yaml",
                          "plans/llama-3.1-405b-dp2048-tp8.recipe.yaml", 16384, "h100", 8192, 2048);
  llama.request.model = &llama.model;
  llama.request.rules = &llama.rules;
  const search::ModelStats st = search::model_stats(llama.model);
  Layout layout = layout_of(16, 1, 128, 8);
  layout.schedule = PipelineScheduleKind::Interleaved;
  layout.virtual_stages = 4;
  const StepCost piped = search::step_cost(st, llama.request, layout, true);
  const double microbatches = 2048.0 / 128.0;
  const double first_forward =
      (piped.compute + piped.recompute + piped.imbalance) / microbatches / 3.0;
  const AxisCommTime* fsdp = nullptr;
  for (const AxisCommTime& axis_time : piped.comm)
    if (axis_time.axis == "dp_shard") fsdp = &axis_time;
  REQUIRE(fsdp != nullptr);
  CHECK(fsdp->overlap.find("reduce-scatters exposed") != std::string::npos);
  // At most the first micro-batch's forward is hidden; the reduce-scatter half never is.
  CHECK(fsdp->seconds - fsdp->exposed <= first_forward * (1 + 1e-9));
  CHECK(fsdp->exposed >= fsdp->seconds / 2);
  // Without a pipeline (dp_shard 2048 over the same ranks) FSDP prefetches behind the compute.
  const StepCost flat = search::step_cost(st, llama.request, layout_of(1, 1, 2048, 8), true);
  for (const AxisCommTime& axis_time : flat.comm)
    if (axis_time.axis == "dp_shard")
      CHECK(axis_time.overlap.find("prefetched: behind the compute") != std::string::npos);
}

TEST_CASE("search: FSDP with efsdp 1 is screened (E-FSDP), and the ranked layouts fit" *
          doctest::test_suite("models")) {
  Fixture deepseek = fixture("plans/deepseek-v3.model.yaml",
                             "plans/deepseek-v3-pp16-ep64.recipe.yaml", 2048, "h800", 4096, 15360);
  deepseek.request.model = &deepseek.model;
  deepseek.request.rules = &deepseek.rules;
  deepseek.request.top = 3;
  deepseek.request.moe_node_limit = 4;
  const SearchResult result = run_search(deepseek.request);
  REQUIRE(result.error.empty());
  CHECK(result.pruned[static_cast<std::size_t>(ScreenReason::ExpertFsdpAxis)] > 0);
  REQUIRE(result.ranked.size() == 3);
  for (const CheckedLayout& checked : result.checked) {
    CHECK_FALSE((checked.layout.dp_shard > 1 && checked.layout.efsdp == 1));
    CHECK(checked.first_code != "E-FSDP");
  }
  // In-budget estimates are checked first: nothing estimated over the budget is
  // planned while fewer than --top layouts are ranked and in-budget ones remain.
  bool over_seen = false;
  for (const CheckedLayout& checked : result.checked) {
    const bool over = checked.estimated_memory > static_cast<double>(deepseek.request.budget);
    CHECK_FALSE((over_seen && !over));
    over_seen = over_seen || over;
  }
  for (const CheckedLayout& checked : result.ranked) CHECK(checked.fits);
}

TEST_CASE("search: interleaved layouts with v = 4 are enumerated while pp x v blocks exist" *
          doctest::test_suite("models")) {
  Fixture llama = fixture("plans/llama-3.1-8b.model.yaml", "plans/llama-3.1-8b-dp8-tp8.recipe.yaml",
                          64, "h100", 8192, 256);
  llama.request.model = &llama.model;
  llama.request.rules = &llama.rules;
  llama.request.fixed = {4, 2, 1, 1, 8, 0};  // pp4 dp_replicate2 tp8: 32 layers = 4 x 8 blocks
  llama.request.top = 64;                    // every layout of the fixed degrees (60) is planned
  llama.request.max_exact = 64;
  const SearchResult result = run_search(llama.request);
  REQUIRE(result.error.empty());
  std::vector<std::int64_t> seen;
  for (const CheckedLayout& checked : result.checked) {
    if (checked.layout.schedule == PipelineScheduleKind::Interleaved)
      seen.push_back(checked.layout.virtual_stages);
  }
  CHECK(std::find(seen.begin(), seen.end(), 4) != seen.end());
  CHECK(std::find(seen.begin(), seen.end(), 8) != seen.end());
  CHECK(std::find(seen.begin(), seen.end(), 16) == seen.end());  // 4 x 16 > 32 layers
}

TEST_CASE("pipeline chunks: stages: auto's cut is the one the planner makes") {
  // Llama-3.1-8B's 32 layer blocks on pp x v model chunks, even and uneven: the
  // planner's model_chunks (stages.cpp) of the emitted recipe (first/last_stage_less_layers
  // 1) equal search::layout_chunks, which the search's block recompute ranges and stage
  // layer counts use.
  Fixture llama = fixture("plans/llama-3.1-8b.model.yaml", "plans/llama-3.1-8b-dp8-tp8.recipe.yaml",
                          64, "h100", 8192, 256);
  llama.request.model = &llama.model;
  llama.request.rules = &llama.rules;
  for (const std::pair<std::int64_t, std::int64_t>& degrees :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{2, 2}, {4, 2}, {2, 4}, {4, 4}, {2, 8}}) {
    const std::int64_t pp = degrees.first;
    const std::int64_t virtual_stages = degrees.second;
    CAPTURE(pp);
    CAPTURE(virtual_stages);
    Layout layout = layout_of(pp, 64 / pp / 8, 1, 8);
    layout.schedule = PipelineScheduleKind::Interleaved;
    layout.virtual_stages = virtual_stages;
    const std::optional<Plan> plan = plan_of(llama, layout);
    REQUIRE(plan);
    const std::vector<ChunkBlocks> chunks =
        search::layout_chunks(search::model_stats(llama.model), layout);
    CHECK(chunks == auto_chunk_blocks(32, pp * virtual_stages, 1, 1));
    CHECK(chunks.front().size() + 1 == chunks[1].size());  // the embedding counts as a layer
    REQUIRE(plan->model_chunks.size() == chunks.size());
    for (std::size_t chunk = 0; chunk < chunks.size(); ++chunk) {
      CHECK(plan->model_chunks[chunk].first_block == chunks[chunk].first);
      CHECK(plan->model_chunks[chunk].end_block == chunks[chunk].end);
    }
    const std::vector<std::int64_t> chunk_of = chunk_of_each_block(chunks, 32);
    for (std::size_t chunk = 0; chunk < chunks.size(); ++chunk) {
      if (chunks[chunk].size() > 0)
        CHECK(chunk_of[static_cast<std::size_t>(chunks[chunk].first)] ==
              static_cast<std::int64_t>(chunk));
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
    const std::int64_t chunk = chunk_of_each_block(uneven, 10)[static_cast<std::size_t>(block)];
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
  Fixture deepseek = fixture("plans/deepseek-v3.model.yaml",
                             "plans/deepseek-v3-pp16-ep64.recipe.yaml", 2048, "h800", 4096, 15360);
  deepseek.request.model = &deepseek.model;
  deepseek.request.rules = &deepseek.rules;
  deepseek.request.moe_node_limit = 4;
  deepseek.request.fixed = {16, 128, 1, 1, 1, 64};
  deepseek.request.top = 40;
  deepseek.request.max_exact = 40;
  const SearchResult result = run_search(deepseek.request);
  REQUIRE(result.error.empty());
  const CheckedLayout* block = nullptr;
  for (const CheckedLayout& checked : result.ranked) {
    if (checked.layout.recompute_block > 0 && checked.layout.zero1) block = &checked;
    CHECK_FALSE((checked.layout.zero1 && checked.layout.dp_shard > 1));  // E-ZERO: never enumerated
  }
  REQUIRE(block != nullptr);
  const Layout& layout = block->layout;
  CHECK(layout.recompute == Recompute::Full);
  CHECK(layout_name(layout).find("recompute=block" + std::to_string(layout.recompute_block)) !=
        std::string::npos);
  const search::ModelStats st = search::model_stats(deepseek.model);
  // 61 blocks over 16 chunks, the embedding and the output counting as one each: 3,
  // 14 chunks of 4, 2 (auto_chunk_blocks with first/last_stage_less_layers 1).
  std::int64_t recomputed = 0;
  for (const ChunkBlocks& chunk : auto_chunk_blocks(61, 16, 1, 1))
    recomputed += std::min(chunk.size(), layout.recompute_block);
  CHECK(search::recomputed_fraction(st, layout) ==
        doctest::Approx(static_cast<double>(recomputed) / 61));
  // The recipe's ranges, as the planner resolves them: on every stage, the first
  // recompute_block blocks of each chunk are `full`, the rest `none`.
  const std::optional<Plan> plan = plan_of(deepseek, layout);
  REQUIRE(plan);
  const std::vector<ChunkBlocks> chunks = auto_chunk_blocks(61, 16, 1, 1);
  for (std::size_t stage = 0; stage < plan->training_layout.stages.size(); ++stage) {
    const StageLayers& counts = plan->training_layout.stages[stage];
    const std::int64_t full = counts.count[0][2] + counts.count[1][2];
    const std::int64_t none = counts.count[0][0] + counts.count[1][0];
    CHECK(full == std::min(chunks[stage].size(), layout.recompute_block));
    CHECK(full + none == chunks[stage].size());
    const StageLayers searched = search::stage_layers(st, layout, static_cast<std::int64_t>(stage));
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
  CHECK(block->peak <= deepseek.request.budget);
  Layout full = layout;
  full.recompute_block = 0;
  const StepCost all = search::step_cost(st, deepseek.request, full, false);
  const StepCost some = search::step_cost(st, deepseek.request, layout, false);
  CHECK(some.recompute == doctest::Approx(all.recompute * search::recomputed_fraction(st, layout)));
  CHECK(some.step < all.step);
}

namespace {

// Llama-3.1-8B with one more vocabulary row (128,257: no tp > 1 divides it) and a rule
// set of the given text (`uneven: even`, the embedding and lm_head Shard(0) over tp).
Fixture odd_vocab(const std::string& rules_text, std::int64_t world) {
  Fixture out = fixture("plans/llama-3.1-8b.model.yaml", "plans/llama-3.1-8b-dp8-tp8.recipe.yaml",
                        world, "h100", 4096, 256);
  DiagnosticSink sink;
  auto rules = parse_recipe({"<rules>", rules_text}, sink, false);
  REQUIRE(rules);
  out.rules = std::move(*rules);
  out.request.rules_text = rule_set_text(rules_text);
  out.model.attributes.vocab_size = 128257;
  for (Param& param : out.model.params)
    if (param.shape.size() == 2 && param.shape[0] == 128256) param.shape[0] = 128257;
  return out;
}

// The rule set text of the shipped 8B plan with its mesh, for parse_recipe.
std::string shipped_llama_rules() { return slurp("plans/llama-3.1-8b-dp8-tp8.recipe.yaml"); }

// Every error and warning the planner gives the layout's recipe, "W-CODE: message" each.
std::vector<std::string> diagnostics_of(const Fixture& setup, const Layout& layout) {
  DiagnosticSink sink;
  const std::optional<Recipe> recipe =
      parse_recipe({"<layout>", layout_recipe_text(setup.request, layout)}, sink, false);
  if (recipe) (void)build_plan(setup.model, *recipe, sink);
  std::vector<std::string> out;
  for (const Diagnostic& diagnostic : sink.items())
    out.push_back(std::string(code_name(diagnostic.code)) + ": " + diagnostic.message);
  return out;
}

}  // namespace

TEST_CASE("search: a vocabulary tp does not divide is padded (Megatron's 128 x tp), not pruned" *
          doctest::test_suite("models")) {
  // The rule set's own rules for the embedding and lm_head (block items) get the key.
  Fixture odd = odd_vocab(shipped_llama_rules(), 16);
  odd.request.model = &odd.model;
  odd.request.rules = &odd.rules;
  odd.request.fixed = {0, 0, 0, 0, 8, 0};
  odd.request.top = 3;
  const SearchResult result = run_search(odd.request);
  REQUIRE(result.error.empty());
  CHECK(result.pruned[static_cast<std::size_t>(ScreenReason::VocabTp)] == 0);
  REQUIRE(result.ranked.size() == 3);
  for (const CheckedLayout& checked : result.ranked) {
    CHECK(checked.layout.vocab_padding);
    CHECK(layout_name(checked.layout).find("padded-vocab") != std::string::npos);
  }
  const Layout& best = result.ranked.front().layout;
  const std::string text = layout_recipe_text(odd.request, best);
  CHECK(text.find("  - match: model.embed_tokens.weight") != std::string::npos);
  std::size_t keys = 0;
  for (std::size_t at = text.find("vocab_padding: {divisible_by: 128}"); at != std::string::npos;
       at = text.find("vocab_padding: {divisible_by: 128}", at + 1))
    ++keys;
  CHECK(keys == 2);
  CHECK(diagnostics_of(odd, best).empty());  // no error, no shadowed rule
  const std::optional<Plan> plan = plan_of(odd, best);
  REQUIRE(plan);
  for (const PlannedParam& param : plan->params) {
    if (param.name == "lm_head.weight" || param.name == "model.embed_tokens.weight")
      CHECK(param.global_shape[0] == 129024);  // 128,257 up to a multiple of 128 x 8
  }
  // tp 1 pads nothing.
  Layout flat = best;
  flat.tp = 1;
  flat.vocab_padding = false;
  CHECK(layout_recipe_text(odd.request, flat).find("vocab_padding") == std::string::npos);
}

TEST_CASE("search: vocabulary padding of flow rules and of a rule shared with other params" *
          doctest::test_suite("models")) {
  // The embedding shares its rule with the q/k/v projections (a rule of its own goes in
  // front); lm_head has a flow item of its own (the key goes inside its braces).
  const std::string rules =
      "format: shardc.recipe/v1\n"
      "mesh:\n  - {name: dp, size: 2}\n  - {name: tp, size: 8}\n"
      "uneven: even\n"
      "rules:\n"
      "  - match: [model.embed_tokens.weight, \"model.layers.*.self_attn.[qkv]_proj.weight\","
      " \"model.layers.*.mlp.gate_proj.weight\", \"model.layers.*.mlp.up_proj.weight\"]\n"
      "    placements: {tp: Shard(0)}\n"
      "  - {match: \"model.layers.*.self_attn.o_proj.weight\", placements: {tp: Shard(1)}}\n"
      "  - {match: \"model.layers.*.mlp.down_proj.weight\", placements: {tp: Shard(1)}}\n"
      "  - {match: lm_head.weight, placements: {tp: Shard(0)}}  # colwise\n"
      "  - match: \"**\"\n    placements: {}\n";
  Fixture odd = odd_vocab(rules, 16);
  odd.request.model = &odd.model;
  odd.request.rules = &odd.rules;
  Layout layout = layout_of(1, 2, 1, 8);
  layout.vocab_padding = true;
  const std::string text = layout_recipe_text(odd.request, layout);
  CHECK(
      text.find("  - match: \"model.embed_tokens.weight\"\n    placements: {tp: Shard(0)}\n"
                "    vocab_padding: {divisible_by: 128}\n  - match: [model.embed_tokens.weight") !=
      std::string::npos);
  CHECK(text.find("  - {match: lm_head.weight, placements: {tp: Shard(0)}, vocab_padding: "
                  "{divisible_by: 128}}\n") != std::string::npos);
  CHECK(text.find("colwise") == std::string::npos);  // the rule set's comments are left out
  CHECK(diagnostics_of(odd, layout).empty());
  const std::optional<Plan> plan = plan_of(odd, layout);
  REQUIRE(plan);
  for (const PlannedParam& param : plan->params) {
    if (param.name == "lm_head.weight" || param.name == "model.embed_tokens.weight")
      CHECK(param.global_shape[0] == 129024);
    if (param.name == "model.layers.0.self_attn.q_proj.weight")
      CHECK(param.global_shape[0] == 4096);  // the shared rule's other params: not padded
  }
}

TEST_CASE("search: a vocabulary param that cannot be padded is still E-EVEN (pruned)" *
          doctest::test_suite("models")) {
  // `unit: 2` on the embedding's rule: vocab_padding does not apply to a split by units.
  std::string rules = shipped_llama_rules();
  const std::string embed = "  - match: model.embed_tokens.weight";
  const std::size_t at = rules.find(embed);
  REQUIRE(at != std::string::npos);
  rules.insert(rules.find('\n', at) + 1, "    unit: 2\n");
  Fixture odd = odd_vocab(rules, 16);
  odd.request.model = &odd.model;
  odd.request.rules = &odd.rules;
  odd.request.fixed = {0, 0, 0, 0, 8, 0};
  const SearchResult result = run_search(odd.request);
  CHECK(result.pruned[static_cast<std::size_t>(ScreenReason::VocabTp)] > 0);
  CHECK(result.ranked.empty());
}

TEST_CASE("search and planner: a vision tower's blocks are not decoder layers (Llama-4-Scout)" *
          doctest::test_suite("models")) {
  // Fresh-user finding (2026-12-05): keyed by the bare index, vision blocks 0-33 and text
  // blocks 0-33 were one "layer": pp2 counted 34 layers on stage 0 and 14 on stage 1,
  // all sized as text MoE layers, where the planner put text layers 0-6 on stage 0.
  Fixture scout =
      fixture("plans/llama-4-scout-17b-16e.model.yaml",
              "plans/llama-4-scout-17b-16e-ep16-tp8.recipe.yaml", 256, "h100", 4096, 1024);
  scout.request.model = &scout.model;
  scout.request.rules = &scout.rules;
  const search::ModelStats st = search::model_stats(scout.model);
  CHECK(st.layers == 48);
  CHECK(st.other_stacks > 0);
  Layout layout = layout_of(2, 32, 1, 2);
  layout.cp = 2;
  layout.ep = 16;
  layout.efsdp = 8;
  layout.zero1 = true;
  const std::optional<Plan> plan = plan_of(scout, layout);
  REQUIRE(plan);
  // The text blocks each stage holds, read off the planned params.
  std::vector<std::set<std::int64_t>> held(2);
  for (const PlannedParam& param : plan->params) {
    const std::int64_t block = decoder_block(param.name, "language_model.model.layers");
    if (block >= 0) held[static_cast<std::size_t>(param.stage)].insert(block);
  }
  CHECK(held[0].size() + held[1].size() == 48);
  for (std::size_t stage = 0; stage < 2; ++stage) {
    const StageLayers& counts = plan->training_layout.stages[stage];
    std::int64_t layers = 0;
    for (int kind = 0; kind < 2; ++kind)
      for (int mode = 0; mode < 3; ++mode) layers += counts.count[kind][mode];
    CHECK(layers == static_cast<std::int64_t>(held[stage].size()));
  }
}
