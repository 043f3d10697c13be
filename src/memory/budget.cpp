// The memory budget check (E-BUDGET): the worst rank, its breakdown, and
// the FSDP degree that would bring it under the budget.
#include <array>
#include <cmath>
#include <cstdio>

#include "shardc/byte_size.hpp"
#include "shardc/limits.hpp"
#include "shardc/memory.hpp"

namespace shardc {
namespace {

// "1.50 KiB", "17.24 GiB": binary units, two decimals.
std::string gib(std::int64_t bytes) {
  constexpr std::array<const char*, 5> units = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024.0;
  std::size_t u = 0;
  while (v >= 1024.0 && u + 1 < units.size()) {
    v /= 1024.0;
    ++u;
  }
  std::array<char, 48> buf{};
  std::snprintf(buf.data(), buf.size(), "%.2f %s", v, units[u]);
  return buf.data();
}

std::string breakdown(const RankMemory& rm) {
  std::string s;
  for (std::size_t k = 0; k < kMemoryKinds; ++k) {
    if (k > 0) s += ", ";
    s += std::string(memory_kind_name(static_cast<MemoryKind>(k))) + " " + gib(rm.bytes[k]);
  }
  return s;
}

// ZeRO-1/2: master weights and optimizer state are already sharded; what
// stays whole is the params (and under stage 1 the grads).
std::string zero_remedy(const Plan& plan, const RankMemory& rm) {
  const int stage = plan.zero.stage;
  std::string s = "with ZeRO-" + std::to_string(stage) + " (`training." +
                  plan.training.zero.spelling + "`) over " +
                  std::to_string(plan.zero.dense.degree) + " DP ranks";
  if (plan.zero.has_experts) {
    s += " (experts over " + std::to_string(plan.zero.expert.degree) + ")";
  }
  s += " this rank keeps its params (" + gib(rm.of(MemoryKind::Params)) + ")";
  if (stage == 1) {
    s += " and grads (" + gib(rm.of(MemoryKind::Grads)) +
         ") whole: `zero: 2` shards the grads, `fsdp` (ZeRO-3) also the params";
  } else {
    s += " whole: `fsdp` (ZeRO-3) shards them too";
  }
  return s +
         "; or more DP ranks for the sharded state, more tp/pp/ep for all of it, fewer optimizer "
         "bytes (`state_dtype: bfloat16`)";
}

// The FSDP degree at which the rank's FSDP-scaled state (which shrinks as
// 1 / degree) fits next to the rest, all-gather buffers kept as they are.
std::string remedy(const MemoryReport& m, const RankMemory& rm, std::int64_t budget) {
  const std::int64_t transient = m.activations_counted ? rm.step_transient
                                                       : std::max(rm.of(MemoryKind::Fsdp2AllGather),
                                                                  rm.of(MemoryKind::MuonAllGather));
  const std::int64_t fixed = std::max<std::int64_t>(0, rm.total - rm.fsdp_scaled - transient);
  const std::int64_t room = budget - fixed - transient;
  const std::string rest =
      "; or shrink the rest: fewer optimizer bytes (`state_dtype: bfloat16`, "
      "`master_weights: none`), more tp/pp/ep";
  if (rm.fsdp_scaled == 0 || room <= 0) {
    const std::string buffers =
        m.activations_counted ? "the activations and all-gather buffers" : "the all-gather buffers";
    const std::string need = fixed == 0 ? buffers + " alone need " + gib(transient)
                                        : "the state FSDP does not shard (" + gib(fixed) +
                                              ") and " + buffers + " (" + gib(transient) +
                                              ") alone need " + gib(fixed + transient);
    return "no FSDP degree brings this rank under the budget: " + need + rest;
  }
  const bool fsdp = m.fsdp_degree > 1 || m.expert_fsdp_degree > 1;
  const double factor = static_cast<double>(rm.fsdp_scaled) / static_cast<double>(room);
  const auto need = [factor](std::int64_t degree) {
    return static_cast<std::int64_t>(std::ceil(static_cast<double>(degree) * factor));
  };
  std::string s = "the FSDP-sharded state of this rank (" + gib(rm.fsdp_scaled) + ") must fit in " +
                  gib(room) + ": ";
  if (!fsdp) {
    s += "FSDP over at least " + std::to_string(need(1)) +
         " ranks would bring it under (plus the FSDP2 all-gather buffers it adds)";
  } else {
    s += "an FSDP degree of at least " + std::to_string(need(m.fsdp_degree)) + " (now " +
         std::to_string(m.fsdp_degree) + ")";
    if (m.expert_fsdp_degree > 1) {
      s += ", expert FSDP degree at least " + std::to_string(need(m.expert_fsdp_degree)) +
           " (now " + std::to_string(m.expert_fsdp_degree) + ")";
    }
    s += " would bring it under";
  }
  return s + rest;
}

}  // namespace

bool check_memory_world(const Plan& plan, const SourceLoc& loc, DiagnosticSink& sink) {
  if (plan.world_size <= limits::kMaxMemoryReportWorld) return true;
  Diagnostic d;
  d.code = DiagCode::EMemoryWorld;
  d.loc = loc;
  d.message = "the per-rank memory report of " + std::to_string(plan.world_size) +
              " ranks is above the limit of " + std::to_string(limits::kMaxMemoryReportWorld) +
              " ranks (2^20): it keeps a row per rank";
  d.hint =
      "`validate` without a budget plans this world; for memory, budgets, inspect and compile "
      "use a smaller world with the same per-rank layout";
  sink.report(std::move(d));
  return false;
}

void check_budget(const Plan& plan, const MemoryReport& m, std::int64_t budget,
                  const SourceLoc& loc, DiagnosticSink& sink) {
  if (m.ranks.empty() || m.peak <= budget) return;
  std::vector<std::int64_t> over;
  for (std::size_t r = 0; r < m.ranks.size(); ++r)
    if (m.ranks[r].total > budget) over.push_back(static_cast<std::int64_t>(r));
  std::string over_text = RankSet::from_sorted(over).to_string();
  if (over_text.size() > 120) over_text = over_text.substr(0, 117) + "...";
  const std::int64_t worst = m.peak_ranks.first();
  const RankMemory& rm = m.ranks[static_cast<std::size_t>(worst)];
  std::string worst_text = m.peak_ranks.to_string();
  if (worst_text.size() > 80) worst_text = worst_text.substr(0, 77) + "...";
  Diagnostic d;
  d.code = DiagCode::EBudget;
  d.loc = loc;
  d.message = "rank " + std::to_string(worst) + " (stage " +
              std::to_string(plan.stage_of_rank(worst)) + ", " + rank_coords_text(plan, worst) +
              ") needs " + gib(rm.total) + ", over the budget of " + byte_size_text(budget) +
              " by " + gib(rm.total - budget) + "; the worst ranks: " + worst_text + "; " +
              std::to_string(over.size()) + " of " + std::to_string(plan.world_size) +
              " ranks are over: " + over_text;
  const std::string activations = m.activations_counted
                                      ? ", activations " + gib(rm.activations) +
                                            " (more `training.recompute` or tp/cp shrinks them); "
                                      : " (activations not counted); ";
  d.hint = "rank " + std::to_string(worst) + ": " + breakdown(rm) + activations +
           (plan.zero.stage == 1 || plan.zero.stage == 2 ? zero_remedy(plan, rm)
                                                         : remedy(m, rm, budget));
  sink.report(std::move(d));
}

}  // namespace shardc
