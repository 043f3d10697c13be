// `shardc inspect`: what one rank holds, as a table or as its rank file.
#include <ostream>

#include "backend/backend.hpp"
#include "driver/inspect_buffers.hpp"
#include "driver/session.hpp"
#include "driver/text_format.hpp"
#include "memory/memory.hpp"
#include "planner/buffers.hpp"
#include "support/pattern.hpp"

namespace shardc {
namespace {

using driver::shape_text;

struct Totals {
  std::int64_t params = 0;
  std::int64_t bytes = 0;
  std::int64_t padded = 0;
  std::int64_t aliases = 0;  ///< rows of aliases sharing a held param's storage (no bytes)
};

std::string coords_text(const Mesh& mesh, const std::vector<std::int64_t>& coords) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) {
    parts.push_back(mesh.axes[i].name + "=" + std::to_string(coords[i]));
  }
  return "{" + driver::join(parts, ", ") + "}";
}

std::string placements_text(const Plan& plan, const PlannedParam& param) {
  const Mesh& mesh = plan.mesh_of(param);
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < param.placements.size() && i < mesh.axes.size(); ++i) {
    if (param.placements[i].kind == ResolvedPlacement::Kind::Replicate) continue;
    parts.push_back(mesh.axes[i].name + ":" + param.placements[i].label());
  }
  return parts.empty() ? "replicated" : driver::join(parts, " ");
}

std::string bytes_text(std::int64_t bytes) {
  return binary_bytes_text(bytes) + " (" + std::to_string(bytes) + ")";
}

void print_header(const Plan& plan, std::int64_t rank, std::ostream& out) {
  out << "rank " << rank << " of " << plan.world_size << ", stage " << plan.stage_of_rank(rank)
      << ", dense " << coords_text(plan.dense, mesh_coords(plan.dense, rank));
  if (plan.expert) out << ", expert " << coords_text(*plan.expert, mesh_coords(*plan.expert, rank));
  out << "\n\n";
}

// The experts of stacked `param` whose source FQN matches `match` and that
// rows [start, start + rows) of dim 0 hold, as "expert 17" / "3 experts".
std::string matched_experts(const PlannedParam& param, const Pattern& match, std::int64_t start,
                            std::int64_t rows) {
  std::int64_t count = 0;
  std::int64_t first = -1;
  for (std::int64_t e = start; e < start + rows && e < expert_count(param); ++e) {
    if (!match.match(expert_fqn(param, e))) continue;
    if (first < 0) first = e;
    ++count;
  }
  if (count == 0) return "";
  if (count == 1)
    return "expert " + std::to_string(first) + " = local row " + std::to_string(first - start);
  return std::to_string(count) + " matched experts";
}

// Adds the row of `param`; counts it unless it is an alias of a param on this rank.
// With `match`, a stacked param is listed when its name or one of its held
// source experts' FQNs matches (the row then says which).
void add_row(const Plan& plan, std::int64_t rank, const PlannedParam& param,
             const std::optional<Pattern>& match, driver::TextTable& table, Totals& totals) {
  const auto coords = mesh_coords(plan.mesh_of(param), rank);
  const ShardGeom geom = shard_at(param.geometry, coords);
  std::string name = param.name;
  if (match && !match->match(param.name)) {
    if (!stacked_expert(param) || geom.local_shape.empty()) return;
    const std::int64_t rows = geom.local_shape[0];
    const std::string which =
        rows == 0 ? "" : matched_experts(param, *match, geom.global_offset[0], rows);
    if (which.empty()) return;
    name += " (" + which + ")";
  }
  const std::int64_t bytes = numel(geom.local_shape) * element_size(param.dtype);
  std::string bytes_col = bytes_text(bytes);
  const bool alias = param.alias_of && plan.holds(rank, plan.params.at(*param.alias_of));
  if (alias) bytes_col = "alias of " + plan.params.at(*param.alias_of).name;
  // Padded pieces show "real/allocated"; packed pieces list their boxes.
  std::string local = shape_text(geom.local_shape);
  if (param.uneven == SplitRule::Pad && geom.padded_shape != geom.local_shape)
    local += " pad " + shape_text(geom.padded_shape);
  std::string offset = shape_text(geom.global_offset);
  if (!geom.boxes.empty()) {
    offset.clear();
    for (const ShardBox& box : geom.boxes)
      offset += (offset.empty() ? "" : " + ") + shape_text(box.shape) + "@" +
                shape_text(box.global_offset);
  }
  table.add_row({name, shape_text(param.global_shape), placements_text(plan, param), local, offset,
                 bytes_col});
  if (alias) {
    ++totals.aliases;
    return;
  }
  ++totals.params;
  totals.bytes += bytes;
  totals.padded += numel(geom.padded_shape) * element_size(param.dtype);
}

// The rank's training memory by kind (src/memory/memory.hpp).
void print_memory(const MemoryReport& memory, const Plan& plan, std::int64_t rank,
                  std::ostream& out) {
  const RankMemory& rm = memory.at(rank);
  out << "\nmemory (optimizer " << optimizer_name(plan.training.optimizer)
      << "; activations not counted):\n";
  driver::TextTable table({"kind", "bytes"}, {false, true});
  for (std::size_t k = 0; k < kMemoryKinds; ++k)
    table.add_row({memory_kind_name(static_cast<MemoryKind>(k)), bytes_text(rm.bytes[k])});
  table.add_row({"total", bytes_text(rm.total)});
  out << table.render();
  out << "total = params + grads + master_weights + optimizer_state + max(fsdp2_allgather, "
         "muon_allgather); peak over all ranks "
      << binary_bytes_text(memory.peak) << " on " << memory.peak_ranks.to_string() << "\n";
}

void print_table(const Plan& plan, const MemoryReport* memory, std::int64_t rank,
                 const std::optional<Pattern>& match, std::ostream& out) {
  driver::TextTable table({"FQN", "global shape", "placements", "local shape", "offset", "bytes"},
                          {false, false, false, false, false, true});
  Totals totals;
  for (const auto& param : plan.params) {
    if (plan.holds(rank, param)) add_row(plan, rank, param, match, table, totals);
  }
  print_header(plan, rank, out);
  out << table.render() << "\n";
  out << (match ? "matched: " : "total: ") << totals.params << " params, "
      << bytes_text(totals.bytes) << ", padded " << bytes_text(totals.padded);
  if (totals.aliases > 0)
    out << " (+ " << totals.aliases << (totals.aliases == 1 ? " alias" : " aliases")
        << " sharing a held param's storage, no bytes of its own)";
  out << "\n";
  if (match && totals.params == 0 && totals.aliases == 0)
    out << "(no parameter held by rank " << rank
        << " matches; FQNs are the plan's names or, for stacked experts, their sources'; `*` "
           "stays within one segment, `**` spans segments)\n";
  if (!match) {
    driver::print_rank_buffers(plan, rank, out);
    print_memory(*memory, plan, rank, out);
  }
}

// --summary: totals per kind of param and per buffer layout, no table.
void print_summary(const Plan& plan, std::int64_t rank, std::ostream& out) {
  Totals dense;
  Totals experts;
  std::int64_t aliases = 0;
  std::int64_t held_experts = 0;
  for (const auto& param : plan.params) {
    if (!plan.holds(rank, param)) continue;
    if (param.alias_of && plan.holds(rank, plan.params.at(*param.alias_of))) {
      ++aliases;
      continue;
    }
    const ShardGeom geom = shard_at(param.geometry, mesh_coords(plan.mesh_of(param), rank));
    Totals& totals = stacked_expert(param) ? experts : dense;
    if (stacked_expert(param) && !geom.local_shape.empty()) held_experts += geom.local_shape[0];
    ++totals.params;
    totals.bytes += numel(geom.local_shape) * element_size(param.dtype);
    totals.padded += numel(geom.padded_shape) * element_size(param.dtype);
  }
  print_header(plan, rank, out);
  out << "param bytes of stage " << plan.stage_of_rank(rank) << " on this rank:\n";
  auto line = [&](const char* kind, const Totals& totals, const std::string& extra) {
    out << "  " << kind << totals.params << " params, " << bytes_text(totals.bytes) << ", padded "
        << bytes_text(totals.padded) << extra << "\n";
  };
  line("dense    ", dense, "");
  line("experts  ", experts,
       experts.params ? " (" + std::to_string(held_experts) + " expert rows of stacked params)"
                      : "");
  line("total    ",
       {dense.params + experts.params, dense.bytes + experts.bytes, dense.padded + experts.padded},
       aliases ? " (" + std::to_string(aliases) + " aliases share a held param's storage)" : "");
  if (plan.buffers.empty()) return;
  // This rank's entries only (buffer_bytes_at): no per-rank table, any world.
  out << "buffers on this rank:\n";
  for (const BufferBytesAt& buffer : buffer_bytes_at(plan, plan_buffers(plan), rank)) {
    out << "  " << buffer_kind_name(buffer.kind) << ": pack " << binary_bytes_text(buffer.pack);
    if (buffer.kind == BufferKind::MuonAllGather)
      out << ", gathered " << binary_bytes_text(buffer.gathered) << " (sum over stages)\n";
    else if (buffer.kind == BufferKind::Fsdp2AllGather && fsdp2_every_unit_gathered(plan))
      out << ", gathered peak " << binary_bytes_text(buffer.gathered)
          << " (every unit: docs/memory.md)\n";
    else
      out << ", gathered peak " << binary_bytes_text(buffer.gathered_peak)
          << " (largest unit + the next one prefetched), sum over units "
          << binary_bytes_text(buffer.gathered) << "\n";
  }
}

}  // namespace

ExitCode run_inspect(const InspectOptions& opt, FileSystem& fs, std::ostream& out,
                     std::ostream& err) {
  driver::SessionScope scope(opt.common);
  driver::Session& session = *scope;
  CommonOptions common = opt.common;
  common.memory_report = !opt.match.has_value();  // the table view and the rank file show memory
  const ExitCode code = driver::plan_or_report(common, fs, session, err);
  if (code != ExitCode::Ok) return code;
  const Plan& plan = *session.plan;
  if (opt.rank < 0 || opt.rank >= plan.world_size) {
    driver::print_error(err, opt.common.diag_format, DiagCode::EUsage,
                        "--rank " + std::to_string(opt.rank) + " is out of range (world size " +
                            std::to_string(plan.world_size) + ": ranks 0-" +
                            std::to_string(plan.world_size - 1) + ")",
                        "give a rank below " + std::to_string(plan.world_size));
    return ExitCode::Usage;
  }
  if (opt.format == InspectFormat::Json) {
    if (opt.match || opt.summary) {
      driver::print_error(err, DiagCode::EUsage,
                          std::string(opt.match ? "--match" : "--summary") +
                              " is a table option; it cannot be used with --format json");
      return ExitCode::Usage;
    }
    // The session's memory classes (any world): this rank's entry.
    out << render_rank_json(plan, plan_buffers(plan), opt.rank, session.memory->at(opt.rank));
    return ExitCode::Ok;
  }
  std::optional<Pattern> match;
  if (opt.match) {
    std::string error;
    match = Pattern::compile(*opt.match, error);
    if (!match) {
      driver::print_error(err, DiagCode::EUsage, "--match '" + *opt.match + "': " + error);
      return ExitCode::Usage;
    }
  }
  if (opt.summary) {
    if (match) {
      driver::print_error(err, opt.common.diag_format, DiagCode::EUsage,
                          "--summary prints totals only; it cannot be used with --match",
                          "drop --summary to list the params --match selects");
      return ExitCode::Usage;
    }
    print_summary(plan, opt.rank, out);
    return ExitCode::Ok;
  }
  print_table(plan, session.memory ? &*session.memory : nullptr, opt.rank, match, out);
  return ExitCode::Ok;
}

}  // namespace shardc
