// Communication per step per rank (src/comm/comm.hpp, src/comm): the ring
// counts, per-term pins with the arithmetic written out for a dense, a GQA, an MoE
// (EP) and an MLA (CP) model, the monotonic properties, and the Plan adapter on the
// shipped plans (groups, node crossing, bytes from the shard classes).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "comm/comm.hpp"
#include "frontend/frontend.hpp"
#include "memory/memory.hpp"
#include "planner/planner.hpp"

using namespace shardc;

namespace {

std::string slurp(const std::string& rel) {
  std::ifstream in(std::filesystem::path(SHARDC_SOURCE_DIR) / rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TrainingShape shape_of(std::int64_t seq, std::int64_t micro_batch = 1) {
  TrainingShape shape;
  shape.seq_len = seq;
  shape.micro_batch_size = micro_batch;
  return shape;
}

ActivationArch llama(std::int64_t hidden, std::int64_t heads, std::int64_t kv_heads,
                     std::int64_t intermediate) {
  ActivationArch arch;
  arch.hidden = hidden;
  arch.heads = heads;
  arch.kv_heads = kv_heads;
  arch.head_dim = hidden / heads;
  arch.intermediate = intermediate;
  arch.vocab = 128256;
  arch.layers = 32;
  return arch;
}

StageCommBytes dense_stage(std::int64_t layers, Recompute mode = Recompute::None) {
  StageCommBytes bytes;
  bytes.layers.count[0][static_cast<int>(mode)] = layers;
  bytes.layers.embedding = true;
  bytes.layers.logits = true;
  return bytes;
}

CommGroups groups_with(CommRole role, std::int64_t size) {
  CommGroups groups;
  groups.of(role).size = size;
  groups.of(role).axes = comm_role_name(role);
  return groups;
}

std::int64_t bytes_of(const StageComm& comm, CommRole role, Collective coll) {
  std::int64_t sum = 0;
  for (const CommTerm& term : comm.terms)
    if (term.role == role && term.collective == coll) sum += term.bytes;
  return sum;
}

std::int64_t role_bytes(const StageComm& comm, CommRole role) {
  std::int64_t sum = 0;
  for (const CommTerm& term : comm.terms)
    if (term.role == role) sum += term.bytes;
  return sum;
}

std::unique_ptr<Plan> plan_of(const std::string& model, const std::string& recipe,
                              const std::string& training) {
  DiagnosticSink sink;
  auto parsed_model = parse_model({"model.yaml", slurp(model)}, sink);
  auto parsed_recipe = parse_recipe({"recipe.yaml", slurp(recipe) + training}, sink);
  REQUIRE(parsed_model);
  REQUIRE(parsed_recipe);
  auto plan = build_plan(*parsed_model, *parsed_recipe, sink);
  REQUIRE(plan);
  return std::make_unique<Plan>(std::move(*plan));
}

}  // namespace

TEST_CASE("comm: ring byte counts (bytes one rank sends)") {
  // all-gather / reduce-scatter / all-to-all: (n-1)/n B; all-reduce 2 (n-1)/n B; send B.
  CHECK(ring_bytes_sent(Collective::AllGather, 1024, 8) == 896);
  CHECK(ring_bytes_sent(Collective::ReduceScatter, 1024, 8) == 896);
  CHECK(ring_bytes_sent(Collective::AllToAll, 1024, 8) == 896);
  CHECK(ring_bytes_sent(Collective::AllReduce, 1024, 8) == 1792);
  CHECK(ring_bytes_sent(Collective::SendRecv, 1024, 1) == 1024);
  CHECK(ring_bytes_sent(Collective::AllReduce, 1024, 1) == 0);
  // A buffer not divisible by n moves whole chunks: ceil(10 / 4) = 3, x 3 = 9.
  CHECK(ring_bytes_sent(Collective::AllGather, 10, 4) == 9);
  // Saturates instead of overflowing.
  CHECK(ring_bytes_sent(Collective::AllReduce, std::numeric_limits<std::int64_t>::max(), 2) ==
        std::numeric_limits<std::int64_t>::max());
  CHECK(std::string(collective_name(Collective::AllToAll)) == "all_to_all");
  CHECK(std::string(comm_role_name(CommRole::ExpertReplicate)) == "expert_replicate");
}

TEST_CASE("comm: dense FSDP2 (8 ranks), reshard_after_forward, micro-batches") {
  const ActivationArch arch = llama(4096, 32, 32, 11008);  // Llama-2-7B sizes, MHA
  StageCommBytes bytes = dense_stage(32);
  bytes.fsdp_param_bytes = 1000000;  // the rank's padded shards
  bytes.fsdp_root_param_bytes = 100000;
  bytes.fsdp_grad_bytes = 1000000;
  const CommGroups groups = groups_with(CommRole::Fsdp, 8);
  CommLayout layout;
  // m = 1, no pipeline: reshard_after_forward defaults to true (torchtitan: not pp).
  StageComm comm = stage_communication(arch, shape_of(4096), 2, layout, groups, bytes);
  // forward gather: 7/8 x (1,000,000 x 8) = 7,000,000; backward gather without the root
  // unit: 7/8 x (900,000 x 8) = 6,300,000; reduce-scatter 7/8 x 8,000,000 = 7,000,000.
  CHECK(bytes_of(comm, CommRole::Fsdp, Collective::AllGather) == 7000000 + 6300000);
  CHECK(bytes_of(comm, CommRole::Fsdp, Collective::ReduceScatter) == 7000000);
  CHECK(comm.bytes == 20300000);
  // 4 micro-batches without a pipeline: every one gathers twice and reduce-scatters.
  layout.microbatches = 4;
  comm = stage_communication(arch, shape_of(4096), 2, layout, groups, bytes);
  CHECK(comm.bytes == 4 * 20300000);
  // reshard_after_forward false: backward reuses the forward's gathered params.
  layout.reshard_after_forward = false;
  comm = stage_communication(arch, shape_of(4096), 2, layout, groups, bytes);
  CHECK(comm.bytes == 4 * 14000000);
  // HSDP: the grad shard all-reduced over 2 replicas: 2 x 1/2 x 1,000,000 per sync.
  CommGroups hsdp = groups;
  hsdp.of(CommRole::Replicate).size = 2;
  comm = stage_communication(arch, shape_of(4096), 2, layout, hsdp, bytes);
  CHECK(bytes_of(comm, CommRole::Replicate, Collective::AllReduce) == 4 * 1000000);
}

TEST_CASE("comm: pipeline: one gather and one reduce-scatter per step (torch pipelining)") {
  const ActivationArch arch = llama(4096, 32, 8, 14336);
  StageCommBytes bytes = dense_stage(8);
  bytes.stage = 1;
  bytes.fsdp_param_bytes = 1000000;
  bytes.fsdp_grad_bytes = 1000000;
  CommGroups groups = groups_with(CommRole::Fsdp, 4);
  groups.of(CommRole::Pp).size = 4;
  CommLayout layout;
  layout.pp = 4;
  layout.microbatches = 8;
  const StageComm comm = stage_communication(arch, shape_of(8192), 2, layout, groups, bytes);
  // reshard_after_forward false under PP: one gather 3/4 x 4,000,000, one reduce-scatter.
  CHECK(bytes_of(comm, CommRole::Fsdp, Collective::AllGather) == 3000000);
  CHECK(bytes_of(comm, CommRole::Fsdp, Collective::ReduceScatter) == 3000000);
  // A middle stage sends its activation forward and its input gradient backward each
  // micro-batch: B = e T h = 2 x 8192 x 4096 = 67,108,864, 2 x 8 sends.
  CHECK(bytes_of(comm, CommRole::Pp, Collective::SendRecv) == 16 * std::int64_t{67108864});
  // The first stage only sends forward, the last only backward.
  bytes.stage = 0;
  CHECK(stage_communication(arch, shape_of(8192), 2, layout, groups, bytes).terms.back().name ==
        "pp.send_activation");
  bytes.stage = 3;
  const StageComm last = stage_communication(arch, shape_of(8192), 2, layout, groups, bytes);
  CHECK(bytes_of(last, CommRole::Pp, Collective::SendRecv) == 8 * std::int64_t{67108864});
  // Interleaved, 2 model chunks per stage: stage 0 sends 2 x 8 forward, 1 x 8 backward.
  layout.virtual_stages = 2;
  bytes.stage = 0;
  const StageComm inter = stage_communication(arch, shape_of(8192), 2, layout, groups, bytes);
  CHECK(bytes_of(inter, CommRole::Pp, Collective::SendRecv) == 24 * std::int64_t{67108864});
}

TEST_CASE("comm: GQA (Llama-3.1-8B) TP 8: Korthikanti's 4 all-reduces per layer") {
  const ActivationArch arch = llama(4096, 32, 8, 14336);
  const CommGroups groups = groups_with(CommRole::Tp, 8);
  CommLayout layout;
  layout.degrees.tp = 8;
  // B = e T h = 2 x 8192 x 4096 = 67,108,864; an all-reduce sends 2 x 7/8 x B =
  // 117,440,512; 2 forward + 2 backward per layer, 32 layers: 128 x 117,440,512.
  StageComm comm = stage_communication(arch, shape_of(8192), 2, layout, groups, dense_stage(32));
  CHECK(bytes_of(comm, CommRole::Tp, Collective::AllReduce) == 128 * std::int64_t{117440512});
  // Sequence parallel: each all-reduce is an all-gather + a reduce-scatter (7/8 B each).
  layout.degrees.sequence_parallel = true;
  comm = stage_communication(arch, shape_of(8192), 2, layout, groups, dense_stage(32));
  CHECK(bytes_of(comm, CommRole::Tp, Collective::AllGather) == 128 * std::int64_t{58720256});
  CHECK(bytes_of(comm, CommRole::Tp, Collective::ReduceScatter) == 128 * std::int64_t{58720256});
  CHECK(role_bytes(comm, CommRole::Tp) == 128 * std::int64_t{117440512});
  layout.degrees.sequence_parallel = false;
  // torch parallelize_module on unfused q, k, v, gate, up: 5 input-gradient all-reduces in
  // backward, 2 in forward: 7 x 32.
  layout.tp_per_linear = true;
  comm = stage_communication(arch, shape_of(8192), 2, layout, groups, dense_stage(32));
  CHECK(bytes_of(comm, CommRole::Tp, Collective::AllReduce) == 224 * std::int64_t{117440512});
  layout.tp_per_linear = false;
  // Full recompute runs each layer's forward again: 6 per layer.
  comm = stage_communication(arch, shape_of(8192), 2, layout, groups,
                             dense_stage(32, Recompute::Full));
  CHECK(bytes_of(comm, CommRole::Tp, Collective::AllReduce) == 192 * std::int64_t{117440512});
  // Vocab-parallel embedding and lm_head: one all-reduce of B each, and the parallel
  // loss's 3 fp32 statistics per token: 3 x 2 x 7/8 x 4 x 8192 = 172,032.
  layout.vocab_parallel = true;
  comm = stage_communication(arch, shape_of(8192), 2, layout, groups, dense_stage(32));
  CHECK(bytes_of(comm, CommRole::Tp, Collective::AllReduce) ==
        130 * std::int64_t{117440512} + 172032);
}

TEST_CASE("comm: GQA context parallel 2 x TP 8: K and V all-gathered per layer") {
  const ActivationArch arch = llama(4096, 32, 8, 14336);
  CommGroups groups = groups_with(CommRole::Cp, 2);
  groups.of(CommRole::Tp).size = 8;
  CommLayout layout;
  layout.degrees.tp = 8;
  layout.degrees.cp = 2;
  const StageComm comm =
      stage_communication(arch, shape_of(8192), 2, layout, groups, dense_stage(32));
  // T = 8192 / 2 = 4096 tokens on the rank; K and V of all cp ranks: B = e (cp T) 2 a_kv d
  // / t = 2 x 8192 x 2048 / 8 = 4,194,304; a gather sends 1/2 B = 2,097,152; forward and
  // backward gather (64) and the gradients' return (32): 96 x 2,097,152.
  CHECK(bytes_of(comm, CommRole::Cp, Collective::AllGather) == 64 * std::int64_t{2097152});
  CHECK(bytes_of(comm, CommRole::Cp, Collective::ReduceScatter) == 32 * std::int64_t{2097152});
  // TP's B halves with the sequence: 2 x 4096 x 4096 = 33,554,432, 2 x 7/8 = 58,720,256.
  CHECK(bytes_of(comm, CommRole::Tp, Collective::AllReduce) == 128 * std::int64_t{58720256});
}

TEST_CASE("comm: MoE (Mixtral-8x7B) EP 8: dispatch and combine all-to-all") {
  ActivationArch arch = llama(4096, 32, 8, 14336);
  arch.experts = 8;
  arch.top_k = 2;
  arch.moe_intermediate = 14336;
  StageCommBytes bytes;
  bytes.layers.count[1][0] = 32;
  const CommGroups groups = groups_with(CommRole::Ep, 8);
  CommLayout layout;
  layout.ep = 8;
  // B = T k h e = 4096 x 2 x 4096 x 2 = 67,108,864; 7/8 B = 58,720,256 per all-to-all; 4
  // per MoE layer (dispatch, combine, and both in backward): 128 x 58,720,256.
  StageComm comm = stage_communication(arch, shape_of(4096), 2, layout, groups, bytes);
  CHECK(bytes_of(comm, CommRole::Ep, Collective::AllToAll) == 128 * std::int64_t{58720256});
  // Capacity factor 1.25: every expert receives its full capacity: B x 1.25.
  TrainingShape capped = shape_of(4096);
  capped.moe.capacity_factor = 1.25;
  comm = stage_communication(arch, capped, 2, layout, groups, bytes);
  CHECK(bytes_of(comm, CommRole::Ep, Collective::AllToAll) == 128 * std::int64_t{73400320});
}

TEST_CASE("comm: MLA (DeepSeek-V3) context parallel 2: the expanded K and V") {
  ActivationArch arch = llama(7168, 128, 128, 18432);
  arch.kv_lora_rank = 512;
  arch.q_lora_rank = 1536;
  arch.qk_nope_head_dim = 128;
  arch.qk_rope_head_dim = 64;
  arch.v_head_dim = 128;
  const CommGroups groups = groups_with(CommRole::Cp, 2);
  CommLayout layout;
  layout.degrees.cp = 2;
  const StageComm comm =
      stage_communication(arch, shape_of(4096), 2, layout, groups, dense_stage(1));
  // K: 128 heads x (128 + 64), V: 128 x 128 = 40,960 per token; B = 2 x (2 x 2048) x 40,960
  // = 335,544,320; a gather sends 1/2 B; 2 gathers per layer.
  CHECK(bytes_of(comm, CommRole::Cp, Collective::AllGather) == 2 * std::int64_t{167772160});
}

TEST_CASE("comm: plain data parallel and ZeRO-1 over 8 ranks, tied ends across stages") {
  const ActivationArch arch = llama(4096, 32, 8, 14336);
  StageCommBytes bytes = dense_stage(4);
  bytes.replicated_grad_bytes = 1000;
  bytes.replicated_param_bytes = 1000;
  CommGroups groups = groups_with(CommRole::DataParallel, 8);
  CommLayout layout;
  layout.microbatches = 4;  // DDP syncs once per step
  StageComm comm = stage_communication(arch, shape_of(1024), 2, layout, groups, bytes);
  CHECK(bytes_of(comm, CommRole::DataParallel, Collective::AllReduce) == 1750);  // 2 x 7/8 x 1000
  groups.of(CommRole::Zero).size = 8;
  layout.zero_stage = 1;
  comm = stage_communication(arch, shape_of(1024), 2, layout, groups, bytes);
  CHECK(bytes_of(comm, CommRole::Zero, Collective::ReduceScatter) == 875);
  CHECK(bytes_of(comm, CommRole::Zero, Collective::AllGather) == 875);
  CHECK(bytes_of(comm, CommRole::DataParallel, Collective::AllReduce) == 0);
  bytes.tied_grad_bytes = 4096;
  groups.of(CommRole::TiedSync).size = 2;
  comm = stage_communication(arch, shape_of(1024), 2, layout, groups, bytes);
  CHECK(bytes_of(comm, CommRole::TiedSync, Collective::AllReduce) == 4096);
}

TEST_CASE("comm: monotonic properties") {
  const ActivationArch arch = llama(4096, 32, 8, 14336);
  // More TP -> more TP bytes per rank (2 (t-1)/t B grows with t), never fewer.
  std::int64_t previous = 0;
  for (std::int64_t tp : {2, 4, 8, 16, 32}) {
    CommLayout layout;
    layout.degrees.tp = tp;
    const StageComm comm = stage_communication(arch, shape_of(8192), 2, layout,
                                               groups_with(CommRole::Tp, tp), dense_stage(32));
    CHECK(role_bytes(comm, CommRole::Tp) > previous);
    previous = role_bytes(comm, CommRole::Tp);
  }
  // A larger FSDP group over the same model sends more per rank: P (n-1)/n.
  previous = 0;
  for (std::int64_t fsdp_ranks : {2, 4, 8, 16, 64}) {
    StageCommBytes bytes = dense_stage(32);
    bytes.fsdp_param_bytes = (std::int64_t{1} << 30) / fsdp_ranks;
    bytes.fsdp_grad_bytes = bytes.fsdp_param_bytes;
    const StageComm comm = stage_communication(arch, shape_of(8192), 2, CommLayout{},
                                               groups_with(CommRole::Fsdp, fsdp_ranks), bytes);
    CHECK(comm.bytes > previous);
    previous = comm.bytes;
  }
  // Doubling seq doubles the TP, CP, EP and PP terms (linear in tokens).
  ActivationArch moe = arch;
  moe.experts = 8;
  moe.top_k = 2;
  CommGroups groups = groups_with(CommRole::Tp, 4);
  groups.of(CommRole::Cp).size = 2;
  groups.of(CommRole::Ep).size = 4;
  groups.of(CommRole::Pp).size = 2;
  CommLayout layout;
  layout.degrees.tp = 4;
  layout.degrees.cp = 2;
  layout.pp = 2;
  StageCommBytes bytes = dense_stage(8);
  bytes.layers.count[1][0] = 8;
  const StageComm one = stage_communication(moe, shape_of(4096), 2, layout, groups, bytes);
  const StageComm two = stage_communication(moe, shape_of(8192), 2, layout, groups, bytes);
  for (CommRole role : {CommRole::Tp, CommRole::Cp, CommRole::Ep, CommRole::Pp}) {
    CHECK(role_bytes(one, role) > 0);
    CHECK(role_bytes(two, role) == 2 * role_bytes(one, role));
  }
  // More recompute never communicates less (full repeats the forward's collectives).
  const StageComm none =
      stage_communication(moe, shape_of(4096), 2, layout, groups, dense_stage(8));
  const StageComm selective = stage_communication(moe, shape_of(4096), 2, layout, groups,
                                                  dense_stage(8, Recompute::Selective));
  const StageComm full =
      stage_communication(moe, shape_of(4096), 2, layout, groups, dense_stage(8, Recompute::Full));
  CHECK(selective.bytes == none.bytes);
  CHECK(full.bytes > selective.bytes);
}

TEST_CASE("comm: the shipped Llama-3.1-8B dp 8 x tp 8 (DDP + TP, vocab-parallel)") {
  const auto plan =
      plan_of("plans/llama-3.1-8b.model.yaml", "plans/llama-3.1-8b-dp8-tp8.recipe.yaml",
              "training:\n  seq_len: 8192\n  ranks_per_node: 8\n");
  const CommReport report = plan_communication(*plan, CommOptions{});
  REQUIRE(report.counted);
  CHECK(report.groups.of(CommRole::Tp).size == 8);
  CHECK(report.groups.of(CommRole::Tp).axes == "tp");
  CHECK_FALSE(report.groups.of(CommRole::Tp).crosses_nodes);  // tp is the fastest axis: one node
  CHECK(report.groups.of(CommRole::DataParallel).size == 8);
  CHECK(report.groups.of(CommRole::DataParallel).crosses_nodes);
  CHECK(report.groups.of(CommRole::Fsdp).size == 1);
  CHECK(report.layout.vocab_parallel);
  // Every rank holds the same bytes (even splits): one class.
  REQUIRE(report.classes.size() == 1);
  const StageComm& comm = report.classes.front().comm;
  // DDP: 2 x 7/8 x the rank's local bf16 grads (= its parameter bytes).
  const std::int64_t local = rank_bytes(*plan).param_bytes[0];
  CHECK(bytes_of(comm, CommRole::DataParallel, Collective::AllReduce) ==
        ring_bytes_sent(Collective::AllReduce, local, 8));
  // TP: 4 per layer x 32 + embedding + lm_head = 130 all-reduces of 2 x 7/8 x 67,108,864,
  // plus the parallel loss's statistics (172,032).
  CHECK(bytes_of(comm, CommRole::Tp, Collective::AllReduce) ==
        130 * std::int64_t{117440512} + 172032);
  CHECK(report.total.max == comm.bytes);
  CHECK(report.peak == comm.bytes);
  CHECK(report.peak_ranks.size() == 64);
}

TEST_CASE("comm: the shipped Llama-3.1-70B HSDP 4 x 8 x TP 8: FSDP bytes are the padded shards") {
  const auto plan =
      plan_of("plans/llama-3.1-70b.model.yaml", "plans/llama-3.1-70b-hsdp.recipe.yaml",
              "training:\n  seq_len: 8192\n  sequence_parallel: true\n"
              "  ranks_per_node: 8\n");
  const CommReport report = plan_communication(*plan, CommOptions{});
  REQUIRE(report.counted);
  CHECK(report.groups.of(CommRole::Fsdp).size == 8);
  CHECK(report.groups.of(CommRole::Fsdp).axes == "dp_shard");
  CHECK(report.groups.of(CommRole::Fsdp).crosses_nodes);  // stride 8: one rank per node
  CHECK(report.groups.of(CommRole::Replicate).size == 4);
  CHECK(report.groups.of(CommRole::Replicate).axes == "dp_replicate");
  CHECK_FALSE(report.groups.of(CommRole::Tp).crosses_nodes);
  const MemoryReport memory = compute_memory(*plan);
  for (const CommClass& cls : report.classes) {
    const std::int64_t rank = cls.ranks.first();
    std::int64_t forward = 0;
    std::int64_t hsdp = 0;
    for (const CommTerm& term : cls.comm.terms) {
      if (term.name == "fsdp.forward_all_gather") forward = term.bytes;
      if (term.name == "fsdp.hsdp_grad_all_reduce") hsdp = term.bytes;
    }
    // Every param is FSDP-sharded: the forward gather sends 7 x the rank's padded shards,
    // the replicate all-reduce 2 x 3/4 x its (bf16) grad shards.
    CHECK(forward == 7 * memory.at(rank).of(MemoryKind::Params));
    CHECK(hsdp == ring_bytes_sent(Collective::AllReduce, memory.at(rank).of(MemoryKind::Grads), 4));
  }
  CHECK(report.layout.degrees.sequence_parallel);
  CHECK(report.layout.reshards());  // no pipeline: torchtitan's default
  CHECK(report.peak == report.total.max);
}

TEST_CASE("comm: the recipe's fsdp.reshard_after_forward, unless the command says otherwise") {
  // Qwen2.5-0.5B over pp 2 x dp_shard 4: unstated, torchtitan's default under PP (false).
  const std::string recipe =
      "format: shardc.recipe/v1\nmesh:\n  - {name: pp, size: 2}\n"
      "  - {name: dp_shard, size: 4}\nrules:\n  - {match: \"**\", placements: {}}\n"
      "pipeline:\n  axis: pp\n  stages: auto\nfsdp:\n  shard: dp_shard\n";
  const std::string training = "training:\n  seq_len: 4096\n  global_batch_size: 64\n";
  auto report_of = [&](const std::string& fsdp_extra, const CommOptions& options) {
    DiagnosticSink sink;
    auto model = parse_model({"model.yaml", slurp("plans/qwen2.5-0.5b.model.yaml")}, sink);
    auto parsed = parse_recipe({"recipe.yaml", recipe + fsdp_extra + training}, sink);
    REQUIRE(model);
    REQUIRE(parsed);
    auto plan = build_plan(*model, *parsed, sink);
    REQUIRE(plan);
    const CommReport report = plan_communication(*plan, options);
    REQUIRE(report.counted);
    REQUIRE_FALSE(report.classes.empty());
    return report;
  };
  auto gathers = [](const CommReport& report) {
    std::int64_t calls = 0;
    for (const CommTerm& term : report.classes.front().comm.terms)
      if (term.role == CommRole::Fsdp && term.collective == Collective::AllGather)
        calls += term.calls;
    return calls;
  };
  const CommReport by_default = report_of("", CommOptions{});
  CHECK_FALSE(by_default.layout.reshards());
  CHECK(std::string(by_default.layout.reshard_after_forward_from) == "torchtitan default");
  // Stated in the recipe: every forward and backward gathers again.
  const std::string stated = "  reshard_after_forward: true\n";
  const CommReport from_recipe = report_of(stated, CommOptions{});
  CHECK(from_recipe.layout.reshards());
  CHECK(std::string(from_recipe.layout.reshard_after_forward_from) == "recipe");
  CHECK(gathers(from_recipe) > gathers(by_default));
  // The command's option wins over the recipe.
  CommOptions options;
  options.reshard_after_forward = false;
  const CommReport from_option = report_of(stated, options);
  CHECK_FALSE(from_option.layout.reshards());
  CHECK(std::string(from_option.layout.reshard_after_forward_from) == "--reshard-after-forward");
  CHECK(gathers(from_option) == gathers(by_default));
}

TEST_CASE("comm: no training shape, nothing counted, and the note says why") {
  const auto plan =
      plan_of("plans/llama-3.1-8b.model.yaml", "plans/llama-3.1-8b-dp8-tp8.recipe.yaml", "");
  const CommReport report = plan_communication(*plan, CommOptions{});
  CHECK_FALSE(report.counted);
  CHECK(report.note.find("training.seq_len") != std::string::npos);
}
