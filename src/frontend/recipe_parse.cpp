// parse_recipe: the recipe's top level and its meshes (contract §4).
#include <string>

#include "frontend/frontend.hpp"
#include "frontend/recipe_internal.hpp"

namespace shardc {
namespace fe {
namespace {

constexpr std::string_view kFormat = "shardc.recipe/v1";

bool valid_axis_name(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::optional<MeshAxis> parse_axis(const Node& n, Reader& r) {
  if (!r.expect_map(n, "a mesh axis")) return std::nullopt;
  bool ok = r.check_keys(n, {"name", "size"}, "a mesh axis");
  const Node* name = n.find("name");
  const Node* size = n.find("size");
  if (name == nullptr || size == nullptr) {
    r.error(n, "a mesh axis needs `name` and `size`", "e.g. `- {name: tp, size: 8}`");
    return std::nullopt;
  }
  MeshAxis axis;
  axis.loc = r.loc(n);
  std::optional<std::string> text = r.get_string(*name, "an axis `name`");
  if (text && !valid_axis_name(*text)) {
    r.error(*name, "an axis `name` must be an identifier, got " + describe(*name),
            "axis names are identifiers such as dp_shard, tp, ep");
    text.reset();
  }
  std::optional<std::int64_t> value = r.get_int(*size, "an axis `size`");
  if (!ok || !text || !value) return std::nullopt;
  axis.name = std::move(*text);
  axis.size = *value;
  axis.size_loc = r.loc(*size);
  return axis;
}

std::optional<Mesh> parse_mesh(const Node& n, Reader& r, std::string_view what) {
  if (!r.expect_seq(n, "`" + std::string(what) + "`")) return std::nullopt;
  Mesh mesh;
  mesh.loc = r.loc(n);
  // Sizes, unique names, emptiness and the world-size limit are meaning:
  // the planner checks them (src/planner/meshes.cpp, E-MESH).
  bool ok = true;
  for (const Node& item : n.items()) {
    std::optional<MeshAxis> axis = parse_axis(item, r);
    if (!axis) {
      ok = false;
      continue;
    }
    mesh.axes.push_back(std::move(*axis));
  }
  if (!ok) return std::nullopt;
  return mesh;
}

void parse_format(const Node& root, Reader& r) {
  const Node* format = root.find("format");
  if (format == nullptr) return;
  std::optional<std::string> text = r.get_string(*format, "`format`");
  if (text && *text != kFormat) {
    r.error(*format, "unsupported recipe format " + describe(*format),
            "use `format: shardc.recipe/v1`");
  }
}

// `fp8_scales: auto | follow | rules` (null = auto).
void parse_fp8_scales(const Node& n, Reader& r, Recipe& out) {
  out.fp8_scales_loc = r.loc(n);
  if (n.is_null() || (n.is_scalar() && n.text() == "auto")) return;
  if (n.is_scalar() && n.text() == "follow") {
    out.fp8_scales = Fp8Scales::Follow;
  } else if (n.is_scalar() && n.text() == "rules") {
    out.fp8_scales = Fp8Scales::Rules;
  } else {
    r.error(n, "`fp8_scales` must be auto, follow or rules, got " + describe(n),
            "follow: each X.weight_scale_inv is split with its weight in whole blocks; rules: "
            "scales are placed by `rules` like any param; auto (default): follow when the model "
            "has weight_block_size");
  }
}

void parse_sections(const Node& root, Reader& r, Recipe& out) {
  parse_format(root, r);
  if (const Node* mesh = root.find("mesh")) {
    out.mesh = parse_mesh(*mesh, r, "mesh").value_or(Mesh{});
  } else {
    r.error(r.loc(root), "the recipe has no `mesh`", "add `mesh: [{name: tp, size: 8}]`");
  }
  if (const Node* world = root.find("world_size")) {
    out.world_size_loc = r.loc(*world);
    out.world_size = r.get_int(*world, "`world_size`");  // its range is meaning: the planner's
  }
  if (const Node* mesh = root.find("expert_mesh")) {
    out.expert_mesh = parse_mesh(*mesh, r, "expert_mesh");
  }
  if (const Node* uneven = root.find("uneven")) {
    out.uneven = parse_split_rule(*uneven, r, &out.pad_multiple).value_or(SplitRule::Chunk);
  }
  if (const Node* rules = root.find("rules")) out.rules = parse_rules(*rules, r);
  if (const Node* experts = root.find("experts")) out.experts = parse_experts(*experts, r);
  if (const Node* tied = root.find("tied")) out.tied = parse_tied_spec(*tied, r);
  if (const Node* pipeline = root.find("pipeline")) out.pipeline = parse_pipeline(*pipeline, r);
  if (const Node* fsdp = root.find("fsdp")) out.fsdp = parse_fsdp(*fsdp, r);
  if (const Node* rules = root.find("rules")) apply_shard_orders(*rules, r, out);
  if (const Node* buffers = root.find("buffers")) out.buffers = parse_buffers(*buffers, r);
  if (const Node* fp8 = root.find("fp8_scales")) parse_fp8_scales(*fp8, r, out);
  out.training.loc = SourceLoc{r.file(), 0, 0};
  if (const Node* training = root.find("training")) out.training = parse_training(*training, r);
}

}  // namespace

std::optional<std::int64_t> parse_bounded(const Node& n, Reader& r, std::string_view what,
                                          std::int64_t lo, std::int64_t hi) {
  std::optional<std::int64_t> v = r.get_int(n, what);
  if (v && (*v < lo || *v > hi)) {
    r.error(n,
            std::string(what) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                "], got " + std::to_string(*v),
            "use a small positive integer (rows)");
    return std::nullopt;
  }
  return v;
}

std::optional<SplitRule> parse_split_rule(const Node& n, Reader& r, std::int64_t* pad) {
  if (n.is_scalar()) {
    if (n.text() == "chunk") return SplitRule::Chunk;
    if (n.text() == "balanced") return SplitRule::Balanced;
    if (n.text() == "even") return SplitRule::Even;
    if (n.text() == "pad") {
      *pad = 1;
      return SplitRule::Pad;
    }
  }
  if (n.is_map() && n.items().size() == 1 && n.find("pad") != nullptr) {
    std::optional<std::int64_t> m =
        parse_bounded(*n.find("pad"), r, "`uneven: {pad: M}` multiple", 1, kMaxPadOrUnit);
    if (!m) return std::nullopt;
    *pad = *m;
    return SplitRule::Pad;
  }
  r.error(n, "`uneven` must be chunk, balanced, even, pad or {pad: M}, got " + describe(n),
          "valid values: chunk (torch.chunk, the default), balanced (hyper-parallel), even, "
          "{pad: 64} (every piece padded to a multiple of 64 rows, Megatron / vLLM)");
  return std::nullopt;
}

}  // namespace fe

std::optional<Recipe> parse_recipe(const SourceFile& file, DiagnosticSink& sink, bool with_digest) {
  std::optional<fe::Document> doc = fe::load_document(file, DiagCode::ERecipe, sink);
  if (!doc) return std::nullopt;
  const fe::Node* root = &doc->root;
  fe::Reader r(file.path, sink, DiagCode::ERecipe);
  if (!r.expect_map(*root, "the recipe")) return std::nullopt;
  r.check_keys(*root,
               {"format", "world_size", "mesh", "expert_mesh", "uneven", "rules", "experts", "tied",
                "pipeline", "fsdp", "buffers", "fp8_scales", "training"},
               "the recipe");
  Recipe recipe;
  recipe.source_path = file.path;
  if (with_digest) recipe.sha256 = sha256_hex(file.text);
  fe::parse_sections(*root, r, recipe);
  if (r.errors() > 0) return std::nullopt;
  return recipe;
}

std::optional<Recipe> parse_recipe(const SourceFile& file, DiagnosticSink& sink) {
  return parse_recipe(file, sink, true);
}

}  // namespace shardc
