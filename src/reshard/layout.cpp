// Layouts: a plan (compiled plan.json or an in-memory Plan) as per-param
// shard-class boxes with replica rank sets.
#include <unordered_map>

#include "reshard/reshard.hpp"
#include "support/limits.hpp"

namespace shardc::reshard {
namespace {

// Finds each param's `"name":"<fqn>"` in plan.json, in file order, and turns
// the position into line:col. A forward cursor keeps it linear.
class NameLocator {
 public:
  NameLocator(const std::string& path, const std::string& text) : path_(path), text_(text) {}

  SourceLoc locate(const std::string& name) {
    if (text_.empty()) return {path_, 0, 0};
    const std::string needle = "\"name\":\"" + name + "\"";
    std::size_t at = text_.find(needle, cursor_);
    if (at == std::string::npos) {
      at = text_.find(needle);
      if (at == std::string::npos) return {path_, 0, 0};
      cursor_ = 0, line_ = 1, line_start_ = 0;
    }
    for (std::size_t i = cursor_; i < at; ++i)
      if (text_[i] == '\n') ++line_, line_start_ = i + 1;
    cursor_ = at;
    return {path_, line_, static_cast<int>(at - line_start_) + 1};
  }

 private:
  const std::string& path_;
  const std::string& text_;
  std::size_t cursor_ = 0;
  int line_ = 1;
  std::size_t line_start_ = 0;
};

// Marks aliases that share storage: same stage as their source.
void mark_shared(Layout& layout) {
  std::unordered_map<std::string, int> stage;
  for (const auto& param : layout.params) stage.emplace(param.name, param.stage);
  for (auto& param : layout.params) {
    if (!param.alias_of) continue;
    const auto it = stage.find(*param.alias_of);
    param.shares_storage = it != stage.end() && it->second == param.stage;
  }
}

// A layout named `label` with the plan's world size and room for its params (a plan.json
// read back, or a Plan).
template <class P>
Layout empty_layout(const std::string& label, const P& plan) {
  Layout layout;
  layout.label = label;
  layout.world_size = plan.world_size;
  layout.params.reserve(plan.params.size());
  return layout;
}

// The fields a plan.json param and a planned param share: name, dtype, global shape, stage.
template <class P>
LayoutParam param_head(const P& pp) {
  LayoutParam param;
  param.name = pp.name;
  param.dtype = pp.dtype;
  param.global_shape = pp.global_shape;
  param.stage = pp.stage;
  param.vocab_rows = pp.vocab_rows;
  param.vocab_multiple = pp.vocab_multiple;
  return param;
}

// Whether a shard's box [offset, offset + local) lies inside the global shape (same ranks
// assumed). A box inside a shape whose numel is checked has a checked numel too.
bool box_fits(const Shape& global, const Shape& local, const Shape& offset) {
  for (std::size_t d = 0; d < global.size(); ++d)
    if (local[d] < 0 || offset[d] < 0 || local[d] > global[d] || offset[d] > global[d] - local[d])
      return false;
  return true;
}

std::int64_t product(const Shape& shape) {
  std::int64_t count = 1;
  for (const std::int64_t extent : shape) count *= extent;
  return count;
}

// Why a packed shard's `boxes` cannot be read ("" when they can): each box inside the
// global shape, at a non-negative local offset inside the allocated piece (padded_shape),
// and the boxes together holding exactly local_shape's elements (contract §5.10). A
// non-empty piece of a packed param has at least one box, an empty one none.
std::string packed_error(const Shape& global, const readback::PlanShard& shard) {
  const std::size_t ndim = global.size();
  if (shard.padded_shape.size() != ndim) return "padded_shape rank differs from the param's";
  std::int64_t held = 0;
  for (std::size_t i = 0; i < shard.boxes.size(); ++i) {
    const readback::PlanBox& box = shard.boxes[i];
    const std::string which = "box " + std::to_string(i) + " ";
    if (box.global_offset.size() != ndim || box.local_offset.size() != ndim ||
        box.shape.size() != ndim)
      return which + "has another rank (ndim) than the param";
    if (!box_fits(global, box.shape, box.global_offset))
      return which + shape_text(box.shape) + " at global_offset " + shape_text(box.global_offset) +
             " is not inside global_shape " + shape_text(global);
    if (!box_fits(shard.padded_shape, box.shape, box.local_offset))
      return which + shape_text(box.shape) + " at local_offset " + shape_text(box.local_offset) +
             " is not inside padded_shape " + shape_text(shard.padded_shape);
    const std::int64_t box_numel = product(box.shape);  // <= numel(global) <= 2^62: box_fits
    if (box_numel > limits::kMaxNumel - held) return "boxes hold more than 2^62 elements";
    held += box_numel;
  }
  for (std::size_t d = 0; d < ndim; ++d)
    if (shard.local_shape[d] < 0 || shard.local_shape[d] > global[d])
      return "local_shape " + shape_text(shard.local_shape) + " is not inside global_shape " +
             shape_text(global);
  if (held != product(shard.local_shape))
    return "boxes hold " + std::to_string(held) + " elements, local_shape " +
           shape_text(shard.local_shape) + " " + std::to_string(product(shard.local_shape));
  return "";
}

// The parts of a packed shard (its boxes), empty for an unpacked one.
std::vector<ShardPart> parts_of(const readback::PlanShard& shard) {
  std::vector<ShardPart> parts;
  parts.reserve(shard.boxes.size());
  for (const readback::PlanBox& box : shard.boxes)
    parts.push_back({Box{box.global_offset, box.shape}, box.local_offset});
  return parts;
}

}  // namespace

Layout layout_from_plan_file(const readback::PlanFile& plan, const std::string& path,
                             const std::string& text, DiagnosticSink& sink) {
  Layout layout = empty_layout(path, plan);
  NameLocator where(path, text);
  for (const auto& pp : plan.params) {
    LayoutParam param = param_head(pp);
    param.alias_of = pp.alias_of;
    param.loc = where.locate(pp.name);
    if (!checked_numel(pp.global_shape)) {
      // Box products below (numel, intersections) are int64: bounded as the front end bounds them.
      sink.error(DiagCode::EReshardInput, param.loc,
                 "param '" + pp.name + "': global_shape " + shape_text(pp.global_shape) +
                     " has a negative extent or 2^62 or more elements",
                 "recompile the plan with shardc compile; plan.json must not be edited by hand");
      layout.params.push_back(std::move(param));
      continue;
    }
    for (const auto& shard : pp.shards) {
      std::string error;
      auto ranks = RankSet::parse(shard.ranks, plan.world_size, error);
      if (ranks && (shard.local_shape.size() != pp.global_shape.size() ||
                    shard.global_offset.size() != pp.global_shape.size()))
        error = "shape or offset rank differs from the param's";
      else if (ranks && !pp.packed && !shard.boxes.empty())
        error = "`boxes` on a param without `packed`";
      else if (ranks && pp.packed)
        error = packed_error(pp.global_shape, shard);
      else if (ranks && !box_fits(pp.global_shape, shard.local_shape, shard.global_offset))
        error = "local_shape " + shape_text(shard.local_shape) + " at global_offset " +
                shape_text(shard.global_offset) + " is not inside global_shape " +
                shape_text(pp.global_shape);
      if (!ranks || !error.empty()) {
        sink.error(
            DiagCode::EReshardInput, param.loc,
            "param '" + pp.name + "': malformed shard (ranks '" + shard.ranks + "'): " + error,
            "recompile the plan with shardc compile; plan.json must not be edited by hand");
        param.classes.clear();
        break;
      }
      param.classes.push_back(
          {Box{shard.global_offset, shard.local_shape}, std::move(*ranks), parts_of(shard)});
    }
    layout.params.push_back(std::move(param));
  }
  mark_shared(layout);
  return layout;
}

Layout layout_from_plan(const Plan& plan, const std::string& label) {
  Layout layout = empty_layout(label, plan);
  layout.in_memory = true;
  for (const auto& pp : plan.params) {
    LayoutParam param = param_head(pp);
    if (pp.alias_of) param.alias_of = plan.params[*pp.alias_of].name;
    param.loc = pp.loc;
    for (auto& shard_class : enumerate_shards(plan, pp)) {
      std::vector<ShardPart> parts;
      for (const ShardBox& sb : shard_class.geom.boxes)
        parts.push_back({Box{sb.global_offset, sb.shape}, sb.local_offset});
      param.classes.push_back({Box{shard_class.geom.global_offset, shard_class.geom.local_shape},
                               std::move(shard_class.ranks), std::move(parts)});
    }
    layout.params.push_back(std::move(param));
  }
  mark_shared(layout);
  return layout;
}

}  // namespace shardc::reshard
