// `shardc explain`: why one parameter is placed the way it is.
#include <algorithm>
#include <charconv>
#include <ostream>
#include <set>

#include "backend/backend.hpp"
#include "core/fused.hpp"
#include "core/pipeline_chunks.hpp"
#include "driver/session.hpp"
#include "driver/suggest.hpp"
#include "driver/text_format.hpp"

namespace shardc {
namespace {

using driver::shape_text;

constexpr std::int64_t kMaxExpertLines = 256;

void field(std::ostream& out, std::string_view name, const std::string& value) {
  std::string label = std::string(name) + ":";
  label.resize(std::max<std::size_t>(label.size(), 15), ' ');
  out << "  " << label << value << "\n";
}

std::string loc_text(const SourceLoc& loc) {
  if (loc.file.empty()) return "";
  std::string text = " at " + loc.file.str();
  if (loc.line > 0) text += ":" + std::to_string(loc.line);
  if (loc.column > 0) text += ":" + std::to_string(loc.column);
  return text;
}

std::string rule_text(const PlannedParam& param, const Recipe& recipe) {
  const bool experts = param.rule.kind == RuleRef::Kind::Experts;
  const auto i = static_cast<std::size_t>(param.rule.index);
  SourceLoc loc;
  if (experts && i < recipe.experts.size()) loc = recipe.experts[i].loc;
  if (!experts && i < recipe.rules.size()) loc = recipe.rules[i].loc;
  return rule_label(recipe, experts, param.rule.index) + ", match \"" + param.rule.match + "\"" +
         loc_text(loc);
}

void print_placements(const Plan& plan, const PlannedParam& param, std::ostream& out) {
  const Mesh& mesh = plan.mesh_of(param);
  std::string text;
  for (std::size_t i = 0; i < mesh.axes.size() && i < param.placements.size(); ++i) {
    std::string axis = mesh.axes[i].name + " (" + std::to_string(mesh.axes[i].size) + ")";
    axis.resize(std::max<std::size_t>(axis.size(), 18), ' ');
    text += (i > 0 ? "\n                 " : "") + axis + param.placements[i].label();
  }
  field(out, "placements", text.empty() ? "(no mesh axes)" : text);
}

std::string alias_text(const Plan& plan, const PlannedParam& param) {
  if (param.alias_of) {
    const PlannedParam& src = plan.params.at(*param.alias_of);
    if (src.stage == param.stage) return "alias of " + src.name + " (same storage on every rank)";
    return "tied to " + src.name + " across stages " + std::to_string(src.stage) + " and " +
           std::to_string(param.stage) + " (each stage holds a copy; gradients all-reduced)";
  }
  std::vector<std::string> aliases;
  for (const auto& other : plan.params) {
    if (other.alias_of && &plan.params.at(*other.alias_of) == &param) aliases.push_back(other.name);
  }
  return aliases.empty() ? "none" : "tie source of " + driver::join(aliases, ", ");
}

// `geometry` without its FSDP split: what EP alone gives each coordinate.
ParamGeometry without_fsdp(const ParamGeometry& geometry) {
  ParamGeometry out = geometry;
  for (auto& chain : out.per_dim) {
    std::erase_if(chain, [](const DimSplit& split) { return split.fsdp; });
  }
  out.fsdp_dim = -1;
  out.fsdp_ways = 1;
  return out;
}

// Expert range [start, stop) held per coordinate of the axes splitting dim 0.
void print_expert_ranges(const Plan& plan, const PlannedParam& param, std::ostream& out) {
  const ParamGeometry geometry = without_fsdp(param.geometry);
  if (geometry.per_dim.empty()) return;
  std::vector<int> axes;
  for (const DimSplit& split : geometry.per_dim[0])
    axes.insert(axes.end(), split.axes.begin(), split.axes.end());
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const Mesh& mesh = plan.mesh_of(param);
  std::int64_t combos = 1;
  for (const int axis : axes) combos *= mesh.axes.at(static_cast<std::size_t>(axis)).size;
  for (std::int64_t flat = 0; flat < combos && flat < kMaxExpertLines; ++flat) {
    std::vector<std::int64_t> coords(mesh.axes.size(), 0);
    std::vector<std::string> names;
    std::int64_t rest = flat;
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
      const auto axis = static_cast<std::size_t>(*it);
      coords[axis] = rest % mesh.axes[axis].size;
      rest /= mesh.axes[axis].size;
      names.insert(names.begin(), mesh.axes[axis].name + "=" + std::to_string(coords[axis]));
    }
    const ShardGeom shard = shard_at(geometry, coords);
    const std::int64_t held = shard.local_shape.empty() ? 0 : shard.local_shape[0];
    const std::int64_t start = held == 0 ? 0 : shard.global_offset[0];
    out << "    " << (names.empty() ? "all" : driver::join(names, ", ")) << ": experts "
        << (held == 0 ? "none"
                      : "[" + std::to_string(start) + ", " + std::to_string(start + held) + ")")
        << "\n";
  }
  if (combos > kMaxExpertLines) out << "    ... (" << combos - kMaxExpertLines << " more)\n";
}

void print_stacked(const Plan& plan, const PlannedParam& param, std::ostream& out) {
  if (!stacked_expert(param)) return;
  if (param.prestacked) {
    field(out, "pre-stacked",
          std::to_string(param.prestacked->count) + " experts on dim " +
              std::to_string(param.prestacked->dim) + " (the checkpoint's own tensor): " +
              expert_fqn(param, 0) + " ... " + expert_fqn(param, param.prestacked->count - 1));
  } else {
    field(out, "stacked from",
          std::to_string(param.stacked_from.size()) + " experts: " + param.stacked_from.front() +
              " ... " + param.stacked_from.back());
  }
  out << "  experts per coordinate:\n";
  print_expert_ranges(plan, param, out);
}

void print_fsdp(const PlannedParam& param, std::ostream& out) {
  const ParamGeometry& geometry = param.geometry;
  if (geometry.fsdp_dim < 0) {
    field(out, "fsdp", "not sharded");
    return;
  }
  field(out, "fsdp",
        "dim " + std::to_string(geometry.fsdp_dim) + " over " + std::to_string(geometry.fsdp_ways) +
            " ranks (chunk; each shard padded to the first chunk, see padded)");
}

// Megatron-Core's linear_qkv is laid out by query group ([groups x (q heads
// per group + 2) x head_dim, hidden]; attention.py
// get_query_key_value_tensors): the rows of each group, or 0 when `param` is not
// such a param (or the model gives no group count).
std::int64_t query_group_rows(const PlannedParam& param, const Model& model) {
  const std::string_view name = param.name;
  const bool qkv = name.ends_with(".linear_qkv.weight") || name.ends_with(".linear_qkv.bias");
  const auto& groups = model.attributes_of(param.name).num_key_value_heads;
  if (!qkv || !groups || *groups <= 0 || param.global_shape.empty()) return 0;
  if (param.global_shape[0] % *groups != 0) return 0;
  return param.global_shape[0] / *groups;
}

// "group 3", "groups 0-1", "rows of groups 0-4 (cut)", "none".
std::string groups_text(const ShardGeom& geom, std::int64_t rows) {
  if (geom.local_shape.empty() || geom.local_shape[0] == 0) return "none";
  const std::int64_t start = geom.global_offset[0];
  const std::int64_t end = start + geom.local_shape[0];
  const std::int64_t first = start / rows;
  const std::int64_t last = (end - 1) / rows;
  const std::string range = first == last
                                ? "group " + std::to_string(first)
                                : "groups " + std::to_string(first) + "-" + std::to_string(last);
  if (start % rows != 0 || end % rows != 0) return "rows of " + range + " (cut)";
  return range;
}

void print_shards(const Plan& plan, const PlannedParam& param, const Model& model,
                  std::ostream& out) {
  const auto shards = enumerate_shards(plan, param);
  out << "  shards: " << shards.size() << " distinct\n";
  const std::int64_t group_rows = query_group_rows(param, model);
  if (group_rows > 0) {
    out << "  query groups: " << param.global_shape[0] / group_rows << " of " << group_rows
        << " rows (Megatron-Core's per-group q|k|v layout)\n";
  }
  std::vector<std::string> header = {"    ranks", "local shape", "global offset", "padded shape"};
  if (group_rows > 0) header.emplace_back("query groups");
  driver::TextTable table(header);
  for (const ShardClass& shard : shards) {
    std::string offset = shape_text(shard.geom.global_offset);
    if (!shard.geom.boxes.empty()) {
      offset.clear();
      for (const ShardBox& box : shard.geom.boxes)
        offset += (offset.empty() ? "" : " + ") + shape_text(box.shape) + "@" +
                  shape_text(box.global_offset);
    }
    std::vector<std::string> row = {"    " + shard.ranks.to_string(),
                                    shape_text(shard.geom.local_shape), offset,
                                    shape_text(shard.geom.padded_shape)};
    if (group_rows > 0) {
      row.push_back(shard.geom.boxes.empty() ? groups_text(shard.geom, group_rows)
                                             : "packed parts");
    }
    table.add_row(row);
  }
  out << table.render();
}

// Explaining a source expert: only the shards holding rows of `expert`
// (dim 0 of the stacked param), the row each holds it at, and their ranks.
void print_expert_shards(const Plan& plan, const PlannedParam& param, std::int64_t expert,
                         std::ostream& out) {
  driver::TextTable table(
      {"    ranks", "local row", "piece of the expert", "global offset", "local shape"});
  RankSet holders;
  std::int64_t classes = 0;
  for (const ShardClass& shard : enumerate_shards(plan, param)) {
    const Shape& local = shard.geom.local_shape;
    const Shape& off = shard.geom.global_offset;
    if (local.empty() || local[0] == 0 || expert < off[0] || expert >= off[0] + local[0]) continue;
    Shape piece(local.begin() + 1, local.end());
    Shape piece_off(off.begin() + 1, off.end());
    table.add_row({"    " + shard.ranks.to_string(), std::to_string(expert - off[0]),
                   shape_text(piece) + " at " + shape_text(piece_off), shape_text(off),
                   shape_text(local)});
    holders = holders.unite(shard.ranks);
    ++classes;
  }
  out << "  expert " << expert << " is held by " << holders.size()
      << (holders.size() == 1 ? " rank (" : " ranks (") << holders.to_string() << "), in "
      << classes << " distinct shards:\n";
  out << table.render();
}

void print_explanation(const Plan& plan, const Recipe& recipe, const Model& model,
                       const PlannedParam& param, std::int64_t expert, std::ostream& out) {
  out << param.name << "\n";
  field(out, "dtype", std::string(dtype_name(param.dtype)));
  field(out, "global shape", shape_text(param.global_shape));
  field(out, "requires_grad", param.requires_grad ? "true" : "false");
  field(out, "rule", rule_text(param, recipe));
  if (param.scale_of)  // docs/semantics.md "FP8 block-quantized checkpoints"
    field(out, "fp8 scale",
          "follows " + plan.params.at(*param.scale_of).name +
              " (its rule and placements, split in whole blocks)");
  field(out, "mesh",
        std::string(mesh_kind_name(param.mesh)) + " (" + driver::mesh_text(plan.mesh_of(param)) +
            ")");
  print_placements(plan, param, out);
  std::string uneven = split_rule_name(param.uneven);
  if (param.uneven == SplitRule::Pad)
    uneven += " (every piece allocates a multiple of " + std::to_string(param.pad_multiple) +
              " rows; pad rows at the end)";
  if (param.unit > 1) uneven += "; unit " + std::to_string(param.unit) + " rows (never cut)";
  field(out, "uneven", uneven);
  if (!param.geometry.parts.empty()) {
    std::string parts;
    for (std::int64_t extent : param.geometry.parts)
      parts += (parts.empty() ? "" : ", ") + std::to_string(extent);
    field(out, "packed",
          std::to_string(param.geometry.parts.size()) + " parts on dim " +
              std::to_string(param.geometry.parts_dim) + " [" + parts +
              "], each split on its own; local tensor = pieces in part order");
    const auto& replicas = param.geometry.part_replicas;
    std::string shared;
    for (std::size_t i = 0; i < replicas.size() && i < param.geometry.part_names.size(); ++i)
      if (replicas[i] > 1)
        shared += (shared.empty() ? "" : ", ") + param.geometry.part_names[i] + " shared by " +
                  std::to_string(replicas[i]) + " consecutive ranks of the split";
    if (!shared.empty()) field(out, "replicas", shared + " (vLLM num_kv_head_replicas)");
  }
  if (param.fused) {
    const FusedLayout& fused = *param.fused;
    std::string parts;
    for (std::size_t i = 0; i < fused.parts.size(); ++i)
      parts += (i ? ", " : "") + fused.part_names[i] + " " + std::to_string(fused.parts[i]);
    std::string text = std::string(fused_order_name(fused)) + " on dim " +
                       std::to_string(fused.dim) + " [" + parts + "]";
    if (fused.groups > 1)
      text += " in " + std::to_string(fused.groups) + " groups of " +
              std::to_string(fused_group_extent(fused));
    field(out, "fused",
          text + "; " + fused.source + "; split part by part: `" +
              fused_packed_line(fused, param.global_shape.size()) + "`");
  }
  if (plan.virtual_stages > 1) {
    const std::int64_t chunk =
        chunk_at({param.stage, param.virtual_stage}, plan.num_stages, plan.v_shape);
    std::string text =
        std::to_string(param.stage) + ", virtual stage " + std::to_string(param.virtual_stage) +
        " of " + std::to_string(plan.virtual_stages) + ": model chunk " + std::to_string(chunk) +
        " of " + std::to_string(plan.num_stages * plan.virtual_stages);
    const auto chunk_index = static_cast<std::size_t>(chunk);
    if (chunk_index < plan.model_chunks.size() && plan.model_chunks[chunk_index].first_block >= 0) {
      text += " (layer blocks " + std::to_string(plan.model_chunks[chunk_index].first_block) + "-" +
              std::to_string(plan.model_chunks[chunk_index].end_block - 1) + ")";
    }
    field(out, "stage", text);
  } else {
    field(out, "stage", std::to_string(param.stage));
  }
  field(out, "alias", alias_text(plan, param));
  print_stacked(plan, param, out);
  print_fsdp(param, out);
  if (expert >= 0) {
    print_expert_shards(plan, param, expert, out);
  } else {
    print_shards(plan, param, model, out);
  }
}

// The expert `fqn` names of pre-stacked `param` (name_before + e + name_after,
// e in [0, count) written without leading zeros), or -1.
std::int64_t prestacked_expert(const PlannedParam& param, std::string_view fqn) {
  const PlannedParam::PreStacked& ps = *param.prestacked;
  if (fqn.size() <= ps.name_before.size() + ps.name_after.size() ||
      !fqn.starts_with(ps.name_before) || !fqn.ends_with(ps.name_after))
    return -1;
  const std::string_view digits =
      fqn.substr(ps.name_before.size(), fqn.size() - ps.name_before.size() - ps.name_after.size());
  if (digits.size() > 1 && digits.front() == '0') return -1;
  std::int64_t expert = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), expert);
  if (ec != std::errc() || end != digits.data() + digits.size() || expert < 0 || expert >= ps.count)
    return -1;
  return expert;
}

// The planned param named `fqn`, or the stacked param that absorbed it
// (`expert` set to its index there).
const PlannedParam* find_param(const Plan& plan, const std::string& fqn, std::int64_t& expert,
                               std::ostream& out) {
  for (const auto& param : plan.params) {
    if (param.name == fqn) return &param;
  }
  for (const auto& param : plan.params) {
    if (param.prestacked) {
      expert = prestacked_expert(param, fqn);
      if (expert < 0) continue;
      out << fqn << " is expert " << expert << " of pre-stacked param " << param.name << " (row "
          << expert << " of dim 0)\n\n";
      return &param;
    }
    const auto it = std::find(param.stacked_from.begin(), param.stacked_from.end(), fqn);
    if (it == param.stacked_from.end()) continue;
    expert = it - param.stacked_from.begin();
    out << fqn << " is expert " << expert << " of stacked param " << param.name << " (row "
        << expert << " of dim 0)\n\n";
    return &param;
  }
  expert = -1;
  return nullptr;
}

void print_unknown(const Plan& plan, const std::string& fqn, std::ostream& err) {
  std::vector<std::string> names;
  for (const auto& param : plan.params) {
    names.push_back(param.name);
    names.insert(names.end(), param.stacked_from.begin(), param.stacked_from.end());
    if (param.prestacked) names.push_back(expert_fqn(param, 0));
  }
  driver::print_error(err, DiagCode::EUsage, "no parameter named '" + fqn + "' in the model");
  const auto close = driver::closest_names(fqn, names);
  if (!close.empty()) {
    err << "  hint: did you mean " << driver::join(close, ", ") << "?\n";
  } else {
    err << "  hint: FQNs are post-stacking names; list them with `shardc inspect MODEL RECIPE "
           "--rank 0` (or --match GLOB)\n";
  }
}

}  // namespace

ExitCode run_explain(const ExplainOptions& opt, FileSystem& fs, std::ostream& out,
                     std::ostream& err) {
  driver::SessionScope scope(opt.common);
  driver::Session& session = *scope;
  const ExitCode code = driver::plan_or_report(opt.common, fs, session, err);
  if (code != ExitCode::Ok) return code;
  std::int64_t expert = -1;
  const PlannedParam* param = find_param(*session.plan, opt.fqn, expert, out);
  if (param == nullptr) {
    print_unknown(*session.plan, opt.fqn, err);
    return ExitCode::Usage;
  }
  print_explanation(*session.plan, *session.recipe, *session.model, *param, expert, out);
  return ExitCode::Ok;
}

}  // namespace shardc
