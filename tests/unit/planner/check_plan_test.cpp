// Tests for src/planner/check_plan.cpp: a consistent plan passes, and each
// kind of corruption made in memory is caught with a message naming it.
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "planner/check_plan.hpp"
#include "support/assert.hpp"

using namespace shardc;
using namespace shardc::test;

namespace {

// emb [50, 8] over tp 4 (rows) with FSDP over dp_shard 2, pipelined norms.
Plan fsdp_tp_plan() {
  Model model;
  model.params = {param("emb", {50, 8}), param("head", {50, 8}), param("norm", {8})};
  model.tied = {TiePair{"emb", "head", {}}};
  Recipe recipe;
  recipe.mesh = mesh({{"dp_shard", 2}, {"tp", 4}});
  recipe.rules = {rule("emb", {{"tp", shard(0)}}), rule("head", {{"tp", shard(0)}}),
                  rule("norm", {})};
  recipe.fsdp = FsdpSpec{};
  recipe.fsdp->shard = {"dp_shard"};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  return *plan;
}

// vocab [50, 8] padded to multiples of 16 rows over tp 4; fc [12, 8] packed
// as parts [4, 8] on dim 0 over tp 4 (two boxes per piece). No FSDP: the
// shipped packed + FSDP plans are checked by every build_plan in the tests.
Plan padded_packed_plan() {
  Model model;
  model.params = {param("vocab", {50, 8}), param("fc", {12, 8})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp_shard", 2}, {"tp", 4}});
  Rule vocab = rule("vocab", {{"tp", shard(0)}});
  vocab.uneven = SplitRule::Pad;
  vocab.pad_multiple = 16;
  Rule fc = rule("fc", {{"tp", shard(0)}});
  fc.packed = PackedSpec{0, {4, 8}, 0, {}};
  recipe.rules = {vocab, fc};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE_MESSAGE(plan, (sink.items().empty() ? "" : sink.items()[0].message));
  return *plan;
}

template <typename Lines>
bool says(const Lines& lines, const std::string& needle) {
  for (const std::string& line : lines) {
    if (line.find(needle) != std::string::npos) return true;
  }
  MESSAGE("no line says: " << needle);
  for (const std::string& line : lines) MESSAGE(line);
  return false;
}

bool reports(const Plan& plan, const std::string& needle) { return says(check_plan(plan), needle); }

// check_shard_classes of the param named `name` after `corrupt` edits its
// shard classes.
template <typename F>
std::vector<std::string> corrupted(const Plan& plan, const std::string& name, F corrupt) {
  for (const PlannedParam& param : plan.params) {
    if (param.name != name) continue;
    std::vector<ShardClass> classes = enumerate_shards(plan, param);
    REQUIRE(check_shard_classes(plan, param, classes).empty());
    corrupt(classes);
    return check_shard_classes(plan, param, classes);
  }
  FAIL("no param " << name);
  return {};
}

}  // namespace

TEST_CASE("a planned FSDP + TP plan with a tie satisfies every invariant") {
  const Plan plan = fsdp_tp_plan();
  CHECK(check_plan(plan).empty());
  CHECK_NOTHROW(assert_plan_invariants(plan));
}

TEST_CASE("check_plan catches corrupted plans") {
  Plan plan = fsdp_tp_plan();
  PlannedParam& emb = plan.params[0];
  SUBCASE("a split whose ways disagree with its axes") {
    emb.geometry.per_dim[0][0].ways = 3;
    CHECK(reports(plan, "emb: dim 0 has a split whose axes do not match the mesh"));
  }
  SUBCASE("one axis splitting two dims (a diagonal: elements lost)") {
    emb.geometry.per_dim[1].push_back(emb.geometry.per_dim[0][0]);
    CHECK(reports(plan, "emb: dim 1: split over axes [1] but its Shard placements are on axes []"));
  }
  SUBCASE("a placement that no split follows") {
    emb.placements[1].dim = 1;
    CHECK(reports(plan,
                  "emb: dim 0: split over axes [0, 1] but its Shard placements are on axes [0]"));
  }
  SUBCASE("a split cutting with another rule than the param's") {
    emb.geometry.per_dim[0][0].rule = SplitRule::Balanced;
    CHECK(reports(plan, "emb: dim 0: a split cuts balanced but the param's rule is chunk"));
  }
  SUBCASE("the FSDP dim pointing elsewhere than the FSDP split") {
    emb.geometry.fsdp_dim = 1;
    CHECK(reports(plan, "emb: fsdp_dim 1 (2 ways) but the FSDP split is on dim 0 (2 ways)"));
  }
  SUBCASE("the FSDP split not chunk") {
    emb.geometry.per_dim[0].back().rule = SplitRule::Balanced;
    CHECK(reports(plan, "the FSDP split must be last and chunk"));
  }
  SUBCASE("a stage outside the pipeline") {
    plan.params[2].stage = 1;
    CHECK(reports(plan, "norm: stage 1 outside [0, 1)"));
  }
  SUBCASE("a placement missing") {
    plan.params[2].placements.pop_back();
    CHECK(reports(plan, "norm: 1 placements for 2 mesh axes"));
  }
  SUBCASE("an alias whose source is sharded differently") {
    REQUIRE(plan.params[1].alias_of);
    // emb loses its tp split consistently (chain and placement): a sound
    // param, but no longer its alias's twin.
    plan.params[0].geometry.per_dim[0].erase(plan.params[0].geometry.per_dim[0].begin());
    plan.params[0].placements[1] = ResolvedPlacement{};
    CHECK(check_plan(plan) ==
          std::vector<std::string>{"head: alias of emb but their shards differ"});
  }
  SUBCASE("an alias of a broken source") {
    emb.geometry.per_dim[0][0].ways = 3;
    CHECK(reports(plan, "head: alias of emb, whose geometry is broken"));
  }
  SUBCASE("a geometry for another shape") {
    emb.global_shape = {51, 8};
    CHECK(reports(plan, "emb: geometry is for shape [50, 8]"));
  }
  CHECK_THROWS_AS(assert_plan_invariants(plan), InternalError);
}

TEST_CASE("check_plan catches corrupted pieces and replica sets") {
  const Plan plan = fsdp_tp_plan();
  SUBCASE("an offset moved") {
    // emb's first class is rows [0, 7) on dp 0 x tp 0; start it at row 1.
    CHECK(says(corrupted(plan, "emb", [](auto& classes) { classes[0].geom.global_offset[0] = 1; }),
               "emb: dim 0: pieces leave a gap at 0"));
  }
  SUBCASE("an offset outside the global shape") {
    CHECK(says(corrupted(plan, "emb", [](auto& classes) { classes[0].geom.global_offset[1] = 4; }),
               "emb: rank 0 dim 1: piece [4, 12) outside [0, 8)"));
  }
  SUBCASE("an empty piece off the sentinel") {
    CHECK(says(corrupted(plan, "emb",
                         [](auto& classes) {
                           classes[0].geom.local_shape[0] = 0;
                           classes[0].geom.global_offset[0] = 3;
                         }),
               "emb: rank 0 dim 0: empty piece at offset 3, not the sentinel 50"));
  }
  SUBCASE("a replica set missing a rank") {
    CHECK(says(corrupted(plan, "norm",
                         [](auto& classes) {
                           std::vector<std::int64_t> ranks;
                           for (std::int64_t r = 1; r < 8; ++r) ranks.push_back(r);
                           classes[0].ranks = RankSet::from_sorted(ranks);
                         }),
               "norm: a shard held by 7 ranks, not a multiple of the replica count 4"));
  }
  SUBCASE("a replica set of the wrong size") {
    CHECK(says(corrupted(plan, "emb",
                         [](auto& classes) {
                           classes[0].ranks = RankSet::from_sorted({0});
                           classes[1].ranks = RankSet::from_sorted({1, 2, 3});
                         }),
               "emb: 10 ranks hold a shard; its stage has 8"));
  }
  SUBCASE("a box held twice, another by none (every dim still partitioned)") {
    // emb: 4 row pieces (tp) x 1; norm: [8] -> use a 2-D split instead.
    Model model;
    model.params = {param("w", {4, 6})};
    Recipe recipe;
    recipe.mesh = mesh({{"a", 2}, {"b", 2}});
    recipe.rules = {rule("w", {{"a", shard(0)}, {"b", shard(1)}})};
    DiagnosticSink sink;
    const auto grid = build_plan(model, recipe, sink);
    REQUIRE(grid);
    // Classes (rows, cols): (0,0) (0,1) (1,0) (1,1); make the last a copy of the first.
    CHECK(says(corrupted(*grid, "w", [](auto& classes) { classes[3].geom = classes[0].geom; }),
               "w: two pieces hold the same box starting at [0, 2, 0, 3]"));
  }
  SUBCASE("a padded shape smaller than the piece") {
    CHECK(says(corrupted(plan, "emb", [](auto& classes) { classes[0].geom.padded_shape[0] = 6; }),
               "emb: rank 0 dim 0: padded extent 6 for local extent 7"));
  }
  SUBCASE("a padded shape off the FSDP dim") {
    CHECK(says(corrupted(plan, "emb", [](auto& classes) { classes[0].geom.padded_shape[1] = 9; }),
               "emb: rank 0 dim 1: padded extent 9 for local extent 8"));
  }
}

TEST_CASE("a padded and a packed plan satisfy every invariant, and their corruptions are caught") {
  Plan plan = padded_packed_plan();
  CHECK(check_plan(plan).empty());
  const PlannedParam& fc = plan.params[1];
  REQUIRE(fc.geometry.parts == std::vector<std::int64_t>{4, 8});
  SUBCASE("pad pieces of different sizes") {
    CHECK(
        says(corrupted(plan, "vocab", [](auto& classes) { classes[1].geom.padded_shape[0] = 32; }),
             "but another rank pads to 16"));
  }
  SUBCASE("a pad allocation that is not a multiple of the pad") {
    CHECK(says(corrupted(plan, "vocab",
                         [](auto& classes) {
                           for (ShardClass& shard_class : classes)
                             shard_class.geom.padded_shape[0] = 15;
                         }),
               "padded extent 15 is not a multiple of 16 (pad 16 x unit 1)"));
  }
  SUBCASE("a pad split without a multiple") {
    plan.params[0].geometry.per_dim[0][0].pad_multiple = 0;
    CHECK(reports(plan, "vocab: dim 0: a split cuts pad 0 but the param's rule is pad"));
  }
  SUBCASE("packed parts that do not tile the dim") {
    plan.params[1].geometry.parts = {4, 9};
    CHECK(reports(plan, "fc: packed parts [4, 9] do not tile dim 0 of extent 12"));
  }
  SUBCASE("a box across two parts") {
    CHECK(says(corrupted(plan, "fc",
                         [](auto& classes) {
                           REQUIRE(classes[0].geom.boxes.size() == 2);
                           classes[0].geom.boxes[1].global_offset[0] = 3;  // [3, 5) over the 4
                         }),
               "are not inside one packed part [4, 8]"));
  }
  SUBCASE("boxes that do not add up to the piece") {
    CHECK(says(corrupted(plan, "fc", [](auto& classes) { classes[0].geom.boxes.pop_back(); }),
               "rows of the packed dim, the piece"));
  }
  SUBCASE("boxes overlapping in the local tensor") {
    CHECK(says(corrupted(plan, "fc",
                         [](auto& classes) {
                           REQUIRE(classes[0].geom.boxes.size() == 2);
                           classes[0].geom.boxes[1].local_offset[0] = 0;
                         }),
               "overlap an earlier box"));
  }
  SUBCASE("a packed piece without boxes") {
    CHECK(says(corrupted(plan, "fc", [](auto& classes) { classes[0].geom.boxes.clear(); }),
               "a packed piece without boxes"));
  }
  SUBCASE("boxes on a param that is neither packed nor strided") {
    CHECK(says(corrupted(plan, "vocab",
                         [](auto& classes) {
                           classes[0].geom.boxes.push_back(ShardBox{{0, 0}, {0, 0}, {1, 8}});
                         }),
               "boxes on a param that is neither packed nor strided"));
  }
  SUBCASE("a packed row held twice, another held by none") {
    CHECK(says(corrupted(plan, "fc",
                         [](auto& classes) {
                           classes[1].geom.global_offset[0] = 0;
                           classes[1].geom.boxes.front().global_offset[0] = 0;
                         }),
               "fc: dim 0: pieces leave a gap at 1"));
  }
}

TEST_CASE("mesh checks live in the planner: E-MESH at the size node, exit class 1") {
  Model model;
  model.params = {param("w", {4})};
  Recipe recipe;
  recipe.mesh = mesh({{"a", 0}, {"tp", 2}, {"tp", 2}});
  recipe.mesh.axes[0].size_loc = SourceLoc{"recipe.yaml", 3, 22};
  recipe.rules = {rule("*", {})};
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink).has_value());
  REQUIRE(sink.items().size() == 2);
  CHECK(sink.items()[0].code == DiagCode::EMesh);
  CHECK(sink.items()[0].loc.column == 22);
  CHECK(sink.items()[1].message.find("repeated") != std::string::npos);
  CHECK(sink.error_exit() == ExitCode::Invalid);
}

namespace {

// A fused q|k|v [16, 4] of 4 q heads and 2 KV heads (head_dim 2: q 8 rows | k 4 | v 4) over
// tp 4, k and v with `replicas` R: each is cut in 4 / R pieces, tp coordinate t holding piece
// t / R (vLLM's KV shard tp_rank // num_kv_head_replicas).
Plan replicated_plan(std::int64_t replicas, bool fsdp) {
  Model model;
  model.attributes.num_attention_heads = 4;
  model.attributes.num_key_value_heads = 2;
  model.attributes.head_dim = 2;
  model.params = {param("model.layers.0.self_attn.qkv_proj.weight", {16, 4})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp_shard", 2}, {"tp", 4}});
  if (fsdp) {
    recipe.fsdp = FsdpSpec{};
    recipe.fsdp->shard = {"dp_shard"};
  }
  Rule qkv = rule("**", {{"tp", shard(0)}});
  PackedSpec spec;
  spec.sizes = {8, 4, 4};
  spec.names = {"q", "k", "v"};
  spec.replicas = {1, replicas, replicas};
  qkv.packed = spec;
  recipe.rules = {qkv};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE_MESSAGE(plan, (sink.items().empty() ? "" : sink.items()[0].message));
  return *plan;
}

}  // namespace

TEST_CASE("packed parts with replicas: each rank's boxes, the same k and v on R ranks") {
  const Plan plan = replicated_plan(2, false);
  const PlannedParam& param = plan.params[0];
  CHECK(check_plan(plan).empty());
  for (std::int64_t t = 0; t < 4; ++t) {
    const ShardGeom shard = shard_at(param.geometry, mesh_coords(plan.dense, t));  // dp 0, tp t
    REQUIRE(shard.boxes.size() == 3);
    CHECK(shard.local_shape == Shape{6, 4});
    CHECK(shard.boxes[0].global_offset == Shape{2 * t, 0});            // q: 2 rows, one head
    CHECK(shard.boxes[1].global_offset == Shape{8 + 2 * (t / 2), 0});  // k: KV head t / 2
    CHECK(shard.boxes[1].shape == Shape{2, 4});
    CHECK(shard.boxes[1].local_offset == Shape{2, 0});
    CHECK(shard.boxes[2].global_offset == Shape{12 + 2 * (t / 2), 0});  // v
  }
  // R = tp: the whole of k and v on every rank.
  const Plan whole = replicated_plan(4, false);
  const ShardGeom g3 = shard_at(whole.params[0].geometry, mesh_coords(whole.dense, 3));
  REQUIRE(g3.boxes.size() == 3);
  CHECK(g3.boxes[1].global_offset == Shape{8, 0});
  CHECK(g3.boxes[1].shape == Shape{4, 4});
  CHECK(check_plan(whole).empty());
  // FSDP on the concatenated local tensor [q 6, 7 | k 10, 11 | v 14, 15] of tp 3: dp_shard 1
  // holds its local rows 3-5, k row 11 and v rows 14-15.
  const Plan sharded = replicated_plan(2, true);
  CHECK(check_plan(sharded).empty());
  const ShardGeom shard = shard_at(sharded.params[0].geometry, mesh_coords(sharded.dense, 4 + 3));
  REQUIRE(shard.boxes.size() == 2);
  CHECK(shard.boxes[0].global_offset == Shape{11, 0});
  CHECK(shard.boxes[0].shape == Shape{1, 4});
  CHECK(shard.boxes[1].global_offset == Shape{14, 0});
  CHECK(shard.boxes[1].shape == Shape{2, 4});
}

TEST_CASE("replicas that do not divide the split, or a packed dim not split once, are E-PACKED") {
  Model model;
  model.params = {param("qkv", {16, 4})};
  Recipe recipe;
  recipe.mesh = mesh({{"tp", 4}});
  Rule qkv = rule("qkv", {{"tp", shard(0)}});
  PackedSpec spec;
  spec.sizes = {8, 4, 4};
  spec.names = {"q", "k", "v"};
  spec.replicas = {1, 3, 3};
  qkv.packed = spec;
  recipe.rules = {qkv};
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  REQUIRE_FALSE(sink.items().empty());
  CHECK(sink.items()[0].code == DiagCode::EPacked);
  CHECK(sink.items()[0].message.find("part 'k': `replicas: 3` does not divide the 4-way split") !=
        std::string::npos);
  // A packed dim the rule does not split: nothing to replicate over.
  recipe.rules[0] = rule("qkv", {{"tp", shard(1)}});
  spec.replicas = {1, 2, 2};
  recipe.rules[0].packed = spec;
  DiagnosticSink sink2;
  CHECK_FALSE(build_plan(model, recipe, sink2));
  REQUIRE_FALSE(sink2.items().empty());
  CHECK(sink2.items()[0].message.find("split by exactly one placement") != std::string::npos);
}
