#include <doctest/doctest.h>

#include "fixtures.hpp"
#include "planner/buffers.hpp"

using namespace shardc;
using namespace shardc::test;
using V = std::vector<std::int64_t>;

namespace {
Plan plan_of(Model model, Recipe recipe) {
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  return *plan;
}
BufferSpec muon_spec() { return BufferSpec{}; }
}  // namespace

TEST_CASE("muon layout of a [10,7] bf16 Shard(0) over 4 ranks") {
  Model model;
  model.params = {param("w", {10, 7}, DType::BFloat16), param("v", {3, 5}, DType::Float32)};
  Recipe recipe;
  recipe.mesh = mesh({{"tp", 4}});
  recipe.rules = {rule("*", {{"tp", shard(0)}})};
  Plan plan = plan_of(model, recipe);
  MuonPlan muon = plan_muon(plan, muon_spec());
  REQUIRE(muon.groups.size() == 1);
  CHECK(muon.groups[0].batches.size() == 2);  // one per dtype
  auto layout = muon_for_rank(muon, plan, 3);
  REQUIRE(layout.groups.size() == 1);
  const auto& b0 = layout.groups[0].batches[0];
  REQUIRE(b0.stages.size() == 1);
  const auto& st = b0.stages[0];
  CHECK(st.ranks == V{0, 1, 2, 3});
  CHECK(st.index == 3);
  const auto& first = st.params[0];
  CHECK(first.split_sizes == V{3, 3, 3, 1});
  CHECK(first.pad_shape == Shape{3, 7});
  CHECK(first.padded_numel == 256);
  CHECK(first.actual_numel == 7);
  CHECK(st.gathered_numel == 1024);
  const auto& second = layout.groups[0].batches[1].stages[0].params[0];
  CHECK(second.split_sizes == V{1, 1, 1, 0});
  CHECK(second.padded_numel == 128);
  CHECK(second.actual_numel == 0);
  // Slice-back for rank 3: rows 9..9 of w.
  REQUIRE(layout.groups[0].slice_back[0].size() == 1);
  CHECK(layout.groups[0].slice_back[0][0].start == 9);
  CHECK(layout.groups[0].slice_back[0][0].length == 1);
}

TEST_CASE("muon stages gather the FSDP split before the TP split") {
  Model model;
  model.params = {param("w", {8, 4})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp_shard", 2}, {"tp", 2}});
  recipe.rules = {rule("w", {{"tp", shard(0)}})};
  recipe.fsdp = FsdpSpec{};
  recipe.fsdp->shard = {"dp_shard"};
  Plan plan = plan_of(model, recipe);
  auto layout = muon_for_rank(plan_muon(plan, muon_spec()), plan, 1);
  const auto& stages = layout.groups[0].batches[0].stages;
  REQUIRE(stages.size() == 2);
  CHECK(stages[0].ranks == V{1, 3});  // dp_shard group of rank 1 (tp=1)
  CHECK(stages[0].params[0].split_sizes == V{2, 2});
  CHECK(stages[1].ranks == V{0, 1});  // tp group
  CHECK(stages[1].params[0].split_sizes == V{4, 4});
  const auto& sb = layout.groups[0].slice_back[0];
  REQUIRE(sb.size() == 2);
  CHECK(sb[0].start == 4);  // tp first when slicing back
  CHECK(sb[1].start == 0);
}

TEST_CASE("muon owners go largest first to the least loaded replicate coordinate") {
  Model model;
  model.params = {param("a", {4, 4}), param("b", {8, 8}), param("c", {2, 2}), param("d", {8, 8})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 2}, {"tp", 2}});
  recipe.rules = {rule("*", {{"tp", shard(0)}})};
  Plan plan = plan_of(model, recipe);
  MuonPlan muon = plan_muon(plan, muon_spec());
  const auto& owners = muon.groups[0].owners;
  CHECK(owners[1] == V{0});  // b: first largest
  CHECK(owners[3] == V{1});  // d
  CHECK(owners[0] == V{0});  // a: tie -> lowest
  CHECK(owners[2] == V{1});  // c
}

TEST_CASE("fsdp2 units take the deepest matching module prefix") {
  Model model;
  model.params = {param("model.embed.weight", {10, 4}), param("model.layers.0.w", {6, 4}),
                  param("model.layers.0.n", {4}, DType::Float32),
                  param("model.layers.1.w", {6, 4})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp_shard", 4}});
  recipe.rules = {rule("**", {})};
  recipe.fsdp = FsdpSpec{};
  recipe.fsdp->shard = {"dp_shard"};
  BufferSpec spec;
  spec.kind = BufferKind::Fsdp2AllGather;
  spec.units = {pat("model.layers.{i}"), pat("**")};
  Plan plan = plan_of(model, recipe);
  Fsdp2Plan fsdp2 = plan_fsdp2(plan, spec);
  REQUIRE(fsdp2.units.size() == 3);
  CHECK(fsdp2.units[0].name == "");
  CHECK(fsdp2.units[1].name == "model.layers.0");
  CHECK(fsdp2.units[1].byte_units);
  CHECK_FALSE(fsdp2.units[2].byte_units);
  auto layout = fsdp2_for_rank(fsdp2, plan, 3);
  const auto& u0 = layout.units[0];
  CHECK(u0.ranks == V{0, 1, 2, 3});
  CHECK(u0.params[0].padded_shape == Shape{3, 4});
  CHECK(u0.params[0].local_shape == Shape{1, 4});
  CHECK(u0.total == 12);
  const auto& u1 = layout.units[1];
  CHECK(u1.params[0].padded_numel == 2 * 4 * 2);  // bytes
  CHECK(u1.params[1].offset == 16);
  CHECK(u1.params[1].padded_numel == 4);  // [1] float32 -> 4 bytes
}

TEST_CASE("FSDP2 gathered peak: the root, the largest unit and the next one prefetched") {
  CHECK(fsdp2_gathered_peak({}, 0) == 0);
  CHECK(fsdp2_gathered_peak({}, 5) == 5);  // the root unit alone
  CHECK(fsdp2_gathered_peak({7}, 0) == 7);
  CHECK(fsdp2_gathered_peak({4, 10, 3, 9}, 0) == 14);  // units 0+1; the sum would be 26
  CHECK(fsdp2_gathered_peak({10, 1, 1, 10}, 0) == 11);
  CHECK(fsdp2_gathered_peak({10, 1, 1, 10}, 100) == 111);  // the root held beside them
}

TEST_CASE("plan-wide FSDP2 peak per rank equals the peak of that rank's own units") {
  Model model;
  model.params = {param("model.embed.weight", {10, 4}), param("model.layers.0.w", {6, 4}),
                  param("model.layers.1.w", {16, 4}), param("model.layers.2.w", {2, 4})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp_shard", 4}});
  recipe.rules = {rule("**", {})};
  recipe.fsdp = FsdpSpec{};
  recipe.fsdp->shard = {"dp_shard"};
  BufferSpec spec;
  spec.kind = BufferKind::Fsdp2AllGather;
  spec.units = {pat("model.layers.{i}"), pat("**")};
  recipe.buffers = {spec};
  Plan plan = plan_of(model, recipe);
  const auto buffers = plan_buffers(plan);
  const auto bytes = buffer_rank_bytes(plan, buffers);
  REQUIRE(bytes.size() == 1);
  REQUIRE(bytes[0].gathered_peak.size() == 4);
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    std::vector<std::int64_t> units;
    std::int64_t root = 0;
    for (const auto& unit : fsdp2_for_rank(*buffers[0].fsdp2, plan, rank).units) {
      const std::int64_t gathered = unit.total_bytes * static_cast<std::int64_t>(unit.ranks.size());
      if (unit.unit->held_whole_step) {
        root += gathered;
      } else {
        units.push_back(gathered);
      }
    }
    CHECK(bytes[0].gathered_peak[static_cast<std::size_t>(rank)] ==
          fsdp2_gathered_peak(units, root));
  }
  // Units root [3,4] x 4, layer 0 [2,4] x 4, layer 1 [4,4] x 4, layer 2 [1,4] x 4 (bf16):
  // 96, 64, 128, 32 B gathered; peak = the root + layers 0 + 1 = 288 B (was 192: the root
  // left out), sum 320 B.
  CHECK(bytes[0].gathered_peak[0] == 288);
  CHECK(bytes[0].gathered[0] == 320);
}

TEST_CASE("muon sizes depend only on the coordinates on the group's split axes") {
  Model model;
  model.params = {param("w", {9, 6}), param("v", {7, 5}, DType::Float32), param("u", {6, 10})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 2}, {"dp_shard", 2}, {"tp", 3}});
  recipe.rules = {rule("*", {{"tp", shard(0)}})};
  recipe.fsdp = FsdpSpec{};
  recipe.fsdp->shard = {"dp_shard"};
  Plan plan = plan_of(model, recipe);
  const MuonPlan muon = plan_muon(plan, muon_spec());
  REQUIRE(muon.groups.size() == 1);
  const MuonGroup& group = muon.groups[0];
  CHECK(muon_split_axes(group, plan) == std::vector<int>{1, 2});
  for (std::int64_t rank = 0; rank < plan.world_size; ++rank) {
    const MuonRankGroup full = muon_group_for_rank(muon, group, plan, rank);
    const auto stages = muon_stage_ranks(group, plan, rank);
    // The same class on the other dp replica (dp is the replicate axis).
    const std::int64_t twin = (rank + 6) % 12;
    const MuonRankGroup other = muon_group_for_rank(muon, group, plan, twin);
    CAPTURE(rank);
    REQUIRE(full.batches.size() == other.batches.size());
    for (std::size_t b = 0; b < full.batches.size(); ++b) {
      const auto& st = full.batches[b].stages;
      REQUIRE(st.size() == stages.size());
      for (std::size_t s = 0; s < st.size(); ++s) {
        CHECK(st[s].ranks == stages[s].ranks);
        CHECK(st[s].index == stages[s].index);
        const MuonStage& other_stage = other.batches[b].stages[s];
        CHECK(st[s].index == other_stage.index);
        CHECK(st[s].total_numel == other_stage.total_numel);
        for (std::size_t k = 0; k < st[s].params.size(); ++k) {
          CHECK(st[s].params[k].split_sizes == other_stage.params[k].split_sizes);
          CHECK(st[s].params[k].pad_shape == other_stage.params[k].pad_shape);
          CHECK(st[s].params[k].actual_numel == other_stage.params[k].actual_numel);
        }
      }
    }
    CHECK(full.replicate_coord != other.replicate_coord);
  }
}
