// Plan helpers: labels, mesh kinds, stage membership.
#include <string>

#include "core/plan.hpp"
#include "support/assert.hpp"

namespace shardc {

const char* mesh_kind_name(MeshKind kind) { return kind == MeshKind::Expert ? "expert" : "dense"; }

std::string ResolvedPlacement::label() const {
  switch (kind) {
    case Kind::Replicate:
      return "Replicate()";
    case Kind::Shard:
      return "Shard(" + std::to_string(dim) + ")";
    case Kind::StridedShard:
      return "_StridedShard(" + std::to_string(dim) + ", sf=" + std::to_string(split_factor) + ")";
  }
  return "Replicate()";
}

bool stacked_expert(const PlannedParam& param) {
  return !param.stacked_from.empty() || param.prestacked.has_value();
}

std::int64_t expert_count(const PlannedParam& param) {
  if (param.prestacked) return param.prestacked->count;
  return static_cast<std::int64_t>(param.stacked_from.size());
}

std::string expert_fqn(const PlannedParam& param, std::int64_t expert) {
  SHARDC_ASSERT(expert >= 0 && expert < expert_count(param),
                param.name + ": no expert " + std::to_string(expert));
  if (!param.prestacked) return param.stacked_from[static_cast<std::size_t>(expert)];
  return param.prestacked->name_before + std::to_string(expert) + param.prestacked->name_after;
}

int Plan::stage_of_rank(std::int64_t rank) const {
  if (pipeline_axis < 0) return 0;
  return static_cast<int>(mesh_coords(dense, rank)[static_cast<std::size_t>(pipeline_axis)]);
}

const ZeroGroup& Plan::zero_group_of(const PlannedParam& param) const {
  const bool expert_class = param.mesh == MeshKind::Expert || stacked_expert(param);
  return expert_class ? zero.expert : zero.dense;
}

std::int64_t Plan::zero_index(const ZeroGroup& group, std::int64_t rank) const {
  const Mesh& mesh = group.mesh == MeshKind::Expert && expert ? *expert : dense;
  const std::vector<std::int64_t> coords = mesh_coords(mesh, rank);
  std::int64_t index = 0;
  for (int axis : group.axes) {
    const auto i = static_cast<std::size_t>(axis);
    index = index * mesh.axes[i].size + coords[i];
  }
  return index;
}

bool Plan::holds(std::int64_t rank, const PlannedParam& param) const {
  return pipeline_axis < 0 || stage_of_rank(rank) == param.stage;
}

}  // namespace shardc
