// Flat optimizer buffers (src/planner/buffers_flat.cpp) and Megatron's padded
// vocabulary (rule `vocab_padding`, src/planner/placements.cpp) on the shipped
// Megatron plan (plans/megatron-llama-3-70b-tp8-pp8-dp8: TP 8 x PP 8 x VP 5 x DP 8,
// distributed optimizer): the DistOpt buckets of pp rank 0 written out by hand
// from Megatron-Core's rules (distrib_optimizer.py _compute_per_buffer_param_layout,
// param_layout.py), the shards a param straddles, and the reshard of a padded
// vocabulary between TP 8 and TP 4 (refused with the row mapping).
#include <doctest/doctest.h>

#include "frontend/frontend.hpp"
#include "memory/memory.hpp"
#include "planner/buffers.hpp"
#include "planner/planner.hpp"
#include "reshard/reshard.hpp"

#include "../source_text.hpp"

using namespace shardc;
using shardc::test::replace_all;
using shardc::test::slurp;

namespace {

const std::string kModel = "plans/megatron-llama-3-70b.model.yaml";
const std::string kRecipe = "plans/megatron-llama-3-70b-tp8-pp8-dp8.recipe.yaml";

Plan plan_ok(const std::string& recipe_text) {
  DiagnosticSink sink;
  auto parsed_model = parse_model({kModel, slurp(kModel)}, sink);
  auto parsed_recipe = parse_recipe({"recipe.yaml", recipe_text}, sink);
  REQUIRE(parsed_model);
  REQUIRE(parsed_recipe);
  std::optional<Plan> plan = build_plan(*parsed_model, *parsed_recipe, sink);
  for (const Diagnostic& d : sink.items()) CAPTURE(d.message);
  REQUIRE(plan);
  REQUIRE(!sink.has_errors());
  return *plan;
}

const PlannedParam& param_named(const Plan& plan, const std::string& name) {
  for (const PlannedParam& param : plan.params)
    if (param.name == name) return param;
  FAIL("no param " << name);
  return plan.params.front();
}

BufferSpec distopt_spec(const Plan& plan) {
  for (const BufferSpec& buffer : plan.buffers)
    if (buffer.kind == BufferKind::MegatronDistOpt) return buffer;
  FAIL("the shipped recipe has no megatron_distopt buffer");
  return {};
}

}  // namespace

TEST_CASE("vocab_padding: Megatron's checkpoint shape, 129,024 rows at TP 8, 128,512 at TP 4") {
  const Plan tp8 = plan_ok(slurp(kRecipe));
  for (const char* name : {"embedding.word_embeddings.weight", "output_layer.weight"}) {
    const PlannedParam& param = param_named(tp8, name);
    CHECK(param.global_shape == Shape{129024, 8192});  // 128,256 up to 128 x 8 = 1,024
    CHECK(param.vocab_rows == 128256);
    CHECK(param.vocab_multiple == 1024);
  }
  // TP 4 x DP 16 on the same 512 ranks: 128,256 up to 128 x 4 = 512.
  const std::string tp4_text =
      replace_all(replace_all(slurp(kRecipe), "{name: tp, size: 8}", "{name: tp, size: 4}"),
                  "{name: dp, size: 8}", "{name: dp, size: 16}");
  const Plan tp4 = plan_ok(tp4_text);
  CHECK(param_named(tp4, "embedding.word_embeddings.weight").global_shape == Shape{128512, 8192});
  CHECK(param_named(tp4, "output_layer.weight").vocab_multiple == 512);
  // Optimizer state is counted on the allocated rows: 16,128 per rank at TP 8 (the
  // memory test of zero_test.cpp keeps 8.39 GiB), 32,128 at TP 4.
  const MemoryReport m4 = compute_memory(tp4);
  const MemoryReport m8 = compute_memory(tp8);
  CHECK(m8.peak == 9013800960);
  CHECK(m4.ranks.at(0).of(MemoryKind::MasterWeights) > 0);
  // The reshard between them states the shape change and the row mapping.
  DiagnosticSink sink;
  const reshard::Layout layout_tp8 = reshard::layout_from_plan(tp8, "tp8");
  const reshard::Layout layout_tp4 = reshard::layout_from_plan(tp4, "tp4");
  (void)reshard::plan_reshard(layout_tp8, layout_tp4, {}, sink);
  REQUIRE(sink.has_errors());
  bool named = false;
  for (const Diagnostic& d : sink.items()) {
    if (d.code != DiagCode::EReshardMismatch || d.param != "embedding.word_embeddings.weight")
      continue;
    named = true;
    CHECK(d.message.find("padded vocabulary") != std::string::npos);
    CHECK(d.message.find("[129024, 8192] in plan A") != std::string::npos);
    CHECK(d.message.find("128256 real rows padded to a multiple of 1024 (768 padding rows)") !=
          std::string::npos);
    CHECK(d.message.find("[128512, 8192] in plan B") != std::string::npos);
    CHECK(d.hint.find("rows 0..128255 (the real vocabulary) map one to one") != std::string::npos);
    CHECK(d.hint.find("A's rows 128256..129023 are padding") != std::string::npos);
    CHECK(d.hint.find("B's rows 128256..128511") != std::string::npos);
  }
  CHECK(named);
}

// pp rank 0, tp 0, dp 0 (rank 0): model chunk 0 holds the embedding and layers 0-1
// (16,128 x 8,192 vocab rows; per layer linear_qkv 1,280 x 8,192, linear_proj 8,192 x
// 1,024, linear_fc1 7,168 x 8,192, linear_fc2 8,192 x 3,584 and two norms of 8,192).
// Reversed: L1.fc2 29,360,128 + L1.fc1 58,720,256 reach 40,000,000 (max(40M, 1M x 8))
// and close bucket 0; then L1.fc1 norm, proj, qkv, qkv norm, L0.fc2 (48,250,880); L0.fc1
// alone (58,720,256); the rest with the embedding (151,011,328). Every numel is a multiple
// of 64 and every bucket end of lcm(8, 128) = 128: no padding.
TEST_CASE("megatron_distopt: the DistOpt buckets of the shipped plan, by hand") {
  const Plan plan = plan_ok(slurp(kRecipe));
  const BufferSpec spec = distopt_spec(plan);
  const FlatRankLayout l0 = flat_for_rank(plan, spec, 0);
  REQUIRE(l0.buffers.size() == 5);  // one per model chunk (virtual stages 0..4)
  for (std::size_t k = 0; k < 5; ++k) {
    const FlatRankBuffer& buffer = l0.buffers[k];
    CHECK(buffer.virtual_stage == static_cast<int>(k));
    CHECK(buffer.param_dtype == DType::BFloat16);
    CHECK(buffer.grad_dtype == DType::Float32);
    CHECK(buffer.ranks == std::vector<std::int64_t>{0, 8, 16, 24, 32, 40, 48, 56});  // dp stride 8
    CHECK(buffer.index == 0);
    CHECK(buffer.bucket_size == (k == 0 ? 40000000 : -1));  // later chunks never bucket
  }
  const FlatRankBuffer& c0 = l0.buffers[0];
  REQUIRE(c0.buckets.size() == 4);
  const std::int64_t ends[] = {88080384, 88080384 + 48250880, 88080384 + 48250880 + 58720256,
                               346062848};
  for (std::size_t j = 0; j < 4; ++j) {
    CHECK(c0.buckets[j].end == ends[j]);
    CHECK(c0.buckets[j].numel_unpadded == c0.buckets[j].end - c0.buckets[j].start);
  }
  CHECK(c0.numel == 346062848);
  CHECK(plan.params[c0.entries.front().param].name == "decoder.layers.1.mlp.linear_fc2.weight");
  CHECK(plan.params[c0.entries.back().param].name == "embedding.word_embeddings.weight");
  // dp rank 2 (rank 16) owns [22,020,096, 33,030,144) of bucket 0: the end of L1.fc2
  // (which ends at 29,360,128) and the start of L1.fc1, a param straddling two shards.
  const FlatRankLayout l16 = flat_for_rank(plan, spec, 16);
  const FlatRankBuffer& r16 = l16.buffers.at(0);
  CHECK(r16.index == 2);
  REQUIRE(r16.owned.size() >= 2);
  CHECK(plan.params[r16.entries[r16.owned[0].entry].param].name ==
        "decoder.layers.1.mlp.linear_fc2.weight");
  CHECK(r16.owned[0].param_offset == 22020096);
  CHECK(r16.owned[0].numel == 29360128 - 22020096);
  CHECK(plan.params[r16.entries[r16.owned[1].entry].param].name ==
        "decoder.layers.1.mlp.linear_fc1.weight");
  CHECK(r16.owned[1].param_offset == 0);
  CHECK(r16.owned[1].numel == 33030144 - 29360128);
  // Over the dp group every element is owned once: the shards add up to the buffer.
  std::int64_t owned = 0;
  for (std::int64_t dp = 0; dp < 8; ++dp)
    for (const FlatRankBuffer& buffer : flat_for_rank(plan, spec, dp * 8).buffers)
      owned += buffer.owned_numel;
  std::int64_t whole = 0;
  for (const FlatRankBuffer& buffer : l0.buffers) whole += buffer.numel;
  CHECK(owned == whole);
  // pp rank 1 (rank 64) never buckets; bucket ends padded to 128.
  for (const FlatRankBuffer& buffer : flat_for_rank(plan, spec, 64).buffers) {
    CHECK(buffer.bucket_size == -1);
    CHECK(buffer.buckets.size() == 1);
    CHECK(buffer.numel % 128 == 0);
  }
}

TEST_CASE("megatron_distopt: 64-element param starts, lcm(dp, 128) and the 2^16 option") {
  CHECK(megatron_bucket_end_divisor(8, false) == 128);
  CHECK(megatron_bucket_end_divisor(48, false) == 384);
  CHECK(megatron_bucket_end_divisor(48, true) == 196608);  // lcm(48, 128, 65536)
  CHECK(megatron_default_bucket_size(8) == 40000000);
  CHECK(megatron_default_bucket_size(64) == 64000000);
  // Ranges of a bucket [0, 256) over 4 shards of 64 with pieces at 0 (100) and 128 (100).
  const std::vector<FlatEntry> entries = {{0, 0, 100, 0, 0}, {1, 0, 100, 128, 0}};
  const FlatBucket bucket{0, 256, 228};
  const auto s1 = flat_owned(entries, bucket, 0, 4, 1);  // [64, 128): piece 0's 64..99
  REQUIRE(s1.size() == 1);
  CHECK(s1[0].param_offset == 64);
  CHECK(s1[0].numel == 36);
  const auto s3 = flat_owned(entries, bucket, 0, 4, 3);  // [192, 256): piece 1's 64..99
  REQUIRE(s3.size() == 1);
  CHECK(s3[0].entry == 1);
  CHECK(s3[0].buffer_start == 192);
  CHECK(s3[0].numel == 36);
}
