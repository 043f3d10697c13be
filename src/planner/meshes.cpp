// Mesh checks (contract §5.7 "Mesh"): sizes >= 1, unique names, equal products,
// world size <= limits::kMaxWorld, `world_size:` in range and equal to each
// mesh's product. The front end only reads the integers: every mesh check
// lives here (E-MESH, exit 1).
#include <set>
#include <string>

#include "planner/passes.hpp"
#include "support/limits.hpp"

namespace shardc::passes {
namespace {

using limits::kMaxWorld;

std::optional<std::int64_t> mesh_product(const Mesh& mesh, const char* what, DiagnosticSink& sink) {
  std::int64_t product = 1;
  bool ok = true;
  std::set<std::string> names;
  for (const MeshAxis& axis : mesh.axes) {
    if (axis.size < 1) {
      sink.error(
          DiagCode::EMesh, axis.size_loc.line > 0 ? axis.size_loc : axis.loc,
          std::string(what) + " axis '" + axis.name + "' has size " + std::to_string(axis.size),
          "every mesh axis needs size >= 1");
      ok = false;
      continue;
    }
    if (!names.insert(axis.name).second) {
      sink.error(DiagCode::EMesh, axis.loc,
                 std::string(what) + " axis name '" + axis.name + "' is repeated",
                 "axis names must be unique within a mesh");
      ok = false;
    }
    if (product > kMaxWorld / axis.size) {
      sink.error(DiagCode::EMesh, axis.loc, std::string(what) + " has more than 2^31-1 ranks",
                 "the product of the axis sizes (the world size) must be below 2^31");
      return std::nullopt;
    }
    product *= axis.size;
  }
  if (mesh.axes.empty()) {
    sink.error(DiagCode::EMesh, mesh.loc, std::string(what) + " has no axes",
               "list at least one axis, e.g. - {name: tp, size: 8}");
    ok = false;
  }
  if (!ok) return std::nullopt;
  return product;
}

// "dp_shard 64 x tp 8 = 512 ranks".
std::string product_text(const Mesh& mesh, std::int64_t product) {
  std::string text;
  for (std::size_t i = 0; i < mesh.axes.size(); ++i)
    text += (i ? " x " : "") + mesh.axes[i].name + " " + std::to_string(mesh.axes[i].size);
  return text + " = " + std::to_string(product) + " ranks";
}

// E-MESH when `mesh`'s product differs from the declared `world_size:`.
bool matches_world(const Mesh& mesh, const char* what, std::int64_t product, const Recipe& recipe,
                   DiagnosticSink& sink) {
  if (!recipe.world_size || *recipe.world_size == product) return true;
  sink.error(DiagCode::EMesh, mesh.loc,
             std::string(what) + " has " + product_text(mesh, product) + " but world_size is " +
                 std::to_string(*recipe.world_size),
             std::string("the product of `") + what + "` sizes is the number of ranks: make it " +
                 std::to_string(*recipe.world_size) + " (or fix world_size)");
  return false;
}

}  // namespace

std::optional<std::int64_t> check_meshes(const Recipe& recipe, DiagnosticSink& sink) {
  if (recipe.world_size && (*recipe.world_size < 1 || *recipe.world_size > kMaxWorld)) {
    sink.error(
        DiagCode::EMesh, recipe.world_size_loc,
        "`world_size` must be between 1 and 2^31-1, got " + std::to_string(*recipe.world_size),
        "the number of ranks the job runs on, e.g. `world_size: 512`");
    return std::nullopt;
  }
  auto world = mesh_product(recipe.mesh, "mesh", sink);
  const bool dense_ok = !world || matches_world(recipe.mesh, "mesh", *world, recipe, sink);
  if (!recipe.expert_mesh) return dense_ok ? world : std::nullopt;
  auto expert_world = mesh_product(*recipe.expert_mesh, "expert_mesh", sink);
  if (!world || !expert_world) return std::nullopt;
  const bool expert_ok =
      matches_world(*recipe.expert_mesh, "expert_mesh", *expert_world, recipe, sink);
  if (!dense_ok || !expert_ok) return std::nullopt;
  if (*world != *expert_world) {
    sink.error(DiagCode::EMesh, recipe.expert_mesh->loc,
               "expert_mesh has " + product_text(*recipe.expert_mesh, *expert_world) +
                   " but mesh has " + product_text(recipe.mesh, *world),
               "both meshes are views of the same ranks, so their products must be equal; add "
               "`world_size: N` (the number of ranks you launch) to the recipe and shardc "
               "names the mesh that is wrong");
    return std::nullopt;
  }
  return world;
}

}  // namespace shardc::passes
