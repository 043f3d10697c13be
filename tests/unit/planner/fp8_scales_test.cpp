// FP8 block scales follow their weights (src/planner/fp8_scales.cpp,
// fp8_check.cpp, fp8_rules.cpp; src/planner/fp8.hpp). Pins computed by
// hand: a rank holding weight rows [a, e) holds scale rows [a/B, ceil(e/B)).
#include <doctest/doctest.h>

#include "fixtures.hpp"
#include "planner/fp8.hpp"

using namespace shardc;
using namespace shardc::test;
using V = std::vector<std::int64_t>;

namespace {

Model fp8_model(std::vector<std::pair<std::string, Shape>> weights,
                std::vector<std::int64_t> block = {128, 128}) {
  Model model;
  model.attributes.weight_block_size = std::move(block);
  for (auto& [name, shape] : weights) {
    model.params.push_back(param(name, shape, DType::Float8E4M3fn));
    auto scale = fp8::scale_shape(shape, model.attributes.weight_block_size);
    REQUIRE(scale);
    model.params.push_back(param(name + "_scale_inv", *scale, DType::Float32));
  }
  return model;
}

const Diagnostic* find_code(const DiagnosticSink& sink, const std::string& code) {
  for (const Diagnostic& d : sink.items())
    if (code_name(d.code) == code) return &d;
  return nullptr;
}

const PlannedParam& planned(const Plan& plan, const std::string& name) {
  for (const PlannedParam& param : plan.params)
    if (param.name == name) return param;
  FAIL("no param " << name);
  return plan.params.front();
}

}  // namespace

TEST_CASE("fp8 arithmetic: scale names, shapes, block images, alignment") {
  CHECK(fp8::scale_name("a.weight") == "a.weight_scale_inv");
  CHECK(fp8::weight_of_scale("a.weight_scale_inv") == std::optional<std::string>("a.weight"));
  CHECK(fp8::weight_of_scale("experts.w13_weight_scale_inv") ==
        std::optional<std::string>("experts.w13_weight"));
  CHECK_FALSE(fp8::weight_of_scale("a.weight"));
  CHECK_FALSE(fp8::weight_of_scale("a.input_scale"));
  const V block{128, 128};
  // DeepSeek-V3: q_b_proj [24576, 1536] -> [192, 12]; kv_a_proj_with_mqa [576, 7168] -> [5, 56]
  // (576 = 4.5 blocks: the last block is partial); stacked experts keep the expert dim.
  CHECK(fp8::scale_shape({24576, 1536}, block) == Shape{192, 12});
  CHECK(fp8::scale_shape({576, 7168}, block) == Shape{5, 56});
  CHECK(fp8::scale_shape({256, 2048, 7168}, block) == Shape{256, 16, 56});
  CHECK_FALSE(fp8::scale_shape({7168}, block));
  CHECK(fp8::dim_blocks(3, block) == V{1, 128, 128});
  // Rows [3072, 6144) are blocks [24, 48); [512, 1000) of 1000 rows are [4, 8).
  CHECK(fp8::block_image({3072, 3072}, 128).start == 24);
  CHECK(fp8::block_image({3072, 3072}, 128).size == 24);
  CHECK(fp8::block_image({512, 488}, 128).size == 4);
  CHECK(fp8::block_aligned({512, 488}, 1000, 128));        // ends at the dim's end
  CHECK_FALSE(fp8::block_aligned({0, 500}, 1000, 128));    // 500 cuts block 3
  CHECK_FALSE(fp8::block_aligned({500, 500}, 1000, 128));  // starts inside block 3
  CHECK(fp8::block_aligned({1000, 0}, 1000, 128));         // empty pieces cut nothing
}

TEST_CASE("fp8 scale_split: units and pad multiples in blocks") {
  DimSplit weight_split;
  weight_split.ways = 4;
  weight_split.unit = 256;
  CHECK(fp8::scale_split(weight_split, 128).unit == 2);
  weight_split.unit = 192;  // a DeepSeek-V3 q head: not whole blocks
  CHECK(fp8::scale_split(weight_split, 128).unit == 1);
  weight_split.unit = 1;
  weight_split.rule = SplitRule::Pad;
  weight_split.pad_multiple = 256;
  CHECK(fp8::scale_split(weight_split, 128).pad_multiple == 2);
  CHECK(fp8::scale_split(weight_split, 1).pad_multiple == 256);
}

TEST_CASE("fp8 valid_ways: every boundary a multiple of the block, torch.chunk included") {
  DimSplit chunk;
  // 18432 rows = 144 blocks: the chunk sizes keeping boundaries aligned.
  CHECK(fp8::valid_ways(18432, 128, chunk, 144, 64) ==
        V{1, 2, 3, 4, 6, 8, 9, 12, 16, 18, 24, 36, 48, 72, 144});
  // 14 rows in blocks of 2 (7 blocks): torch.chunk over 4 gives 4, 4, 4, 2 rows, all
  // aligned, although 4 does not divide 7.
  CHECK(fp8::valid_ways(14, 2, chunk, 7, 64) == V{1, 4, 7});
}

TEST_CASE("DeepSeek-V3 q_b_proj on tp 8: scale [192, 12] split into [24, 12] per rank") {
  Model model = fp8_model({{"model.layers.0.self_attn.q_b_proj.weight", {24576, 1536}}});
  Recipe recipe;
  recipe.mesh = mesh({{"tp", 8}});
  recipe.rules = {rule("**.q_b_proj.weight", {{"tp", shard(0)}})};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  const std::string text = "model.layers.0.self_attn.q_b_proj.weight_scale_inv";
  CHECK(sizes(*plan, text, 0) == V{24, 24, 24, 24, 24, 24, 24, 24});
  CHECK(offsets(*plan, text, 0) == V{0, 24, 48, 72, 96, 120, 144, 168});
  CHECK(sizes(*plan, text, 1) == V{12, 12, 12, 12, 12, 12, 12, 12});
  // The weight: 3072 rows per rank = 24 blocks of 128.
  CHECK(offsets(*plan, "model.layers.0.self_attn.q_b_proj.weight", 0) ==
        V{0, 3072, 6144, 9216, 12288, 15360, 18432, 21504});
  const PlannedParam& sp = planned(*plan, text);
  CHECK(sp.scale_of.has_value());
  CHECK(sp.rule.index == 0);  // the weight's rule, although it does not match the scale
  CHECK(sp.placements[0].label() == "Shard(0)");
}

TEST_CASE("a tp size that cuts a block is E-FP8-BLOCK with the rank, boundary and valid sizes") {
  Model model = fp8_model({{"model.layers.0.mlp.gate_proj.weight", {18432, 7168}}});
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 2}, {"tp", 32}});
  recipe.rules = {rule("**", {{"tp", shard(0)}})};
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  const Diagnostic* d = find_code(sink, "E-FP8-BLOCK");
  REQUIRE(d != nullptr);
  // 18432 / 32 = 576 rows per rank = 4.5 blocks: rank 0 holds [0, 576), cut at 576.
  CHECK(d->message.find("rank 0 holds elements [0, 576) of 18432") != std::string::npos);
  CHECK(d->message.find("boundary at element 576 cuts an FP8 block of 128") != std::string::npos);
  CHECK(d->message.find("576 = 4 x 128 + 64") != std::string::npos);
  CHECK(d->message.find("(64 of 64 ranks") != std::string::npos);
  CHECK(d->param == "model.layers.0.mlp.gate_proj.weight");
  CHECK(d->hint.find("1, 2, 3, 4, 6, 8, 9, 12, 16, 18, 24, 36, 48, 72, 144") != std::string::npos);
  CHECK(d->hint.find("`unit: 128`") != std::string::npos);
  CHECK(sink.error_count() == 1);  // the scale itself gets no second error
}

TEST_CASE("the ranks holding a cut piece are counted on the param's stage") {
  // 1280 rows = 10 blocks over tp 4 (chunk 320): [0,320) [320,640) [640,960) [960,1280);
  // 320 and 960 cut a block (640 does not), and every piece touches 320 or 960.
  Model model = fp8_model(
      {{"model.layers.0.a.weight", {1280, 128}}, {"model.layers.1.a.weight", {1280, 128}}});
  Recipe recipe;
  recipe.mesh = mesh({{"pp", 2}, {"tp", 4}});
  recipe.rules = {rule("**.a.weight", {{"tp", shard(0)}})};
  recipe.pipeline = PipelineSpec{};
  recipe.pipeline->axis = "pp";
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  std::vector<const Diagnostic*> found;
  for (const Diagnostic& d : sink.items())
    if (d.code == shardc::DiagCode::EFp8Block) found.push_back(&d);
  REQUIRE(found.size() == 1);  // grouped: same rule, dim and extent
  CHECK(found[0]->message.find("rank 0 holds elements [0, 320) of 1280") != std::string::npos);
  CHECK(found[0]->message.find("(4 of 8 ranks hold such a shard) (and 1 more like it)") !=
        std::string::npos);
  CHECK(found[0]->hint.find("(extent 1280 = 10 blocks, chunk): 1, 2, 5, 10") != std::string::npos);
  // Alone on stage 1, layer 1's representative rank is the first of that stage.
  model.params.erase(model.params.begin(), model.params.begin() + 2);
  model.params.insert(model.params.begin(), param("model.layers.0.n.weight", {8}));
  recipe.rules.push_back(rule("**", {}));
  DiagnosticSink s1;
  CHECK_FALSE(build_plan(model, recipe, s1));
  REQUIRE(find_code(s1, "E-FP8-BLOCK") != nullptr);
  CHECK(find_code(s1, "E-FP8-BLOCK")->message.find("rank 4 holds elements [0, 320)") !=
        std::string::npos);
}

TEST_CASE("uneven torch.chunk pieces that stay aligned are followed exactly") {
  // Blocks of 2: 14 rows = 7 blocks over tp 4 -> 4, 4, 4, 2 rows -> 2, 2, 2, 1 scale rows.
  Model model = fp8_model({{"w.weight", {14, 4}}}, {2, 2});
  Recipe recipe;
  recipe.mesh = mesh({{"tp", 4}});
  recipe.rules = {rule("w.weight", {{"tp", shard(0)}})};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  CHECK(sizes(*plan, "w.weight", 0) == V{4, 4, 4, 2});
  CHECK(sizes(*plan, "w.weight_scale_inv", 0) == V{2, 2, 2, 1});
  CHECK(offsets(*plan, "w.weight_scale_inv", 0) == V{0, 2, 4, 6});
}

TEST_CASE("`unit: B` splits whole blocks: uneven block counts, boundaries always aligned") {
  // 1280 rows = 10 blocks over tp 4: chunk cuts at 320; with unit 128 torch.chunk of the
  // 10 blocks gives 3, 3, 3, 1 blocks -> rows 384, 384, 384, 128 and scale rows 3, 3, 3, 1.
  Model model = fp8_model({{"w.weight", {1280, 256}}});
  Recipe recipe;
  recipe.mesh = mesh({{"tp", 4}});
  recipe.rules = {rule("w.weight", {{"tp", shard(0)}})};
  DiagnosticSink bad;
  CHECK_FALSE(build_plan(model, recipe, bad));
  CHECK(bad.has_code(DiagCode::EFp8Block));
  recipe.rules[0].unit = 128;
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  CHECK(sizes(*plan, "w.weight", 0) == V{384, 384, 384, 128});
  CHECK(sizes(*plan, "w.weight_scale_inv", 0) == V{3, 3, 3, 1});
  CHECK(offsets(*plan, "w.weight_scale_inv", 0) == V{0, 3, 6, 9});
  CHECK(planned(*plan, "w.weight_scale_inv").unit == 1);  // 128 rows = 1 block
}

TEST_CASE("nested shards on one dim: every level must stay aligned") {
  // 1536 rows = 12 blocks; a 2 -> 768 (6 blocks) each; then b 4 -> 192 rows: cut.
  Model model = fp8_model({{"w.weight", {1536, 128}}});
  Recipe recipe;
  recipe.mesh = mesh({{"a", 2}, {"b", 4}});
  recipe.rules = {rule("w.weight", {{"a", shard(0)}, {"b", shard(0)}})};
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  const Diagnostic* d = find_code(sink, "E-FP8-BLOCK");
  REQUIRE(d != nullptr);
  CHECK(d->message.find("rank 0 holds elements [0, 192)") != std::string::npos);
  CHECK(d->message.find("(8 of 8 ranks") != std::string::npos);
  CHECK(d->hint.find("sizes of b") != std::string::npos);
  CHECK(d->hint.find("(extent 768 = 6 blocks, chunk): 1, 2, 3, 6") != std::string::npos);
  // b 2 keeps 384 rows = 3 blocks per piece: nested scale pieces of 3 rows.
  recipe.mesh = mesh({{"a", 2}, {"b", 2}});
  DiagnosticSink ok;
  auto plan = build_plan(model, recipe, ok);
  REQUIRE(plan);
  CHECK(offsets(*plan, "w.weight_scale_inv", 0) == V{0, 3, 6, 9});
}

TEST_CASE("FSDP is exempt: the scale is FSDP-sharded as its own param") {
  // 384 rows (3 blocks) FSDP over 2: weight chunks of 192 rows cut block 1, but FSDP2
  // all-gathers before use; the scale [3, 1] is chunked 2 + 1 by FSDP on its own.
  Model model = fp8_model({{"w.weight", {384, 128}}});
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 2}});
  recipe.rules = {rule("w.weight", {})};
  recipe.fsdp = FsdpSpec{};
  recipe.fsdp->shard = {"dp"};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  CHECK(sizes(*plan, "w.weight", 0) == V{192, 192});
  CHECK(sizes(*plan, "w.weight_scale_inv", 0) == V{2, 1});
  CHECK(offsets(*plan, "w.weight_scale_inv", 0) == V{0, 2});
}

TEST_CASE("expert scales are stacked like their stacked weights") {
  Model model;
  model.attributes.weight_block_size = {128, 128};
  for (int e = 0; e < 4; ++e) {
    const std::string base = "model.layers.1.mlp.experts." + std::to_string(e) + ".w1.weight";
    model.params.push_back(param(base, {256, 128}, DType::Float8E4M3fn));
    model.params.push_back(param(base + "_scale_inv", {2, 1}, DType::Float32));
  }
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 2}});
  recipe.expert_mesh = mesh({{"ep", 2}});
  ExpertsEntry entry;
  entry.match = pat("model.layers.{L}.mlp.experts.{E}.{P}.weight");
  entry.stack = "model.layers.{L}.mlp.experts.{P}";
  entry.placements.push_back({"ep", shard(0), {}});
  recipe.experts = {entry};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  REQUIRE(plan->params.size() == 2);
  const PlannedParam& param = plan->params[1];
  CHECK(param.name == "model.layers.1.mlp.experts.w1_scale_inv");
  CHECK(param.global_shape == Shape{4, 2, 1});
  CHECK(param.mesh == MeshKind::Expert);
  CHECK(param.stacked_from.size() == 4);
  CHECK(param.stacked_from[3] == "model.layers.1.mlp.experts.3.w1.weight_scale_inv");
  CHECK(sizes(*plan, param.name, 0) == V{2, 2});
  CHECK(offsets(*plan, param.name, 0) == V{0, 2});
}

TEST_CASE("E-FP8-SCALE: a scale of the wrong shape, a scale without weight, follow without block") {
  Model model = fp8_model({{"w.weight", {256, 256}}});
  model.params[1].shape = {2, 3};
  Recipe recipe;
  recipe.mesh = mesh({{"tp", 2}});
  recipe.rules = {rule("w.weight", {{"tp", shard(0)}})};
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  const Diagnostic* d = find_code(sink, "E-FP8-SCALE");
  REQUIRE(d != nullptr);
  CHECK(d->message.find("is [2, 3] but w.weight [256, 256] in blocks of [128, 128] needs [2, 2]") !=
        std::string::npos);
  CHECK_FALSE(sink.has_code(DiagCode::EUncovered));  // the broken scale is not reported twice

  Model orphan = fp8_model({{"w.weight", {256, 256}}});
  orphan.params.erase(orphan.params.begin());
  DiagnosticSink s2;
  CHECK_FALSE(build_plan(orphan, recipe, s2));
  REQUIRE(find_code(s2, "E-FP8-SCALE") != nullptr);
  CHECK(find_code(s2, "E-FP8-SCALE")->message.find("has no weight w.weight") != std::string::npos);

  Model no_block = fp8_model({{"w.weight", {256, 256}}});
  no_block.attributes.weight_block_size.clear();
  recipe.fp8_scales = Fp8Scales::Follow;
  DiagnosticSink s3;
  CHECK_FALSE(build_plan(no_block, recipe, s3));
  CHECK(s3.has_code(DiagCode::EFp8Scale));
}

TEST_CASE("fp8_scales: rules (and auto without a block size) place scales by rules") {
  Model model = fp8_model({{"w.weight", {256, 256}}});
  Recipe recipe;
  recipe.mesh = mesh({{"tp", 2}});
  recipe.rules = {rule("w.weight", {{"tp", shard(0)}})};
  recipe.fp8_scales = Fp8Scales::Rules;
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  CHECK(sink.has_code(DiagCode::EUncovered));  // nothing places the scale now
  recipe.rules.push_back(rule("**.weight_scale_inv", {}));
  DiagnosticSink ok;
  auto plan = build_plan(model, recipe, ok);
  REQUIRE(plan);
  CHECK(sizes(*plan, "w.weight_scale_inv", 0) == V{2, 2});  // replicated
  CHECK_FALSE(planned(*plan, "w.weight_scale_inv").scale_of);
}

TEST_CASE("a following scale takes its weight's pipeline stage, whatever the globs say") {
  Model model =
      fp8_model({{"model.layers.0.w.weight", {256, 256}}, {"model.layers.1.w.weight", {256, 256}}});
  Recipe recipe;
  recipe.mesh = mesh({{"pp", 2}, {"tp", 2}});
  recipe.rules = {rule("**", {{"tp", shard(1)}})};
  recipe.pipeline = PipelineSpec{};
  recipe.pipeline->axis = "pp";
  recipe.pipeline->auto_stages = false;
  recipe.pipeline->stages = {{pat("model.layers.0.w.weight")}, {pat("model.layers.1.w.weight")}};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  CHECK(planned(*plan, "model.layers.0.w.weight_scale_inv").stage == 0);
  CHECK(planned(*plan, "model.layers.1.w.weight_scale_inv").stage == 1);
}

TEST_CASE("hostile mesh: the block check stays bounded and still reports the cut") {
  // 2^31 rows over tp 2^30: 2 rows per rank, block 128 -> cut at row 2; the walk stops at
  // its step budget and says "at least".
  Model model = fp8_model({{"w.weight", {std::int64_t{1} << 31, 1}}});
  Recipe recipe;
  recipe.mesh = mesh({{"tp", std::int64_t{1} << 30}});
  recipe.rules = {rule("w.weight", {{"tp", shard(0)}})};
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  const Diagnostic* d = find_code(sink, "E-FP8-BLOCK");
  REQUIRE(d != nullptr);
  CHECK(d->message.find("rank 0 holds elements [0, 2)") != std::string::npos);
  CHECK(d->message.find("at least") != std::string::npos);
}

TEST_CASE("a split the scale cannot mirror (pad multiple not in whole blocks) is E-FP8-BLOCK") {
  // 1024 rows over tp 4 with pad 64: every piece allocates 256 rows (aligned), but the
  // scale (8 rows) padded to multiples of 64 puts all 8 rows on rank 0.
  Model model = fp8_model({{"w.weight", {1024, 128}}});
  Recipe recipe;
  recipe.mesh = mesh({{"tp", 4}});
  recipe.rules = {rule("w.weight", {{"tp", shard(0)}})};
  recipe.rules[0].uneven = SplitRule::Pad;
  recipe.rules[0].pad_multiple = 64;
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  const Diagnostic* d = find_code(sink, "E-FP8-BLOCK");
  REQUIRE(d != nullptr);
  CHECK(d->message.find("rank 0 holds elements [0, 256) of 1024 = FP8 blocks [0, 2) of 128, but "
                        "the pad 64 split gives w.weight_scale_inv elements [0, 8) there") !=
        std::string::npos);
  // A pad multiple of whole blocks is mirrored: 128 rows -> 1 block per pad unit.
  recipe.rules[0].pad_multiple = 128;
  DiagnosticSink ok;
  auto plan = build_plan(model, recipe, ok);
  REQUIRE(plan);
  CHECK(sizes(*plan, "w.weight_scale_inv", 0) == V{2, 2, 2, 2});
}

TEST_CASE("scales of _StridedShard labels that are no order: checked run by run") {
  // transformers' packed_colwise `_StridedShard(0, sf=2)` over tp 2: a rank holds a run of
  // each half. 1024 rows: runs of 256 are whole blocks, the scale (8 rows, same labels)
  // holds exactly their blocks. 768 rows: runs of 192 cut a block, although the contiguous
  // halves the nested walk would see ([0, 384), [384, 768)) do not.
  const auto strided = [](int d, std::int64_t sf) {
    return Placement{Placement::Kind::Shard,
                     d,
                     {},
                     "_StridedShard(" + std::to_string(d) + ", sf=" + std::to_string(sf) + ")"};
  };
  Recipe recipe;
  recipe.mesh = mesh({{"tp", 2}});
  recipe.rules = {rule("**.w.weight", {{"tp", strided(0, 2)}})};
  {
    Model model = fp8_model({{"model.layers.0.w.weight", {1024, 256}}});
    DiagnosticSink sink;
    const auto plan = build_plan(model, recipe, sink);
    REQUIRE(plan);
    const PlannedParam& scale = planned(*plan, "model.layers.0.w.weight_scale_inv");
    // rank 1: weight rows [256, 512) + [768, 1024) = blocks 2, 3, 6, 7
    const ShardGeom geom = shard_at(scale.geometry, mesh_coords(plan->dense, 1));
    REQUIRE(geom.boxes.size() == 2);
    CHECK(geom.boxes[0] == ShardBox{{2, 0}, {0, 0}, {2, 2}});
    CHECK(geom.boxes[1] == ShardBox{{6, 0}, {2, 0}, {2, 2}});
  }
  Model model = fp8_model({{"model.layers.0.w.weight", {768, 256}}});
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  const Diagnostic* diag = find_code(sink, "E-FP8-BLOCK");
  REQUIRE(diag != nullptr);
  CHECK(diag->message.find("(tp: _StridedShard(0, sf=2)): rank 0 holds elements [0, 192) + [384, "
                           "576) of 768") != std::string::npos);
  CHECK(diag->message.find("run boundary at element 192 cuts an FP8 block of 128") !=
        std::string::npos);
  CHECK(diag->message.find("(2 of 2 ranks") != std::string::npos);
  CHECK(sink.error_count() == 1);
}
