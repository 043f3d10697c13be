// `shardc memory`: per-rank training memory (src/memory/memory.hpp) as a
// table by stage x kind (GiB, min / median / max over the stage's ranks) or
// JSON, the peak rank, and the budget verdict.
#include <array>
#include <cstdio>
#include <ostream>

#include "backend/backend.hpp"
#include "driver/rank_option.hpp"
#include "driver/session.hpp"
#include "driver/text_format.hpp"
#include "support/byte_size.hpp"
#include "support/utf8.hpp"

namespace shardc {
namespace {

std::string gib(std::int64_t bytes) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%.2f",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf.data();
}

std::string dtype_or(const std::optional<DType>& d, const char* fallback) {
  return d ? std::string(dtype_name(*d)) : std::string(fallback);
}

void print_assumptions(const Plan& plan, const MemoryReport& m, std::ostream& out) {
  const TrainingSpec& t = plan.training;
  out << "memory per rank: " << printable(plan.model_name) << " on " << plan.world_size
      << " ranks (" << driver::mesh_text(plan.dense) << "), " << plan.num_stages
      << (plan.num_stages == 1 ? " stage\n" : " stages\n");
  out << "training: optimizer " << optimizer_name(t.optimizer) << ", master_weights "
      << dtype_or(t.master_weights, "none") << ", grad_dtype " << dtype_or(t.grad_dtype, "= param")
      << ", state_dtype " << dtype_or(t.state_dtype, t.master_weights ? "= master" : "= param")
      << "\n";
  if (plan.zero.stage > 0) {
    auto group = [&plan](const ZeroGroup& g) {
      const Mesh& mesh = g.mesh == MeshKind::Expert && plan.expert ? *plan.expert : plan.dense;
      std::string axes;
      for (int a : g.axes)
        axes += (axes.empty() ? "" : " x ") + mesh.axes[static_cast<std::size_t>(a)].name;
      return std::to_string(g.degree) + " ranks (" + (axes.empty() ? "no axis" : axes) + ")";
    };
    out << "zero: stage " << plan.zero.stage << " (training." << t.zero.spelling << "), "
        << (plan.zero.stage == 1   ? "master weights and optimizer state"
            : plan.zero.stage == 2 ? "grads, master weights and optimizer state"
                                   : "params, grads and optimizer state (FSDP)")
        << " sharded over " << group(plan.zero.dense);
    if (plan.zero.has_experts) out << "; experts over " << group(plan.zero.expert);
    out << "\n";
  }
  if (!m.fsdp2_declared && (m.fsdp_degree > 1 || m.expert_fsdp_degree > 1)) {
    out << "note: no fsdp2_allgather buffer in the recipe: FSDP2 all-gather memory is not "
           "counted (add one with the FSDP units to count it)\n";
  }
}

void print_table(const Plan& plan, const MemoryReport& m, std::ostream& out) {
  driver::TextTable table({"stage", "ranks", "kind", "min GiB", "median GiB", "max GiB"},
                          {false, true, false, true, true, true});
  for (const StageMemory& s : stage_memory(plan, m)) {
    const std::string stage = std::to_string(s.stage);
    const std::string ranks = std::to_string(s.num_ranks);
    for (std::size_t k = 0; k < kMemoryKinds; ++k) {
      const KindStats& st = s.kinds[k];
      table.add_row({k == 0 ? stage : "", k == 0 ? ranks : "",
                     memory_kind_name(static_cast<MemoryKind>(k)), gib(st.min), gib(st.median),
                     gib(st.max)});
    }
    if (m.activations_counted) {
      for (std::size_t k = 0; k < kStepKindNames.size(); ++k) {
        const KindStats& st = s.step[k];
        table.add_row({"", "", kStepKindNames[k], gib(st.min), gib(st.median), gib(st.max)});
      }
    }
    table.add_row({"", "", "total", gib(s.total.min), gib(s.total.median), gib(s.total.max)});
  }
  out << table.render();
}

// One rank's bytes by kind: "  params 2.05, grads 2.05, ... GiB".
void print_kinds(const RankMemory& rm, bool counted, std::ostream& out) {
  out << "  ";
  for (std::size_t k = 0; k < kMemoryKinds; ++k)
    out << (k > 0 ? ", " : "") << memory_kind_name(static_cast<MemoryKind>(k)) << " "
        << gib(rm.bytes[k]);
  if (counted) {
    out << ", activations " << gib(rm.activations) << ", fsdp2_reduce_scatter "
        << gib(rm.fsdp2_reduce_scatter) << ", muon_grad_copy " << gib(rm.muon_grad_copy)
        << ", host " << gib(rm.host);
  }
  out << " GiB\n";
}

// The training shape and each stage's activation terms (`--explain`: one per line).
void print_activations(const Plan& plan, const MemoryReport& m, bool explain, std::ostream& out) {
  const TrainingShape& t = plan.training.shape;
  const TrainingLayout& tl = plan.training_layout;
  out << "training shape: seq_len " << *t.seq_len << ", micro_batch_size " << t.micro_batch_size
      << ", " << tl.microbatches << " micro-batches per step (" << tl.microbatches_from
      << "), recompute " << recompute_name(t.recompute)
      << (t.recompute_ranges.empty() ? "" : " (and per-layer ranges)") << ", attention "
      << attention_impl_name(t.attention) << ", activation_dtype "
      << dtype_name(tl.activation_dtype) << ", schedule " << pipeline_schedule_name(tl.schedule)
      << "\n";
  out << "layout: tp " << tl.degrees.tp
      << (tl.degrees.sequence_parallel ? " (sequence parallel)" : "") << ", expert tp "
      << tl.degrees.expert_tp << ", cp " << tl.degrees.cp << ", dp " << tl.dp << ", pp "
      << plan.num_stages << "\n";
  if (!m.activations_counted) return;
  for (const StageActivations& sa : m.stage_activations) {
    out << "activations stage " << sa.stage << ": " << sa.layers << " layers, "
        << gib(sa.per_microbatch_bytes) << " GiB per micro-batch x " << sa.in_flight
        << (sa.virtual_stages > 1 ? " model-chunk micro-batches in flight (/ " +
                                        std::to_string(sa.virtual_stages) + " virtual stages)"
                                  : std::string(" in flight"));
    for (const ActivationTerm& term : sa.once) out << " + " << term.name << " " << gib(term.bytes);
    out << " = " << gib(sa.bytes) << " GiB\n";
    if (!explain) continue;
    for (const ActivationTerm& term : sa.per_microbatch) {
      out << "  " << term.name << ": " << term.bytes << " bytes = " << term.formula << " ("
          << term.source << ")\n";
    }
    for (const ActivationTerm& term : sa.once) {
      out << "  " << term.name << " (once): " << term.bytes << " bytes (" << term.source << ")\n";
    }
  }
}

void print_peak(const Plan& plan, const MemoryReport& m, std::optional<std::int64_t> budget,
                std::ostream& out) {
  const std::int64_t r = m.peak_ranks.first();
  const RankMemory& rm = m.at(r);
  out << "peak: " << gib(m.peak) << " GiB on rank(s) " << m.peak_ranks.to_string() << "; rank " << r
      << ": stage " << plan.stage_of_rank(r) << ", " << rank_coords_text(plan, r) << "\n";
  print_kinds(rm, m.activations_counted, out);
  if (m.activations_counted) {
    out << "total = params + grads + master_weights + optimizer_state (on the device) + "
           "max(activations + fsdp2_allgather + fsdp2_reduce_scatter, muon_allgather + "
           "muon_grad_copy); host memory apart\n";
  } else {
    out << "total = params + grads + master_weights + optimizer_state + max(fsdp2_allgather, "
           "muon_allgather)\n";
  }
  if (budget) {
    out << "budget " << byte_size_text(*budget) << ": "
        << (m.peak <= *budget ? "fits, headroom " + gib(*budget - m.peak) + " GiB"
                              : "exceeded by " + gib(m.peak - *budget) + " GiB")
        << "\n";
  }
  if (m.activations_counted) {
    out << "peak stage: " << m.peak_stage << "\n";
    out << "not counted: CUDA context, NCCL and allocator buffers, fragmentation, backward's "
           "transient activation gradients\n";
  } else {
    if (!m.activations_note.empty()) out << "note: " << m.activations_note << "\n";
    out << "not counted: "
        << "activations, CUDA context, NCCL and allocator buffers, fragmentation"
        << "\n";
  }
}

// The ranks to list (--ranks), or nullopt after printing a usage error.
std::optional<std::vector<std::int64_t>> listed_ranks(const MemoryOptions& opt, const Plan& plan,
                                                      std::ostream& err) {
  if (!opt.ranks) return std::vector<std::int64_t>{};
  return driver::parse_ranks_option(*opt.ranks, plan.world_size, err);
}

}  // namespace

ExitCode run_memory(const MemoryOptions& opt, FileSystem& fs, std::ostream& out,
                    std::ostream& err) {
  CommonOptions common = opt.common;
  common.check_budget = true;
  common.memory_report = true;
  driver::SessionScope scope(opt.common);
  driver::Session& s = *scope;
  const ExitCode code = driver::plan_or_report(common, fs, s, err);
  if (!s.plan || code == ExitCode::Usage) return code;
  const Plan& plan = *s.plan;
  if (!s.memory) return code == ExitCode::Ok ? ExitCode::Usage : code;  // refused (its diagnostic)
  const auto ranks = listed_ranks(opt, plan, err);
  if (!ranks) return ExitCode::Usage;
  if (opt.format == MemoryFormat::Json) {
    out << render_memory_json(plan, *s.memory, s.budget, *ranks);
    return code;
  }
  print_assumptions(plan, *s.memory, out);
  out << "\n";
  print_table(plan, *s.memory, out);
  out << "\n";
  if (plan.training_layout.active) {
    print_activations(plan, *s.memory, opt.explain, out);
    out << "\n";
  }
  print_peak(plan, *s.memory, s.budget, out);
  for (std::int64_t r : *ranks) {
    const RankMemory& rm = s.memory->at(r);
    out << "rank " << r << " (stage " << plan.stage_of_rank(r) << ", " << rank_coords_text(plan, r)
        << "): total " << gib(rm.total) << " GiB (" << rm.total << " bytes)\n";
    print_kinds(rm, s.memory->activations_counted, out);
  }
  return code;
}

}  // namespace shardc
