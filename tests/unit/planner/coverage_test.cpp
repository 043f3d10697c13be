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

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<Plan> load_plan(const std::string& model, const std::string& recipe) {
  const std::filesystem::path root = SHARDC_SOURCE_DIR;
  DiagnosticSink sink;
  auto m = parse_model({model, slurp(root / model)}, sink);
  auto r = parse_recipe({recipe, slurp(root / recipe)}, sink);
  if (!m || !r) return std::nullopt;
  return build_plan(*m, *r, sink);
}

std::int64_t replicas(const Plan& plan, const PlannedParam& p) {
  const ClassSpace cs = class_space(plan, p);
  std::int64_t n = 1;
  for (std::size_t a = 0; a < cs.sizes.size(); ++a)
    if (!cs.varying[a] && static_cast<int>(a) != cs.pipeline_axis) n *= cs.sizes[a];
  return n;
}

// The 1-D real pieces of dim d over every combination of its chain's
// coordinates tile [0, L) (product structure: each axis splits one dim);
// padded pieces allocate at least their real rows. Packed dims are checked
// by the element test instead (their pieces are several runs).
void check_dim_tiling(const PlannedParam& p, std::size_t d, std::size_t naxes) {
  if (!p.geometry.parts.empty() && static_cast<std::size_t>(p.geometry.parts_dim) == d) return;
  const auto& chain = p.geometry.per_dim[d];
  std::int64_t combos = 1;
  for (const DimSplit& s : chain) combos *= s.ways;
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
    const DimPiece piece = apply_chain(p.global_shape[d], chain, coords);
    REQUIRE_MESSAGE(piece.real <= piece.alloc, p.name << " dim " << d);
    if (piece.real > 0) pieces.emplace_back(piece.start, piece.real);
  }
  std::sort(pieces.begin(), pieces.end());
  std::int64_t next = 0;
  for (const auto& piece : pieces) {
    const std::int64_t start = piece.first;  // not a structured binding: clang 14 cannot
    REQUIRE_MESSAGE(start == next, p.name << " dim " << d << " gap or overlap at " << start);
    next += piece.second;
  }
  CHECK_MESSAGE(next == p.global_shape[d], p.name << " dim " << d);
}

// The boxes of a piece: its `boxes` (packed) or the one box at global_offset.
// Packed boxes must concatenate, in order on the packed dim, to the local
// tensor: local offsets contiguous from 0, extents summing to local_shape.
std::vector<ShardBox> boxes_of(const PlannedParam& p, const ShardGeom& g) {
  if (p.geometry.parts.empty())
    return {ShardBox{g.global_offset, Shape(g.local_shape.size(), 0), g.local_shape}};
  const auto pd = static_cast<std::size_t>(p.geometry.parts_dim);
  std::int64_t local = 0;
  for (const ShardBox& b : g.boxes) {
    REQUIRE_MESSAGE(b.local_offset[pd] == local, p.name << " box not contiguous");
    for (std::size_t d = 0; d < b.shape.size(); ++d)
      if (d != pd) REQUIRE_MESSAGE(b.shape[d] == g.local_shape[d], p.name);
    local += b.shape[pd];
  }
  if (numel(g.local_shape) > 0) REQUIRE_MESSAGE(local == g.local_shape[pd], p.name);
  return g.boxes;
}

// Every logical element is held exactly `reps` times; the real rows fit in
// the allocation (pad rows, held by no logical index, follow them).
void check_elements(const Plan& plan, const PlannedParam& p, std::int64_t reps) {
  const std::int64_t n = numel(p.global_shape);
  std::vector<std::int64_t> held(static_cast<std::size_t>(n), 0);
  for (const ShardClass& c : enumerate_shards(plan, p)) {
    for (std::size_t d = 0; d < c.geom.local_shape.size(); ++d)
      REQUIRE_MESSAGE(c.geom.local_shape[d] <= c.geom.padded_shape[d], p.name);
    if (numel(c.geom.local_shape) == 0) continue;
    const std::size_t nd = p.global_shape.size();
    for (const ShardBox& b : boxes_of(p, c.geom)) {
      std::vector<std::int64_t> idx(nd, 0);
      for (std::int64_t e = 0; e < numel(b.shape); ++e) {
        std::int64_t flat = 0;
        for (std::size_t d = 0; d < nd; ++d)
          flat = flat * p.global_shape[d] + b.global_offset[d] + idx[d];
        REQUIRE(flat < n);
        held[static_cast<std::size_t>(flat)] += c.ranks.size();
        for (std::size_t d = nd; d-- > 0;) {
          if (++idx[d] < b.shape[d]) break;
          idx[d] = 0;
        }
      }
    }
  }
  for (std::int64_t v : held) REQUIRE_MESSAGE(v == reps, p.name);
}

// Packed params of any size: for every position on the other dims, the
// boxes' runs on the packed dim cover [0, L) exactly `reps` times.
void check_packed_boxes(const Plan& plan, const PlannedParam& p, std::int64_t reps) {
  const auto pd = static_cast<std::size_t>(p.geometry.parts_dim);
  std::map<std::pair<Shape, Shape>, std::map<std::int64_t, std::int64_t>> sweep;
  for (const ShardClass& c : enumerate_shards(plan, p)) {
    if (numel(c.geom.local_shape) == 0) continue;
    for (const ShardBox& b : boxes_of(p, c.geom)) {
      Shape off = b.global_offset;
      Shape ext = b.shape;
      off[pd] = 0;
      ext[pd] = 0;
      auto& events = sweep[{off, ext}];
      events[b.global_offset[pd]] += c.ranks.size();
      events[b.global_offset[pd] + b.shape[pd]] -= c.ranks.size();
    }
  }
  REQUIRE(!sweep.empty());
  for (const auto& [key, events] : sweep) {
    std::int64_t depth = 0;
    std::int64_t pos = 0;
    for (const auto& [at, delta] : events) {
      if (at > pos) REQUIRE_MESSAGE(depth == reps, p.name << " packed rows at " << pos);
      depth += delta;
      pos = at;
    }
    CHECK_MESSAGE(pos == p.global_shape[pd], p.name);
  }
}

void check_plan(const Plan& plan) {
  for (const PlannedParam& p : plan.params) {
    const std::int64_t reps = replicas(plan, p);
    for (std::size_t d = 0; d < p.global_shape.size(); ++d)
      check_dim_tiling(p, d, plan.mesh_of(p).axes.size());
    const auto shards = enumerate_shards(plan, p);
    std::int64_t held_ranks = 0;
    for (const ShardClass& c : shards) {
      held_ranks += c.ranks.size();
      if (numel(c.geom.local_shape) > 0) CHECK_MESSAGE(c.ranks.size() == reps, p.name);
      // Spot-check the rank set against shard_at on its first and last rank.
      for (std::int64_t r : {c.ranks.first(), c.ranks.runs().back().last()}) {
        CHECK(plan.holds(r, p));
        CHECK(shard_at(p.geometry, mesh_coords(plan.mesh_of(p), r)).global_offset ==
              c.geom.global_offset);
      }
    }
    CHECK_MESSAGE(held_ranks == plan.world_size / plan.num_stages, p.name);
    if (p.alias_of) {
      const auto src = enumerate_shards(plan, plan.params[*p.alias_of]);
      REQUIRE(src.size() == shards.size());
      for (std::size_t i = 0; i < src.size(); ++i) CHECK(src[i].geom == shards[i].geom);
    }
    if (numel(p.global_shape) <= (1 << 16)) check_elements(plan, p, reps);
    if (!p.geometry.parts.empty()) check_packed_boxes(plan, p, reps);
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
