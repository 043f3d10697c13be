// `shardc explain`: why one parameter is placed the way it is.
#include <algorithm>
#include <charconv>
#include <ostream>
#include <set>

#include "backend/backend.hpp"
#include "core/fused.hpp"
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
  std::string s = " at " + loc.file.str();
  if (loc.line > 0) s += ":" + std::to_string(loc.line);
  if (loc.column > 0) s += ":" + std::to_string(loc.column);
  return s;
}

std::string rule_text(const PlannedParam& p, const Recipe& recipe) {
  const bool experts = p.rule.kind == RuleRef::Kind::Experts;
  const auto i = static_cast<std::size_t>(p.rule.index);
  SourceLoc loc;
  if (experts && i < recipe.experts.size()) loc = recipe.experts[i].loc;
  if (!experts && i < recipe.rules.size()) loc = recipe.rules[i].loc;
  return rule_label(recipe, experts, p.rule.index) + ", match \"" + p.rule.match + "\"" +
         loc_text(loc);
}

void print_placements(const Plan& plan, const PlannedParam& p, std::ostream& out) {
  const Mesh& mesh = plan.mesh_of(p);
  std::string text;
  for (std::size_t i = 0; i < mesh.axes.size() && i < p.placements.size(); ++i) {
    std::string axis = mesh.axes[i].name + " (" + std::to_string(mesh.axes[i].size) + ")";
    axis.resize(std::max<std::size_t>(axis.size(), 18), ' ');
    text += (i > 0 ? "\n                 " : "") + axis + p.placements[i].label();
  }
  field(out, "placements", text.empty() ? "(no mesh axes)" : text);
}

std::string alias_text(const Plan& plan, const PlannedParam& p) {
  if (p.alias_of) {
    const PlannedParam& src = plan.params.at(*p.alias_of);
    if (src.stage == p.stage) return "alias of " + src.name + " (same storage on every rank)";
    return "tied to " + src.name + " across stages " + std::to_string(src.stage) + " and " +
           std::to_string(p.stage) + " (each stage holds a copy; gradients all-reduced)";
  }
  std::vector<std::string> aliases;
  for (const auto& q : plan.params) {
    if (q.alias_of && &plan.params.at(*q.alias_of) == &p) aliases.push_back(q.name);
  }
  return aliases.empty() ? "none" : "tie source of " + driver::join(aliases, ", ");
}

// Geometry of `p` without its FSDP split: what EP alone gives each coordinate.
ParamGeometry without_fsdp(const ParamGeometry& g) {
  ParamGeometry out = g;
  for (auto& chain : out.per_dim) {
    std::erase_if(chain, [](const DimSplit& s) { return s.fsdp; });
  }
  out.fsdp_dim = -1;
  out.fsdp_ways = 1;
  return out;
}

// Expert range [start, stop) held per coordinate of the axes splitting dim 0.
void print_expert_ranges(const Plan& plan, const PlannedParam& p, std::ostream& out) {
  const ParamGeometry g = without_fsdp(p.geometry);
  if (g.per_dim.empty()) return;
  std::vector<int> axes;
  for (const DimSplit& s : g.per_dim[0]) axes.insert(axes.end(), s.axes.begin(), s.axes.end());
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const Mesh& mesh = plan.mesh_of(p);
  std::int64_t combos = 1;
  for (const int a : axes) combos *= mesh.axes.at(static_cast<std::size_t>(a)).size;
  for (std::int64_t flat = 0; flat < combos && flat < kMaxExpertLines; ++flat) {
    std::vector<std::int64_t> coords(mesh.axes.size(), 0);
    std::vector<std::string> names;
    std::int64_t rest = flat;
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
      const auto a = static_cast<std::size_t>(*it);
      coords[a] = rest % mesh.axes[a].size;
      rest /= mesh.axes[a].size;
      names.insert(names.begin(), mesh.axes[a].name + "=" + std::to_string(coords[a]));
    }
    const ShardGeom s = shard_at(g, coords);
    const std::int64_t n = s.local_shape.empty() ? 0 : s.local_shape[0];
    const std::int64_t start = n == 0 ? 0 : s.global_offset[0];
    out << "    " << (names.empty() ? "all" : driver::join(names, ", ")) << ": experts "
        << (n == 0 ? "none" : "[" + std::to_string(start) + ", " + std::to_string(start + n) + ")")
        << "\n";
  }
  if (combos > kMaxExpertLines) out << "    ... (" << combos - kMaxExpertLines << " more)\n";
}

void print_stacked(const Plan& plan, const PlannedParam& p, std::ostream& out) {
  if (!stacked_expert(p)) return;
  if (p.prestacked) {
    field(out, "pre-stacked",
          std::to_string(p.prestacked->count) + " experts on dim " +
              std::to_string(p.prestacked->dim) + " (the checkpoint's own tensor): " +
              expert_fqn(p, 0) + " ... " + expert_fqn(p, p.prestacked->count - 1));
  } else {
    field(out, "stacked from",
          std::to_string(p.stacked_from.size()) + " experts: " + p.stacked_from.front() + " ... " +
              p.stacked_from.back());
  }
  out << "  experts per coordinate:\n";
  print_expert_ranges(plan, p, out);
}

void print_fsdp(const PlannedParam& p, std::ostream& out) {
  const ParamGeometry& g = p.geometry;
  if (g.fsdp_dim < 0) {
    field(out, "fsdp", "not sharded");
    return;
  }
  field(out, "fsdp",
        "dim " + std::to_string(g.fsdp_dim) + " over " + std::to_string(g.fsdp_ways) +
            " ranks (chunk; each shard padded to the first chunk, see padded)");
}

// Megatron-Core's linear_qkv is laid out by query group ([groups x (q heads
// per group + 2) x head_dim, hidden]; attention.py
// get_query_key_value_tensors): the rows of each group, or 0 when `p` is not
// such a param (or the model gives no group count).
std::int64_t query_group_rows(const PlannedParam& p, const Model& model) {
  const std::string_view name = p.name;
  const bool qkv = name.ends_with(".linear_qkv.weight") || name.ends_with(".linear_qkv.bias");
  const auto& groups = model.attributes_of(p.name).num_key_value_heads;
  if (!qkv || !groups || *groups <= 0 || p.global_shape.empty()) return 0;
  if (p.global_shape[0] % *groups != 0) return 0;
  return p.global_shape[0] / *groups;
}

// "group 3", "groups 0-1", "rows of groups 0-4 (cut)", "none".
std::string groups_text(const ShardGeom& g, std::int64_t rows) {
  if (g.local_shape.empty() || g.local_shape[0] == 0) return "none";
  const std::int64_t start = g.global_offset[0];
  const std::int64_t end = start + g.local_shape[0];
  const std::int64_t first = start / rows;
  const std::int64_t last = (end - 1) / rows;
  const std::string range = first == last
                                ? "group " + std::to_string(first)
                                : "groups " + std::to_string(first) + "-" + std::to_string(last);
  if (start % rows != 0 || end % rows != 0) return "rows of " + range + " (cut)";
  return range;
}

void print_shards(const Plan& plan, const PlannedParam& p, const Model& model, std::ostream& out) {
  const auto shards = enumerate_shards(plan, p);
  out << "  shards: " << shards.size() << " distinct\n";
  const std::int64_t group_rows = query_group_rows(p, model);
  if (group_rows > 0) {
    out << "  query groups: " << p.global_shape[0] / group_rows << " of " << group_rows
        << " rows (Megatron-Core's per-group q|k|v layout)\n";
  }
  std::vector<std::string> header = {"    ranks", "local shape", "global offset", "padded shape"};
  if (group_rows > 0) header.emplace_back("query groups");
  driver::TextTable table(header);
  for (const ShardClass& c : shards) {
    std::string offset = shape_text(c.geom.global_offset);
    if (!c.geom.boxes.empty()) {
      offset.clear();
      for (const ShardBox& b : c.geom.boxes)
        offset +=
            (offset.empty() ? "" : " + ") + shape_text(b.shape) + "@" + shape_text(b.global_offset);
    }
    std::vector<std::string> row = {"    " + c.ranks.to_string(), shape_text(c.geom.local_shape),
                                    offset, shape_text(c.geom.padded_shape)};
    if (group_rows > 0) {
      row.push_back(c.geom.boxes.empty() ? groups_text(c.geom, group_rows) : "packed parts");
    }
    table.add_row(row);
  }
  out << table.render();
}

// Explaining a source expert: only the shards holding rows of expert `e`
// (dim 0 of the stacked param), the row each holds it at, and their ranks.
void print_expert_shards(const Plan& plan, const PlannedParam& p, std::int64_t e,
                         std::ostream& out) {
  driver::TextTable table(
      {"    ranks", "local row", "piece of the expert", "global offset", "local shape"});
  RankSet holders;
  std::int64_t classes = 0;
  for (const ShardClass& c : enumerate_shards(plan, p)) {
    const Shape& local = c.geom.local_shape;
    const Shape& off = c.geom.global_offset;
    if (local.empty() || local[0] == 0 || e < off[0] || e >= off[0] + local[0]) continue;
    Shape piece(local.begin() + 1, local.end());
    Shape piece_off(off.begin() + 1, off.end());
    table.add_row({"    " + c.ranks.to_string(), std::to_string(e - off[0]),
                   shape_text(piece) + " at " + shape_text(piece_off), shape_text(off),
                   shape_text(local)});
    holders = holders.unite(c.ranks);
    ++classes;
  }
  out << "  expert " << e << " is held by " << holders.size() << " ranks (" << holders.to_string()
      << "), in " << classes << " distinct shards:\n";
  out << table.render();
}

void print_explanation(const Plan& plan, const Recipe& recipe, const Model& model,
                       const PlannedParam& p, std::int64_t expert, std::ostream& out) {
  out << p.name << "\n";
  field(out, "dtype", std::string(dtype_name(p.dtype)));
  field(out, "global shape", shape_text(p.global_shape));
  field(out, "requires_grad", p.requires_grad ? "true" : "false");
  field(out, "rule", rule_text(p, recipe));
  if (p.scale_of)  // docs/semantics.md "FP8 block-quantized checkpoints"
    field(out, "fp8 scale",
          "follows " + plan.params.at(*p.scale_of).name +
              " (its rule and placements, split in whole blocks)");
  field(out, "mesh",
        std::string(mesh_kind_name(p.mesh)) + " (" + driver::mesh_text(plan.mesh_of(p)) + ")");
  print_placements(plan, p, out);
  std::string uneven = split_rule_name(p.uneven);
  if (p.uneven == SplitRule::Pad)
    uneven += " (every piece allocates a multiple of " + std::to_string(p.pad_multiple) +
              " rows; pad rows at the end)";
  if (p.unit > 1) uneven += "; unit " + std::to_string(p.unit) + " rows (never cut)";
  field(out, "uneven", uneven);
  if (!p.geometry.parts.empty()) {
    std::string parts;
    for (std::int64_t x : p.geometry.parts)
      parts += (parts.empty() ? "" : ", ") + std::to_string(x);
    field(out, "packed",
          std::to_string(p.geometry.parts.size()) + " parts on dim " +
              std::to_string(p.geometry.parts_dim) + " [" + parts +
              "], each split on its own; local tensor = pieces in part order");
    const auto& replicas = p.geometry.part_replicas;
    std::string shared;
    for (std::size_t i = 0; i < replicas.size() && i < p.geometry.part_names.size(); ++i)
      if (replicas[i] > 1)
        shared += (shared.empty() ? "" : ", ") + p.geometry.part_names[i] + " shared by " +
                  std::to_string(replicas[i]) + " consecutive ranks of the split";
    if (!shared.empty()) field(out, "replicas", shared + " (vLLM num_kv_head_replicas)");
  }
  if (p.fused) {
    const FusedLayout& f = *p.fused;
    std::string parts;
    for (std::size_t i = 0; i < f.parts.size(); ++i)
      parts += (i ? ", " : "") + f.part_names[i] + " " + std::to_string(f.parts[i]);
    std::string text =
        std::string(fused_order_name(f)) + " on dim " + std::to_string(f.dim) + " [" + parts + "]";
    if (f.groups > 1)
      text +=
          " in " + std::to_string(f.groups) + " groups of " + std::to_string(fused_group_extent(f));
    field(out, "fused",
          text + "; " + f.source + "; split part by part: `" +
              fused_packed_line(f, p.global_shape.size()) + "`");
  }
  if (plan.virtual_stages > 1) {
    const std::int64_t chunk =
        static_cast<std::int64_t>(p.virtual_stage) * plan.num_stages + p.stage;
    std::string text =
        std::to_string(p.stage) + ", virtual stage " + std::to_string(p.virtual_stage) + " of " +
        std::to_string(plan.virtual_stages) + ": model chunk " + std::to_string(chunk) + " of " +
        std::to_string(plan.num_stages * plan.virtual_stages);
    const auto k = static_cast<std::size_t>(chunk);
    if (k < plan.model_chunks.size() && plan.model_chunks[k].first_block >= 0) {
      text += " (layer blocks " + std::to_string(plan.model_chunks[k].first_block) + "-" +
              std::to_string(plan.model_chunks[k].end_block - 1) + ")";
    }
    field(out, "stage", text);
  } else {
    field(out, "stage", std::to_string(p.stage));
  }
  field(out, "alias", alias_text(plan, p));
  print_stacked(plan, p, out);
  print_fsdp(p, out);
  if (expert >= 0) {
    print_expert_shards(plan, p, expert, out);
  } else {
    print_shards(plan, p, model, out);
  }
}

// The expert `fqn` names of pre-stacked `p` (name_before + e + name_after,
// e in [0, count) written without leading zeros), or -1.
std::int64_t prestacked_expert(const PlannedParam& p, std::string_view fqn) {
  const PlannedParam::PreStacked& ps = *p.prestacked;
  if (fqn.size() <= ps.name_before.size() + ps.name_after.size() ||
      !fqn.starts_with(ps.name_before) || !fqn.ends_with(ps.name_after))
    return -1;
  const std::string_view digits =
      fqn.substr(ps.name_before.size(), fqn.size() - ps.name_before.size() - ps.name_after.size());
  if (digits.size() > 1 && digits.front() == '0') return -1;
  std::int64_t e = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), e);
  if (ec != std::errc() || end != digits.data() + digits.size() || e < 0 || e >= ps.count)
    return -1;
  return e;
}

// The planned param named `fqn`, or the stacked param that absorbed it
// (`expert` set to its index there).
const PlannedParam* find_param(const Plan& plan, const std::string& fqn, std::int64_t& expert,
                               std::ostream& out) {
  for (const auto& p : plan.params) {
    if (p.name == fqn) return &p;
  }
  for (const auto& p : plan.params) {
    if (p.prestacked) {
      expert = prestacked_expert(p, fqn);
      if (expert < 0) continue;
      out << fqn << " is expert " << expert << " of pre-stacked param " << p.name << " (row "
          << expert << " of dim 0)\n\n";
      return &p;
    }
    const auto it = std::find(p.stacked_from.begin(), p.stacked_from.end(), fqn);
    if (it == p.stacked_from.end()) continue;
    expert = it - p.stacked_from.begin();
    out << fqn << " is expert " << expert << " of stacked param " << p.name << " (row " << expert
        << " of dim 0)\n\n";
    return &p;
  }
  expert = -1;
  return nullptr;
}

void print_unknown(const Plan& plan, const std::string& fqn, std::ostream& err) {
  std::vector<std::string> names;
  for (const auto& p : plan.params) {
    names.push_back(p.name);
    names.insert(names.end(), p.stacked_from.begin(), p.stacked_from.end());
    if (p.prestacked) names.push_back(expert_fqn(p, 0));
  }
  driver::print_error(err, "no parameter named '" + fqn + "' in the model");
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
  driver::Session& s = *scope;
  const ExitCode code = driver::plan_or_report(opt.common, fs, s, err);
  if (code != ExitCode::Ok) return code;
  std::int64_t expert = -1;
  const PlannedParam* p = find_param(*s.plan, opt.fqn, expert, out);
  if (p == nullptr) {
    print_unknown(*s.plan, opt.fqn, err);
    return ExitCode::Usage;
  }
  print_explanation(*s.plan, *s.recipe, *s.model, *p, expert, out);
  return ExitCode::Ok;
}

}  // namespace shardc
