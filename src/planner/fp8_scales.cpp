// FP8 block scales follow their weights (`fp8_scales: follow`; the rule and
// its sources are in src/planner/fp8.hpp and docs/semantics.md "FP8
// block-quantized checkpoints").
//
// Block-quantized checkpoints (DeepSeek-V3, Kimi-K2, Qwen3-FP8; config.json
// `quantization_config.weight_block_size` [B0, B1]) store, for each FP8
// `X.weight` [.., O, I], a float32 `X.weight_scale_inv` [.., ceil(O/B0),
// ceil(I/B1)]. A runtime that shards the weight must hold the scales of the
// blocks it holds, so the scale is planned as the weight's shadow:
//
//  * pair_fp8_scales (after stack_experts, before rules): each scale is paired
//    with its weight by name (PlannedParam::scale_of); rules never apply to
//    it. Per-expert scales of experts stacked by an `experts` entry are
//    stacked the same way, into `<stacked weight>_scale_inv` [E, ...] at the
//    first source scale's position (stacked_from lists the checkpoint
//    scales). A scale without its weight, with another shape, or `follow`
//    without a block size is E-FP8-SCALE (an error: following with a wrong
//    block would hand ranks the wrong scales); the scale is then dropped so
//    no second diagnostic (E-UNCOVERED) repeats it.
//  * follow_fp8_weights (after placements, before FSDP): the scale takes the
//    weight's rule, mesh, stage and placements, and each rule split of the
//    weight becomes the same split of the scale in block units
//    (fp8::scale_split). FSDP is then applied to the scale as to any param:
//    FSDP2 all-gathers a param before use, so its FSDP shards never need to
//    align with blocks (the scale's own dim-0 chunks are what FSDP stores).
//  * check_fp8_blocks (fp8_check.cpp): every rule-split boundary of the
//    weight must be a multiple of the block (E-FP8-BLOCK otherwise).
//
// Pure: no I/O.
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "planner/fp8.hpp"
#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

std::string block_text(const Model& model) {
  return shape_text(
      Shape(model.attributes.weight_block_size.begin(), model.attributes.weight_block_size.end()));
}

// Whether scales follow their weights in this compile.
bool following(const Model& model, const Recipe& recipe, DiagnosticSink& sink) {
  const bool has_block = model.attributes.weight_block_size.size() == 2;
  if (recipe.fp8_scales == Fp8Scales::Rules) return false;
  if (recipe.fp8_scales == Fp8Scales::Auto || has_block) return has_block;
  sink.error(DiagCode::EFp8Scale, recipe.fp8_scales_loc,
             "`fp8_scales: follow` but the model has no `weight_block_size` attribute",
             "add `weight_block_size: [128, 128]` to the model's attributes (config.json "
             "quantization_config.weight_block_size; `shardc import` copies it), or use "
             "`fp8_scales: rules` and place the scales with rules");
  return false;
}

std::unordered_map<std::string, std::size_t> index_by_name(const std::vector<PlannedParam>& ps) {
  std::unordered_map<std::string, std::size_t> out;
  for (std::size_t i = 0; i < ps.size(); ++i) out.emplace(ps[i].name, i);
  return out;
}

// The scales of one stacked weight's experts, or {} when it has none (an
// unquantized expert) or they cannot be stacked (reported).
std::vector<std::size_t> expert_scales(const PlannedParam& weight,
                                       const std::vector<PlannedParam>& ps,
                                       const std::unordered_map<std::string, std::size_t>& index,
                                       DiagnosticSink& sink) {
  std::vector<std::size_t> src;
  std::string missing;
  for (const std::string& name : weight.stacked_from) {
    auto it = index.find(fp8::scale_name(name));
    if (it != index.end()) {
      src.push_back(it->second);
    } else if (missing.empty()) {
      missing = fp8::scale_name(name);
    }
  }
  if (src.empty()) return {};
  const PlannedParam& first = ps[src.front()];
  std::string problem;
  if (!missing.empty()) {
    problem = std::to_string(src.size()) + " of its " + std::to_string(weight.stacked_from.size()) +
              " experts have scales (" + missing + " is missing)";
  }
  for (std::size_t i : src)
    if (problem.empty() && (ps[i].global_shape != first.global_shape || ps[i].dtype != first.dtype))
      problem = ps[i].name + " is " + shape_text(ps[i].global_shape) + " but " + first.name +
                " is " + shape_text(first.global_shape);
  if (problem.empty() && index.count(fp8::scale_name(weight.name)))
    problem = "its stacked scale name " + fp8::scale_name(weight.name) + " is already a parameter";
  if (!problem.empty()) {
    sink.error(DiagCode::EFp8Scale, first.loc,
               "cannot stack the FP8 scales of stacked " + weight.name + ": " + problem,
               "every expert of a stacked block-quantized weight needs its weight_scale_inv of "
               "one shape (a truncated checkpoint?); or `fp8_scales: rules`");
    return {};
  }
  return src;
}

// Stacks per-expert scales like their stacked weights: each group's first
// source scale is replaced by the stacked scale, the other sources removed.
// Returns the stacked scales' names.
std::unordered_set<std::string> stack_expert_scales(std::vector<PlannedParam>& params,
                                                    DiagnosticSink& sink) {
  const auto index = index_by_name(params);
  std::vector<bool> drop(params.size(), false);
  std::vector<std::pair<std::size_t, PlannedParam>> stacked;
  std::unordered_set<std::string> names;
  for (const PlannedParam& weight : params) {
    if (weight.stacked_from.empty()) continue;
    const std::vector<std::size_t> src = expert_scales(weight, params, index, sink);
    if (src.empty()) continue;
    PlannedParam stacked_scale = params[src.front()];
    stacked_scale.name = fp8::scale_name(weight.name);
    stacked_scale.global_shape.insert(stacked_scale.global_shape.begin(),
                                      static_cast<std::int64_t>(src.size()));
    stacked_scale.mesh = weight.mesh;
    stacked_scale.stacked_from.clear();
    for (std::size_t i : src) {
      stacked_scale.stacked_from.push_back(params[i].name);
      drop[i] = true;
    }
    names.insert(stacked_scale.name);
    stacked.emplace_back(src.front(), std::move(stacked_scale));
  }
  if (stacked.empty()) return names;
  for (auto& [at, q] : stacked) {
    params[at] = std::move(q);
    drop[at] = false;
  }
  std::vector<PlannedParam> kept;
  kept.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(params[i]));
  params = std::move(kept);
  return names;
}

// Why `scale` cannot follow `weight` (empty when it can).
std::string pair_problem(const PlannedParam& scale, const PlannedParam* weight,
                         const std::string& weight_name, const Model& model) {
  if (weight == nullptr) return scale.name + " has no weight " + weight_name + " in the model";
  const auto want = fp8::scale_shape(weight->global_shape, model.attributes.weight_block_size);
  if (!want)
    return scale.name + ": its weight " + weight->name + " " + shape_text(weight->global_shape) +
           " is not a matrix, so it has no FP8 blocks";
  if (*want != scale.global_shape)
    return scale.name + " is " + shape_text(scale.global_shape) + " but " + weight->name + " " +
           shape_text(weight->global_shape) + " in blocks of " + block_text(model) + " needs " +
           shape_text(*want);
  return {};
}

}  // namespace

void pair_fp8_scales(std::vector<PlannedParam>& params, const Model& model, const Recipe& recipe,
                     DiagnosticSink& sink) {
  if (!following(model, recipe, sink)) return;
  const std::unordered_set<std::string> stacked = stack_expert_scales(params, sink);
  const auto index = index_by_name(params);
  std::vector<bool> drop(params.size(), false);
  std::vector<std::optional<std::size_t>> weight_of(params.size());
  GroupedReporter rep;
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::optional<std::string> wname = fp8::weight_of_scale(params[i].name);
    if (!wname && stacked.count(params[i].name))
      wname = params[i].name.substr(0, params[i].name.size() - fp8::kScaleSuffix.size());
    if (!wname) continue;
    const auto it = index.find(*wname);
    const PlannedParam* weight = it == index.end() ? nullptr : &params[it->second];
    const std::string problem = pair_problem(params[i], weight, *wname, model);
    if (problem.empty()) {
      weight_of[i] = it->second;
      continue;
    }
    Diagnostic diag = param_diagnostic(params[i], DiagCode::EFp8Scale, params[i].loc);
    diag.message = problem;
    diag.hint = weight == nullptr
                    ? "a weight_scale_inv needs its weight (a truncated checkpoint or model "
                      "file?); or `fp8_scales: rules` to place it by a rule"
                    : "the model's weight_block_size (" + block_text(model) +
                          ") disagrees with the checkpoint: copy "
                          "quantization_config.weight_block_size from config.json; or "
                          "`fp8_scales: rules`";
    rep.add(std::move(diag), weight == nullptr ? "orphan" : "shape");
    drop[i] = true;
  }
  // The other direction: a block-quantized (FP8) matrix without its scale would be handed to
  // ranks with no way to dequantize it (a checkpoint missing its *_scale_inv tensors).
  std::vector<bool> has_scale(params.size(), false);
  for (const auto& weight : weight_of)
    if (weight) has_scale[*weight] = true;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const PlannedParam& param = params[i];
    const bool fp8 = param.dtype == DType::Float8E4M3fn || param.dtype == DType::Float8E5M2;
    if (!fp8 || param.global_shape.size() < 2 || has_scale[i] || fp8::weight_of_scale(param.name))
      continue;
    Diagnostic diag = param_diagnostic(param, DiagCode::EFp8Scale, param.loc);
    diag.message = param.name + " is an FP8 matrix (" + std::string(dtype_name(param.dtype)) +
                   ") of a block-quantized model but has no " + param.name +
                   std::string(fp8::kScaleSuffix) + " to follow it";
    diag.hint =
        "the checkpoint lacks its weight_scale_inv tensors (a truncated download?); or "
        "`fp8_scales: rules` if the scales are placed some other way";
    rep.add(std::move(diag), "unscaled");
  }
  rep.flush(sink);
  // Indices shift when dropped scales go: map old -> new first.
  std::vector<std::size_t> new_index(params.size(), 0);
  std::size_t kept_count = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    new_index[i] = kept_count;
    if (!drop[i]) ++kept_count;
  }
  std::vector<PlannedParam> kept;
  kept.reserve(kept_count);
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (drop[i]) continue;
    PlannedParam& param = params[i];
    if (weight_of[i]) {
      param.scale_of = new_index[*weight_of[i]];
      param.rule = {};  // rules and experts entries never place a following scale
    }
    kept.push_back(std::move(param));
  }
  params = std::move(kept);
}

namespace {

// A packed weight's parts on a block dim in blocks; nullopt (reported) when
// a part boundary cuts a block.
std::optional<std::vector<std::int64_t>> scale_parts(const PlannedParam& weight, std::int64_t block,
                                                     std::int64_t scale_extent,
                                                     const Recipe& recipe, GroupedReporter& rep) {
  std::vector<std::int64_t> out;
  std::int64_t at = 0;
  for (std::size_t i = 0; i + 1 < weight.geometry.parts.size(); ++i) {
    at += weight.geometry.parts[i];
    if (at % block != 0) {
      Diagnostic diag = param_diagnostic(weight, DiagCode::EFp8Block, rule_loc(weight, recipe));
      diag.message = weight.name + ": packed part boundary at row " + std::to_string(at) +
                     " of dim " + std::to_string(weight.geometry.parts_dim) + " cuts a " +
                     std::to_string(block) +
                     "-row FP8 block, so its scale cannot be split part by part";
      diag.hint = "packed part extents must be multiples of the block; or `fp8_scales: rules`";
      rep.add(std::move(diag), "packed:" + std::to_string(weight.rule.index));
      return std::nullopt;
    }
    out.push_back(weight.geometry.parts[i] / block);
  }
  std::int64_t sum = 0;
  for (std::int64_t part : out) sum += part;
  out.push_back(scale_extent - sum);
  return out;
}

// The scale's geometry: the weight's rule splits in block units.
bool follow_geometry(PlannedParam& scale, const PlannedParam& weight, const Model& model,
                     const Recipe& recipe, GroupedReporter& rep) {
  const std::vector<std::int64_t> blocks =
      fp8::dim_blocks(scale.global_shape.size(), model.attributes.weight_block_size);
  ParamGeometry geom;
  geom.global_shape = scale.global_shape;
  geom.per_dim.resize(scale.global_shape.size());
  scale.unit = 1;
  bool unit_seen = false;
  for (std::size_t d = 0; d < geom.per_dim.size(); ++d) {
    for (const DimSplit& ws : weight.geometry.per_dim[d]) {
      geom.per_dim[d].push_back(fp8::scale_split(ws, blocks[d]));
      if (!unit_seen) scale.unit = geom.per_dim[d].back().unit;
      unit_seen = true;
    }
  }
  if (!weight.geometry.parts.empty()) {
    const auto d = static_cast<std::size_t>(weight.geometry.parts_dim);
    auto parts = scale_parts(weight, blocks[d], scale.global_shape[d], recipe, rep);
    if (!parts) return false;
    geom.parts = std::move(*parts);
    geom.parts_dim = weight.geometry.parts_dim;
    geom.part_replicas = weight.geometry.part_replicas;  // the same split, so the same replicas
    geom.part_names = weight.geometry.part_names;
  }
  scale.geometry = std::move(geom);
  return true;
}

}  // namespace

void follow_fp8_weights(std::vector<PlannedParam>& params, const Model& model, const Recipe& recipe,
                        DiagnosticSink& sink) {
  GroupedReporter rep;
  for (PlannedParam& scale : params) {
    if (!scale.scale_of) continue;
    const PlannedParam& weight = params[*scale.scale_of];
    // The weight's own problems (uncovered, bad placements) are reported already.
    if (weight.rule.index < 0 || weight.geometry.per_dim.size() != scale.global_shape.size())
      continue;
    if (!follow_geometry(scale, weight, model, recipe, rep)) continue;
    scale.mesh = weight.mesh;
    scale.rule = weight.rule;
    scale.uneven = weight.uneven;
    scale.pad_multiple = weight.pad_multiple;
    scale.stage = weight.stage;
    scale.virtual_stage = weight.virtual_stage;
    scale.placements = weight.placements;
  }
  rep.flush(sink);
}

}  // namespace shardc::passes
