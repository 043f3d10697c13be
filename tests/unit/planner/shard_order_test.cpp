// Explicit shard orders (src/planner/shard_order.cpp, src/core/shard_order.hpp,
// docs/shard-order.md): the nested-chunk arithmetic, DTensor's split factors and their
// inverse, DTensor's reading of the labels, and a property: for random small meshes and
// orders, every dim's pieces tile it exactly once.
#include "core/shard_order.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "fixtures.hpp"

using namespace shardc;
using namespace shardc::test;
using V = std::vector<std::int64_t>;

namespace {

Plan plan_of(const Model& model, const Recipe& recipe) {
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE_MESSAGE(plan.has_value(), (sink.items().empty() ? "" : sink.items().front().message));
  return *plan;
}

// DTensor's label `_StridedShard(d, sf=F)` (the front end's spelling of a shard_order)
Placement strided(int d, std::int64_t sf) {
  return {Placement::Kind::Shard,
          d,
          {},
          "_StridedShard(" + std::to_string(d) + ", sf=" + std::to_string(sf) + ")"};
}

// The rule of `shard_order: {d: order}` as the front end hands it on: DTensor's labels.
Rule ordered_rule(const std::string& match, const Mesh& mesh, int d,
                  const std::vector<std::string>& order) {
  std::vector<int> dims;
  V sizes;
  for (const auto& axis : mesh.axes) sizes.push_back(axis.size);
  for (const auto& name : order) dims.push_back(mesh.find(name));
  const V factors = strided_split_factors(dims, sizes);
  std::vector<std::pair<std::string, Placement>> pl;
  for (std::size_t i = 0; i < order.size(); ++i)
    pl.emplace_back(order[i], factors[i] > 1 ? strided(d, factors[i]) : shard(d));
  return rule(match, pl);
}

std::vector<std::string> labels(const PlannedParam& param) {
  std::vector<std::string> out;
  for (const ResolvedPlacement& rp : param.placements) out.push_back(rp.label());
  return out;
}

}  // namespace

TEST_CASE("nested_piece: two axes on one dim, uneven and empty") {
  // 18 rows, tp (2) first then dp (4): tp halves of 9, dp chunks of 3 (the last empty):
  // PyTorch test_utils.py "SS, Shard": size 3 at tp * 9 + 3 * dp, dp 3 empty at the end.
  const V ways{2, 4};
  for (std::int64_t tp = 0; tp < 2; ++tp) {
    for (std::int64_t dp = 0; dp < 4; ++dp) {
      const V coords{tp, dp};
      const Piece piece = nested_piece(18, ways, coords);
      CHECK(piece.size == (dp == 3 ? 0 : 3));
      if (dp < 3) CHECK(piece.start == tp * 9 + 3 * dp);
    }
  }
  // 15 rows (test_uneven_fsdp_tp_meta_compute): tp1 holds 7, split 2,2,2,1.
  CHECK(nested_piece(15, ways, V{1, 3}).start == 14);
  CHECK(nested_piece(15, ways, V{1, 3}).size == 1);
  // 3 rows over 2 x 4: tp0 [0, 2) -> 1, 1, 0, 0; tp1 [2, 3) -> 1, 0, 0, 0
  CHECK(nested_piece(3, ways, V{0, 2}).size == 0);
  CHECK(nested_piece(3, ways, V{1, 0}).start == 2);
  CHECK(nested_piece(3, ways, V{1, 1}).size == 0);
}

TEST_CASE("nested_piece: three axes, the order matters") {
  // mesh (a 4, b 3, c 2), 23 rows in order c, a, b: c halves 12 | 11; a chunks 3,3,3,3 |
  // 3,3,3,2; b chunks of those.
  const V ways{2, 4, 3};  // c, a, b
  CHECK(nested_piece(23, ways, V{0, 0, 0}).start == 0);
  CHECK(nested_piece(23, ways, V{0, 0, 0}).size == 1);
  CHECK(nested_piece(23, ways, V{1, 3, 0}).start == 12 + 9);
  CHECK(nested_piece(23, ways, V{1, 3, 1}).size == 1);
  CHECK(nested_piece(23, ways, V{1, 3, 2}).size == 0);
  // mesh order a, b, c instead: a chunks 6,6,6,5
  CHECK(nested_piece(23, V{4, 3, 2}, V{3, 0, 0}).start == 18);
}

TEST_CASE("split factors: DTensor's _convert_shard_order_to_StridedShard and its inverse") {
  // The example of torch 2.13 _dtensor_spec.py: mesh [4, 3, 2], order (2, 0, 1) ->
  // (_StridedShard(0, sf=2), _StridedShard(0, sf=2), Shard(0)).
  const V sizes{4, 3, 2};
  const std::vector<int> order{2, 0, 1};
  CHECK(strided_split_factors(order, sizes) == V{1, 2, 2});
  const std::vector<int> dims{0, 1, 2};
  const auto decoded = decode_split_factors(dims, V{2, 2, 1}, sizes);
  REQUIRE(decoded.has_value());
  CHECK(*decoded == order);
  // FSDP2 + TP on (dp 4, tp 2): order (1, 0) -> [_StridedShard(0, sf=2), Shard(0)]
  CHECK(strided_split_factors(std::vector<int>{1, 0}, V{4, 2}) == V{1, 2});
  // not a shard order (test_utils.py Test_StridedShard_with_shard_order, mesh 4 x 8):
  // [_StridedShard(1, sf=16), Shard(1)]
  CHECK_FALSE(decode_split_factors(std::vector<int>{0, 1}, V{16, 1}, V{4, 8}).has_value());
  // [Shard(0), _StridedShard(0, sf=2)] of test_compute_local_shape_and_global_offset_uneven
  CHECK_FALSE(decode_split_factors(std::vector<int>{0, 1}, V{1, 2}, V{4, 2}).has_value());
}

TEST_CASE("dtensor_rows: DTensor's reading of the labels") {
  // 9 rows, (dp 4, tp 2), [_StridedShard(0, sf=2), Shard(0)]: torch reads row 8 at dp 3 /
  // tp 0; the shard order (tp, dp) puts it at dp 3 / tp 1.
  const std::vector<MeshDimSplit> at30{{4, 3, 2}, {2, 0, 1}};
  CHECK(dtensor_rows(9, at30) == std::vector<RowRun>{{8, 1}});
  CHECK(nested_piece(9, V{2, 4}, V{0, 3}).size == 0);
  // [Shard(0), _StridedShard(0, sf=2)] on 18 rows at (0, 0): rows 0, 1, 3 (not contiguous)
  const std::vector<MeshDimSplit> strided{{4, 0, 1}, {2, 0, 2}};
  CHECK(dtensor_rows(18, strided) == std::vector<RowRun>{{0, 2}, {3, 1}});
  // divisible extents: the reading is the order's nested chunks
  const std::vector<MeshDimSplit> even{{4, 1, 2}, {2, 1, 1}};
  const Piece piece = nested_piece(16, V{2, 4}, V{1, 1});
  CHECK(dtensor_rows(16, even) == std::vector<RowRun>{{piece.start, piece.size}});
}

TEST_CASE("_StridedShard labels of an order: the splits in that order, labels as DTensor") {
  Model model;
  model.params = {param("w", {18, 2}, DType::Float32), param("v", {18, 2}, DType::Float32)};
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 4}, {"tp", 2}});
  recipe.rules = {ordered_rule("w", recipe.mesh, 0, {"tp", "dp"}),
                  ordered_rule("v", recipe.mesh, 0, {"dp", "tp"})};
  const Plan plan = plan_of(model, recipe);
  CHECK(labels(plan.params[0]) == std::vector<std::string>{"_StridedShard(0, sf=2)", "Shard(0)"});
  CHECK(out_of_mesh_order(plan.params[0].geometry, 0));
  CHECK(sizes(plan, "w", 0) == V{3, 3, 3, 3, 3, 3, 0, 0});
  CHECK(offsets(plan, "w", 0) == V{0, 9, 3, 12, 6, 15, 18, 18});
  // the default order: plain Shards, the layout of mesh order
  CHECK(labels(plan.params[1]) == std::vector<std::string>{"Shard(0)", "Shard(0)"});
  CHECK_FALSE(out_of_mesh_order(plan.params[1].geometry, 0));
  CHECK(offsets(plan, "v", 0) == V{0, 3, 5, 8, 10, 13, 15, 17});
}

TEST_CASE("labels that are no shard order: several boxes, as DTensor reads them") {
  Model model;
  model.params = {param("w", {18, 2}, DType::Float32)};
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 4}, {"tp", 2}});
  // [Shard(0), _StridedShard(0, sf=2)] of test_utils.py "(Shard, SS)": dp chunks 5, 5, 5, 3;
  // tp halves each dp piece into 2 pieces, takes its half of each: not contiguous
  recipe.rules = {rule("w", {{"dp", shard(0)}, {"tp", strided(0, 2)}})};
  const Plan plan = plan_of(model, recipe);
  const PlannedParam& param = plan.params[0];
  CHECK(labels(param) == std::vector<std::string>{"Shard(0)", "_StridedShard(0, sf=2)"});
  CHECK(boxed_dim(param.geometry) == 0);
  CHECK_FALSE(out_of_mesh_order(param.geometry, 0));  // mesh order kept: no W-STRIDED
  // rank (dp 0, tp 0): dp rows [0, 5) -> pieces [0, 3) and [3, 5); tp 0 takes [0, 2), [3, 4)
  const ShardGeom shard = shard_at(param.geometry, mesh_coords(plan.dense, 0));
  CHECK(shard.local_shape == Shape{3, 2});
  CHECK(shard.global_offset == Shape{0, 0});  // DTensor reports the first row
  REQUIRE(shard.boxes.size() == 2);
  CHECK(shard.boxes[0] == ShardBox{{0, 0}, {0, 0}, {2, 2}});
  CHECK(shard.boxes[1] == ShardBox{{3, 0}, {2, 0}, {1, 2}});
  // rank (dp 3, tp 1): dp rows [15, 18) -> [15, 17), [17, 18); tp 1 takes [16, 17)
  const ShardGeom last = shard_at(param.geometry, mesh_coords(plan.dense, 7));
  CHECK(last.local_shape == Shape{1, 2});
  REQUIRE(last.boxes.size() == 1);
  CHECK(last.boxes[0] == ShardBox{{16, 0}, {0, 0}, {1, 2}});
}

TEST_CASE("labels that are no shard order: FSDP cuts the runs' concatenation") {
  Model model;
  model.params = {param("w", {12, 2}, DType::Float32)};
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 2}, {"tp", 2}});
  FsdpSpec fsdp;
  fsdp.shard = {"dp"};
  recipe.fsdp = fsdp;
  // [_StridedShard(0, sf=2)] on tp alone: rows [0, 3) + [6, 9) on tp 0 (no order: one split)
  recipe.rules = {rule("w", {{"tp", strided(0, 2)}})};
  const Plan plan = plan_of(model, recipe);
  const PlannedParam& param = plan.params[0];
  REQUIRE(boxed_dim(param.geometry) == 0);
  // rank (dp 1, tp 0) = 2: local [0, 1, 2, 6, 7, 8], FSDP piece 1 of 2: rows 6, 7, 8
  const ShardGeom shard = shard_at(param.geometry, mesh_coords(plan.dense, 2));
  CHECK(shard.local_shape == Shape{3, 2});
  REQUIRE(shard.boxes.size() == 1);
  CHECK(shard.boxes[0] == ShardBox{{6, 0}, {0, 0}, {3, 2}});
  // rank (dp 0, tp 1) = 1: local [3, 4, 5, 9, 10, 11], FSDP piece 0: rows 3, 4, 5
  CHECK(shard_at(param.geometry, mesh_coords(plan.dense, 1)).boxes[0] ==
        ShardBox{{3, 0}, {0, 0}, {3, 2}});
}

TEST_CASE("labels that are no shard order under FSDP: W-STRIDED where DTensor reads FSDP2's") {
  // FSDP2 labels its split of a `_StridedShard` TP shard `_StridedShard(0, sf=2)` as if the
  // shard were contiguous; DTensor reads (SS(0, 2) on dp, SS(0, 2) on tp) with other rows
  // than FSDP2 stores, even for 16 rows (torch 2.13.0 on gloo: full_tensor() of the sharded
  // param gives rows 0-3, 8-11, 4-7, 12-15): every rank is warned. FSDP2 on another dim is
  // `Shard(0)` over the strided dim 1, read as stored: no warning.
  Model model;
  model.params = {param("w", {16, 2}, DType::Float32), param("v", {4, 8}, DType::Float32)};
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 2}, {"tp", 2}});
  FsdpSpec fsdp;
  fsdp.shard = {"dp"};
  recipe.fsdp = fsdp;
  recipe.rules = {rule("w", {{"tp", strided(0, 2)}}), rule("v", {{"tp", strided(1, 2)}})};
  DiagnosticSink sink;
  const auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan.has_value());
  CHECK(labels(plan->params[0]) ==
        std::vector<std::string>{"_StridedShard(0, sf=2)", "_StridedShard(0, sf=2)"});
  // rank (dp 0, tp 1) = 1 stores tp 1's rows [4, 8) + [12, 16), FSDP2's first half: [4, 8)
  const ShardGeom geom = shard_at(plan->params[0].geometry, mesh_coords(plan->dense, 1));
  REQUIRE(geom.boxes.size() == 1);
  CHECK(geom.boxes[0] == ShardBox{{4, 0}, {0, 0}, {4, 2}});
  std::vector<std::string> warned;
  for (const Diagnostic& diag : sink.items())
    if (diag.code == DiagCode::WStrided) warned.push_back(diag.param);
  REQUIRE(warned == std::vector<std::string>{"w"});
  const Diagnostic& warning =
      *std::find_if(sink.items().begin(), sink.items().end(),
                    [](const Diagnostic& item) { return item.code == DiagCode::WStrided; });
  CHECK(warning.message.find("with other rows than FSDP2 stores on 4 shard(s), ranks 0-3") !=
        std::string::npos);
  CHECK(warning.hint.find("_init_sharding_spec_tp") != std::string::npos);
}

TEST_CASE("labels that are no shard order, where DTensor has no reading: E-SHARD-ORDER") {
  Model model;
  model.params = {param("w", {18, 2}, DType::Float32)};
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 4}, {"tp", 2}});
  Rule ru = rule("w", {{"dp", shard(0)}, {"tp", strided(0, 2)}});
  ru.uneven = SplitRule::Balanced;  // DTensor splits as torch.chunk only
  recipe.rules = {ru};
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink).has_value());
  REQUIRE(!sink.items().empty());
  CHECK(sink.items()[0].code == DiagCode::EShardOrder);
  CHECK(sink.items()[0].message.find("are no shard order") != std::string::npos);
  CHECK(sink.items()[0].message.find("balanced") != std::string::npos);
  CHECK_FALSE(sink.items()[0].hint.empty());
}

TEST_CASE("property: labels that are no order tile the dim, box by box") {
  // random meshes of 1-3 axes (sizes 1-4), every axis labelled Shard or _StridedShard (sf 1-3)
  // on dim 0 of extent 0-17: every row held by exactly the replica count of ranks, boxes in
  // local order summing to the local extent, each box the dtensor_rows run
  std::mt19937 rng(20261202);
  int stated = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int naxes = 1 + static_cast<int>(rng() % 3);
    std::vector<std::pair<std::string, std::int64_t>> axes;
    std::int64_t world = 1;
    for (int a = 0; a < naxes; ++a) {
      const std::int64_t size = 1 + static_cast<std::int64_t>(rng() % 4);
      axes.emplace_back("m" + std::to_string(a), size);
      world *= size;
    }
    const std::int64_t length = static_cast<std::int64_t>(rng() % 18);
    std::vector<std::pair<std::string, Placement>> pl;
    std::vector<MeshDimSplit> splits;
    for (const auto& [name, size] : axes) {
      const std::int64_t sf = 1 + static_cast<std::int64_t>(rng() % 3);
      pl.emplace_back(name, sf > 1 ? strided(0, sf) : shard(0));
      splits.push_back({size, 0, sf});
    }
    Recipe recipe;
    recipe.mesh = mesh(axes);
    recipe.rules = {rule("w", pl)};
    Model model;
    model.params = {param("w", {length, 2}, DType::Float32)};
    CAPTURE(trial);
    DiagnosticSink sink;
    const auto plan = build_plan(model, recipe, sink);
    REQUIRE_MESSAGE(plan.has_value(), (sink.items().empty() ? "" : sink.items().front().message));
    const PlannedParam& param = plan->params[0];
    if (boxed_dim(param.geometry) < 0) continue;  // the labels were an order (tested above)
    ++stated;
    std::vector<std::int64_t> held(static_cast<std::size_t>(length), 0);
    for (std::int64_t rank = 0; rank < world; ++rank) {
      const std::vector<std::int64_t> coords = mesh_coords(plan->dense, rank);
      for (std::size_t a = 0; a < splits.size(); ++a) splits[a].coord = coords[a];
      const std::vector<RowRun> want = dtensor_rows(length, splits);
      const ShardGeom shard = shard_at(param.geometry, coords);
      std::int64_t local = 0;
      REQUIRE(shard.boxes.size() == (shard.local_shape[0] == 0 ? 0 : want.size()));
      for (std::size_t b = 0; b < shard.boxes.size(); ++b) {
        CHECK(shard.boxes[b].global_offset[0] == want[b].start);
        CHECK(shard.boxes[b].shape[0] == want[b].size);
        CHECK(shard.boxes[b].local_offset[0] == local);
        local += shard.boxes[b].shape[0];
        for (std::int64_t row = 0; row < want[b].size; ++row)
          ++held[static_cast<std::size_t>(want[b].start + row)];
      }
      CHECK(local == shard.local_shape[0]);
    }
    for (std::int64_t count : held) REQUIRE(count == 1);
  }
  CHECK(stated > 50);
}

TEST_CASE("FSDP after an ordered dim: FSDP's split stays last") {
  Model model;
  model.params = {param("w", {13, 4}, DType::Float32)};
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 2}, {"cp", 2}, {"tp", 2}});
  FsdpSpec fsdp;
  fsdp.shard = {"dp"};
  recipe.fsdp = fsdp;
  recipe.rules = {ordered_rule("w", recipe.mesh, 0, {"tp", "cp"})};
  const Plan plan = plan_of(model, recipe);
  const PlannedParam& param = plan.params[0];
  // FSDP2's label of its split: sf = the ways already on the dim
  CHECK(labels(param) ==
        std::vector<std::string>{"_StridedShard(0, sf=4)", "_StridedShard(0, sf=2)", "Shard(0)"});
  const auto& chain = param.geometry.per_dim[0];
  REQUIRE(chain.size() == 3);
  CHECK(chain[0].axes == std::vector<int>{2});
  CHECK(chain[1].axes == std::vector<int>{1});
  CHECK(chain[2].fsdp);
  // rank (dp 1, cp 1, tp 1) = 7: tp1 rows [7, 13), cp1 [10, 13), dp1 [12, 13) padded to 2
  const ShardGeom shard = shard_at(param.geometry, mesh_coords(plan.dense, 7));
  CHECK(shard.global_offset[0] == 12);
  CHECK(shard.local_shape[0] == 1);
  CHECK(shard.padded_shape[0] == 2);
}

TEST_CASE("property: for random small meshes and orders the pieces tile every dim once") {
  std::mt19937 rng(20261201);
  for (int trial = 0; trial < 300; ++trial) {
    const int naxes = 1 + static_cast<int>(rng() % 4);
    std::vector<std::pair<std::string, std::int64_t>> axes;
    std::int64_t world = 1;
    for (int a = 0; a < naxes; ++a) {
      const std::int64_t size = 1 + static_cast<std::int64_t>(rng() % 4);
      axes.emplace_back("m" + std::to_string(a), size);
      world *= size;
    }
    const int ndim = 1 + static_cast<int>(rng() % 2);
    Shape shape;
    for (int d = 0; d < ndim; ++d) shape.push_back(static_cast<std::int64_t>(rng() % 14));
    // each axis shards a random dim or replicates; each dim's axes in a random order,
    // labelled as DTensor labels that order
    Recipe recipe;
    recipe.mesh = mesh(axes);
    std::vector<std::vector<std::string>> per_dim(static_cast<std::size_t>(ndim));
    for (const auto& [name, size] : axes) {
      const int d = static_cast<int>(rng() % static_cast<unsigned>(ndim + 1)) - 1;
      if (d >= 0) per_dim[static_cast<std::size_t>(d)].push_back(name);
    }
    Rule ru = rule("w", {});
    std::vector<std::vector<int>> wanted(static_cast<std::size_t>(ndim));
    for (int d = 0; d < ndim; ++d) {
      auto& list = per_dim[static_cast<std::size_t>(d)];
      std::shuffle(list.begin(), list.end(), rng);
      for (const auto& ap : ordered_rule("w", recipe.mesh, d, list).placements)
        ru.placements.push_back(ap);
      for (const auto& name : list)
        wanted[static_cast<std::size_t>(d)].push_back(recipe.mesh.find(name));
    }
    recipe.rules = {ru};
    Model model;
    model.params = {param("w", shape, DType::Float32)};
    CAPTURE(trial);
    const Plan plan = plan_of(model, recipe);
    const PlannedParam& param = plan.params[0];
    // the labels decode to the order (size-1 axes may move: their split is a no-op)
    for (int d = 0; d < ndim; ++d) {
      std::vector<int> got;
      for (const DimSplit& split : param.geometry.per_dim[static_cast<std::size_t>(d)])
        if (axes[static_cast<std::size_t>(split.axes.front())].second > 1)
          got.push_back(split.axes.front());
      std::vector<int> want;
      for (int axis : wanted[static_cast<std::size_t>(d)])
        if (axes[static_cast<std::size_t>(axis)].second > 1) want.push_back(axis);
      CHECK(got == want);
    }
    // every element held by exactly (world / pieces) ranks: count per element
    std::int64_t numel = 1;
    for (std::int64_t extent : shape) numel *= extent;
    std::vector<std::int64_t> held(static_cast<std::size_t>(numel), 0);
    std::int64_t replicas = 1;
    for (std::size_t a = 0; a < param.placements.size(); ++a)
      if (param.placements[a].kind == ResolvedPlacement::Kind::Replicate)
        replicas *= axes[a].second;
    for (std::int64_t rank = 0; rank < world; ++rank) {
      const ShardGeom shard = shard_at(param.geometry, mesh_coords(plan.dense, rank));
      std::int64_t count = 1;
      for (std::int64_t extent : shard.local_shape) count *= extent;
      if (count == 0) continue;
      for (std::int64_t e = 0; e < count; ++e) {
        std::int64_t rem = e;
        std::int64_t flat = 0;
        std::int64_t stride = 1;
        for (int d = ndim; d-- > 0;) {
          const auto du = static_cast<std::size_t>(d);
          const std::int64_t i = rem % shard.local_shape[du];
          rem /= shard.local_shape[du];
          flat += (shard.global_offset[du] + i) * stride;
          stride *= shape[du];
        }
        ++held[static_cast<std::size_t>(flat)];
      }
    }
    for (std::int64_t count : held) REQUIRE(count == replicas);
  }
}
