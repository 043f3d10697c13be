// `shardc inspect`: what one rank holds, as a table or as its rank file.
#include <ostream>

#include "driver/inspect_buffers.hpp"
#include "driver/session.hpp"
#include "driver/text_format.hpp"
#include "shardc/backend.hpp"
#include "shardc/pattern.hpp"

namespace shardc {
namespace {

using driver::human_bytes;
using driver::shape_text;

struct Totals {
  std::int64_t params = 0;
  std::int64_t bytes = 0;
  std::int64_t padded = 0;
};

std::string coords_text(const Mesh& mesh, const std::vector<std::int64_t>& coords) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) {
    parts.push_back(mesh.axes[i].name + "=" + std::to_string(coords[i]));
  }
  return "{" + driver::join(parts, ", ") + "}";
}

std::string placements_text(const Plan& plan, const PlannedParam& p) {
  const Mesh& mesh = plan.mesh_of(p);
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < p.placements.size() && i < mesh.axes.size(); ++i) {
    if (p.placements[i].kind == ResolvedPlacement::Kind::Replicate) continue;
    parts.push_back(mesh.axes[i].name + ":" + p.placements[i].label());
  }
  return parts.empty() ? "replicated" : driver::join(parts, " ");
}

std::string bytes_text(std::int64_t bytes) {
  return human_bytes(bytes) + " (" + std::to_string(bytes) + ")";
}

void print_header(const Plan& plan, std::int64_t rank, std::ostream& out) {
  out << "rank " << rank << " of " << plan.world_size << ", stage " << plan.stage_of_rank(rank)
      << ", dense " << coords_text(plan.dense, mesh_coords(plan.dense, rank));
  if (plan.expert) out << ", expert " << coords_text(*plan.expert, mesh_coords(*plan.expert, rank));
  out << "\n\n";
}

// Adds p's row; counts it unless it is an alias of a param on this rank.
void add_row(const Plan& plan, std::int64_t rank, const PlannedParam& p, driver::TextTable& table,
             Totals& totals) {
  const auto coords = mesh_coords(plan.mesh_of(p), rank);
  const ShardGeom g = shard_at(p.geometry, coords);
  const std::int64_t bytes = numel(g.local_shape) * element_size(p.dtype);
  std::string bytes_col = bytes_text(bytes);
  const bool alias = p.alias_of && plan.holds(rank, plan.params.at(*p.alias_of));
  if (alias) bytes_col = "alias of " + plan.params.at(*p.alias_of).name;
  table.add_row({p.name, shape_text(p.global_shape), placements_text(plan, p),
                 shape_text(g.local_shape), shape_text(g.global_offset), bytes_col});
  if (alias) return;
  ++totals.params;
  totals.bytes += bytes;
  totals.padded += numel(g.padded_shape) * element_size(p.dtype);
}

void print_table(const Plan& plan, std::int64_t rank, const std::optional<Pattern>& match,
                 std::ostream& out) {
  driver::TextTable table({"FQN", "global shape", "placements", "local shape", "offset", "bytes"},
                          {false, false, false, false, false, true});
  Totals totals;
  for (const auto& p : plan.params) {
    if (!plan.holds(rank, p) || (match && !match->match(p.name))) continue;
    add_row(plan, rank, p, table, totals);
  }
  print_header(plan, rank, out);
  out << table.render() << "\n";
  out << (match ? "matched: " : "total: ") << totals.params << " params, "
      << bytes_text(totals.bytes) << ", padded " << bytes_text(totals.padded) << "\n";
  if (!match) driver::print_rank_buffers(plan, rank, out);
}

}  // namespace

ExitCode run_inspect(const InspectOptions& opt, FileSystem& fs, std::ostream& out,
                     std::ostream& err) {
  driver::Session s;
  const ExitCode code = driver::plan_or_report(opt.common, fs, s, err);
  if (code != ExitCode::Ok) return code;
  const Plan& plan = *s.plan;
  if (opt.rank < 0 || opt.rank >= plan.world_size) {
    driver::print_error(err, "--rank " + std::to_string(opt.rank) +
                                 " is out of range (world size " + std::to_string(plan.world_size) +
                                 ": ranks 0-" + std::to_string(plan.world_size - 1) + ")");
    return ExitCode::Usage;
  }
  if (opt.format == InspectFormat::Json) {
    if (opt.match) {
      driver::print_error(err, "--match filters the table; it cannot be used with --format json");
      return ExitCode::Usage;
    }
    out << render_rank_json(plan, opt.rank);
    return ExitCode::Ok;
  }
  std::optional<Pattern> match;
  if (opt.match) {
    std::string error;
    match = Pattern::compile(*opt.match, error);
    if (!match) {
      driver::print_error(err, "--match '" + *opt.match + "': " + error);
      return ExitCode::Usage;
    }
  }
  print_table(plan, opt.rank, match, out);
  return ExitCode::Ok;
}

}  // namespace shardc
