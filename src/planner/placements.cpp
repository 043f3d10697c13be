// Placement resolution: the matched rule's (or experts entry's) `{axis:
// placement}` map becomes one ResolvedPlacement per mesh axis, and the
// split chains of contract §5.2 (axes sharding the same dim nest in mesh order).
#include <algorithm>
#include <string>

#include "core/fused.hpp"

#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

const std::vector<AxisPlacement>& placements_of(const PlannedParam& param, const Recipe& recipe) {
  const auto i = static_cast<std::size_t>(param.rule.index);
  return param.rule.kind == RuleRef::Kind::Experts ? recipe.experts[i].placements
                                                   : recipe.rules[i].placements;
}

std::string axis_names(const Mesh& mesh) {
  std::string text;
  for (const MeshAxis& axis : mesh.axes) text += (text.empty() ? "" : ", ") + axis.name;
  return text;
}

Diagnostic make(DiagCode code, const AxisPlacement& ap, const PlannedParam& param,
                std::string message, std::string hint) {
  Diagnostic diag = param_diagnostic(param, code, ap.loc);
  diag.message = std::move(message);
  diag.hint = std::move(hint);
  return diag;
}

// Resolves one `axis: placement` entry into `out`; false after reporting.
bool resolve_one(const AxisPlacement& ap, const PlannedParam& param, const Mesh& mesh,
                 const Plan& plan, std::vector<ResolvedPlacement>& out, GroupedReporter& rep) {
  // Grouping key of this entry's diagnostics: built only when one is reported.
  const auto key = [&] { return std::to_string(param.rule.index) + ':' + ap.axis; };
  const int axis = mesh.find(ap.axis);
  const char* mesh_name = param.mesh == MeshKind::Expert ? "expert_mesh" : "mesh";
  if (axis < 0) {
    rep.add(make(DiagCode::EAxis, ap, param,
                 std::string("placement names axis '") + ap.axis + "' but the " + mesh_name +
                     " has no such axis",
                 std::string("axes of the ") + mesh_name + ": " + axis_names(mesh)),
            key());
    return false;
  }
  if (ap.placement.kind == Placement::Kind::Partial) {
    rep.add(make(DiagCode::EPartial, ap, param,
                 "'" + ap.placement.text + "' on parameter " + param.name +
                     ": parameters cannot be Partial (pending reductions belong to activations "
                     "and gradients)",
                 "use Shard(d) or Replicate()"),
            key());
    return false;
  }
  const int pp = param.mesh == MeshKind::Expert ? plan.expert_pipeline_axis : plan.pipeline_axis;
  if (axis == pp) {
    rep.add(make(DiagCode::EPipeline, ap, param,
                 "rule places parameters on the pipeline axis '" + ap.axis + "'",
                 "the pipeline axis assigns stages; remove it from the placements"),
            key());
    return false;
  }
  if (ap.placement.kind == Placement::Kind::Replicate) return true;
  const int ndim = static_cast<int>(param.global_shape.size());
  const int dim = ap.placement.dim < 0 ? ap.placement.dim + ndim : ap.placement.dim;
  if (dim < 0 || dim >= ndim) {
    rep.add(
        make(DiagCode::EShardDim, ap, param,
             "'" + ap.placement.text + "' is out of range for " + param.name + " with " +
                 std::to_string(ndim) + " dim" + (ndim == 1 ? "" : "s"),
             ndim == 0 ? std::string("a 0-d parameter can only be replicated")
                       : "valid dims: " + std::to_string(-ndim) + ".." + std::to_string(ndim - 1)),
        key() + ':' + std::to_string(ndim));
    return false;
  }
  auto& rp = out[static_cast<std::size_t>(axis)];
  rp.kind = ResolvedPlacement::Kind::Shard;
  rp.dim = dim;
  return true;
}

void build_chains(PlannedParam& param, const Mesh& mesh) {
  ParamGeometry& geom = param.geometry;
  geom.global_shape = param.global_shape;
  geom.per_dim.assign(param.global_shape.size(), {});
  for (std::size_t a = 0; a < param.placements.size(); ++a) {
    const ResolvedPlacement& rp = param.placements[a];
    if (rp.kind == ResolvedPlacement::Kind::Replicate) continue;
    DimSplit split;
    split.axes = {static_cast<int>(a)};
    split.axis_sizes = {mesh.axes[a].size};
    split.ways = mesh.axes[a].size;
    split.rule = param.uneven;
    split.pad_multiple = param.pad_multiple;
    split.unit = param.unit;
    geom.per_dim[static_cast<std::size_t>(rp.dim)].push_back(std::move(split));
  }
}

// Parts with `replicas: R` (recipe.hpp PackedSpec): blocked parts on a dim the rule splits
// exactly once (one placement, possibly over flattened axes) into W ways, R dividing W. E-PACKED
// otherwise, naming the part, R, the split and the replica counts that would do.
bool resolve_replicas(PlannedParam& param, const PackedSpec& spec, const FusedLayout& layout,
                      GroupedReporter& rep) {
  const bool any = std::any_of(spec.replicas.begin(), spec.replicas.end(),
                               [](std::int64_t replicas) { return replicas > 1; });
  if (!any) return true;
  const auto& chain = param.geometry.per_dim[static_cast<std::size_t>(layout.dim)];
  std::string why;
  std::string hint;
  std::int64_t ways = 1;
  if (chain.size() != 1) {
    why = "a part with `replicas` needs the packed dim " + std::to_string(layout.dim) +
          " split by exactly one placement of the rule, it has " + std::to_string(chain.size());
    hint = "split the packed dim once (Shard(" + std::to_string(layout.dim) +
           ") on the tp axis), or drop `replicas`";
  } else {
    ways = chain[0].ways;
    for (std::size_t i = 0; i < spec.replicas.size() && why.empty(); ++i) {
      if (ways % spec.replicas[i] == 0) continue;
      const std::string part =
          spec.names[i].empty() ? "part " + std::to_string(i) : "part '" + spec.names[i] + "'";
      why = part + ": `replicas: " + std::to_string(spec.replicas[i]) + "` does not divide the " +
            std::to_string(ways) + "-way split of dim " + std::to_string(layout.dim);
      hint =
          "R consecutive ranks of the split share the part's piece, so R divides the split "
          "(vLLM: num_kv_head_replicas = tp / KV heads)";
    }
  }
  if (!why.empty()) {
    Diagnostic diag = param_diagnostic(param, DiagCode::EPacked,
                                       spec.replicas_loc.line > 0 ? spec.replicas_loc : spec.loc);
    diag.message = param.name + ": " + why;
    diag.hint = hint;
    rep.add(std::move(diag), std::string(param.rule.kind == RuleRef::Kind::Experts ? "e" : "r") +
                                 std::to_string(param.rule.index) + ":replicas:" + why);
    return false;
  }
  param.geometry.part_replicas = spec.replicas;
  param.geometry.part_names = layout.part_names;
  return true;
}

// `packed:` of the rule (contract §5.10): part extents on the normalized dim. E-PACKED when
// the dim is out of range or the parts do not add up to its extent. Blocked parts become the
// geometry's parts (each split on its own, boxes); interleaved and per-group layouts hold every
// part's piece in one contiguous run, so they split the dim in whole groups (the unit).
bool resolve_packed(PlannedParam& param, const Recipe& recipe, GroupedReporter& rep) {
  if (param.scale_of) return true;
  const PackedSpec* packed = packed_spec(param, recipe);
  if (packed == nullptr) return true;
  std::string why;
  std::string hint;
  const std::optional<FusedLayout> layout = packed_layout(*packed, param.global_shape, &why, &hint);
  if (!layout) {
    Diagnostic diag = param_diagnostic(param, DiagCode::EPacked, packed->loc);
    diag.message = param.name + ": " + why;
    diag.hint = hint;
    rep.add(std::move(diag), std::string(param.rule.kind == RuleRef::Kind::Experts ? "e" : "r") +
                                 std::to_string(param.rule.index) + ":" + why);
    return false;
  }
  if (layout->groups > 1) {
    const std::int64_t group = fused_group_extent(*layout);
    for (DimSplit& split : param.geometry.per_dim[static_cast<std::size_t>(layout->dim)])
      split.unit = group * std::max<std::int64_t>(1, param.unit);  // `unit` counts groups there
    param.geometry.group_dim = layout->dim;
    param.geometry.group_extent = group;
    return true;
  }
  if (!resolve_replicas(param, *packed, *layout, rep)) return false;
  param.geometry.parts = layout->parts;
  param.geometry.parts_dim = layout->dim;
  return true;
}

}  // namespace

std::optional<FusedLayout> packed_layout(const PackedSpec& spec, const Shape& shape,
                                         std::string* why, std::string* hint) {
  const int ndim = static_cast<int>(shape.size());
  const int dim = spec.dim < 0 ? spec.dim + ndim : spec.dim;
  if (dim < 0 || dim >= ndim) {
    *why = "packed dim " + std::to_string(spec.dim) + " is out of range for a param with " +
           std::to_string(ndim) + " dims";
    *hint = "packed parts concatenate on an existing dim (SwiGLU and fused qkv: 0)";
    return std::nullopt;
  }
  const std::int64_t extent = shape[static_cast<std::size_t>(dim)];
  FusedLayout layout;
  layout.dim = dim;
  layout.source = "recipe `packed`";
  layout.parts = spec.sizes;
  if (layout.parts.empty()) {
    if (extent % spec.count != 0) {
      *why = "dim " + std::to_string(dim) + " extent " + std::to_string(extent) + " is not " +
             std::to_string(spec.count) + " equal parts";
      *hint = "give the part extents as a list, e.g. `parts: [q, k, v]`";
      return std::nullopt;
    }
    layout.parts.assign(static_cast<std::size_t>(spec.count), extent / spec.count);
  }
  std::int64_t sum = 0;
  for (std::int64_t part : layout.parts) sum = part > extent - sum ? extent + 1 : sum + part;
  if (sum != extent) {
    *why = "packed parts do not add up to dim " + std::to_string(dim) + " extent " +
           std::to_string(extent);
    *hint = "the parts must tile the dim exactly, in order";
    return std::nullopt;
  }
  if (spec.interleave > 0) {
    for (std::int64_t part : layout.parts)
      if (part != layout.parts.front() || part % spec.interleave != 0) {
        *why = "`interleave: " + std::to_string(spec.interleave) +
               "` needs equal parts that are whole blocks of it";
        *hint = "for unequal parts stored per group (GQA q|k|v per KV group) say `groups: G`";
        return std::nullopt;
      }
    layout.groups = layout.parts.front() / spec.interleave;
  } else if (spec.groups > 0) {
    for (std::int64_t part : layout.parts)
      if (part % spec.groups != 0) {
        *why = "part extent " + std::to_string(part) + " is not " + std::to_string(spec.groups) +
               " whole groups";
        *hint =
            "every part holds the same number of elements in each group (Megatron "
            "linear_qkv: groups = query groups)";
        return std::nullopt;
      }
    layout.groups = spec.groups;
  }
  if ((spec.interleave > 0 || spec.groups > 0) &&
      std::any_of(spec.replicas.begin(), spec.replicas.end(),
                  [](std::int64_t replicas) { return replicas > 1; })) {
    *why = "`replicas` on a part of an interleaved or per-group layout";
    *hint =
        "replicas apply to blocked parts (q | k | v, each contiguous); a per-group layout "
        "already keeps each group's parts together";
    return std::nullopt;
  }
  for (std::size_t i = 0; i < layout.parts.size(); ++i)
    layout.part_names.push_back(i < spec.names.size() && !spec.names[i].empty()
                                    ? spec.names[i]
                                    : "part " + std::to_string(i));
  return layout;
}

namespace {

// Megatron's padded vocabulary (rule `vocab_padding`; megatron/training/
// tokenizer/tokenizer.py _vocab_size_with_padding: the vocabulary rounded up
// to make_vocab_size_divisible_by x tensor_model_parallel_size): dim 0's
// global extent becomes the padded one, the shape a Megatron checkpoint
// stores, so every rank gets padded / ways whole rows and the optimizer state
// is counted on the allocated rows. The multiple counts every axis that
// splits dim 0 (TP; with a CP-like axis too, its product).
bool pad_vocab(PlannedParam& param, const Mesh& mesh, const Recipe& recipe, GroupedReporter& rep) {
  if (param.rule.kind != RuleRef::Kind::Rule) return true;
  const Rule& rule = recipe.rules[static_cast<std::size_t>(param.rule.index)];
  if (rule.vocab_divisible_by <= 0) return true;
  const auto fail = [&](const std::string& why, const std::string& hint) {
    Diagnostic diag = param_diagnostic(param, DiagCode::EPad, rule.vocab_loc);
    diag.message = param.name + ": " + why;
    diag.hint = hint;
    rep.add(std::move(diag), std::to_string(param.rule.index) + ":vocab:" + why);
    return false;
  };
  if (param.global_shape.empty())
    return fail("`vocab_padding` pads dim 0 (the vocabulary), and the param is 0-d",
                "match the embedding and output layer weights only ([vocab, hidden])");
  if (rule.packed)
    return fail("`vocab_padding` with `packed`: a fused tensor's dim 0 is not a vocabulary",
                "give the embedding and output layer a rule of their own");
  std::int64_t ways = 1;
  for (std::size_t a = 0; a < param.placements.size(); ++a)
    if (param.placements[a].kind == ResolvedPlacement::Kind::Shard && param.placements[a].dim == 0)
      ways *= mesh.axes[a].size;
  const std::int64_t multiple = rule.vocab_divisible_by * ways;  // both bounded: no overflow
  const std::int64_t rows = param.global_shape[0];
  std::int64_t padded = 0;
  if (__builtin_add_overflow(rows, multiple - 1, &padded))
    return fail("dim 0 of " + std::to_string(rows) + " rows cannot be padded to a multiple of " +
                    std::to_string(multiple),
                "check the model's vocabulary size");
  param.vocab_rows = rows;
  param.vocab_multiple = multiple;
  param.global_shape[0] = padded / multiple * multiple;
  return true;
}

}  // namespace

void resolve_placements(std::vector<PlannedParam>& params, const Plan& plan, const Recipe& recipe,
                        DiagnosticSink& sink) {
  GroupedReporter rep;
  for (PlannedParam& param : params) {
    if (param.rule.index < 0) continue;  // uncovered: already reported
    const Mesh& mesh = plan.mesh_of(param);
    param.placements.assign(mesh.axes.size(), ResolvedPlacement{});
    bool ok = true;
    for (const AxisPlacement& ap : placements_of(param, recipe))
      ok = resolve_one(ap, param, mesh, plan, param.placements, rep) && ok;
    if (!ok || !pad_vocab(param, mesh, recipe, rep)) continue;
    build_chains(param, mesh);
    if (!resolve_packed(param, recipe, rep)) param.geometry.per_dim.clear();
  }
  rep.flush(sink);
}

}  // namespace shardc::passes
