// Layout search (src/search/search.hpp, src/search/cost.cpp, docs/search.md): the
// cost model's rules pinned on the shipped Llama-3.1-8B and DeepSeek-V3 inventories
// (interleaved bubble / v, a shared link hides at most the compute in all), the
// screen (an expert FSDP axis), and the exact phase's order (in-budget estimates first).
#include <doctest/doctest.h>

#include <algorithm>

#include "../source_text.hpp"
#include "frontend/frontend.hpp"
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

TEST_CASE("search: FSDP with efsdp 1 is screened (E-FSDP), and the ranked layouts fit") {
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

TEST_CASE("search: interleaved layouts with v = 4 are enumerated while pp x v blocks exist") {
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
