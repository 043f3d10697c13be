// The memory budget check (E-BUDGET): the worst rank, its breakdown, and
// the FSDP degree that would bring it under the budget.
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "memory/memory.hpp"
#include "support/byte_size.hpp"
#include "support/limits.hpp"

namespace shardc {
namespace {

std::string breakdown(const RankMemory& rm) {
  std::string text;
  for (std::size_t k = 0; k < kMemoryKinds; ++k) {
    if (k > 0) text += ", ";
    text += std::string(memory_kind_name(static_cast<MemoryKind>(k))) + " " +
            binary_bytes_text(rm.bytes[k]);
  }
  // `training.offload`: those bytes are in the rows above but not on the device.
  if (rm.host > 0) text += " (" + binary_bytes_text(rm.host) + " of them offloaded to the host)";
  return text;
}

// ZeRO-1/2: master weights and optimizer state are already sharded; what
// stays whole is the params (and under stage 1 the grads).
std::string zero_remedy(const Plan& plan, const RankMemory& rm) {
  const int stage = plan.zero.stage;
  std::string text = "with ZeRO-" + std::to_string(stage) + " (`training." +
                     plan.training.zero.spelling + "`) over " +
                     std::to_string(plan.zero.dense.degree) + " DP ranks";
  if (plan.zero.has_experts) {
    text += " (experts over " + std::to_string(plan.zero.expert.degree) + ")";
  }
  text += " this rank keeps its params (" + binary_bytes_text(rm.of(MemoryKind::Params)) + ")";
  if (stage == 1) {
    // `grads` holds the fp32 copy of the grad shard too when grads are narrower than the
    // master (memory.hpp grad_copy_bytes). Megatron's distributed optimizer has no stage 2.
    text += " and its grads whole (grads " + binary_bytes_text(rm.of(MemoryKind::Grads)) +
            ", with the fp32 copy of its grad shard where grads are narrower than the master): " +
            (plan.training.zero.spelling == "distributed_optimizer"
                 ? std::string("Megatron's distributed optimizer has no stage 2; `fsdp` "
                               "(Megatron FSDP, ZeRO-3) shards grads and params")
             : plan.num_stages > 1
                 ? std::string("`fsdp` (ZeRO-3, which torch's pipelining runs) shards "
                               "grads and params; DeepSpeed refuses ZeRO-2 with a pipeline")
                 : std::string("`zero: 2` shards the grads, `fsdp` (ZeRO-3) also the params"));
  } else {
    text += " whole: `fsdp` (ZeRO-3) shards them too";
  }
  // Trial D 6: with the optimizer offloaded its state is on the host: neither its dtype nor
  // its sharding changes the device's bytes.
  if (plan.training.shape.offload.optimizer)
    return text +
           "; or more tp/pp/ep (the optimizer state is offloaded to the host: its dtype "
           "and its sharding do not change this rank's device bytes)";
  return text +
         "; or more DP ranks for the sharded state, more tp/pp/ep for all of it, fewer optimizer "
         "bytes (`state_dtype: bfloat16`)";
}

// The data-parallel capacity of a mesh: the product of its axes that no
// param of the class (`experts` or not) is split over by a rule or an
// experts entry (FSDP and HSDP axes count, they are data parallel), minus
// the pipeline axis. An FSDP degree is possible on this world (the other
// sizes kept) exactly when it divides the capacity (the rest replicate:
// HSDP), as torch's init_device_mesh needs the axis sizes to multiply to
// the world size.
std::int64_t dp_capacity(const Plan& plan, bool experts) {
  const Mesh& mesh = experts && plan.expert ? *plan.expert : plan.dense;
  const int pp = experts && plan.expert ? plan.expert_pipeline_axis : plan.pipeline_axis;
  std::vector<bool> model_parallel(mesh.axes.size(), false);
  for (const PlannedParam& param : plan.params) {
    if ((param.mesh == MeshKind::Expert || stacked_expert(param)) != experts) continue;
    for (const auto& chain : param.geometry.per_dim)
      for (const DimSplit& split : chain)
        if (!split.fsdp)
          for (int axis : split.axes) model_parallel[static_cast<std::size_t>(axis)] = true;
  }
  std::int64_t capacity = 1;
  for (std::size_t a = 0; a < mesh.axes.size(); ++a)
    if (!model_parallel[a] && static_cast<int>(a) != pp) capacity *= mesh.axes[a].size;
  return capacity;
}

// The smallest divisor of `capacity` that is at least `need`, or 0.
std::int64_t possible_degree(std::int64_t need, std::int64_t capacity) {
  for (std::int64_t d = std::max<std::int64_t>(1, need); d <= capacity; ++d)
    if (capacity % d == 0) return d;
  return 0;
}

// "an FSDP degree of 16 (now 8)", or why none on this world size suffices.
std::string degree_text(const char* what, std::int64_t need, std::int64_t now,
                        std::int64_t capacity, std::int64_t world) {
  const std::int64_t degree = possible_degree(need, capacity);
  if (degree == 0) {
    return std::string("no ") + what + " degree on " + std::to_string(world) +
           " ranks suffices (it would need " + std::to_string(need) + ", and these " +
           std::to_string(world) + " ranks have " + std::to_string(capacity) +
           " data-parallel ranks beside the model-parallel axes)";
  }
  std::string text = std::string("an ") + what + " degree of " + std::to_string(degree) +
                     (now > 1 ? " (now " + std::to_string(now) + ")" : "");
  if (degree != need)
    text += " (at least " + std::to_string(need) + " is needed; the degrees possible on " +
            std::to_string(world) + " ranks divide " + std::to_string(capacity) + ")";
  return text;
}

// The FSDP degree at which the rank's FSDP-scaled state (which shrinks as
// 1 / degree) fits next to the rest, all-gather buffers kept as they are.
// Only degrees possible on the plan's world size are offered (dp_capacity).
std::string remedy(const Plan& plan, const MemoryReport& report, const RankMemory& rm,
                   std::int64_t budget) {
  const std::int64_t transient =
      report.activations_counted
          ? rm.step_transient
          : std::max(rm.of(MemoryKind::Fsdp2AllGather), rm.of(MemoryKind::MuonAllGather));
  const std::int64_t fixed = std::max<std::int64_t>(0, rm.total - rm.fsdp_scaled - transient);
  const std::int64_t room = budget - fixed - transient;
  const std::string rest =
      plan.training.shape.offload.optimizer
          ? "; or shrink the rest: more tp/pp/ep (the optimizer state is offloaded to the host)"
          : "; or shrink the rest: fewer optimizer bytes (`state_dtype: bfloat16`, "
            "`master_weights: none`), more tp/pp/ep";
  if (rm.fsdp_scaled == 0 || room <= 0) {
    const std::string buffers = report.activations_counted
                                    ? "the activations and all-gather buffers"
                                    : "the all-gather buffers";
    const std::string need = fixed == 0
                                 ? buffers + " alone need " + binary_bytes_text(transient)
                                 : "the state FSDP does not shard (" + binary_bytes_text(fixed) +
                                       ") and " + buffers + " (" + binary_bytes_text(transient) +
                                       ") alone need " + binary_bytes_text(fixed + transient);
    return "no FSDP degree brings this rank under the budget: " + need + rest;
  }
  const bool fsdp = report.fsdp_degree > 1 || report.expert_fsdp_degree > 1;
  const double factor = static_cast<double>(rm.fsdp_scaled) / static_cast<double>(room);
  const auto need = [factor](std::int64_t degree) {
    return static_cast<std::int64_t>(std::ceil(static_cast<double>(degree) * factor));
  };
  std::string text = "the FSDP-sharded state of this rank (" + binary_bytes_text(rm.fsdp_scaled) +
                     ") must fit in " + binary_bytes_text(room) + ": ";
  const std::int64_t world = plan.world_size;
  const std::int64_t dense_capacity = dp_capacity(plan, false);
  if (!fsdp) {
    const std::int64_t degree = possible_degree(need(1), dense_capacity);
    if (degree == 0) {
      text += degree_text("FSDP", need(1), 1, dense_capacity, world);
    } else {
      text += "FSDP over " + std::to_string(degree) +
              " ranks would bring it under (plus the FSDP2 all-gather buffers it adds)";
      if (degree != need(1))
        text += " (at least " + std::to_string(need(1)) + " are needed; the degrees possible on " +
                std::to_string(world) + " ranks divide " + std::to_string(dense_capacity) + ")";
    }
  } else {
    const bool dense_fits = possible_degree(need(report.fsdp_degree), dense_capacity) > 0;
    text +=
        degree_text("FSDP", need(report.fsdp_degree), report.fsdp_degree, dense_capacity, world);
    bool expert_fits = true;
    if (report.expert_fsdp_degree > 1) {
      const std::int64_t expert_capacity = dp_capacity(plan, true);
      expert_fits = possible_degree(need(report.expert_fsdp_degree), expert_capacity) > 0;
      text += ", " + degree_text("expert FSDP", need(report.expert_fsdp_degree),
                                 report.expert_fsdp_degree, expert_capacity, world);
    }
    if (dense_fits && expert_fits) text += " would bring it under";
  }
  return text + rest;
}

}  // namespace

bool check_memory_world(const Plan& plan, const SourceLoc& loc, std::string_view what,
                        DiagnosticSink& sink) {
  if (plan.world_size <= limits::kMaxMemoryReportWorld) return true;
  Diagnostic diag;
  diag.code = DiagCode::EMemoryWorld;
  diag.loc = loc;
  diag.message = std::string(what) + " of " + std::to_string(plan.world_size) +
                 " ranks keeps a row per rank, above the limit of " +
                 std::to_string(limits::kMaxMemoryReportWorld) + " ranks (2^20)";
  diag.hint =
      "`validate`, `memory` and `inspect --rank` answer this world per class of ranks; for "
      "per-rank files use a smaller world with the same per-rank layout";
  sink.report(std::move(diag));
  return false;
}

void refuse_memory_classes(const Plan& plan, const SourceLoc& loc, const std::string& why,
                           DiagnosticSink& sink) {
  Diagnostic diag;
  diag.code = DiagCode::EMemoryWorld;
  diag.loc = loc;
  diag.message = "the memory report of " + std::to_string(plan.world_size) +
                 " ranks cannot be computed per class of ranks: " + why;
  diag.hint = "use a world of at most " + std::to_string(limits::kMaxMemoryReportWorld) +
              " ranks (2^20) with the same per-rank layout; `validate` without a budget plans this "
              "world";
  sink.report(std::move(diag));
}

void check_budget(const Plan& plan, const MemoryReport& report, std::int64_t budget,
                  const SourceLoc& loc, DiagnosticSink& sink) {
  if (report.classes.empty() || report.peak <= budget) return;
  std::vector<Progression> over_runs;
  std::int64_t over_count = 0;
  for (const MemoryClass& memory_class : report.classes) {
    if (memory_class.memory.total <= budget) continue;
    over_runs.insert(over_runs.end(), memory_class.ranks.runs().begin(),
                     memory_class.ranks.runs().end());
    over_count += memory_class.count;
  }
  std::string over_text = RankSet::from_disjoint(std::move(over_runs)).to_string();
  if (over_text.size() > 120) over_text = over_text.substr(0, 117) + "...";
  const std::int64_t worst = report.peak_ranks.first();
  const RankMemory& rm = report.at(worst);
  std::string worst_text = report.peak_ranks.to_string();
  if (worst_text.size() > 80) worst_text = worst_text.substr(0, 77) + "...";
  Diagnostic diag;
  diag.code = DiagCode::EBudget;
  diag.loc = loc;
  diag.message = "rank " + std::to_string(worst) + " (stage " +
                 std::to_string(plan.stage_of_rank(worst)) + ", " + rank_coords_text(plan, worst) +
                 ") needs " + binary_bytes_text(rm.total) + ", over the budget of " +
                 byte_size_text(budget) + " by " + binary_bytes_text(rm.total - budget) +
                 "; the worst ranks: " + worst_text + "; " + std::to_string(over_count) + " of " +
                 std::to_string(plan.world_size) + " ranks are over: " + over_text;
  const std::string activations = report.activations_counted
                                      ? ", activations " + binary_bytes_text(rm.activations) +
                                            " (more `training.recompute` or tp/cp shrinks them); "
                                      : " (activations not counted); ";
  diag.hint = "rank " + std::to_string(worst) + ": " + breakdown(rm) + activations +
              (plan.zero.stage == 1 || plan.zero.stage == 2 ? zero_remedy(plan, rm)
                                                            : remedy(plan, report, rm, budget));
  sink.report(std::move(diag));
}

}  // namespace shardc
