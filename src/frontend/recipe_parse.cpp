// parse_recipe: the recipe's top level and its meshes (contract §4).
#include <string>

#include "frontend/frontend.hpp"
#include "frontend/recipe_internal.hpp"

namespace shardc {
namespace fe {
namespace {

constexpr std::string_view kFormat = "shardc.recipe/v1";

std::optional<MeshAxis> parse_axis(const Node& node, Reader& reader) {
  if (!reader.expect_map(node, "a mesh axis")) return std::nullopt;
  bool ok = reader.check_keys(node, {"name", "size"}, "a mesh axis");
  const Node* name = node.find("name");
  const Node* size = node.find("size");
  if (name == nullptr || size == nullptr) {
    reader.error(node, "a mesh axis needs `name` and `size`", "e.g. `- {name: tp, size: 8}`");
    return std::nullopt;
  }
  MeshAxis axis;
  axis.loc = reader.loc(node);
  std::optional<std::string> text = reader.get_string(*name, "an axis `name`");
  if (text && !is_identifier(*text)) {
    reader.error(*name, "an axis `name` must be an identifier, got " + describe(*name),
                 "axis names are identifiers such as dp_shard, tp, ep");
    text.reset();
  }
  std::optional<std::int64_t> value = reader.get_int(*size, "an axis `size`");
  if (!ok || !text || !value) return std::nullopt;
  axis.name = std::move(*text);
  axis.size = *value;
  axis.size_loc = reader.loc(*size);
  return axis;
}

std::optional<Mesh> parse_mesh(const Node& node, Reader& reader, std::string_view what) {
  if (!reader.expect_seq(node, "`" + std::string(what) + "`")) return std::nullopt;
  Mesh mesh;
  mesh.loc = reader.loc(node);
  // Sizes, unique names, emptiness and the world-size limit are meaning:
  // the planner checks them (src/planner/meshes.cpp, E-MESH).
  bool ok = true;
  for (const Node& item : node.items()) {
    std::optional<MeshAxis> axis = parse_axis(item, reader);
    if (!axis) {
      ok = false;
      continue;
    }
    mesh.axes.push_back(std::move(*axis));
  }
  if (!ok) return std::nullopt;
  return mesh;
}

// `fp8_scales: auto | follow | rules` (null = auto).
void parse_fp8_scales(const Node& node, Reader& reader, Recipe& out) {
  out.fp8_scales_loc = reader.loc(node);
  if (node.is_null() || (node.is_scalar() && node.text() == "auto")) return;
  if (node.is_scalar() && node.text() == "follow") {
    out.fp8_scales = Fp8Scales::Follow;
  } else if (node.is_scalar() && node.text() == "rules") {
    out.fp8_scales = Fp8Scales::Rules;
  } else {
    reader.error(
        node, "`fp8_scales` must be auto, follow or rules, got " + describe(node),
        "follow: each X.weight_scale_inv is split with its weight in whole blocks; rules: "
        "scales are placed by `rules` like any param; auto (default): follow when the model "
        "has weight_block_size");
  }
}

void parse_sections(const Node& root, Reader& reader, Recipe& out) {
  check_format(root, kFormat, "recipe", "use `format: shardc.recipe/v1`", reader);
  if (const Node* mesh = root.find("mesh")) {
    out.mesh = parse_mesh(*mesh, reader, "mesh").value_or(Mesh{});
  } else {
    reader.error(reader.loc(root), "the recipe has no `mesh`", "add `mesh: [{name: tp, size: 8}]`");
  }
  if (const Node* world = root.find("world_size")) {
    out.world_size_loc = reader.loc(*world);
    out.world_size = reader.get_int(*world, "`world_size`");  // its range is meaning: the planner's
  }
  if (const Node* mesh = root.find("expert_mesh")) {
    out.expert_mesh = parse_mesh(*mesh, reader, "expert_mesh");
  }
  if (const Node* uneven = root.find("uneven")) {
    out.uneven = parse_split_rule(*uneven, reader, &out.pad_multiple).value_or(SplitRule::Chunk);
  }
  if (const Node* rules = root.find("rules")) out.rules = parse_rules(*rules, reader);
  if (const Node* experts = root.find("experts")) out.experts = parse_experts(*experts, reader);
  if (const Node* tied = root.find("tied")) out.tied = parse_tied_spec(*tied, reader);
  if (const Node* pipeline = root.find("pipeline"))
    out.pipeline = parse_pipeline(*pipeline, reader);
  if (const Node* fsdp = root.find("fsdp")) out.fsdp = parse_fsdp(*fsdp, reader);
  if (const Node* rules = root.find("rules")) apply_shard_orders(*rules, reader, out);
  if (const Node* buffers = root.find("buffers")) out.buffers = parse_buffers(*buffers, reader);
  if (const Node* fp8 = root.find("fp8_scales")) parse_fp8_scales(*fp8, reader, out);
  out.training.loc = SourceLoc{reader.file(), 0, 0};
  if (const Node* training = root.find("training"))
    out.training = parse_training(*training, reader);
}

}  // namespace

std::optional<std::int64_t> parse_bounded(const Node& node, Reader& reader, std::string_view what,
                                          std::int64_t lo, std::int64_t hi) {
  std::optional<std::int64_t> value = reader.get_int(node, what);
  if (value && (*value < lo || *value > hi)) {
    reader.error(node,
                 std::string(what) + " must be in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got " + std::to_string(*value),
                 "use a small positive integer (rows)");
    return std::nullopt;
  }
  return value;
}

std::optional<SplitRule> parse_split_rule(const Node& node, Reader& reader, std::int64_t* pad) {
  if (node.is_scalar()) {
    if (node.text() == "chunk") return SplitRule::Chunk;
    if (node.text() == "balanced") return SplitRule::Balanced;
    if (node.text() == "even") return SplitRule::Even;
    if (node.text() == "pad") {
      *pad = 1;
      return SplitRule::Pad;
    }
  }
  if (node.is_map() && node.items().size() == 1 && node.find("pad") != nullptr) {
    std::optional<std::int64_t> multiple =
        parse_bounded(*node.find("pad"), reader, "`uneven: {pad: M}` multiple", 1, kMaxPadOrUnit);
    if (!multiple) return std::nullopt;
    *pad = *multiple;
    return SplitRule::Pad;
  }
  reader.error(node,
               "`uneven` must be chunk, balanced, even, pad or {pad: M}, got " + describe(node),
               "valid values: chunk (torch.chunk, the default), balanced (hyper-parallel), even, "
               "{pad: 64} (every piece padded to a multiple of 64 rows, Megatron / vLLM)");
  return std::nullopt;
}

}  // namespace fe

std::optional<Recipe> parse_recipe(const SourceFile& file, DiagnosticSink& sink, bool with_digest) {
  std::optional<fe::Document> doc = fe::load_document(file, DiagCode::ERecipe, sink);
  if (!doc) return std::nullopt;
  const fe::Node* root = &doc->root;
  fe::Reader reader(file.path, sink, DiagCode::ERecipe);
  if (!reader.expect_map(*root, "the recipe")) return std::nullopt;
  reader.check_keys(*root,
                    {"format", "world_size", "mesh", "expert_mesh", "uneven", "rules", "experts",
                     "tied", "pipeline", "fsdp", "buffers", "fp8_scales", "training"},
                    "the recipe");
  Recipe recipe;
  recipe.source_path = file.path;
  if (with_digest) recipe.sha256 = sha256_hex(file.text);
  fe::parse_sections(*root, reader, recipe);
  if (reader.errors() > 0) return std::nullopt;
  return recipe;
}

std::optional<Recipe> parse_recipe(const SourceFile& file, DiagnosticSink& sink) {
  return parse_recipe(file, sink, true);
}

}  // namespace shardc
