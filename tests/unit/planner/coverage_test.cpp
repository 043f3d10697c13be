// Property: for every param of every shipped plan, the distinct shards tile
// the global tensor exactly and each is held by exactly the replica count
// (the product of the mesh axes that neither split the param nor select
// its pipeline stage). Small params are also checked element by element.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/shard_classes.hpp"
#include "frontend/frontend.hpp"
#include "planner/planner.hpp"

using namespace shardc;

namespace {

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream stream;
  stream << in.rdbuf();
  return stream.str();
}

std::optional<Plan> load_plan(const std::string& model, const std::string& recipe) {
  const std::filesystem::path root = SHARDC_SOURCE_DIR;
  DiagnosticSink sink;
  auto parsed_model = parse_model({model, slurp(root / model)}, sink);
  auto parsed_recipe = parse_recipe({recipe, slurp(root / recipe)}, sink);
  if (!parsed_model || !parsed_recipe) return std::nullopt;
  return build_plan(*parsed_model, *parsed_recipe, sink);
}

std::int64_t replicas(const Plan& plan, const PlannedParam& param) {
  const ClassSpace cs = class_space(plan, param);
  std::int64_t count = 1;
  for (std::size_t a = 0; a < cs.sizes.size(); ++a)
    if (!cs.varying[a] && static_cast<int>(a) != cs.pipeline_axis) count *= cs.sizes[a];
  return count;
}

// The 1-D real pieces of dim d over every combination of its chain's
// coordinates tile [0, L) (product structure: each axis splits one dim);
// padded pieces allocate at least their real rows. Packed dims are checked
// by the element test instead (their pieces are several runs).
void check_dim_tiling(const PlannedParam& param, std::size_t d, std::size_t naxes) {
  if (!param.geometry.parts.empty() && static_cast<std::size_t>(param.geometry.parts_dim) == d)
    return;
  const auto& chain = param.geometry.per_dim[d];
  std::int64_t combos = 1;
  for (const DimSplit& split : chain) combos *= split.ways;
  std::vector<std::pair<std::int64_t, std::int64_t>> pieces;
  std::vector<std::int64_t> coords(naxes, 0);
  for (std::int64_t c = 0; c < combos; ++c) {
    std::int64_t rem = c;
    for (std::size_t i = chain.size(); i-- > 0;) {
      const std::int64_t k = rem % chain[i].ways;
      rem /= chain[i].ways;
      std::int64_t kk = k;
      for (std::size_t j = chain[i].axes.size(); j-- > 0;) {
        coords[static_cast<std::size_t>(chain[i].axes[j])] = kk % chain[i].axis_sizes[j];
        kk /= chain[i].axis_sizes[j];
      }
    }
    const DimPiece piece = apply_chain(param.global_shape[d], chain, coords);
    REQUIRE_MESSAGE(piece.real <= piece.alloc, param.name << " dim " << d);
    if (piece.real > 0) pieces.emplace_back(piece.start, piece.real);
  }
  std::sort(pieces.begin(), pieces.end());
  std::int64_t next = 0;
  for (const auto& piece : pieces) {
    const std::int64_t start = piece.first;  // not a structured binding: clang 14 cannot
    REQUIRE_MESSAGE(start == next, param.name << " dim " << d << " gap or overlap at " << start);
    next += piece.second;
  }
  CHECK_MESSAGE(next == param.global_shape[d], param.name << " dim " << d);
}

// The boxes of a piece: its `boxes` (packed) or the one box at global_offset.
// Packed boxes must concatenate, in order on the packed dim, to the local
// tensor: local offsets contiguous from 0, extents summing to local_shape.
std::vector<ShardBox> boxes_of(const PlannedParam& param, const ShardGeom& shard) {
  if (param.geometry.parts.empty())
    return {ShardBox{shard.global_offset, Shape(shard.local_shape.size(), 0), shard.local_shape}};
  const auto pd = static_cast<std::size_t>(param.geometry.parts_dim);
  std::int64_t local = 0;
  for (const ShardBox& box : shard.boxes) {
    REQUIRE_MESSAGE(box.local_offset[pd] == local, param.name << " box not contiguous");
    for (std::size_t d = 0; d < box.shape.size(); ++d)
      if (d != pd) REQUIRE_MESSAGE(box.shape[d] == shard.local_shape[d], param.name);
    local += box.shape[pd];
  }
  if (numel(shard.local_shape) > 0) REQUIRE_MESSAGE(local == shard.local_shape[pd], param.name);
  return shard.boxes;
}

// Every logical element is held exactly `reps` times; the real rows fit in
// the allocation (pad rows, held by no logical index, follow them).
void check_elements(const Plan& plan, const PlannedParam& param, std::int64_t reps) {
  const std::int64_t elements = numel(param.global_shape);
  std::vector<std::int64_t> held(static_cast<std::size_t>(elements), 0);
  for (const ShardClass& shard_class : enumerate_shards(plan, param)) {
    for (std::size_t d = 0; d < shard_class.geom.local_shape.size(); ++d)
      REQUIRE_MESSAGE(shard_class.geom.local_shape[d] <= shard_class.geom.padded_shape[d],
                      param.name);
    if (numel(shard_class.geom.local_shape) == 0) continue;
    const std::size_t nd = param.global_shape.size();
    for (const ShardBox& box : boxes_of(param, shard_class.geom)) {
      std::vector<std::int64_t> idx(nd, 0);
      for (std::int64_t e = 0; e < numel(box.shape); ++e) {
        std::int64_t flat = 0;
        for (std::size_t d = 0; d < nd; ++d)
          flat = flat * param.global_shape[d] + box.global_offset[d] + idx[d];
        REQUIRE(flat < elements);
        held[static_cast<std::size_t>(flat)] += shard_class.ranks.size();
        for (std::size_t d = nd; d-- > 0;) {
          if (++idx[d] < box.shape[d]) break;
          idx[d] = 0;
        }
      }
    }
  }
  for (std::int64_t times : held) REQUIRE_MESSAGE(times == reps, param.name);
}

// Packed params of any size: for every position on the other dims, the
// boxes' runs on the packed dim cover [0, L) exactly `reps` times.
void check_packed_boxes(const Plan& plan, const PlannedParam& param, std::int64_t reps) {
  const auto pd = static_cast<std::size_t>(param.geometry.parts_dim);
  std::map<std::pair<Shape, Shape>, std::map<std::int64_t, std::int64_t>> sweep;
  for (const ShardClass& shard_class : enumerate_shards(plan, param)) {
    if (numel(shard_class.geom.local_shape) == 0) continue;
    for (const ShardBox& box : boxes_of(param, shard_class.geom)) {
      Shape off = box.global_offset;
      Shape ext = box.shape;
      off[pd] = 0;
      ext[pd] = 0;
      auto& events = sweep[{off, ext}];
      events[box.global_offset[pd]] += shard_class.ranks.size();
      events[box.global_offset[pd] + box.shape[pd]] -= shard_class.ranks.size();
    }
  }
  REQUIRE(!sweep.empty());
  for (const auto& [key, events] : sweep) {
    std::int64_t depth = 0;
    std::int64_t pos = 0;
    for (const auto& [at, delta] : events) {
      if (at > pos) REQUIRE_MESSAGE(depth == reps, param.name << " packed rows at " << pos);
      depth += delta;
      pos = at;
    }
    CHECK_MESSAGE(pos == param.global_shape[pd], param.name);
  }
}

void check_plan(const Plan& plan) {
  for (const PlannedParam& param : plan.params) {
    const std::int64_t reps = replicas(plan, param);
    for (std::size_t d = 0; d < param.global_shape.size(); ++d)
      check_dim_tiling(param, d, plan.mesh_of(param).axes.size());
    const auto shards = enumerate_shards(plan, param);
    std::int64_t held_ranks = 0;
    for (const ShardClass& shard_class : shards) {
      held_ranks += shard_class.ranks.size();
      if (numel(shard_class.geom.local_shape) > 0)
        CHECK_MESSAGE(shard_class.ranks.size() == reps, param.name);
      // Spot-check the rank set against shard_at on its first and last rank.
      for (std::int64_t rank :
           {shard_class.ranks.first(), shard_class.ranks.runs().back().last()}) {
        CHECK(plan.holds(rank, param));
        CHECK(shard_at(param.geometry, mesh_coords(plan.mesh_of(param), rank)).global_offset ==
              shard_class.geom.global_offset);
      }
    }
    CHECK_MESSAGE(held_ranks == plan.world_size / plan.num_stages, param.name);
    if (param.alias_of) {
      const auto src = enumerate_shards(plan, plan.params[*param.alias_of]);
      REQUIRE(src.size() == shards.size());
      for (std::size_t i = 0; i < src.size(); ++i) CHECK(src[i].geom == shards[i].geom);
    }
    if (numel(param.global_shape) <= (1 << 16)) check_elements(plan, param, reps);
    if (!param.geometry.parts.empty()) check_packed_boxes(plan, param, reps);
  }
}

}  // namespace

TEST_CASE("every shipped plan covers each global element exactly the replica count" *
          doctest::test_suite("models")) {
  const std::vector<std::pair<std::string, std::string>> plans = {
      {"plans/llama-3.1-8b.model.yaml", "plans/llama-3.1-8b-dp8-tp8.recipe.yaml"},
      {"plans/llama-3.1-70b.model.yaml", "plans/llama-3.1-70b-hsdp.recipe.yaml"},
      {"plans/llama-3.1-405b.model.yaml", "plans/llama-3.1-405b-dp2048-tp8.recipe.yaml"},
      {"plans/qwen2.5-0.5b.model.yaml", "plans/qwen2.5-0.5b-dp4-tp2.recipe.yaml"},
      {"plans/qwen3-30b-a3b.model.yaml", "plans/qwen3-30b-a3b-ep8-fsdp.recipe.yaml"},
      {"plans/qwen3-235b-a22b.model.yaml", "plans/qwen3-235b-a22b-tp4-ep64.recipe.yaml"},
      {"plans/mixtral-8x7b.model.yaml", "plans/mixtral-8x7b-ep8-tp8.recipe.yaml"},
      {"plans/deepseek-v3.model.yaml", "plans/deepseek-v3-pp16-ep64.recipe.yaml"},
      {"plans/gpt2.model.yaml", "plans/gpt2-tp4-tied.recipe.yaml"},
      {"plans/gpt2.model.yaml", "plans/gpt2-tp4-heads.recipe.yaml"},
      {"plans/gemma-2-2b.model.yaml", "plans/gemma-2-2b-tp4-tied.recipe.yaml"},
      // Padded, packed and unit-granular layouts (tests/reports/).
      {"tests/reports/vocab_pad_50257_tp2/model.yaml",
       "tests/reports/vocab_pad_50257_tp2/recipe-pad.yaml"},
      {"tests/reports/vocab_pad_deepseek_v3_tp24/model.yaml",
       "tests/reports/vocab_pad_deepseek_v3_tp24/recipe.yaml"},
      {"tests/data/models/Qwen2.5-0.5B.params.json",
       "tests/reports/vocab_pad_qwen2_151936_tp6/recipe.yaml"},
      {"tests/reports/packed_swiglu_fc1_tp2/model.yaml",
       "tests/reports/packed_swiglu_fc1_tp2/recipe-packed.yaml"},
      {"tests/reports/packed_swiglu_fc1_tp2/model.yaml",
       "tests/reports/packed_swiglu_fc1_tp2/recipe-packed-fsdp.yaml"},
      {"tests/reports/packed_fused_qkv_phi3/model.yaml",
       "tests/reports/packed_fused_qkv_phi3/recipe.yaml"},
      {"tests/reports/unit_llama2_7b_heads_tp3/model.yaml",
       "tests/reports/unit_llama2_7b_heads_tp3/recipe.yaml"},
      {"tests/reports/packed_w13_pairs_tp2/model.yaml",
       "tests/reports/packed_w13_pairs_tp2/recipe-units-tp3.yaml"},
  };
  for (const auto& entry : plans) {
    const auto& [model, recipe] = entry;
    const auto& recipe_path = entry.second;  // clang 14 cannot capture structured bindings
    CAPTURE(recipe_path);
    auto plan = load_plan(model, recipe);
    REQUIRE(plan);
    check_plan(*plan);
  }
}
