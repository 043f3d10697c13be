// The communication adapter from a Plan (src/comm/comm.hpp (b)): groups
// read off the meshes, per-rank bytes per shard class (`rank_sums`), ranks of
// equal figures as classes, per-(role, collective) statistics over ranks.
#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "comm/comm.hpp"
#include "core/plan.hpp"
#include "planner/buffers.hpp"
#include "support/limits.hpp"

namespace shardc {
namespace {

enum Column : std::size_t {
  kFsdpParam,
  kFsdpGrad,
  kFsdpRoot,
  kExpertFsdpParam,
  kExpertFsdpGrad,
  kReplicatedGrad,
  kReplicatedParam,
  kExpertReplicatedGrad,
  kExpertReplicatedParam,
  kTiedGrad,
  kWidth,
};

bool expert_side(const Plan& plan, const PlannedParam& param) {
  return param.mesh == MeshKind::Expert && plan.expert.has_value();
}

// A decoder layer's param: a `layers` / `h` / `layer` segment followed by a number
// (the planner's training_shape pass reads layers the same way).
bool layer_param(const PlannedParam& param) {
  const std::string& fqn = param.name;
  std::size_t pos = 0;
  bool after_layers = false;
  while (pos <= fqn.size()) {
    std::size_t dot = fqn.find('.', pos);
    if (dot == std::string::npos) dot = fqn.size();
    const std::string_view seg(fqn.data() + pos, dot - pos);
    if (after_layers) {
      return !seg.empty() && seg.find_first_not_of("0123456789") == std::string_view::npos;
    }
    after_layers = seg == "layers" || seg == "h" || seg == "layer";
    pos = dot + 1;
  }
  return false;
}

// Axes of the param's mesh that a rule (not FSDP) splits, on dims >= first_dim (or dim 0 only).
void rule_axes(const PlannedParam& param, std::set<int>& out, bool dim0_only, bool skip_dim0) {
  for (std::size_t dim = 0; dim < param.geometry.per_dim.size(); ++dim) {
    if ((dim0_only && dim != 0) || (skip_dim0 && dim == 0)) continue;
    for (const DimSplit& split : param.geometry.per_dim[dim]) {
      if (split.fsdp) continue;
      out.insert(split.axes.begin(), split.axes.end());
    }
  }
}

void fsdp_axes(const PlannedParam& param, std::set<int>& out) {
  for (const std::vector<DimSplit>& chain : param.geometry.per_dim)
    for (const DimSplit& split : chain)
      if (split.fsdp) out.insert(split.axes.begin(), split.axes.end());
}

// Whether some group of `axes` on `mesh` has ranks on two nodes (node = rank / per_node):
// every rank is compared with its group's base (coordinates on `axes` zeroed). O(world).
bool crosses_nodes(const Mesh& mesh, const std::set<int>& axes, std::int64_t per_node,
                   std::int64_t world) {
  if (per_node <= 0 || axes.empty()) return false;
  std::vector<std::int64_t> stride(mesh.axes.size(), 1);
  for (std::size_t i = mesh.axes.size(); i-- > 1;) stride[i - 1] = stride[i] * mesh.axes[i].size;
  for (std::int64_t rank = 0; rank < world; ++rank) {
    std::int64_t base = rank;
    for (int axis : axes) {
      const auto axis_index = static_cast<std::size_t>(axis);
      base -= (rank / stride[axis_index]) % mesh.axes[axis_index].size * stride[axis_index];
    }
    if (base / per_node != rank / per_node) return true;
  }
  return false;
}

CommGroup make_group(const Mesh& mesh, const std::set<int>& axes, std::int64_t per_node,
                     std::int64_t world) {
  CommGroup group;
  for (int axis : axes) {
    const MeshAxis& mesh_axis = mesh.axes[static_cast<std::size_t>(axis)];
    group.size *= mesh_axis.size;
    group.axes += (group.axes.empty() ? "" : " x ") + mesh_axis.name;
  }
  group.crosses_nodes = group.size > 1 && crosses_nodes(mesh, axes, per_node, world);
  return group;
}

std::set<int> minus(std::set<int> axes, const std::set<int>& removed) {
  for (int axis : removed) axes.erase(axis);
  return axes;
}

std::set<int> all_axes(const Mesh& mesh) {
  std::set<int> out;
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) out.insert(static_cast<int>(i));
  return out;
}

}  // namespace

CommReport plan_communication(const Plan& plan, const CommOptions& options) {
  CommReport report;
  const TrainingLayout& tl = plan.training_layout;
  if (!tl.active) {
    report.note =
        "the recipe gives no training shape (`training.seq_len`): communication per "
        "step depends on it";
    return report;
  }
  if (!tl.arch) {
    report.note = "the model has no `" + tl.arch_missing +
                  "` attribute (copy it from config.json): communication is not counted";
    return report;
  }
  if (plan.world_size > limits::kMaxMemoryReportWorld) {
    report.note = "the world of " + std::to_string(plan.world_size) +
                  " ranks is above the per-rank report limit of " +
                  std::to_string(limits::kMaxMemoryReportWorld);
    return report;
  }
  const TrainingShape& shape = plan.training.shape;
  const std::int64_t world = plan.world_size;
  const std::int64_t per_node = shape.ranks_per_node.value_or(0);
  report.ranks_per_node = per_node;

  // Axes by role, from the params' splits.
  std::set<int> tp_axes, dense_fsdp, expert_fsdp, ep_axes, expert_tp_axes;
  bool vocab_parallel = false;
  for (const PlannedParam& param : plan.params) {
    if (expert_side(plan, param)) {
      if (stacked_expert(param)) {
        rule_axes(param, ep_axes, true, false);
        rule_axes(param, expert_tp_axes, false, true);
      }
      fsdp_axes(param, expert_fsdp);
      continue;
    }
    fsdp_axes(param, dense_fsdp);
    if (stacked_expert(param)) continue;
    if (layer_param(param)) {
      rule_axes(param, tp_axes, false, false);
    } else if (!param.geometry.per_dim.empty()) {
      std::set<int> dim0;
      rule_axes(param, dim0, true, false);
      vocab_parallel = vocab_parallel || !dim0.empty();
    }
  }
  std::set<int> pp_axis, cp_axis;
  if (plan.pipeline_axis >= 0) pp_axis.insert(plan.pipeline_axis);
  tp_axes = minus(tp_axes, pp_axis);
  if (shape.context_parallel) {
    const int cp_axis_index = plan.dense.find(*shape.context_parallel);
    if (cp_axis_index >= 0) cp_axis.insert(cp_axis_index);
  }
  // Gradients are summed over every axis the params are replicated on for data
  // (not the pipeline, not tp): FSDP's axes reduce-scatter, the rest all-reduce.
  const std::set<int> grad_axes = minus(minus(all_axes(plan.dense), pp_axis), tp_axes);
  CommGroups& groups = report.groups;
  auto dense_group = [&](const std::set<int>& axes) {
    return make_group(plan.dense, axes, per_node, world);
  };
  groups.of(CommRole::Fsdp) = dense_group(dense_fsdp);
  if (!dense_fsdp.empty())
    groups.of(CommRole::Replicate) = dense_group(minus(grad_axes, dense_fsdp));
  groups.of(CommRole::DataParallel) = dense_group(grad_axes);
  groups.of(CommRole::Tp) = dense_group(tp_axes);
  groups.of(CommRole::Cp) = dense_group(cp_axis);
  groups.of(CommRole::Pp) = dense_group(pp_axis);
  if (plan.zero.stage > 0) {
    const std::set<int> zero(plan.zero.dense.axes.begin(), plan.zero.dense.axes.end());
    groups.of(CommRole::Zero) = make_group(
        plan.zero.dense.mesh == MeshKind::Expert && plan.expert ? *plan.expert : plan.dense, zero,
        per_node, world);
  }
  if (plan.expert) {
    std::set<int> epp;
    if (plan.expert_pipeline_axis >= 0) epp.insert(plan.expert_pipeline_axis);
    auto expert_group = [&](const std::set<int>& axes) {
      return make_group(*plan.expert, axes, per_node, world);
    };
    const std::set<int> expert_grad =
        minus(minus(minus(all_axes(*plan.expert), epp), ep_axes), expert_tp_axes);
    groups.of(CommRole::Ep) = expert_group(minus(ep_axes, epp));
    groups.of(CommRole::ExpertFsdp) = expert_group(expert_fsdp);
    if (!expert_fsdp.empty()) {
      groups.of(CommRole::ExpertReplicate) = expert_group(minus(expert_grad, expert_fsdp));
    }
    groups.of(CommRole::ExpertDataParallel) = expert_group(expert_grad);
    if (plan.zero.stage > 0 && plan.zero.has_experts) {
      const std::set<int> zero(plan.zero.expert.axes.begin(), plan.zero.expert.axes.end());
      groups.of(CommRole::ExpertZero) = expert_group(zero);
    }
  } else {
    // Stacked experts on the dense mesh: the axes splitting their expert dim.
    std::set<int> ep;
    for (const PlannedParam& param : plan.params)
      if (stacked_expert(param)) rule_axes(param, ep, true, false);
    groups.of(CommRole::Ep) = dense_group(minus(ep, pp_axis));
  }
  if (!plan.tie_sync.empty() && plan.pipeline_axis >= 0) {
    groups.of(CommRole::TiedSync) = dense_group(pp_axis);
    groups.of(CommRole::TiedSync).size = 2;  // the two stages holding the tie's ends
  }

  CommLayout& layout = report.layout;
  layout.degrees = tl.degrees;
  layout.ep = groups.of(CommRole::Ep).size;
  layout.pp = plan.num_stages;
  layout.virtual_stages = plan.virtual_stages;
  layout.microbatches = tl.microbatches;
  layout.schedule = tl.schedule;
  // The command's option, else the recipe's `fsdp.reshard_after_forward`.
  layout.reshard_after_forward = options.reshard_after_forward;
  if (options.reshard_after_forward) {
    layout.reshard_after_forward_from = "--reshard-after-forward";
  } else if (plan.fsdp_reshard_after_forward) {
    layout.reshard_after_forward = plan.fsdp_reshard_after_forward;
    layout.reshard_after_forward_from = "recipe";
  }
  layout.zero_stage = plan.zero.stage;
  layout.loss_parallel = options.loss_parallel;
  layout.tp_per_linear = options.tp_inputs == CommOptions::TpInputs::PerLinear;
  layout.vocab_parallel = vocab_parallel;

  // The root FSDP2 unit's params (not gathered again in backward).
  std::vector<char> root(plan.params.size(), 0);
  for (const BufferSpec& spec : plan.buffers) {
    if (spec.kind != BufferKind::Fsdp2AllGather) continue;
    for (const Fsdp2Unit& unit : plan_fsdp2(plan, spec).units)
      if (unit.name.empty() && unit.mesh == MeshKind::Dense)
        for (std::size_t i : unit.params) root[i] = 1;
    break;
  }
  std::set<std::string> tied;
  for (const TieSyncGroups& tie : plan.tie_sync) {
    tied.insert(tie.source);
    tied.insert(tie.alias);
  }
  const auto base = plan.params.data();
  const std::vector<std::int64_t> sums = rank_sums(
      plan, kWidth,
      [&](const PlannedParam& param, const ShardGeom& geom, std::span<std::int64_t> out) {
        const std::int64_t param_size = element_size(param.dtype);
        const std::int64_t grad_size = element_size(plan.training.grad_dtype.value_or(param.dtype));
        const std::int64_t padded = numel(geom.padded_shape);
        const std::int64_t local = numel(geom.local_shape);
        const bool expert = expert_side(plan, param);
        const bool grads = param.requires_grad;
        if (param.geometry.fsdp_dim >= 0) {
          out[expert ? kExpertFsdpParam : kFsdpParam] += padded * param_size;
          if (grads) out[expert ? kExpertFsdpGrad : kFsdpGrad] += padded * grad_size;
          const auto index = static_cast<std::size_t>(&param - base);
          if (!expert && index < root.size() && root[index]) out[kFsdpRoot] += padded * param_size;
        } else if (grads) {
          out[expert ? kExpertReplicatedGrad : kReplicatedGrad] += local * grad_size;
          out[expert ? kExpertReplicatedParam : kReplicatedParam] += local * param_size;
        }
        if (grads && tied.count(param.name) > 0) out[kTiedGrad] += local * grad_size;
      });

  // Ranks of equal (stage, bytes) are one class.
  const std::int64_t element_bytes = element_size(tl.activation_dtype);
  std::map<std::array<std::int64_t, kWidth + 1>, std::vector<std::int64_t>> by_key;
  for (std::int64_t rank = 0; rank < world; ++rank) {
    std::array<std::int64_t, kWidth + 1> key{};
    key[0] = plan.stage_of_rank(rank);
    for (std::size_t i = 0; i < kWidth; ++i)
      key[i + 1] = sums[static_cast<std::size_t>(rank) * kWidth + i];
    by_key[key].push_back(rank);
  }
  for (auto& [key, ranks] : by_key) {
    StageCommBytes bytes;
    bytes.stage = static_cast<int>(key[0]);
    bytes.fsdp_param_bytes = key[1 + kFsdpParam];
    bytes.fsdp_grad_bytes = key[1 + kFsdpGrad];
    bytes.fsdp_root_param_bytes = key[1 + kFsdpRoot];
    bytes.expert_fsdp_param_bytes = key[1 + kExpertFsdpParam];
    bytes.expert_fsdp_grad_bytes = key[1 + kExpertFsdpGrad];
    bytes.replicated_grad_bytes = key[1 + kReplicatedGrad];
    bytes.replicated_param_bytes = key[1 + kReplicatedParam];
    bytes.expert_replicated_grad_bytes = key[1 + kExpertReplicatedGrad];
    bytes.expert_replicated_param_bytes = key[1 + kExpertReplicatedParam];
    bytes.tied_grad_bytes = key[1 + kTiedGrad];
    const auto stage = static_cast<std::size_t>(bytes.stage);
    if (stage < tl.stages.size()) bytes.layers = tl.stages[stage];
    CommClass comm_class;
    comm_class.comm = stage_communication(*tl.arch, shape, element_bytes, layout, groups, bytes);
    comm_class.count = static_cast<std::int64_t>(ranks.size());
    comm_class.ranks = RankSet::from_sorted(ranks);
    report.classes.push_back(std::move(comm_class));
  }
  std::sort(report.classes.begin(), report.classes.end(),
            [](const CommClass& lhs, const CommClass& rhs) {
              return lhs.ranks.first() < rhs.ranks.first();
            });

  // Statistics over every rank (classes weighted by their size).
  auto stats_of = [&](const std::vector<std::int64_t>& per_class) {
    std::vector<std::pair<std::int64_t, std::int64_t>> values;  // bytes, ranks
    for (std::size_t i = 0; i < per_class.size(); ++i)
      values.emplace_back(per_class[i], report.classes[i].count);
    std::sort(values.begin(), values.end());
    ByteStats st;
    if (values.empty()) return st;
    st.min = values.front().first;
    st.max = values.back().first;
    std::int64_t seen = 0;
    const std::int64_t at = (world - 1) / 2;
    for (const auto& [value, count] : values) {
      if (seen + count > at) {
        st.median = value;
        break;
      }
      seen += count;
    }
    return st;
  };
  std::vector<std::int64_t> totals;
  for (std::size_t coll = 0; coll < kCollectives; ++coll) {
    std::vector<std::int64_t> per_class;
    for (const CommClass& comm_class : report.classes) {
      std::int64_t sum = 0;
      for (const CommTerm& term : comm_class.comm.terms)
        if (static_cast<std::size_t>(term.collective) == coll) sum += term.bytes;
      per_class.push_back(sum);
    }
    report.per_collective[coll] = stats_of(per_class);
  }
  for (const CommClass& comm_class : report.classes) totals.push_back(comm_class.comm.bytes);
  report.total = stats_of(totals);
  // Per (role, collective).
  for (std::size_t role = 0; role < kCommRoles; ++role) {
    for (std::size_t coll = 0; coll < kCollectives; ++coll) {
      std::vector<std::int64_t> per_class;
      for (const CommClass& comm_class : report.classes) {
        std::int64_t sum = 0;
        for (const CommTerm& term : comm_class.comm.terms)
          if (static_cast<std::size_t>(term.role) == role &&
              static_cast<std::size_t>(term.collective) == coll)
            sum += term.bytes;
        per_class.push_back(sum);
      }
      const ByteStats bs = stats_of(per_class);
      if (bs.max == 0) continue;
      CommStats st;
      st.role = static_cast<CommRole>(role);
      st.collective = static_cast<Collective>(coll);
      const CommGroup& group = groups.of(st.role);
      st.axes = group.axes;
      st.group_size = st.collective == Collective::SendRecv ? 2 : group.size;
      st.crosses_nodes = group.crosses_nodes;
      st.min = bs.min;
      st.median = bs.median;
      st.max = bs.max;
      report.stats.push_back(st);
    }
  }
  for (const CommClass& comm_class : report.classes)
    report.peak = std::max(report.peak, comm_class.comm.bytes);
  for (const CommClass& comm_class : report.classes)
    if (comm_class.comm.bytes == report.peak)
      report.peak_ranks = report.peak_ranks.unite(comm_class.ranks);
  report.counted = true;
  return report;
}

}  // namespace shardc
