// Mesh checks (SPEC §5.7 "Mesh"): sizes >= 1, unique names, equal products.
#include <set>
#include <string>

#include "passes.hpp"

namespace shardc::passes {
namespace {

constexpr std::int64_t kMaxWorld = std::int64_t{1} << 40;

std::optional<std::int64_t> mesh_product(const Mesh& mesh, const char* what, DiagnosticSink& sink) {
  std::int64_t product = 1;
  bool ok = true;
  std::set<std::string> names;
  for (const MeshAxis& a : mesh.axes) {
    if (a.size < 1) {
      sink.error("E-MESH", a.loc,
                 std::string(what) + " axis '" + a.name + "' has size " + std::to_string(a.size),
                 "every mesh axis needs size >= 1");
      ok = false;
      continue;
    }
    if (!names.insert(a.name).second) {
      sink.error("E-MESH", a.loc, std::string(what) + " axis name '" + a.name + "' is repeated",
                 "axis names must be unique within a mesh");
      ok = false;
    }
    if (product > kMaxWorld / a.size) {
      sink.error("E-MESH", a.loc, std::string(what) + " world size exceeds 2^40 ranks",
                 "shardc plans meshes of up to 2^40 ranks");
      return std::nullopt;
    }
    product *= a.size;
  }
  if (mesh.axes.empty()) {
    sink.error("E-MESH", mesh.loc, std::string(what) + " has no axes",
               "list at least one axis, e.g. - {name: tp, size: 8}");
    ok = false;
  }
  if (!ok) return std::nullopt;
  return product;
}

}  // namespace

std::optional<std::int64_t> check_meshes(const Recipe& recipe, DiagnosticSink& sink) {
  auto world = mesh_product(recipe.mesh, "mesh", sink);
  if (!recipe.expert_mesh) return world;
  auto expert_world = mesh_product(*recipe.expert_mesh, "expert_mesh", sink);
  if (!world || !expert_world) return std::nullopt;
  if (*world != *expert_world) {
    sink.error("E-MESH", recipe.expert_mesh->loc,
               "expert_mesh has " + std::to_string(*expert_world) + " ranks but mesh has " +
                   std::to_string(*world),
               "the expert mesh is a second view of the same ranks: its sizes must multiply to " +
                   std::to_string(*world));
    return std::nullopt;
  }
  return world;
}

}  // namespace shardc::passes
