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

std::string dtype_or(const std::optional<DType>& dtype, const char* fallback) {
  return dtype ? std::string(dtype_name(*dtype)) : std::string(fallback);
}

void print_assumptions(const Plan& plan, const MemoryReport& memory, std::ostream& out) {
  const TrainingSpec& training = plan.training;
  out << "memory per rank: " << printable(plan.model_name) << " on " << plan.world_size
      << " ranks (" << driver::mesh_text(plan.dense) << "), " << plan.num_stages
      << (plan.num_stages == 1 ? " stage\n" : " stages\n");
  out << "training: optimizer " << optimizer_name(training.optimizer) << ", master_weights "
      << dtype_or(training.master_weights, "none") << ", grad_dtype "
      << dtype_or(training.grad_dtype, "= param")
      << (training.grad_dtype_default.empty() ? "" : " (" + training.grad_dtype_default + ")")
      << ", state_dtype "
      << dtype_or(training.state_dtype, training.master_weights ? "= master" : "= param") << "\n";
  if (plan.zero.stage > 0) {
    auto group = [&plan](const ZeroGroup& zero_group) {
      const Mesh& mesh =
          zero_group.mesh == MeshKind::Expert && plan.expert ? *plan.expert : plan.dense;
      std::string axes;
      for (int axis : zero_group.axes)
        axes += (axes.empty() ? "" : " x ") + mesh.axes[static_cast<std::size_t>(axis)].name;
      return std::to_string(zero_group.degree) + " ranks (" + (axes.empty() ? "no axis" : axes) +
             ")";
    };
    out << "zero: stage " << plan.zero.stage << " (training." << training.zero.spelling << "), "
        << (plan.zero.stage == 1   ? "master weights and optimizer state"
            : plan.zero.stage == 2 ? "grads, master weights and optimizer state"
                                   : "params, grads and optimizer state (FSDP)")
        << " sharded over " << group(plan.zero.dense);
    if (plan.zero.has_experts) out << "; experts over " << group(plan.zero.expert);
    out << "\n";
  }
  if (memory.fsdp2_every_unit) {
    out << "fsdp2: every unit of a rank stays gathered at the peak ("
        << (plan.num_stages > 1
                ? "a pipeline: torch.distributed.pipelining keeps each stage's units gathered and "
                  "their unsharded grads until the step's last micro-batch"
                : "reshard_after_forward: false")
        << ")\n";
  }
  if (!memory.fsdp2_declared && (memory.fsdp_degree > 1 || memory.expert_fsdp_degree > 1)) {
    out << "note: no fsdp2_allgather buffer in the recipe: FSDP2 all-gather memory is not "
           "counted (add one with the FSDP units to count it)\n";
  }
}

void print_table(const Plan& plan, const MemoryReport& memory, std::ostream& out) {
  driver::TextTable table({"stage", "ranks", "kind", "min GiB", "median GiB", "max GiB"},
                          {false, true, false, true, true, true});
  for (const StageMemory& per_stage : stage_memory(plan, memory)) {
    const std::string stage = std::to_string(per_stage.stage);
    const std::string ranks = std::to_string(per_stage.num_ranks);
    for (std::size_t k = 0; k < kMemoryKinds; ++k) {
      const KindStats& st = per_stage.kinds[k];
      table.add_row({k == 0 ? stage : "", k == 0 ? ranks : "",
                     memory_kind_name(static_cast<MemoryKind>(k)), gib(st.min), gib(st.median),
                     gib(st.max)});
    }
    if (memory.activations_counted) {
      for (std::size_t k = 0; k < kStepKindNames.size(); ++k) {
        const KindStats& st = per_stage.step[k];
        table.add_row({"", "", kStepKindNames[k], gib(st.min), gib(st.median), gib(st.max)});
      }
    }
    table.add_row({"", "", "total", gib(per_stage.total.min), gib(per_stage.total.median),
                   gib(per_stage.total.max)});
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
  } else if (rm.host > 0) {
    out << ", host " << gib(rm.host);
  }
  out << " GiB\n";
}

// The training shape and each stage's activation terms (`--explain`: one per line).
void print_activations(const Plan& plan, const MemoryReport& memory, bool explain,
                       std::ostream& out) {
  const TrainingShape& shape = plan.training.shape;
  const TrainingLayout& tl = plan.training_layout;
  out << "training shape: seq_len " << *shape.seq_len << ", micro_batch_size "
      << shape.micro_batch_size << ", " << tl.microbatches << " micro-batches per step ("
      << tl.microbatches_from << "), " << driver::recompute_text(shape) << ", attention "
      << (shape.kernels == ActivationKernels::Fused
              ? std::string("flash (kernels fused)")
              : std::string(attention_impl_name(shape.attention)))
      << ", activation_dtype " << dtype_name(tl.activation_dtype) << ", schedule "
      << pipeline_schedule_name(tl.schedule) << "\n";
  out << "layout: tp " << tl.degrees.tp
      << (tl.degrees.sequence_parallel ? " (sequence parallel)" : "") << ", expert tp "
      << tl.degrees.expert_tp << ", cp " << tl.degrees.cp << ", dp " << tl.dp << ", pp "
      << plan.num_stages << "\n";
  if (!memory.activations_counted) return;
  for (const StageActivations& sa : memory.stage_activations) {
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

void print_peak(const Plan& plan, const MemoryReport& memory, std::optional<std::int64_t> budget,
                std::ostream& out) {
  const std::int64_t rank = memory.peak_ranks.first();
  const RankMemory& rm = memory.at(rank);
  out << "peak: " << gib(memory.peak) << " GiB on rank(s) " << memory.peak_ranks.to_string()
      << "; rank " << rank << ": stage " << plan.stage_of_rank(rank) << ", "
      << rank_coords_text(plan, rank) << "\n";
  print_kinds(rm, memory.activations_counted, out);
  if (memory.activations_counted) {
    out << "total = params + grads + master_weights + optimizer_state (on the device) + "
           "max(activations + fsdp2_allgather + fsdp2_reduce_scatter, muon_allgather + "
           "muon_grad_copy); host memory apart\n";
  } else {
    out << "total = params + grads + master_weights + optimizer_state"
        << (rm.host > 0 ? " (on the device: `training.offload` keeps host apart)" : "")
        << " + max(fsdp2_allgather, muon_allgather)\n";
  }
  if (budget) {
    out << "budget " << byte_size_text(*budget) << ": "
        << (memory.peak <= *budget ? "fits, headroom " + binary_bytes_text(*budget - memory.peak)
                                   : "exceeded by " + binary_bytes_text(memory.peak - *budget))
        << "\n";
  }
  if (memory.activations_counted) {
    out << "peak stage: " << memory.peak_stage << "\n";
    out << "not counted: CUDA context, NCCL and allocator buffers, fragmentation, backward's "
           "transient activation gradients\n";
  } else {
    if (!memory.activations_note.empty()) out << "note: " << memory.activations_note << "\n";
    out << "not counted: "
        << "activations, CUDA context, NCCL and allocator buffers, fragmentation"
        << "\n";
  }
}

// The ranks to list (--ranks), or nullopt after printing a usage error.
std::optional<std::vector<std::int64_t>> listed_ranks(const MemoryOptions& opt, const Plan& plan,
                                                      std::ostream& err) {
  if (!opt.ranks) return std::vector<std::int64_t>{};
  return driver::parse_ranks_option(*opt.ranks, plan.world_size, opt.common.diag_format, err);
}

}  // namespace

ExitCode run_memory(const MemoryOptions& opt, FileSystem& fs, std::ostream& out,
                    std::ostream& err) {
  CommonOptions common = opt.common;
  common.check_budget = true;
  common.memory_report = true;
  driver::SessionScope scope(opt.common);
  driver::Session& session = *scope;
  const ExitCode code = driver::plan_or_report(common, fs, session, err);
  if (!session.plan || code == ExitCode::Usage) return code;
  const Plan& plan = *session.plan;
  if (!session.memory)
    return code == ExitCode::Ok ? ExitCode::Usage : code;  // refused (its diagnostic)
  const auto ranks = listed_ranks(opt, plan, err);
  if (!ranks) return ExitCode::Usage;
  if (opt.format == MemoryFormat::Json) {
    out << render_memory_json(plan, *session.memory, session.budget, *ranks);
    return code;
  }
  print_assumptions(plan, *session.memory, out);
  out << "\n";
  print_table(plan, *session.memory, out);
  out << "\n";
  if (plan.training_layout.active) {
    print_activations(plan, *session.memory, opt.explain, out);
    out << "\n";
  }
  print_peak(plan, *session.memory, session.budget, out);
  for (std::int64_t rank : *ranks) {
    const RankMemory& rm = session.memory->at(rank);
    out << "rank " << rank << " (stage " << plan.stage_of_rank(rank) << ", "
        << rank_coords_text(plan, rank) << "): total " << gib(rm.total) << " GiB (" << rm.total
        << " bytes)\n";
    print_kinds(rm, session.memory->activations_counted, out);
  }
  return code;
}

}  // namespace shardc
