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
void mark_shared(Layout& l) {
  std::unordered_map<std::string, int> stage;
  for (const auto& p : l.params) stage.emplace(p.name, p.stage);
  for (auto& p : l.params) {
    if (!p.alias_of) continue;
    const auto it = stage.find(*p.alias_of);
    p.shares_storage = it != stage.end() && it->second == p.stage;
  }
}

// A layout named `label` with the plan's world size and room for its params (a plan.json
// read back, or a Plan).
template <class P>
Layout empty_layout(const std::string& label, const P& plan) {
  Layout l;
  l.label = label;
  l.world_size = plan.world_size;
  l.params.reserve(plan.params.size());
  return l;
}

// The fields a plan.json param and a planned param share: name, dtype, global shape, stage.
template <class P>
LayoutParam param_head(const P& pp) {
  LayoutParam p;
  p.name = pp.name;
  p.dtype = pp.dtype;
  p.global_shape = pp.global_shape;
  p.stage = pp.stage;
  p.vocab_rows = pp.vocab_rows;
  p.vocab_multiple = pp.vocab_multiple;
  return p;
}

// Whether a shard's box [offset, offset + local) lies inside the global shape (same ranks
// assumed). A box inside a shape whose numel is checked has a checked numel too.
bool box_fits(const Shape& global, const Shape& local, const Shape& offset) {
  for (std::size_t d = 0; d < global.size(); ++d)
    if (local[d] < 0 || offset[d] < 0 || local[d] > global[d] || offset[d] > global[d] - local[d])
      return false;
  return true;
}

std::int64_t product(const Shape& s) {
  std::int64_t n = 1;
  for (const std::int64_t e : s) n *= e;
  return n;
}

// Why a packed shard's `boxes` cannot be read ("" when they can): each box inside the
// global shape, at a non-negative local offset inside the allocated piece (padded_shape),
// and the boxes together holding exactly local_shape's elements (contract §5.10). A
// non-empty piece of a packed param has at least one box, an empty one none.
std::string packed_error(const Shape& global, const readback::PlanShard& s) {
  const std::size_t ndim = global.size();
  if (s.padded_shape.size() != ndim) return "padded_shape rank differs from the param's";
  std::int64_t held = 0;
  for (std::size_t i = 0; i < s.boxes.size(); ++i) {
    const readback::PlanBox& b = s.boxes[i];
    const std::string which = "box " + std::to_string(i) + " ";
    if (b.global_offset.size() != ndim || b.local_offset.size() != ndim || b.shape.size() != ndim)
      return which + "has another rank (ndim) than the param";
    if (!box_fits(global, b.shape, b.global_offset))
      return which + shape_text(b.shape) + " at global_offset " + shape_text(b.global_offset) +
             " is not inside global_shape " + shape_text(global);
    if (!box_fits(s.padded_shape, b.shape, b.local_offset))
      return which + shape_text(b.shape) + " at local_offset " + shape_text(b.local_offset) +
             " is not inside padded_shape " + shape_text(s.padded_shape);
    const std::int64_t n = product(b.shape);  // <= numel(global) <= 2^62: box_fits
    if (n > limits::kMaxNumel - held) return "boxes hold more than 2^62 elements";
    held += n;
  }
  for (std::size_t d = 0; d < ndim; ++d)
    if (s.local_shape[d] < 0 || s.local_shape[d] > global[d])
      return "local_shape " + shape_text(s.local_shape) + " is not inside global_shape " +
             shape_text(global);
  if (held != product(s.local_shape))
    return "boxes hold " + std::to_string(held) + " elements, local_shape " +
           shape_text(s.local_shape) + " " + std::to_string(product(s.local_shape));
  return "";
}

// The parts of a packed shard (its boxes), empty for an unpacked one.
std::vector<ShardPart> parts_of(const readback::PlanShard& s) {
  std::vector<ShardPart> parts;
  parts.reserve(s.boxes.size());
  for (const readback::PlanBox& b : s.boxes)
    parts.push_back({Box{b.global_offset, b.shape}, b.local_offset});
  return parts;
}

}  // namespace

Layout layout_from_plan_file(const readback::PlanFile& plan, const std::string& path,
                             const std::string& text, DiagnosticSink& sink) {
  Layout l = empty_layout(path, plan);
  NameLocator where(path, text);
  for (const auto& pp : plan.params) {
    LayoutParam p = param_head(pp);
    p.alias_of = pp.alias_of;
    p.loc = where.locate(pp.name);
    if (!checked_numel(pp.global_shape)) {
      // Box products below (numel, intersections) are int64: bounded as the front end bounds them.
      sink.error(DiagCode::EReshardInput, p.loc,
                 "param '" + pp.name + "': global_shape " + shape_text(pp.global_shape) +
                     " has a negative extent or 2^62 or more elements",
                 "recompile the plan with shardc compile; plan.json must not be edited by hand");
      l.params.push_back(std::move(p));
      continue;
    }
    for (const auto& s : pp.shards) {
      std::string error;
      auto ranks = RankSet::parse(s.ranks, plan.world_size, error);
      if (ranks && (s.local_shape.size() != pp.global_shape.size() ||
                    s.global_offset.size() != pp.global_shape.size()))
        error = "shape or offset rank differs from the param's";
      else if (ranks && !pp.packed && !s.boxes.empty())
        error = "`boxes` on a param without `packed`";
      else if (ranks && pp.packed)
        error = packed_error(pp.global_shape, s);
      else if (ranks && !box_fits(pp.global_shape, s.local_shape, s.global_offset))
        error = "local_shape " + shape_text(s.local_shape) + " at global_offset " +
                shape_text(s.global_offset) + " is not inside global_shape " +
                shape_text(pp.global_shape);
      if (!ranks || !error.empty()) {
        sink.error(DiagCode::EReshardInput, p.loc,
                   "param '" + pp.name + "': malformed shard (ranks '" + s.ranks + "'): " + error,
                   "recompile the plan with shardc compile; plan.json must not be edited by hand");
        p.classes.clear();
        break;
      }
      p.classes.push_back({Box{s.global_offset, s.local_shape}, std::move(*ranks), parts_of(s)});
    }
    l.params.push_back(std::move(p));
  }
  mark_shared(l);
  return l;
}

Layout layout_from_plan(const Plan& plan, const std::string& label) {
  Layout l = empty_layout(label, plan);
  l.in_memory = true;
  for (const auto& pp : plan.params) {
    LayoutParam p = param_head(pp);
    if (pp.alias_of) p.alias_of = plan.params[*pp.alias_of].name;
    p.loc = pp.loc;
    for (auto& c : enumerate_shards(plan, pp)) {
      std::vector<ShardPart> parts;
      for (const ShardBox& sb : c.geom.boxes)
        parts.push_back({Box{sb.global_offset, sb.shape}, sb.local_offset});
      p.classes.push_back(
          {Box{c.geom.global_offset, c.geom.local_shape}, std::move(c.ranks), std::move(parts)});
    }
    l.params.push_back(std::move(p));
  }
  mark_shared(l);
  return l;
}

}  // namespace shardc::reshard
