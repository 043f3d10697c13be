// A small plan built by hand (no front end, no planner passes) for back-end
// tests: pp=2 x tp=2, an embedding sharded on tp, an alias on the same
// stage, a tied copy on the other stage, a replicated norm.
#pragma once

#include <string>
#include <vector>

#include "core/plan.hpp"

namespace shardc::test {

inline Mesh two_axis_mesh() {
  Mesh m;
  m.axes = {{"pp", 2, {}, {}}, {"tp", 2, {}, {}}};
  return m;
}

inline ParamGeometry tp_rows(Shape shape) {
  ParamGeometry g;
  g.global_shape = shape;
  g.per_dim.resize(shape.size());
  DimSplit s;
  s.axes = {1};
  s.axis_sizes = {2};
  s.ways = 2;
  g.per_dim[0].push_back(s);
  return g;
}

inline PlannedParam planned(const std::string& name, Shape shape, DType t, int stage,
                            bool tp_sharded) {
  PlannedParam p;
  p.name = name;
  p.dtype = t;
  p.global_shape = shape;
  p.stage = stage;
  p.placements.resize(2);
  if (tp_sharded) {
    p.placements[1].kind = ResolvedPlacement::Kind::Shard;
    p.geometry = tp_rows(shape);
  } else {
    p.geometry.global_shape = shape;
    p.geometry.per_dim.resize(shape.size());
  }
  p.rule = {RuleRef::Kind::Rule, 0, "**"};
  return p;
}

inline Plan small_plan() {
  Plan plan;
  plan.model_name = "tiny";
  plan.model_sha256 = "aa";
  plan.recipe_sha256 = "bb";
  plan.world_size = 4;
  plan.dense = two_axis_mesh();
  plan.pipeline_axis = 0;
  plan.num_stages = 2;
  plan.params.push_back(planned("embed", {5, 3}, DType::BFloat16, 0, true));
  plan.params.push_back(planned("embed_alias", {5, 3}, DType::BFloat16, 0, true));
  plan.params.back().alias_of = 0;
  plan.params.push_back(planned("norm", {3}, DType::Float32, 1, false));
  plan.params.push_back(planned("head", {5, 3}, DType::BFloat16, 1, true));
  plan.params.back().alias_of = 0;
  plan.tie_sync.push_back({"embed", "head", {{0, 2}, {1, 3}}});
  Diagnostic d;
  d.severity = Severity::Warning;
  d.code = DiagCode::WExperts;
  d.message = "30 experts over ep=8";
  d.loc = {"recipe.yaml", 3, 5};
  d.ranges = {{0, 4}, {4, 8}};
  plan.diagnostics.push_back(d);
  return plan;
}

}  // namespace shardc::test
