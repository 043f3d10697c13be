// Hand-built models and recipes for planner tests (no parsing involved).
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/model.hpp"
#include "core/recipe.hpp"
#include "planner/planner.hpp"

namespace shardc::test {

inline Pattern pat(const std::string& text) {
  std::string err;
  auto p = Pattern::compile(text, err);
  REQUIRE_MESSAGE(p.has_value(), err);
  return *p;
}

inline Mesh mesh(std::vector<std::pair<std::string, std::int64_t>> axes) {
  Mesh m;
  for (auto& [n, s] : axes) m.axes.push_back({n, s, {}, {}});
  return m;
}

inline Placement shard(int d) {
  return {Placement::Kind::Shard, d, {}, "Shard(" + std::to_string(d) + ")"};
}

inline Rule rule(const std::string& match, std::vector<std::pair<std::string, Placement>> pl) {
  Rule r;
  r.match.push_back(pat(match));
  for (auto& [axis, p] : pl) r.placements.push_back({axis, p, {}});
  return r;
}

inline Param param(const std::string& name, Shape shape, DType t = DType::BFloat16) {
  Param p;
  p.name = name;
  p.shape = std::move(shape);
  p.dtype = t;
  return p;
}

/// Offsets on dim `d` of `fqn` for every rank, in rank order.
inline std::vector<std::int64_t> offsets(const Plan& plan, const std::string& fqn, std::size_t d) {
  std::vector<std::int64_t> out;
  for (const PlannedParam& p : plan.params) {
    if (p.name != fqn) continue;
    for (std::int64_t r = 0; r < plan.world_size; ++r) {
      auto c = mesh_coords(plan.mesh_of(p), r);
      out.push_back(shard_at(p.geometry, c).global_offset[d]);
    }
  }
  return out;
}

inline std::vector<std::int64_t> sizes(const Plan& plan, const std::string& fqn, std::size_t d) {
  std::vector<std::int64_t> out;
  for (const PlannedParam& p : plan.params) {
    if (p.name != fqn) continue;
    for (std::int64_t r = 0; r < plan.world_size; ++r) {
      auto c = mesh_coords(plan.mesh_of(p), r);
      out.push_back(shard_at(p.geometry, c).local_shape[d]);
    }
  }
  return out;
}

}  // namespace shardc::test
