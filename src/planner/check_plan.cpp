// check_plan: the plan's invariants (src/planner/check_plan.hpp).
#include "planner/check_plan.hpp"
#include "core/shard_order.hpp"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/shard_classes.hpp"
#include "support/assert.hpp"

namespace shardc {
namespace {

/// Params with more shard classes than this get only the structural checks,
/// and so do geometries beyond kMaxCheckedClassesTotal classes in a plan.
constexpr std::int64_t kMaxCheckedClasses = std::int64_t{1} << 16;
constexpr std::int64_t kMaxCheckedClassesTotal = std::int64_t{1} << 21;
/// Ranks whose own piece is compared with their shard class's, per param geometry.
constexpr std::int64_t kMaxCheckedMembers = std::int64_t{1} << 18;

template <typename T>
std::string list_text(const std::vector<T>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + std::to_string(items[i]);
  return out + "]";
}

// True when rows [at, at + len) lie inside one part of `parts` (the part
// extents, concatenated in order).
bool inside_one_part(const std::vector<std::int64_t>& parts, std::int64_t at, std::int64_t len) {
  std::int64_t start = 0;
  for (std::int64_t part : parts) {
    if (at < start + part) return at >= start && len <= start + part - at;
    start += part;
  }
  return false;
}

class Checker {
 public:
  Checker(const Plan& plan, std::size_t cap) : plan_(plan), cap_(cap) {}

  void param(const PlannedParam& planned) {
    if (!planned.stacked_from.empty() &&
        (planned.global_shape.empty() ||
         planned.global_shape[0] != static_cast<std::int64_t>(planned.stacked_from.size()))) {
      fail(planned, "stacked from " + std::to_string(planned.stacked_from.size()) +
                        " experts but global shape is " + shape_text(planned.global_shape));
    }
    if (planned.prestacked &&
        (!planned.stacked_from.empty() || planned.prestacked->dim != 0 ||
         planned.global_shape.empty() || planned.global_shape[0] != planned.prestacked->count ||
         planned.rule.kind != RuleRef::Kind::Experts)) {
      fail(planned, "pre-stacked with " + std::to_string(planned.prestacked->count) +
                        " experts but global shape is " + shape_text(planned.global_shape));
    }
    if (!structure(planned)) return;
    if (planned.alias_of) alias(planned);
    if (planned.scale_of) scale(planned);
    // A param's shard classes are a pure function of its geometry, mesh and
    // stage: params that share all three (every layer of a model) are
    // checked once. Shard classes cost O(classes): a hostile mesh (2^29 ways
    // on one dim) is checked structurally only, and so is every geometry
    // past the plan-wide budget.
    if (!checked_.insert(geometry_key(planned, true)).second) return;
    const std::int64_t classes_count = class_space(plan_, planned).num_classes;
    if (classes_count > kMaxCheckedClasses || classes_count > budget_) return;
    budget_ -= classes_count;
    shards(planned, enumerate_shards(plan_, planned));
  }

  // The pieces and replica sets of `p` (its shard classes).
  void shards(const PlannedParam& planned, const std::vector<ShardClass>& classes) {
    pieces(planned, classes);
    counts(planned, classes);
    members(planned, classes);
  }
  bool checked_structure(const PlannedParam& planned) { return structure(planned); }

  std::vector<std::string> take() { return std::move(out_); }
  [[nodiscard]] bool full() const { return cap_ != 0 && out_.size() >= cap_; }

 private:
  void fail(const PlannedParam& planned, const std::string& what) {
    if (!full()) out_.push_back(planned.name + ": " + what);
  }

  // Placements, stage and split chains agree with the param's mesh.
  bool structure(const PlannedParam& planned) {
    if (planned.mesh == MeshKind::Expert && !plan_.expert) {
      fail(planned, "on the expert mesh but the plan has none");
      return false;
    }
    const Mesh& mesh = plan_.mesh_of(planned);
    bool ok = true;
    if (planned.placements.size() != mesh.axes.size()) {
      fail(planned, std::to_string(planned.placements.size()) + " placements for " +
                        std::to_string(mesh.axes.size()) + " mesh axes");
      ok = false;
    }
    if (planned.stage < 0 || planned.stage >= plan_.num_stages) {
      fail(planned, "stage " + std::to_string(planned.stage) + " outside [0, " +
                        std::to_string(plan_.num_stages) + ")");
      ok = false;
    }
    const ParamGeometry& geom = planned.geometry;
    if (geom.global_shape != planned.global_shape ||
        geom.per_dim.size() != planned.global_shape.size()) {
      fail(planned, "geometry is for shape " + shape_text(geom.global_shape) + " with " +
                        std::to_string(geom.per_dim.size()) + " split chains");
      return false;
    }
    for (std::size_t d = 0; d < geom.per_dim.size(); ++d) {
      const auto& chain = geom.per_dim[d];
      for (std::size_t i = 0; i < chain.size(); ++i)
        ok = split(planned, d, chain[i], i + 1 == chain.size(), mesh) && ok;
    }
    if (!ok) return false;
    return chains_follow_placements(planned) && fsdp_split(planned) && packed_parts(planned);
  }

  // The splits of each dim are its Shard placements (the FSDP axes' labels
  // included); the rule splits come in mesh order and carry the param's
  // split rule, pad multiple and unit.
  bool chains_follow_placements(const PlannedParam& planned) {
    std::vector<std::vector<int>> want(planned.global_shape.size());
    for (std::size_t a = 0; a < planned.placements.size(); ++a) {
      const ResolvedPlacement& rp = planned.placements[a];
      if (rp.kind == ResolvedPlacement::Kind::Replicate) continue;
      if (rp.dim < 0 || static_cast<std::size_t>(rp.dim) >= want.size()) {
        fail(planned, "placement on axis " + std::to_string(a) + " shards dim " +
                          std::to_string(rp.dim) + " of a " + std::to_string(want.size()) +
                          "-d param");
        return false;
      }
      want[static_cast<std::size_t>(rp.dim)].push_back(static_cast<int>(a));
    }
    for (std::size_t d = 0; d < want.size(); ++d) {
      std::vector<int> have;  // every split's axes; the rule splits' in mesh order
      for (const DimSplit& dim_split : planned.geometry.per_dim[d]) {
        have.insert(have.end(), dim_split.axes.begin(), dim_split.axes.end());
        if (dim_split.fsdp) continue;
        // a rule's `shard_order` may put them in another order (docs/shard-order.md)
        if (!out_of_mesh_order(planned.geometry, d) && have.size() > 1 &&
            have[have.size() - 2] >= have.back()) {
          fail(planned,
               "dim " + std::to_string(d) + ": rule splits out of mesh order " + list_text(have));
          return false;
        }
        const bool pad = dim_split.rule == SplitRule::Pad;
        // An FP8 scale splits in block units: its unit and pad multiple are
        // its weight's scaled (checked against the weight in `scale`).
        const bool own = !planned.scale_of;
        // An interleaved / per-group packed dim splits whole groups (contract §5.10).
        const std::int64_t unit = static_cast<int>(d) == planned.geometry.group_dim
                                      ? planned.geometry.group_extent * planned.unit
                                      : planned.unit;
        if (dim_split.rule != planned.uneven || dim_split.unit < 1 ||
            (own && dim_split.unit != unit) ||
            (pad && (dim_split.pad_multiple < 1 ||
                     (own && dim_split.pad_multiple != planned.pad_multiple)))) {
          fail(planned, "dim " + std::to_string(d) + ": a split cuts " + uneven_text(dim_split) +
                            " but the param's rule is " + split_rule_name(planned.uneven) +
                            " (pad " + std::to_string(planned.pad_multiple) + ", unit " +
                            std::to_string(planned.unit) + ")");
          return false;
        }
      }
      std::sort(have.begin(), have.end());
      if (have != want[d]) {
        fail(planned, "dim " + std::to_string(d) + ": split over axes " + list_text(have) +
                          " but its Shard placements are on axes " + list_text(want[d]));
        return false;
      }
    }
    return true;
  }

  // At most one FSDP split, on `fsdp_dim`, of `fsdp_ways` ways.
  bool fsdp_split(const PlannedParam& planned) {
    const ParamGeometry& geom = planned.geometry;
    int found = -1;
    std::int64_t ways = 1;
    for (std::size_t d = 0; d < geom.per_dim.size(); ++d) {
      for (const DimSplit& dim_split : geom.per_dim[d]) {
        if (!dim_split.fsdp) continue;
        if (found >= 0) {
          fail(planned,
               "FSDP splits on dims " + std::to_string(found) + " and " + std::to_string(d));
          return false;
        }
        found = static_cast<int>(d);
        ways = dim_split.ways;
      }
    }
    if (found != geom.fsdp_dim || (found >= 0 && ways != geom.fsdp_ways)) {
      fail(planned, "fsdp_dim " + std::to_string(geom.fsdp_dim) + " (" +
                        std::to_string(geom.fsdp_ways) + " ways) but the FSDP split is on dim " +
                        std::to_string(found) + " (" + std::to_string(ways) + " ways)");
      return false;
    }
    return true;
  }

  // Packed params: the parts are non-negative and sum to the packed dim.
  bool packed_parts(const PlannedParam& planned) {
    const ParamGeometry& geom = planned.geometry;
    if (geom.parts.empty()) {
      if (geom.parts_dim == -1) return true;
      fail(planned, "parts_dim " + std::to_string(geom.parts_dim) + " without parts");
      return false;
    }
    if (geom.parts_dim < 0 ||
        static_cast<std::size_t>(geom.parts_dim) >= geom.global_shape.size()) {
      fail(planned, "packed on dim " + std::to_string(geom.parts_dim) + " of a " +
                        std::to_string(geom.global_shape.size()) + "-d param");
      return false;
    }
    std::int64_t sum = 0;
    bool ok = true;
    for (std::int64_t part : geom.parts)
      ok = ok && part >= 0 && !__builtin_add_overflow(sum, part, &sum);
    const std::int64_t extent = geom.global_shape[static_cast<std::size_t>(geom.parts_dim)];
    if (!ok || sum != extent) {
      fail(planned, "packed parts " + list_text(geom.parts) + " do not tile dim " +
                        std::to_string(geom.parts_dim) + " of extent " + std::to_string(extent));
      return false;
    }
    if (geom.part_replicas.empty()) return true;
    // Replicated parts (vLLM's num_kv_head_replicas): one per part, each dividing the packed
    // dim's one rule split.
    const auto& chain = geom.per_dim[static_cast<std::size_t>(geom.parts_dim)];
    const std::size_t rules = chain.size() - (!chain.empty() && chain.back().fsdp ? 1 : 0);
    for (std::int64_t replicas : geom.part_replicas) {
      if (geom.part_replicas.size() == geom.parts.size() && replicas >= 1 &&
          (replicas == 1 || (rules == 1 && chain[0].ways % replicas == 0)))
        continue;
      fail(planned, "part replicas " + list_text(geom.part_replicas) + " for parts " +
                        list_text(geom.parts) + " on a packed dim split by " +
                        std::to_string(rules) + " rule placement(s)");
      return false;
    }
    return true;
  }

  // Whether global rows [at, at + len) of the packed dim lie in a part with replicas > 1 (its
  // boxes are held by several shard classes).
  static bool in_replicated_part(const ParamGeometry& geom, std::int64_t at) {
    std::int64_t start = 0;
    for (std::size_t i = 0; i < geom.parts.size() && i < geom.part_replicas.size(); ++i) {
      if (at < start + geom.parts[i]) return at >= start && geom.part_replicas[i] > 1;
      start += geom.parts[i];
    }
    return false;
  }

  bool split(const PlannedParam& planned, std::size_t d, const DimSplit& dim_split, bool last,
             const Mesh& mesh) {
    std::int64_t ways = 1;
    bool ok = dim_split.axes.size() == dim_split.axis_sizes.size() && !dim_split.axes.empty();
    for (std::size_t i = 0; ok && i < dim_split.axes.size(); ++i) {
      const int axis = dim_split.axes[i];
      ok = axis >= 0 && static_cast<std::size_t>(axis) < mesh.axes.size() &&
           mesh.axes[static_cast<std::size_t>(axis)].size == dim_split.axis_sizes[i];
      ways *= dim_split.axis_sizes[i];
    }
    if (!ok || ways != dim_split.ways) {
      fail(planned, "dim " + std::to_string(d) + " has a split whose axes do not match the mesh");
      return false;
    }
    if (dim_split.fsdp && (!last || dim_split.rule != SplitRule::Chunk)) {
      fail(planned, "dim " + std::to_string(d) + ": the FSDP split must be last and chunk");
      return false;
    }
    return true;
  }

  // Every rank of a shard class holds exactly the class's piece: local shape, offset, padded
  // shape (what it allocates) and boxes, as shard_at gives for its own coordinates. plan.json
  // lists the classes and rank files the ranks, so a class that merged ranks with different
  // allocations makes the two disagree (reports/plan_shard_padded_class). The first, second and
  // last rank of each run are compared (a run's members differ only on free axes), within a
  // budget per param.
  void members(const PlannedParam& planned, const std::vector<ShardClass>& classes) {
    const Mesh& mesh = plan_.mesh_of(planned);
    std::int64_t budget = kMaxCheckedMembers;
    for (const ShardClass& shard_class : classes) {
      for (const Progression& run : shard_class.ranks.runs()) {
        for (const std::int64_t k : {std::int64_t{0}, std::int64_t{1}, run.count - 1}) {
          if (k >= run.count || budget-- <= 0) continue;
          const std::int64_t rank = run.start + k * run.stride;
          if (shard_at(planned.geometry, mesh_coords(mesh, rank)) == shard_class.geom) continue;
          const ShardGeom own = shard_at(planned.geometry, mesh_coords(mesh, rank));
          fail(planned, "rank " + std::to_string(rank) + " is listed in the shard class of rank " +
                            std::to_string(shard_class.ranks.first()) + " (local " +
                            shape_text(shard_class.geom.local_shape) + ", padded " +
                            shape_text(shard_class.geom.padded_shape) + ") but holds local " +
                            shape_text(own.local_shape) + ", padded " +
                            shape_text(own.padded_shape));
          return;
        }
      }
    }
  }

  // Offsets inside the shape, sentinels, padding; each dim's pieces
  // partition [0, L) (on a packed dim: the pieces' boxes do).
  void pieces(const PlannedParam& planned, const std::vector<ShardClass>& classes) {
    const Shape& global = planned.global_shape;
    const std::size_t ndim = global.size();
    const int packed = boxed_dim(planned.geometry);  // packed parts, or a strided dim's runs
    std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> intervals(ndim);
    std::vector<std::int64_t> pad_alloc(ndim, -1);  // the one allocation of a pad-last dim
    std::vector<std::vector<std::int64_t>> cells;   // every box, as [begin, end) per dim
    for (const ShardClass& shard_class : classes) {
      const ShardGeom& shard = shard_class.geom;
      if (shard.local_shape.size() != ndim || shard.global_offset.size() != ndim ||
          shard.padded_shape.size() != ndim) {
        fail(planned, "a shard of rank " + std::to_string(shard_class.ranks.first()) +
                          " has the wrong ndim");
        return;
      }
      const bool empty = numel(shard.local_shape) == 0;
      const std::string rank = "rank " + std::to_string(shard_class.ranks.first());
      for (std::size_t d = 0; d < ndim; ++d) {
        const std::string where = rank + " dim " + std::to_string(d) + ": ";
        extent(planned, shard, d, where, static_cast<int>(d) == packed && !empty);
        padding(planned, shard, d, where, pad_alloc[d]);
        if (empty) continue;
        if (static_cast<int>(d) != packed) {
          intervals[d].emplace_back(shard.global_offset[d],
                                    shard.global_offset[d] + shard.local_shape[d]);
        }
      }
      if (packed >= 0 && !empty)
        boxes(planned, shard, rank, intervals[static_cast<std::size_t>(packed)]);
      if (packed < 0 && !shard.boxes.empty())
        fail(planned, rank + ": boxes on a param that is neither packed nor strided");
      if (!empty) add_cells(planned, shard, cells);
    }
    bool tiled = true;
    for (std::size_t d = 0; d < ndim; ++d) tiled = partition(planned, d, intervals[d]) && tiled;
    if (tiled) grid(planned, intervals, cells);
  }

  // The boxes of a non-empty piece as cells: per dim [begin, end), flattened.
  static void add_cells(const PlannedParam& planned, const ShardGeom& shard,
                        std::vector<std::vector<std::int64_t>>& cells) {
    const std::size_t ndim = shard.local_shape.size();
    auto cell = [&](std::size_t pd, std::int64_t at, std::int64_t len) {
      std::vector<std::int64_t> bounds;
      for (std::size_t d = 0; d < ndim; ++d) {
        const std::int64_t begin = d == pd ? at : shard.global_offset[d];
        bounds.push_back(begin);
        bounds.push_back(begin + (d == pd ? len : shard.local_shape[d]));
      }
      cells.push_back(std::move(bounds));
    };
    if (boxed_dim(planned.geometry) < 0 || shard.boxes.empty()) {
      cell(ndim, 0, 0);
      return;
    }
    const auto pd = static_cast<std::size_t>(boxed_dim(planned.geometry));
    for (const ShardBox& box : shard.boxes) {
      if (box.global_offset.size() == ndim && box.shape.size() == ndim)
        cell(pd, box.global_offset[pd], box.shape[pd]);
    }
  }

  // Each dim's pieces partition [0, L); the boxes of all pieces must then be
  // the grid those partitions span, each cell once: a duplicated box and a
  // missing one elsewhere would leave every dim's partition intact.
  void grid(const PlannedParam& planned,
            const std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>>& intervals,
            std::vector<std::vector<std::int64_t>>& cells) {
    if (numel(planned.global_shape) == 0) return;
    std::sort(cells.begin(), cells.end());
    if (!planned.geometry.part_replicas.empty()) {
      // A replicated part's boxes are the same cells in several classes (never a q box).
      const auto pd = static_cast<std::size_t>(planned.geometry.parts_dim);
      cells.erase(std::unique(cells.begin(), cells.end(),
                              [&](const auto& left, const auto& right) {
                                return left == right &&
                                       in_replicated_part(planned.geometry, left[2 * pd]);
                              }),
                  cells.end());
    }
    const auto dup = std::adjacent_find(cells.begin(), cells.end());
    if (dup != cells.end()) {
      fail(planned, "two pieces hold the same box starting at " + list_text(*dup));
      return;
    }
    std::int64_t want = 1;
    for (const auto& iv : intervals) {
      if (__builtin_mul_overflow(want, static_cast<std::int64_t>(iv.size()), &want)) return;
    }
    if (static_cast<std::int64_t>(cells.size()) != want) {
      fail(planned, std::to_string(cells.size()) + " distinct boxes for the " +
                        std::to_string(want) +
                        " cells the per-dim pieces span: the pieces do not tile the tensor");
    }
  }

  // One dim of a piece: the local extent fits, an empty dim sits at the
  // sentinel, a non-empty piece lies inside [0, L) (a packed dim's boxes are
  // checked by `boxes` instead).
  void extent(const PlannedParam& planned, const ShardGeom& shard, std::size_t d,
              const std::string& where, bool packed) {
    const std::int64_t global = planned.global_shape[d];
    const std::int64_t len = shard.local_shape[d];
    const std::int64_t off = shard.global_offset[d];
    if (len < 0 || len > global) fail(planned, where + "local extent " + std::to_string(len));
    if (len == 0 && global > 0 && off != global) {
      fail(planned, where + "empty piece at offset " + std::to_string(off) + ", not the sentinel " +
                        std::to_string(global));
    }
    if (!packed && len > 0 && (off < 0 || off > global - len)) {
      fail(planned, where + "piece [" + std::to_string(off) + ", " + std::to_string(off + len) +
                        ") outside [0, " + std::to_string(global) + ")");
    }
  }

  // Padded >= local; equal unless the dim is FSDP's or has a pad split
  // (`uneven: {pad: M}`). A dim whose last split pads allocates the same
  // multiple of M x unit rows on every rank (pure padding included).
  void padding(const PlannedParam& planned, const ShardGeom& shard, std::size_t d,
               const std::string& where, std::int64_t& pad_alloc) {
    const auto& chain = planned.geometry.per_dim[d];
    const bool pads = std::any_of(chain.begin(), chain.end(), [](const DimSplit& dim_split) {
      return !dim_split.fsdp && dim_split.rule == SplitRule::Pad;
    });
    const std::int64_t len = shard.local_shape[d];
    const std::int64_t padded = shard.padded_shape[d];
    if (padded < len ||
        (static_cast<int>(d) != planned.geometry.fsdp_dim && !pads && padded != len)) {
      fail(planned, where + "padded extent " + std::to_string(padded) + " for local extent " +
                        std::to_string(len));
      return;
    }
    if (chain.empty() || chain.back().fsdp || chain.back().rule != SplitRule::Pad) return;
    const DimSplit& last = chain.back();
    const std::int64_t multiple = std::max<std::int64_t>(1, last.pad_multiple) * last.unit;
    if (multiple > 0 && padded % multiple != 0) {
      fail(planned, where + "padded extent " + std::to_string(padded) + " is not a multiple of " +
                        std::to_string(multiple) + " (pad " + std::to_string(last.pad_multiple) +
                        " x unit " + std::to_string(last.unit) + ")");
    }
    if (pad_alloc < 0) pad_alloc = padded;
    if (padded != pad_alloc) {
      fail(planned, where + "padded extent " + std::to_string(padded) +
                        " but another rank pads to " + std::to_string(pad_alloc));
    }
  }

  // A packed piece's boxes: in local order without overlap inside the
  // allocation, each inside one part of the global tensor, the local
  // extent on the packed dim their sum, the other dims the piece's own.
  void boxes(const PlannedParam& planned, const ShardGeom& shard, const std::string& rank,
             std::vector<std::pair<std::int64_t, std::int64_t>>& iv) {
    const auto pd = static_cast<std::size_t>(boxed_dim(planned.geometry));
    const std::size_t ndim = planned.global_shape.size();
    if (shard.boxes.empty()) {
      fail(planned, rank + ": a packed piece without boxes");
      return;
    }
    if (shard.global_offset[pd] != shard.boxes.front().global_offset[pd]) {
      fail(planned, rank + ": offset " + std::to_string(shard.global_offset[pd]) +
                        " on the packed dim" + " is not its first box's " +
                        std::to_string(shard.boxes.front().global_offset[pd]));
    }
    std::int64_t local_end = 0;
    std::int64_t sum = 0;
    for (const ShardBox& box : shard.boxes) {
      const std::string label = rank + " box at " + shape_text(box.global_offset) + ": ";
      if (box.shape.size() != ndim || box.global_offset.size() != ndim ||
          box.local_offset.size() != ndim) {
        fail(planned, label + "wrong ndim");
        return;
      }
      for (std::size_t d = 0; d < ndim; ++d) {
        if (d == pd) continue;
        if (box.shape[d] != shard.local_shape[d] ||
            box.global_offset[d] != shard.global_offset[d] || box.local_offset[d] != 0) {
          fail(planned, label + "dim " + std::to_string(d) + " is not the piece's own");
        }
      }
      const std::int64_t len = box.shape[pd];
      const std::int64_t at = box.global_offset[pd];
      if (len <= 0 || box.local_offset[pd] < local_end ||
          box.local_offset[pd] > shard.padded_shape[pd] - len) {
        fail(planned, label + std::to_string(len) + " rows at local row " +
                          std::to_string(box.local_offset[pd]) +
                          " overlap an earlier box or leave the " +
                          std::to_string(shard.padded_shape[pd]) + " allocated rows");
      }
      local_end = box.local_offset[pd] + len;
      sum += len;
      const bool in_part =
          planned.geometry.parts.empty() || inside_one_part(planned.geometry.parts, at, len);
      if (at < 0 || len > planned.global_shape[pd] - at || !in_part) {
        fail(planned, label + "rows [" + std::to_string(at) + ", " + std::to_string(at + len) +
                          ") are not inside one packed part " + list_text(planned.geometry.parts));
      }
      iv.emplace_back(at, at + len);
    }
    if (sum != shard.local_shape[pd]) {
      fail(planned, rank + ": boxes hold " + std::to_string(sum) +
                        " rows of the packed dim, the piece " +
                        std::to_string(shard.local_shape[pd]));
    }
  }

  // Sorts and dedupes `iv`; false (reported) unless they partition [0, L).
  bool partition(const PlannedParam& planned, std::size_t d,
                 std::vector<std::pair<std::int64_t, std::int64_t>>& iv) {
    const std::int64_t length = planned.global_shape[d];
    if (length == 0 || numel(planned.global_shape) == 0) return true;
    std::sort(iv.begin(), iv.end());
    iv.erase(std::unique(iv.begin(), iv.end()), iv.end());
    std::int64_t at = 0;
    for (const auto& [begin, end] : iv) {
      if (begin != at) {
        fail(planned, "dim " + std::to_string(d) + ": pieces " +
                          (begin < at ? "overlap" : "leave a gap") + " at " + std::to_string(at));
        return false;
      }
      at = end;
    }
    if (at != length) {
      fail(planned, "dim " + std::to_string(d) + ": pieces cover [0, " + std::to_string(at) +
                        ") of " + std::to_string(length));
      return false;
    }
    return true;
  }

  // Every rank of the stage in one class; element count x replicas.
  void counts(const PlannedParam& planned, const std::vector<ShardClass>& classes) {
    const std::int64_t on_stage = plan_.world_size / plan_.num_stages;
    std::int64_t all_ways = 1;
    for (const auto& chain : planned.geometry.per_dim)
      for (const DimSplit& dim_split : chain) all_ways *= dim_split.ways;
    if (all_ways < 1 || on_stage % all_ways != 0) {
      fail(planned, "splits of " + std::to_string(all_ways) + " ways do not divide the " +
                        std::to_string(on_stage) + " ranks of its stage");
      return;
    }
    // Counted per replica (class ranks / replicas) so the sum stays near
    // numel(global) < 2^62; overflow is reported, never wrapped.
    std::int64_t ranks = 0;
    std::int64_t elements = 0;  // sum of numel(local) x |ranks| / (on_stage / all_ways)
    bool overflow = false;
    const std::int64_t replicas = on_stage / all_ways;
    for (const ShardClass& shard_class : classes) {
      ranks += shard_class.ranks.size();
      // Every class holds a multiple of `replicas` ranks when the layout is
      // right; a class that does not is itself a violation.
      if (shard_class.ranks.size() % replicas != 0) {
        fail(planned, "a shard held by " + std::to_string(shard_class.ranks.size()) +
                          " ranks, not a multiple of the replica count " +
                          std::to_string(replicas));
        return;
      }
      std::int64_t add = 0;
      overflow = overflow ||
                 __builtin_mul_overflow(numel(shard_class.geom.local_shape),
                                        shard_class.ranks.size() / replicas, &add) ||
                 __builtin_add_overflow(elements, add, &elements);
      for (const Progression& run : shard_class.ranks.runs()) {
        const std::int64_t last = run.start + (run.count - 1) * run.stride;
        if (!plan_.holds(run.start, planned) || !plan_.holds(last, planned)) {
          fail(planned, "rank " + std::to_string(run.start) + " of a shard is not on stage " +
                            std::to_string(planned.stage));
          return;
        }
      }
    }
    if (ranks != on_stage) {
      fail(planned, std::to_string(ranks) + " ranks hold a shard; its stage has " +
                        std::to_string(on_stage));
    }
    // A part with `replicas: R` is held by R shard classes (its piece at R split
    // coordinates), so its elements count R times.
    std::int64_t expected = numel(planned.global_shape);
    const ParamGeometry& geom = planned.geometry;
    const std::int64_t packed_extent =
        geom.parts.empty() ? 0 : planned.global_shape[static_cast<std::size_t>(geom.parts_dim)];
    const std::int64_t per_row = packed_extent == 0 ? 0 : expected / packed_extent;
    for (std::size_t i = 0; i < geom.part_replicas.size() && i < geom.parts.size(); ++i) {
      if (geom.part_replicas[i] <= 1 || packed_extent == 0) continue;
      std::int64_t extra = 0;
      overflow =
          overflow ||
          __builtin_mul_overflow(per_row * geom.parts[i], geom.part_replicas[i] - 1, &extra) ||
          __builtin_add_overflow(expected, extra, &expected);
    }
    if (overflow || elements != expected) {
      fail(planned, "shards hold " +
                        (overflow ? std::string("more than 2^63") : std::to_string(elements)) +
                        " elements per replica; the global tensor has " +
                        std::to_string(numel(planned.global_shape)) +
                        (expected != numel(planned.global_shape)
                             ? " (" + std::to_string(expected) + " with its replicated parts)"
                             : std::string()));
    }
  }

  void alias(const PlannedParam& planned) {
    if (*planned.alias_of >= plan_.params.size()) {
      fail(planned, "alias of a param index outside the plan");
      return;
    }
    const PlannedParam& src = plan_.params[*planned.alias_of];
    if (src.alias_of) fail(planned, "alias of " + src.name + ", which is an alias itself");
    if (src.dtype != planned.dtype || src.global_shape != planned.global_shape) {
      fail(planned, "alias of " + src.name + " with a different dtype or global shape");
      return;
    }
    // The source's own violations are reported at the source; its pieces
    // are only computed from a sound geometry.
    if (!Checker(plan_, 1).checked_structure(src)) {
      fail(planned, "alias of " + src.name + ", whose geometry is broken");
      return;
    }
    // Same geometry on the same mesh: the same pieces by construction
    // (shard_at is a pure function of both); else compare the pieces.
    if (geometry_key(src, false) == geometry_key(planned, false)) return;
    if (class_space(plan_, planned).num_classes > kMaxCheckedClasses ||
        class_space(plan_, src).num_classes > kMaxCheckedClasses) {
      fail(planned, "alias of " + src.name + " with another geometry");
      return;
    }
    const std::vector<ShardClass> classes = enumerate_shards(plan_, planned);
    const std::vector<ShardClass> theirs = enumerate_shards(plan_, src);
    bool same = theirs.size() == classes.size();
    for (std::size_t i = 0; same && i < classes.size(); ++i) {
      same = theirs[i].geom == classes[i].geom &&
             (src.stage != planned.stage || theirs[i].ranks.runs() == classes[i].ranks.runs());
    }
    if (!same) fail(planned, "alias of " + src.name + " but their shards differ");
  }

  // An FP8 block scale follows its weight (contract §5.11): same mesh,
  // stage, rule and placements, and each dim's rule splits over the same
  // axes with the same rule (in block units).
  void scale(const PlannedParam& planned) {
    if (*planned.scale_of >= plan_.params.size()) {
      fail(planned, "scale of a param index outside the plan");
      return;
    }
    const PlannedParam& weight = plan_.params[*planned.scale_of];
    if (weight.mesh != planned.mesh || weight.stage != planned.stage ||
        weight.rule.index != planned.rule.index || weight.rule.kind != planned.rule.kind ||
        weight.placements.size() != planned.placements.size() ||
        weight.geometry.per_dim.size() != planned.geometry.per_dim.size()) {
      fail(planned, "scale of " + weight.name + " on another mesh, stage, rule or ndim");
      return;
    }
    for (std::size_t a = 0; a < weight.placements.size(); ++a) {
      if (weight.placements[a].kind != planned.placements[a].kind ||
          weight.placements[a].dim != planned.placements[a].dim) {
        fail(planned, "scale of " + weight.name + " placed " + planned.placements[a].label() +
                          " on axis " + std::to_string(a) + ", its weight " +
                          weight.placements[a].label());
        return;
      }
    }
    for (std::size_t d = 0; d < weight.geometry.per_dim.size(); ++d) {
      std::vector<const DimSplit*> ws, ss;
      for (const DimSplit& dim_split : weight.geometry.per_dim[d])
        if (!dim_split.fsdp) ws.push_back(&dim_split);
      for (const DimSplit& dim_split : planned.geometry.per_dim[d])
        if (!dim_split.fsdp) ss.push_back(&dim_split);
      bool same = ws.size() == ss.size();
      for (std::size_t i = 0; same && i < ws.size(); ++i) {
        same =
            ws[i]->axes == ss[i]->axes && ws[i]->ways == ss[i]->ways && ws[i]->rule == ss[i]->rule;
      }
      if (!same) {
        fail(planned, "dim " + std::to_string(d) + ": the scale's splits are not its weight " +
                          weight.name + "'s");
        return;
      }
    }
  }

  // Everything enumerate_shards(plan, p) depends on: mesh, geometry and
  // (with `stage`) the stage.
  static std::string geometry_key(const PlannedParam& planned, bool stage) {
    const ParamGeometry& geom = planned.geometry;
    std::string key = std::to_string(static_cast<int>(planned.mesh)) + "|" +
                      (stage ? std::to_string(planned.stage) : "") + "|" +
                      list_text(geom.global_shape) + "|" + std::to_string(geom.fsdp_dim) + "," +
                      std::to_string(geom.fsdp_ways) + "|" + list_text(geom.parts) + "@" +
                      std::to_string(geom.parts_dim);
    for (const auto& chain : geom.per_dim) {
      key += "|";
      for (const DimSplit& dim_split : chain) {
        key += list_text(dim_split.axes) + list_text(dim_split.axis_sizes) +
               std::to_string(dim_split.ways) + "," +
               std::to_string(static_cast<int>(dim_split.rule)) + "," +
               (dim_split.fsdp ? "f" : "r") + std::to_string(dim_split.pad_multiple) + "," +
               std::to_string(dim_split.unit) + ";";
      }
    }
    return key;
  }

  const Plan& plan_;
  std::size_t cap_;
  std::vector<std::string> out_;
  std::unordered_set<std::string> checked_;        ///< geometry keys whose classes were checked
  std::int64_t budget_ = kMaxCheckedClassesTotal;  ///< shard classes left to enumerate
};

}  // namespace

std::vector<std::string> check_plan(const Plan& plan, std::size_t max_reported) {
  Checker checker(plan, max_reported);
  if (plan.num_stages < 1 || plan.world_size < 1 || plan.world_size % plan.num_stages != 0) {
    return {"plan: " + std::to_string(plan.world_size) + " ranks in " +
            std::to_string(plan.num_stages) + " stages"};
  }
  for (const PlannedParam& planned : plan.params) {
    if (checker.full()) break;
    checker.param(planned);
  }
  return checker.take();
}

std::vector<std::string> check_shard_classes(const Plan& plan, const PlannedParam& planned,
                                             const std::vector<ShardClass>& classes,
                                             std::size_t max_reported) {
  Checker checker(plan, max_reported);
  if (checker.checked_structure(planned)) checker.shards(planned, classes);
  return checker.take();
}

namespace {

class BufferChecker {
 public:
  BufferChecker(const Plan& plan, std::size_t cap) : plan_(plan), cap_(cap) {}

  void rank(const std::vector<PlannedBuffer>& buffers, std::int64_t global_rank) {
    for (const PlannedBuffer& buffer : buffers) {
      if (buffer.fsdp2) fsdp2(fsdp2_for_rank(*buffer.fsdp2, plan_, global_rank), global_rank);
      if (buffer.muon) muon(muon_for_rank(*buffer.muon, plan_, global_rank), global_rank);
    }
  }
  std::vector<std::string> take() { return std::move(out_); }

 private:
  void fail(std::int64_t global_rank, const std::string& what) {
    if (cap_ == 0 || out_.size() < cap_)
      out_.push_back("rank " + std::to_string(global_rank) + ": " + what);
  }

  void fsdp2(const Fsdp2RankLayout& layout, std::int64_t global_rank) {
    for (const Fsdp2RankUnit& rank_unit : layout.units) {
      const std::string label = "fsdp2 unit '" + rank_unit.unit->name + "'";
      if (rank_unit.index < 0 ||
          static_cast<std::size_t>(rank_unit.index) >= rank_unit.ranks.size() ||
          rank_unit.ranks[static_cast<std::size_t>(rank_unit.index)] != global_rank) {
        fail(global_rank, label + ": not at its index in the FSDP group");
      }
      std::int64_t at = 0;
      for (const Fsdp2Param& fp : rank_unit.params) {
        const PlannedParam& planned = plan_.params[fp.param];
        const ShardGeom shard =
            shard_at(planned.geometry, mesh_coords(plan_.mesh_of(planned), global_rank));
        const std::int64_t unit_size = rank_unit.unit->byte_units ? element_size(planned.dtype) : 1;
        if (fp.offset != at)
          fail(global_rank, label + ": " + planned.name + " at offset " +
                                std::to_string(fp.offset) + ", not " + std::to_string(at));
        if (fp.padded_shape != shard.padded_shape || fp.local_shape != shard.local_shape ||
            fp.padded_numel != numel(shard.padded_shape) * unit_size) {
          fail(global_rank, label + ": " + planned.name + " packs " + shape_text(fp.padded_shape) +
                                ", its shard is padded " + shape_text(shard.padded_shape));
        }
        at += fp.padded_numel;
      }
      if (rank_unit.total != at)
        fail(global_rank,
             label + ": slot " + std::to_string(rank_unit.total) + " != " + std::to_string(at));
    }
  }

  void muon(const MuonRankLayout& layout, std::int64_t global_rank) {
    for (const MuonRankGroup& group : layout.groups) {
      for (const MuonRankBatch& batch : group.batches) {
        for (std::size_t s = 0; s < batch.stages.size(); ++s)
          stage(batch.stages[s], s == 0, global_rank);
      }
    }
  }

  void stage(const MuonStage& st, bool first, std::int64_t global_rank) {
    if (st.index < 0 || static_cast<std::size_t>(st.index) >= st.ranks.size() ||
        st.ranks[static_cast<std::size_t>(st.index)] != global_rank) {
      fail(global_rank, "muon stage: not at its index in the group");
    }
    std::int64_t at = 0;
    for (const MuonStageParam& mp : st.params) {
      const PlannedParam& planned = plan_.params[mp.param];
      if (mp.offset != at || mp.padded_numel < mp.actual_numel ||
          mp.split_sizes.size() != st.ranks.size()) {
        fail(global_rank, "muon stage: " + planned.name + " packed at " +
                              std::to_string(mp.offset) + " (expected " + std::to_string(at) +
                              "), " + std::to_string(mp.actual_numel) + " of " +
                              std::to_string(mp.padded_numel) + " elements, " +
                              std::to_string(mp.split_sizes.size()) + " split sizes for " +
                              std::to_string(st.ranks.size()) + " members");
      }
      if (first) {
        const ShardGeom shard =
            shard_at(planned.geometry, mesh_coords(plan_.mesh_of(planned), global_rank));
        if (mp.actual_numel != numel(shard.local_shape)) {
          fail(global_rank, "muon stage: " + planned.name + " sends " +
                                std::to_string(mp.actual_numel) + " elements, its shard has " +
                                std::to_string(numel(shard.local_shape)));
        }
      }
      at += mp.padded_numel;
    }
    if (st.total_numel != at ||
        st.gathered_numel != at * static_cast<std::int64_t>(st.ranks.size())) {
      fail(global_rank, "muon stage: totals " + std::to_string(st.total_numel) + " / " +
                            std::to_string(st.gathered_numel) + " for packed " +
                            std::to_string(at));
    }
  }

  const Plan& plan_;
  std::size_t cap_;
  std::vector<std::string> out_;
};

[[noreturn]] void throw_broken(const char* what, const std::vector<std::string>& broken) {
  std::string message =
      std::string("the ") + what + " breaks " + std::to_string(broken.size()) + " invariant(s):";
  for (const std::string& line : broken) message += "\n  " + line;
  assertion_failed(__FILE__, __LINE__, what, message);
}

}  // namespace

std::vector<std::string> check_buffers(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                                       const std::vector<std::int64_t>& ranks,
                                       std::size_t max_reported) {
  BufferChecker checker(plan, max_reported);
  for (std::int64_t global_rank : ranks) checker.rank(buffers, global_rank);
  return checker.take();
}

void assert_buffer_invariants(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                              const std::vector<std::int64_t>& ranks) {
  const std::vector<std::string> broken = check_buffers(plan, buffers, ranks);
  if (!broken.empty()) throw_broken("buffer layout", broken);
}

bool invariants_checked_always() {
#ifdef SHARDC_CHECK_INVARIANTS
  return true;
#else
  return false;
#endif
}

void assert_plan_invariants(const Plan& plan) {
  const std::vector<std::string> broken = check_plan(plan);
  if (!broken.empty()) throw_broken("plan", broken);
}

}  // namespace shardc
