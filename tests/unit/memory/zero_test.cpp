// Optimizer-state sharding (training.zero / distributed_optimizer /
// zero_optimization.stage; src/planner/zero.cpp, src/memory): Megatron's
// distributed-optimizer memory to the byte on the two shapes of issue 29
// (the arithmetic written out), the inferred DP groups, the spellings, and
// every E-ZERO refusal.
#include <doctest/doctest.h>

#include "frontend/frontend.hpp"
#include "memory/memory.hpp"
#include "planner/planner.hpp"

#include "../source_text.hpp"

using namespace shardc;
using shardc::test::replace_all;
using shardc::test::slurp;

namespace {

struct Planned {
  DiagnosticSink sink;
  std::optional<Plan> plan;
};

void plan_into(Planned& out, const std::string& model_path, const std::string& recipe_text) {
  auto model = parse_model({model_path, slurp(model_path)}, out.sink);
  auto recipe = parse_recipe({"recipe.yaml", recipe_text}, out.sink);
  REQUIRE(model);
  if (!recipe) return;
  out.plan = build_plan(*model, *recipe, out.sink);
}

Plan plan_ok(const std::string& model_path, const std::string& recipe_text) {
  Planned planned;
  plan_into(planned, model_path, recipe_text);
  for (const Diagnostic& d : planned.sink.items()) CAPTURE(d.message);
  REQUIRE(planned.plan);
  REQUIRE(!planned.sink.has_errors());
  return *planned.plan;
}

// The first error's code name and message, "" when none.
std::string first_error(const std::string& model_path, const std::string& recipe_text) {
  Planned planned;
  plan_into(planned, model_path, recipe_text);
  for (const Diagnostic& d : planned.sink.items()) {
    if (d.severity == Severity::Error) return std::string(code_name(d.code)) + ": " + d.message;
  }
  return "";
}

const std::string kDense = "plans/megatron-llama-3-70b.model.yaml";
const std::string kDenseRecipe = "plans/megatron-llama-3-70b-tp8-pp8-dp8.recipe.yaml";

// The shipped dense recipe without its megatron_distopt buffer layout, for the variants
// that turn the distributed optimizer off or into ZeRO-3 (the layout needs stage 1 or 2).
std::string dense_without_layout() {
  return replace_all(slurp(kDenseRecipe), "buffers:\n  - {kind: megatron_distopt}\n", "");
}
const std::string kMoe = "tests/data/megatron/mixtral-8x7b.model.yaml";
const std::string kMoeRecipe = "tests/data/megatron/mixtral-8x7b-tp2-ep8-distopt.recipe.yaml";
const std::string kMoeEtpRecipe =
    "tests/data/megatron/mixtral-8x7b-tp2-ep8-etp2-distopt.recipe.yaml";

const RankMemory& rank(const MemoryReport& report, std::int64_t rank_id) {
  return report.ranks.at(static_cast<std::size_t>(rank_id));
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

// Megatron's formula (docs "Distributed Optimizer"; Megatron-LM
// megatron/training/theoretical_memory_usage.py): bf16 params with fp32 main
// grads and Adam keep 6 bytes per param whole (bf16 param 2 + fp32 grad 4)
// and 12 bytes per param over the DP degree d (fp32 main param 4 + exp_avg 4
// + exp_avg_sq 4); without the distributed optimizer 18 bytes per param.
TEST_CASE("Megatron Llama-3-70B, TP 8 x PP 8 x DP 8, distributed optimizer: 6 + 12/8 bytes") {
  const Plan plan = plan_ok(kDense, slurp(kDenseRecipe));
  CHECK(plan.zero.stage == 1);
  CHECK(plan.zero.dense.degree == 8);  // inferred: pp is the pipeline, tp shards, dp is free
  // Per TP rank of one layer: linear_qkv 10240 x 8192 / 8 (one query group) + linear_proj
  // 8192 x 8192 / 8 + linear_fc1 57344 x 8192 / 8 + linear_fc2 8192 x 28672 / 8, and the two
  // fused norm weights of 8192 (replicated over tp).
  const std::int64_t layer = 1280LL * 8192 + 8192LL * 1024 + 7168LL * 8192 + 8192LL * 3584;
  CHECK(layer == 106954752);
  const std::int64_t norms = 2 * 8192;
  // Stage 0 (10 layers + the embedding), rank tp = 0: 16,128 vocab rows (pad 128: 126 x 128;
  // Megatron's 129,024 / 8), all real on tp 0..6.
  const std::int64_t vocab = 16128LL * 8192;
  const std::int64_t first = 10 * (layer + norms) + vocab;
  CHECK(first == 1201831936);
  // Stage 7 adds the final norm to the same count.
  const std::int64_t last = first + 8192;
  const MemoryReport report = compute_memory(plan);
  const std::int64_t d = 8;
  CHECK(first % d == 0);
  CHECK(last % d == 0);
  const RankMemory& r0 = rank(report, 0);  // pp 0, dp 0, tp 0
  CHECK(r0.of(MemoryKind::Params) == 2 * first);
  CHECK(r0.of(MemoryKind::Grads) == 4 * first);
  CHECK(r0.of(MemoryKind::MasterWeights) == 4 * first / d);
  CHECK(r0.of(MemoryKind::OptimizerState) == 8 * first / d);
  CHECK(r0.total == 6 * first + 12 * first / d);
  CHECK(report.peak == 6 * last + 12 * last / d);
  CHECK(report.peak == 9013800960);
  CHECK(static_cast<double>(report.peak) / kGiB == doctest::Approx(8.3948).epsilon(1e-4));
  CHECK(rank(report, 448).total == report.peak);  // pp 7, dp 0, tp 0
  // Every dp rank of a (pp, tp) position holds the same: the 1/8 shard differs, not its size.
  for (std::int64_t rank_id : {448 + 8, 448 + 7 * 8})
    CHECK(rank(report, rank_id).total == report.peak);
  // Without the distributed optimizer (what shardc reported before): 18 bytes per param.
  const Plan ddp =
      plan_ok(kDense, replace_all(dense_without_layout(), "distributed_optimizer: true",
                                  "distributed_optimizer: false"));
  CHECK(ddp.zero.stage == 0);
  const MemoryReport md = compute_memory(ddp);
  CHECK(md.peak == 18 * last);
  CHECK(static_cast<double>(md.peak) / kGiB == doctest::Approx(20.148).epsilon(1e-4));
}

// Mixtral-8x7B-shaped in Megatron names, TP 2 x DP 32 dense, EP 8 x expert-DP 8 for the
// experts (expert TP 1): dense params shard their state over 32 ranks, experts over 8.
TEST_CASE("Megatron Mixtral-8x7B, TP 2 x EP 8, distributed optimizer: experts over expert-DP") {
  const Plan plan = plan_ok(kMoe, slurp(kMoeRecipe));
  CHECK(plan.zero.stage == 1);
  CHECK(plan.zero.dense.degree == 32);
  CHECK(plan.zero.has_experts);
  CHECK(plan.zero.expert.mesh == MeshKind::Expert);
  CHECK(plan.zero.expert.degree == 8);  // edp; ep shards the experts
  // Dense per rank (tp 2): per layer linear_qkv 6144 x 4096 / 2 + linear_proj 4096 x 4096 / 2,
  // the norms 2 x 4096 and the router 8 x 4096 (replicated); embedding and output layer
  // 32000 / 2 = 16,000 rows (pad 128: 125 x 128, no pad rows); the final norm 4096.
  const std::int64_t layer = 3072LL * 4096 + 4096LL * 2048 + 2 * 4096 + 8 * 4096;
  const std::int64_t dense = 32 * layer + 2 * 16000LL * 4096 + 4096;
  CHECK(dense == 803475456);
  // Experts per rank: one whole expert (8 / ep 8) of each of 32 layers: fc1 28672 x 4096,
  // fc2 4096 x 14336.
  const std::int64_t experts = 32 * (28672LL * 4096 + 4096LL * 14336);
  CHECK(experts == 5637144576);
  const std::int64_t all = dense + experts;
  const MemoryReport report = compute_memory(plan);
  for (std::int64_t rank_id : {0, 1, 17, 63}) {
    CAPTURE(rank_id);
    const RankMemory& rm = rank(report, rank_id);
    CHECK(rm.of(MemoryKind::Params) == 2 * all);
    CHECK(rm.of(MemoryKind::Grads) == 4 * all);
    CHECK(rm.of(MemoryKind::MasterWeights) == 4 * dense / 32 + 4 * experts / 8);
    CHECK(rm.of(MemoryKind::OptimizerState) == 8 * dense / 32 + 8 * experts / 8);
    CHECK(rm.total == 6 * all + 12 * dense / 32 + 12 * experts / 8);
  }
  CHECK(report.peak == 47400740352);
  CHECK(static_cast<double>(report.peak) / kGiB == doctest::Approx(44.146).epsilon(1e-4));
  // Without it: 18 bytes per param, the 107.97 GiB shardc used to report.
  const Plan ddp =
      plan_ok(kMoe, replace_all(slurp(kMoeRecipe), "  distributed_optimizer: true\n", ""));
  const MemoryReport md = compute_memory(ddp);
  CHECK(md.peak == 18 * all);
  CHECK(static_cast<double>(md.peak) / kGiB == doctest::Approx(107.97).epsilon(1e-4));
}

// The same with expert_tensor_parallel_size 2 as its own expert-mesh axis (edp 4 x ep 8 x
// etp 2): each rank holds half of one expert per layer (fc1: half of gate and half of up,
// packed; fc2: half its columns), and the expert state is sharded over Megatron's
// expert_data_parallel_size = world / (etp x ep x pp) = 64 / 16 = 4 (parallel_state.py).
TEST_CASE("Megatron Mixtral-8x7B with expert TP 2: its own axis, expert-DP 4") {
  const Plan plan = plan_ok(kMoe, slurp(kMoeEtpRecipe));
  CHECK(plan.zero.dense.degree == 32);
  CHECK(plan.zero.expert.degree == 4);  // edp; ep and etp shard the experts
  const std::int64_t layer = 3072LL * 4096 + 4096LL * 2048 + 2 * 4096 + 8 * 4096;
  const std::int64_t dense = 32 * layer + 2 * 16000LL * 4096 + 4096;
  const std::int64_t experts = 32 * (14336LL * 4096 + 4096LL * 7168);
  const std::int64_t all = dense + experts;
  const MemoryReport report = compute_memory(plan);
  for (std::int64_t rank_id : {0, 1, 17, 63}) {
    CAPTURE(rank_id);
    const RankMemory& rm = rank(report, rank_id);
    CHECK(rm.of(MemoryKind::Params) == 2 * all);
    CHECK(rm.total == 6 * all + 12 * dense / 32 + 12 * experts / 4);
  }
  for (const PlannedParam& param : plan.params) {
    if (param.name != "decoder.layers.0.mlp.experts.linear_fc1") continue;
    // rank 1: edp 0, ep 0, etp 1: gate rows 7168.. and up rows 21504.. of expert 0
    const ShardGeom shard = shard_at(param.geometry, mesh_coords(*plan.expert, 1));
    REQUIRE(shard.boxes.size() == 2);
    CHECK(shard.boxes[0].global_offset == Shape{0, 7168, 0});
    CHECK(shard.boxes[1].global_offset == Shape{0, 21504, 0});
  }
}

TEST_CASE("ZeRO spellings: zero: 1, distributed_optimizer, zero_optimization.stage agree") {
  const std::string base = slurp(kMoeRecipe);
  const std::int64_t reference = compute_memory(plan_ok(kMoe, base)).peak;
  for (const char* spelling : {"zero: 1", "zero: {stage: 1}", "zero_optimization: {stage: 1}",
                               "zero: {stage: 1, shard: [dp], expert_shard: [edp]}"}) {
    CAPTURE(spelling);
    const Plan plan = plan_ok(kMoe, replace_all(base, "distributed_optimizer: true", spelling));
    CHECK(plan.zero.stage == 1);
    CHECK(compute_memory(plan).peak == reference);
  }
}

// ZeRO-2 (DeepSpeed stage_1_and_2.py with partition_grads): the grads are sharded too.
TEST_CASE("ZeRO-2 shards the grads over the same groups") {
  const Plan plan = plan_ok(kMoe, replace_all(slurp(kMoeRecipe), "distributed_optimizer: true",
                                              "zero_optimization: {stage: 2}"));
  const std::int64_t dense = 803475456;
  const std::int64_t experts = 5637144576;
  const MemoryReport report = compute_memory(plan);
  CHECK(rank(report, 5).of(MemoryKind::Grads) == 4 * dense / 32 + 4 * experts / 8);
  CHECK(rank(report, 5).total == 2 * (dense + experts) + 16 * dense / 32 + 16 * experts / 8);
}

// bf16 grads (Megatron without grad_reduce_in_fp32): the optimizer steps on an fp32 copy of
// the shard's grads (distrib_optimizer.py: `shard_main_param.grad = shard_model_grad.float()`),
// Megatron's "fp16 param, fp16 grads: 4 + 16/d".
TEST_CASE("ZeRO-1 with grads narrower than the master adds the fp32 grad copy of the shard") {
  const Plan plan =
      plan_ok(kMoe, replace_all(slurp(kMoeRecipe), "grad_dtype: float32", "grad_dtype: bfloat16"));
  const std::int64_t dense = 803475456;
  const std::int64_t experts = 5637144576;
  const MemoryReport report = compute_memory(plan);
  CHECK(rank(report, 0).of(MemoryKind::Grads) ==
        2 * (dense + experts) + 4 * dense / 32 + 4 * experts / 8);
  CHECK(rank(report, 0).total == 4 * (dense + experts) + 16 * dense / 32 + 16 * experts / 8);
}

TEST_CASE("ZeRO groups: the pipeline axis and sharding axes are never inferred") {
  // Experts on the dense mesh (no expert mesh): dense DP = dp x ep (ep shards no dense param),
  // expert DP = dp x tp (ep shards them, tp does not: expert TP 1).
  std::string recipe = slurp(kMoeRecipe);
  recipe = replace_all(recipe,
                       "mesh:\n  - {name: dp, size: 32}\n  - {name: tp, size: 2}\nexpert_mesh:\n"
                       "  - {name: edp, size: 8}\n  - {name: ep, size: 8}\n",
                       "mesh:\n  - {name: dp, size: 4}\n  - {name: ep, size: 8}\n"
                       "  - {name: tp, size: 2}\n");
  const Plan plan = plan_ok(kMoe, recipe);
  CHECK(plan.zero.dense.degree == 32);
  CHECK(plan.zero.expert.mesh == MeshKind::Dense);
  CHECK(plan.zero.expert.degree == 8);
  CHECK(plan.zero.expert.axes == std::vector<int>{0, 2});
  // Same memory as the two-mesh recipe.
  CHECK(compute_memory(plan).peak == 47400740352);
  // The shard index: rank 13 = (dp 0, ep 6, tp 1): dense index dp*8 + ep = 6, expert dp*2+tp = 1.
  CHECK(plan.zero_index(plan.zero.dense, 13) == 6);
  CHECK(plan.zero_index(plan.zero.expert, 13) == 1);
  // The dense recipe: pp is left out.
  const Plan dense = plan_ok(kDense, slurp(kDenseRecipe));
  CHECK(dense.zero.dense.axes == std::vector<int>{1});
  CHECK(dense.zero_index(dense.zero.dense, 448 + 3 * 8 + 5) == 3);
}

TEST_CASE("E-ZERO: every refusal names what is wrong") {
  const std::string base = slurp(kMoeRecipe);
  auto with = [&](const std::string& zero) {
    return first_error(kMoe, replace_all(base, "distributed_optimizer: true", zero));
  };
  CHECK(with("zero: {stage: 1, shard: [tp]}")
            .find("E-ZERO: training.zero.shard names axis 'tp', "
                  "which shards a dense param") == 0);
  CHECK(with("zero: {stage: 1, expert_shard: [ep]}").find("which shards a stacked expert") !=
        std::string::npos);
  CHECK(with("zero: {stage: 1, shard: [dpp]}").find("has no such axis") != std::string::npos);
  CHECK(with("zero: 3").find("that is FSDP, and the recipe has no `fsdp` section") !=
        std::string::npos);
  CHECK(with("zero: 4").find("E-RECIPE: `training.zero` must be 0, 1, 2 or 3") == 0);
  CHECK(with("zero: 1\n  zero_optimization: {stage: 1}").find("E-RECIPE") == 0);
  const std::string dense = dense_without_layout();
  CHECK(first_error(kDense, replace_all(dense, "distributed_optimizer: true",
                                        "zero: {stage: 1, shard: [pp, dp]}"))
            .find("names the pipeline axis 'pp'") != std::string::npos);
  // Stage 1 beside fsdp (FSDP is stage 3).
  const std::string fsdp = replace_all(dense, "training:\n", "fsdp: {shard: dp}\ntraining:\n");
  CHECK(first_error(kDense, fsdp).find("beside `fsdp`") != std::string::npos);
  // Stage 3 with fsdp: accepted, the FSDP axes recorded, memory is FSDP's.
  const Plan z3 = plan_ok(kDense, replace_all(fsdp, "distributed_optimizer: true", "zero: 3"));
  CHECK(z3.zero.stage == 3);
  CHECK(z3.zero.dense.degree == 8);
}

TEST_CASE("E-BUDGET under ZeRO-1 names what stays whole") {
  const Plan plan = plan_ok(kMoe, slurp(kMoeRecipe));
  const MemoryReport report = compute_memory(plan);
  DiagnosticSink sink;
  check_budget(plan, report, 40LL * 1024 * 1024 * 1024, SourceLoc{}, sink);
  REQUIRE(sink.items().size() == 1);
  const std::string& hint = sink.items()[0].hint;
  // Megatron's spelling: its distributed optimizer has no stage 2 to suggest (it did); the
  // grads figure holds the fp32 copy of the grad shard beside the bf16 grads, said so.
  CHECK(hint.find("with ZeRO-1 (`training.distributed_optimizer`) over 32 DP ranks (experts over "
                  "8) this rank keeps its params (12.00 GiB) and its grads whole (grads 23.99 "
                  "GiB, with the fp32 copy of its grad shard where grads are narrower than the "
                  "master): Megatron's distributed optimizer has no stage 2; `fsdp` (Megatron "
                  "FSDP, ZeRO-3) shards grads and params") != std::string::npos);
  CHECK(hint.find("`zero: 2`") == std::string::npos);
}

TEST_CASE("ZeRO-Offload: the fp32 grad partition moves to the host, ZeRO-2 keeps no grads") {
  // Trial D 5 and 6 (DeepSpeed stage_1_and_2.py under cpu_offload: `self.device = 'cpu'`,
  // the fp32 grad partition allocated there, reduced grads copied straight into it).
  // Llama-3.1-8B, dp 8 x tp 8, bf16 params and grads, fp32 master, AdamW; no training
  // shape: offload applies to the model state all the same.
  const std::string base = replace_all(slurp("plans/llama-3.1-8b-dp8-tp8.recipe.yaml"),
                                       "  - {kind: muon_allgather, alignment_bytes: 512}\n", "");
  const auto memory_of = [&](const std::string& zero) {
    const Plan plan = plan_ok("plans/llama-3.1-8b.model.yaml",
                              base + "training: {optimizer: adamw, master_weights: float32, " +
                                  zero + ", offload: {optimizer: true}}\n");
    return compute_memory(plan).at(0);
  };
  const std::int64_t elements = 1004015616;  // TP-local params per rank (memory_test.cpp)
  const RankMemory zero1 = memory_of("zero: 1");
  CHECK(zero1.grad_copy == 4 * elements / 8);
  // Device: bf16 params and whole bf16 grads; host: the fp32 grad, master and Adam shards.
  CHECK(zero1.total == 2 * elements + 2 * elements);
  CHECK(zero1.host == (4 + 4 + 8) * elements / 8);
  const RankMemory zero2 = memory_of("zero: 2");
  CHECK(zero2.total == 2 * elements);
  CHECK(zero2.host == (4 + 4 + 8) * elements / 8);
}
