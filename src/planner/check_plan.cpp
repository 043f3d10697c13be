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
std::string list_text(const std::vector<T>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
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

  void param(const PlannedParam& p) {
    if (!p.stacked_from.empty() &&
        (p.global_shape.empty() ||
         p.global_shape[0] != static_cast<std::int64_t>(p.stacked_from.size()))) {
      fail(p, "stacked from " + std::to_string(p.stacked_from.size()) +
                  " experts but global shape is " + shape_text(p.global_shape));
    }
    if (p.prestacked &&
        (!p.stacked_from.empty() || p.prestacked->dim != 0 || p.global_shape.empty() ||
         p.global_shape[0] != p.prestacked->count || p.rule.kind != RuleRef::Kind::Experts)) {
      fail(p, "pre-stacked with " + std::to_string(p.prestacked->count) +
                  " experts but global shape is " + shape_text(p.global_shape));
    }
    if (!structure(p)) return;
    if (p.alias_of) alias(p);
    if (p.scale_of) scale(p);
    // A param's shard classes are a pure function of its geometry, mesh and
    // stage: params that share all three (every layer of a model) are
    // checked once. Shard classes cost O(classes): a hostile mesh (2^29 ways
    // on one dim) is checked structurally only, and so is every geometry
    // past the plan-wide budget.
    if (!checked_.insert(geometry_key(p, true)).second) return;
    const std::int64_t n = class_space(plan_, p).num_classes;
    if (n > kMaxCheckedClasses || n > budget_) return;
    budget_ -= n;
    shards(p, enumerate_shards(plan_, p));
  }

  // The pieces and replica sets of `p` (its shard classes).
  void shards(const PlannedParam& p, const std::vector<ShardClass>& classes) {
    pieces(p, classes);
    counts(p, classes);
    members(p, classes);
  }
  bool checked_structure(const PlannedParam& p) { return structure(p); }

  std::vector<std::string> take() { return std::move(out_); }
  [[nodiscard]] bool full() const { return cap_ != 0 && out_.size() >= cap_; }

 private:
  void fail(const PlannedParam& p, const std::string& what) {
    if (!full()) out_.push_back(p.name + ": " + what);
  }

  // Placements, stage and split chains agree with the param's mesh.
  bool structure(const PlannedParam& p) {
    if (p.mesh == MeshKind::Expert && !plan_.expert) {
      fail(p, "on the expert mesh but the plan has none");
      return false;
    }
    const Mesh& mesh = plan_.mesh_of(p);
    bool ok = true;
    if (p.placements.size() != mesh.axes.size()) {
      fail(p, std::to_string(p.placements.size()) + " placements for " +
                  std::to_string(mesh.axes.size()) + " mesh axes");
      ok = false;
    }
    if (p.stage < 0 || p.stage >= plan_.num_stages) {
      fail(p, "stage " + std::to_string(p.stage) + " outside [0, " +
                  std::to_string(plan_.num_stages) + ")");
      ok = false;
    }
    const ParamGeometry& g = p.geometry;
    if (g.global_shape != p.global_shape || g.per_dim.size() != p.global_shape.size()) {
      fail(p, "geometry is for shape " + shape_text(g.global_shape) + " with " +
                  std::to_string(g.per_dim.size()) + " split chains");
      return false;
    }
    for (std::size_t d = 0; d < g.per_dim.size(); ++d) {
      const auto& chain = g.per_dim[d];
      for (std::size_t i = 0; i < chain.size(); ++i)
        ok = split(p, d, chain[i], i + 1 == chain.size(), mesh) && ok;
    }
    if (!ok) return false;
    return chains_follow_placements(p) && fsdp_split(p) && packed_parts(p);
  }

  // The splits of each dim are its Shard placements (the FSDP axes' labels
  // included); the rule splits come in mesh order and carry the param's
  // split rule, pad multiple and unit.
  bool chains_follow_placements(const PlannedParam& p) {
    std::vector<std::vector<int>> want(p.global_shape.size());
    for (std::size_t a = 0; a < p.placements.size(); ++a) {
      const ResolvedPlacement& rp = p.placements[a];
      if (rp.kind == ResolvedPlacement::Kind::Replicate) continue;
      if (rp.dim < 0 || static_cast<std::size_t>(rp.dim) >= want.size()) {
        fail(p, "placement on axis " + std::to_string(a) + " shards dim " + std::to_string(rp.dim) +
                    " of a " + std::to_string(want.size()) + "-d param");
        return false;
      }
      want[static_cast<std::size_t>(rp.dim)].push_back(static_cast<int>(a));
    }
    for (std::size_t d = 0; d < want.size(); ++d) {
      std::vector<int> have;  // every split's axes; the rule splits' in mesh order
      for (const DimSplit& s : p.geometry.per_dim[d]) {
        have.insert(have.end(), s.axes.begin(), s.axes.end());
        if (s.fsdp) continue;
        // a rule's `shard_order` may put them in another order (docs/shard-order.md)
        if (!out_of_mesh_order(p.geometry, d) && have.size() > 1 &&
            have[have.size() - 2] >= have.back()) {
          fail(p,
               "dim " + std::to_string(d) + ": rule splits out of mesh order " + list_text(have));
          return false;
        }
        const bool pad = s.rule == SplitRule::Pad;
        // An FP8 scale splits in block units: its unit and pad multiple are
        // its weight's scaled (checked against the weight in `scale`).
        const bool own = !p.scale_of;
        // An interleaved / per-group packed dim splits whole groups (contract §5.10).
        const std::int64_t unit =
            static_cast<int>(d) == p.geometry.group_dim ? p.geometry.group_extent * p.unit : p.unit;
        if (s.rule != p.uneven || s.unit < 1 || (own && s.unit != unit) ||
            (pad && (s.pad_multiple < 1 || (own && s.pad_multiple != p.pad_multiple)))) {
          fail(p, "dim " + std::to_string(d) + ": a split cuts " + uneven_text(s) +
                      " but the param's rule is " + split_rule_name(p.uneven) + " (pad " +
                      std::to_string(p.pad_multiple) + ", unit " + std::to_string(p.unit) + ")");
          return false;
        }
      }
      std::sort(have.begin(), have.end());
      if (have != want[d]) {
        fail(p, "dim " + std::to_string(d) + ": split over axes " + list_text(have) +
                    " but its Shard placements are on axes " + list_text(want[d]));
        return false;
      }
    }
    return true;
  }

  // At most one FSDP split, on `fsdp_dim`, of `fsdp_ways` ways.
  bool fsdp_split(const PlannedParam& p) {
    const ParamGeometry& g = p.geometry;
    int found = -1;
    std::int64_t ways = 1;
    for (std::size_t d = 0; d < g.per_dim.size(); ++d) {
      for (const DimSplit& s : g.per_dim[d]) {
        if (!s.fsdp) continue;
        if (found >= 0) {
          fail(p, "FSDP splits on dims " + std::to_string(found) + " and " + std::to_string(d));
          return false;
        }
        found = static_cast<int>(d);
        ways = s.ways;
      }
    }
    if (found != g.fsdp_dim || (found >= 0 && ways != g.fsdp_ways)) {
      fail(p, "fsdp_dim " + std::to_string(g.fsdp_dim) + " (" + std::to_string(g.fsdp_ways) +
                  " ways) but the FSDP split is on dim " + std::to_string(found) + " (" +
                  std::to_string(ways) + " ways)");
      return false;
    }
    return true;
  }

  // Packed params: the parts are non-negative and sum to the packed dim.
  bool packed_parts(const PlannedParam& p) {
    const ParamGeometry& g = p.geometry;
    if (g.parts.empty()) {
      if (g.parts_dim == -1) return true;
      fail(p, "parts_dim " + std::to_string(g.parts_dim) + " without parts");
      return false;
    }
    if (g.parts_dim < 0 || static_cast<std::size_t>(g.parts_dim) >= g.global_shape.size()) {
      fail(p, "packed on dim " + std::to_string(g.parts_dim) + " of a " +
                  std::to_string(g.global_shape.size()) + "-d param");
      return false;
    }
    std::int64_t sum = 0;
    bool ok = true;
    for (std::int64_t part : g.parts)
      ok = ok && part >= 0 && !__builtin_add_overflow(sum, part, &sum);
    const std::int64_t extent = g.global_shape[static_cast<std::size_t>(g.parts_dim)];
    if (!ok || sum != extent) {
      fail(p, "packed parts " + list_text(g.parts) + " do not tile dim " +
                  std::to_string(g.parts_dim) + " of extent " + std::to_string(extent));
      return false;
    }
    if (g.part_replicas.empty()) return true;
    // Replicated parts (vLLM's num_kv_head_replicas): one per part, each dividing the packed
    // dim's one rule split.
    const auto& chain = g.per_dim[static_cast<std::size_t>(g.parts_dim)];
    const std::size_t rules = chain.size() - (!chain.empty() && chain.back().fsdp ? 1 : 0);
    for (std::int64_t r : g.part_replicas) {
      if (g.part_replicas.size() == g.parts.size() && r >= 1 &&
          (r == 1 || (rules == 1 && chain[0].ways % r == 0)))
        continue;
      fail(p, "part replicas " + list_text(g.part_replicas) + " for parts " + list_text(g.parts) +
                  " on a packed dim split by " + std::to_string(rules) + " rule placement(s)");
      return false;
    }
    return true;
  }

  // Whether global rows [at, at + len) of the packed dim lie in a part with replicas > 1 (its
  // boxes are held by several shard classes).
  static bool in_replicated_part(const ParamGeometry& g, std::int64_t at) {
    std::int64_t start = 0;
    for (std::size_t i = 0; i < g.parts.size() && i < g.part_replicas.size(); ++i) {
      if (at < start + g.parts[i]) return at >= start && g.part_replicas[i] > 1;
      start += g.parts[i];
    }
    return false;
  }

  bool split(const PlannedParam& p, std::size_t d, const DimSplit& s, bool last, const Mesh& mesh) {
    std::int64_t ways = 1;
    bool ok = s.axes.size() == s.axis_sizes.size() && !s.axes.empty();
    for (std::size_t i = 0; ok && i < s.axes.size(); ++i) {
      const int a = s.axes[i];
      ok = a >= 0 && static_cast<std::size_t>(a) < mesh.axes.size() &&
           mesh.axes[static_cast<std::size_t>(a)].size == s.axis_sizes[i];
      ways *= s.axis_sizes[i];
    }
    if (!ok || ways != s.ways) {
      fail(p, "dim " + std::to_string(d) + " has a split whose axes do not match the mesh");
      return false;
    }
    if (s.fsdp && (!last || s.rule != SplitRule::Chunk)) {
      fail(p, "dim " + std::to_string(d) + ": the FSDP split must be last and chunk");
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
  void members(const PlannedParam& p, const std::vector<ShardClass>& classes) {
    const Mesh& mesh = plan_.mesh_of(p);
    std::int64_t budget = kMaxCheckedMembers;
    for (const ShardClass& c : classes) {
      for (const Progression& run : c.ranks.runs()) {
        for (const std::int64_t k : {std::int64_t{0}, std::int64_t{1}, run.count - 1}) {
          if (k >= run.count || budget-- <= 0) continue;
          const std::int64_t rank = run.start + k * run.stride;
          if (shard_at(p.geometry, mesh_coords(mesh, rank)) == c.geom) continue;
          const ShardGeom own = shard_at(p.geometry, mesh_coords(mesh, rank));
          fail(p, "rank " + std::to_string(rank) + " is listed in the shard class of rank " +
                      std::to_string(c.ranks.first()) + " (local " +
                      shape_text(c.geom.local_shape) + ", padded " +
                      shape_text(c.geom.padded_shape) + ") but holds local " +
                      shape_text(own.local_shape) + ", padded " + shape_text(own.padded_shape));
          return;
        }
      }
    }
  }

  // Offsets inside the shape, sentinels, padding; each dim's pieces
  // partition [0, L) (on a packed dim: the pieces' boxes do).
  void pieces(const PlannedParam& p, const std::vector<ShardClass>& classes) {
    const Shape& global = p.global_shape;
    const std::size_t ndim = global.size();
    const int packed = boxed_dim(p.geometry);  // packed parts, or a strided dim's runs
    std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> intervals(ndim);
    std::vector<std::int64_t> pad_alloc(ndim, -1);  // the one allocation of a pad-last dim
    std::vector<std::vector<std::int64_t>> cells;   // every box, as [begin, end) per dim
    for (const ShardClass& c : classes) {
      const ShardGeom& s = c.geom;
      if (s.local_shape.size() != ndim || s.global_offset.size() != ndim ||
          s.padded_shape.size() != ndim) {
        fail(p, "a shard of rank " + std::to_string(c.ranks.first()) + " has the wrong ndim");
        return;
      }
      const bool empty = numel(s.local_shape) == 0;
      const std::string rank = "rank " + std::to_string(c.ranks.first());
      for (std::size_t d = 0; d < ndim; ++d) {
        const std::string where = rank + " dim " + std::to_string(d) + ": ";
        extent(p, s, d, where, static_cast<int>(d) == packed && !empty);
        padding(p, s, d, where, pad_alloc[d]);
        if (empty) continue;
        if (static_cast<int>(d) != packed) {
          intervals[d].emplace_back(s.global_offset[d], s.global_offset[d] + s.local_shape[d]);
        }
      }
      if (packed >= 0 && !empty) boxes(p, s, rank, intervals[static_cast<std::size_t>(packed)]);
      if (packed < 0 && !s.boxes.empty())
        fail(p, rank + ": boxes on a param that is neither packed nor strided");
      if (!empty) add_cells(p, s, cells);
    }
    bool tiled = true;
    for (std::size_t d = 0; d < ndim; ++d) tiled = partition(p, d, intervals[d]) && tiled;
    if (tiled) grid(p, intervals, cells);
  }

  // The boxes of a non-empty piece as cells: per dim [begin, end), flattened.
  static void add_cells(const PlannedParam& p, const ShardGeom& s,
                        std::vector<std::vector<std::int64_t>>& cells) {
    const std::size_t ndim = s.local_shape.size();
    auto cell = [&](std::size_t pd, std::int64_t at, std::int64_t len) {
      std::vector<std::int64_t> c;
      for (std::size_t d = 0; d < ndim; ++d) {
        const std::int64_t begin = d == pd ? at : s.global_offset[d];
        c.push_back(begin);
        c.push_back(begin + (d == pd ? len : s.local_shape[d]));
      }
      cells.push_back(std::move(c));
    };
    if (boxed_dim(p.geometry) < 0 || s.boxes.empty()) {
      cell(ndim, 0, 0);
      return;
    }
    const auto pd = static_cast<std::size_t>(boxed_dim(p.geometry));
    for (const ShardBox& b : s.boxes) {
      if (b.global_offset.size() == ndim && b.shape.size() == ndim)
        cell(pd, b.global_offset[pd], b.shape[pd]);
    }
  }

  // Each dim's pieces partition [0, L); the boxes of all pieces must then be
  // the grid those partitions span, each cell once: a duplicated box and a
  // missing one elsewhere would leave every dim's partition intact.
  void grid(const PlannedParam& p,
            const std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>>& intervals,
            std::vector<std::vector<std::int64_t>>& cells) {
    if (numel(p.global_shape) == 0) return;
    std::sort(cells.begin(), cells.end());
    if (!p.geometry.part_replicas.empty()) {
      // A replicated part's boxes are the same cells in several classes (never a q box).
      const auto pd = static_cast<std::size_t>(p.geometry.parts_dim);
      cells.erase(std::unique(cells.begin(), cells.end(),
                              [&](const auto& x, const auto& y) {
                                return x == y && in_replicated_part(p.geometry, x[2 * pd]);
                              }),
                  cells.end());
    }
    const auto dup = std::adjacent_find(cells.begin(), cells.end());
    if (dup != cells.end()) {
      fail(p, "two pieces hold the same box starting at " + list_text(*dup));
      return;
    }
    std::int64_t want = 1;
    for (const auto& iv : intervals) {
      if (__builtin_mul_overflow(want, static_cast<std::int64_t>(iv.size()), &want)) return;
    }
    if (static_cast<std::int64_t>(cells.size()) != want) {
      fail(p, std::to_string(cells.size()) + " distinct boxes for the " + std::to_string(want) +
                  " cells the per-dim pieces span: the pieces do not tile the tensor");
    }
  }

  // One dim of a piece: the local extent fits, an empty dim sits at the
  // sentinel, a non-empty piece lies inside [0, L) (a packed dim's boxes are
  // checked by `boxes` instead).
  void extent(const PlannedParam& p, const ShardGeom& s, std::size_t d, const std::string& where,
              bool packed) {
    const std::int64_t global = p.global_shape[d];
    const std::int64_t len = s.local_shape[d];
    const std::int64_t off = s.global_offset[d];
    if (len < 0 || len > global) fail(p, where + "local extent " + std::to_string(len));
    if (len == 0 && global > 0 && off != global) {
      fail(p, where + "empty piece at offset " + std::to_string(off) + ", not the sentinel " +
                  std::to_string(global));
    }
    if (!packed && len > 0 && (off < 0 || off > global - len)) {
      fail(p, where + "piece [" + std::to_string(off) + ", " + std::to_string(off + len) +
                  ") outside [0, " + std::to_string(global) + ")");
    }
  }

  // Padded >= local; equal unless the dim is FSDP's or has a pad split
  // (`uneven: {pad: M}`). A dim whose last split pads allocates the same
  // multiple of M x unit rows on every rank (pure padding included).
  void padding(const PlannedParam& p, const ShardGeom& s, std::size_t d, const std::string& where,
               std::int64_t& pad_alloc) {
    const auto& chain = p.geometry.per_dim[d];
    const bool pads = std::any_of(chain.begin(), chain.end(), [](const DimSplit& x) {
      return !x.fsdp && x.rule == SplitRule::Pad;
    });
    const std::int64_t len = s.local_shape[d];
    const std::int64_t padded = s.padded_shape[d];
    if (padded < len || (static_cast<int>(d) != p.geometry.fsdp_dim && !pads && padded != len)) {
      fail(p, where + "padded extent " + std::to_string(padded) + " for local extent " +
                  std::to_string(len));
      return;
    }
    if (chain.empty() || chain.back().fsdp || chain.back().rule != SplitRule::Pad) return;
    const DimSplit& last = chain.back();
    const std::int64_t multiple = std::max<std::int64_t>(1, last.pad_multiple) * last.unit;
    if (multiple > 0 && padded % multiple != 0) {
      fail(p, where + "padded extent " + std::to_string(padded) + " is not a multiple of " +
                  std::to_string(multiple) + " (pad " + std::to_string(last.pad_multiple) +
                  " x unit " + std::to_string(last.unit) + ")");
    }
    if (pad_alloc < 0) pad_alloc = padded;
    if (padded != pad_alloc) {
      fail(p, where + "padded extent " + std::to_string(padded) + " but another rank pads to " +
                  std::to_string(pad_alloc));
    }
  }

  // A packed piece's boxes: in local order without overlap inside the
  // allocation, each inside one part of the global tensor, the local
  // extent on the packed dim their sum, the other dims the piece's own.
  void boxes(const PlannedParam& p, const ShardGeom& s, const std::string& rank,
             std::vector<std::pair<std::int64_t, std::int64_t>>& iv) {
    const auto pd = static_cast<std::size_t>(boxed_dim(p.geometry));
    const std::size_t ndim = p.global_shape.size();
    if (s.boxes.empty()) {
      fail(p, rank + ": a packed piece without boxes");
      return;
    }
    if (s.global_offset[pd] != s.boxes.front().global_offset[pd]) {
      fail(p, rank + ": offset " + std::to_string(s.global_offset[pd]) + " on the packed dim" +
                  " is not its first box's " + std::to_string(s.boxes.front().global_offset[pd]));
    }
    std::int64_t local_end = 0;
    std::int64_t sum = 0;
    for (const ShardBox& b : s.boxes) {
      const std::string box = rank + " box at " + shape_text(b.global_offset) + ": ";
      if (b.shape.size() != ndim || b.global_offset.size() != ndim ||
          b.local_offset.size() != ndim) {
        fail(p, box + "wrong ndim");
        return;
      }
      for (std::size_t d = 0; d < ndim; ++d) {
        if (d == pd) continue;
        if (b.shape[d] != s.local_shape[d] || b.global_offset[d] != s.global_offset[d] ||
            b.local_offset[d] != 0) {
          fail(p, box + "dim " + std::to_string(d) + " is not the piece's own");
        }
      }
      const std::int64_t len = b.shape[pd];
      const std::int64_t at = b.global_offset[pd];
      if (len <= 0 || b.local_offset[pd] < local_end ||
          b.local_offset[pd] > s.padded_shape[pd] - len) {
        fail(p, box + std::to_string(len) + " rows at local row " +
                    std::to_string(b.local_offset[pd]) + " overlap an earlier box or leave the " +
                    std::to_string(s.padded_shape[pd]) + " allocated rows");
      }
      local_end = b.local_offset[pd] + len;
      sum += len;
      const bool in_part = p.geometry.parts.empty() || inside_one_part(p.geometry.parts, at, len);
      if (at < 0 || len > p.global_shape[pd] - at || !in_part) {
        fail(p, box + "rows [" + std::to_string(at) + ", " + std::to_string(at + len) +
                    ") are not inside one packed part " + list_text(p.geometry.parts));
      }
      iv.emplace_back(at, at + len);
    }
    if (sum != s.local_shape[pd]) {
      fail(p, rank + ": boxes hold " + std::to_string(sum) + " rows of the packed dim, the piece " +
                  std::to_string(s.local_shape[pd]));
    }
  }

  // Sorts and dedupes `iv`; false (reported) unless they partition [0, L).
  bool partition(const PlannedParam& p, std::size_t d,
                 std::vector<std::pair<std::int64_t, std::int64_t>>& iv) {
    const std::int64_t length = p.global_shape[d];
    if (length == 0 || numel(p.global_shape) == 0) return true;
    std::sort(iv.begin(), iv.end());
    iv.erase(std::unique(iv.begin(), iv.end()), iv.end());
    std::int64_t at = 0;
    for (const auto& [begin, end] : iv) {
      if (begin != at) {
        fail(p, "dim " + std::to_string(d) + ": pieces " +
                    (begin < at ? "overlap" : "leave a gap") + " at " + std::to_string(at));
        return false;
      }
      at = end;
    }
    if (at != length) {
      fail(p, "dim " + std::to_string(d) + ": pieces cover [0, " + std::to_string(at) + ") of " +
                  std::to_string(length));
      return false;
    }
    return true;
  }

  // Every rank of the stage in one class; element count x replicas.
  void counts(const PlannedParam& p, const std::vector<ShardClass>& classes) {
    const std::int64_t on_stage = plan_.world_size / plan_.num_stages;
    std::int64_t all_ways = 1;
    for (const auto& chain : p.geometry.per_dim)
      for (const DimSplit& s : chain) all_ways *= s.ways;
    if (all_ways < 1 || on_stage % all_ways != 0) {
      fail(p, "splits of " + std::to_string(all_ways) + " ways do not divide the " +
                  std::to_string(on_stage) + " ranks of its stage");
      return;
    }
    // Counted per replica (class ranks / replicas) so the sum stays near
    // numel(global) < 2^62; overflow is reported, never wrapped.
    std::int64_t ranks = 0;
    std::int64_t elements = 0;  // sum of numel(local) x |ranks| / (on_stage / all_ways)
    bool overflow = false;
    const std::int64_t replicas = on_stage / all_ways;
    for (const ShardClass& c : classes) {
      ranks += c.ranks.size();
      // Every class holds a multiple of `replicas` ranks when the layout is
      // right; a class that does not is itself a violation.
      if (c.ranks.size() % replicas != 0) {
        fail(p, "a shard held by " + std::to_string(c.ranks.size()) +
                    " ranks, not a multiple of the replica count " + std::to_string(replicas));
        return;
      }
      std::int64_t add = 0;
      overflow =
          overflow ||
          __builtin_mul_overflow(numel(c.geom.local_shape), c.ranks.size() / replicas, &add) ||
          __builtin_add_overflow(elements, add, &elements);
      for (const Progression& run : c.ranks.runs()) {
        const std::int64_t last = run.start + (run.count - 1) * run.stride;
        if (!plan_.holds(run.start, p) || !plan_.holds(last, p)) {
          fail(p, "rank " + std::to_string(run.start) + " of a shard is not on stage " +
                      std::to_string(p.stage));
          return;
        }
      }
    }
    if (ranks != on_stage) {
      fail(p, std::to_string(ranks) + " ranks hold a shard; its stage has " +
                  std::to_string(on_stage));
    }
    // A part with `replicas: R` is held by R shard classes (its piece at R split
    // coordinates), so its elements count R times.
    std::int64_t expected = numel(p.global_shape);
    const ParamGeometry& g = p.geometry;
    const std::int64_t packed_extent =
        g.parts.empty() ? 0 : p.global_shape[static_cast<std::size_t>(g.parts_dim)];
    const std::int64_t per_row = packed_extent == 0 ? 0 : expected / packed_extent;
    for (std::size_t i = 0; i < g.part_replicas.size() && i < g.parts.size(); ++i) {
      if (g.part_replicas[i] <= 1 || packed_extent == 0) continue;
      std::int64_t extra = 0;
      overflow = overflow ||
                 __builtin_mul_overflow(per_row * g.parts[i], g.part_replicas[i] - 1, &extra) ||
                 __builtin_add_overflow(expected, extra, &expected);
    }
    if (overflow || elements != expected) {
      fail(p, "shards hold " +
                  (overflow ? std::string("more than 2^63") : std::to_string(elements)) +
                  " elements per replica; the global tensor has " +
                  std::to_string(numel(p.global_shape)) +
                  (expected != numel(p.global_shape)
                       ? " (" + std::to_string(expected) + " with its replicated parts)"
                       : std::string()));
    }
  }

  void alias(const PlannedParam& p) {
    if (*p.alias_of >= plan_.params.size()) {
      fail(p, "alias of a param index outside the plan");
      return;
    }
    const PlannedParam& src = plan_.params[*p.alias_of];
    if (src.alias_of) fail(p, "alias of " + src.name + ", which is an alias itself");
    if (src.dtype != p.dtype || src.global_shape != p.global_shape) {
      fail(p, "alias of " + src.name + " with a different dtype or global shape");
      return;
    }
    // The source's own violations are reported at the source; its pieces
    // are only computed from a sound geometry.
    if (!Checker(plan_, 1).checked_structure(src)) {
      fail(p, "alias of " + src.name + ", whose geometry is broken");
      return;
    }
    // Same geometry on the same mesh: the same pieces by construction
    // (shard_at is a pure function of both); else compare the pieces.
    if (geometry_key(src, false) == geometry_key(p, false)) return;
    if (class_space(plan_, p).num_classes > kMaxCheckedClasses ||
        class_space(plan_, src).num_classes > kMaxCheckedClasses) {
      fail(p, "alias of " + src.name + " with another geometry");
      return;
    }
    const std::vector<ShardClass> classes = enumerate_shards(plan_, p);
    const std::vector<ShardClass> theirs = enumerate_shards(plan_, src);
    bool same = theirs.size() == classes.size();
    for (std::size_t i = 0; same && i < classes.size(); ++i) {
      same = theirs[i].geom == classes[i].geom &&
             (src.stage != p.stage || theirs[i].ranks.runs() == classes[i].ranks.runs());
    }
    if (!same) fail(p, "alias of " + src.name + " but their shards differ");
  }

  // An FP8 block scale follows its weight (contract §5.11): same mesh,
  // stage, rule and placements, and each dim's rule splits over the same
  // axes with the same rule (in block units).
  void scale(const PlannedParam& p) {
    if (*p.scale_of >= plan_.params.size()) {
      fail(p, "scale of a param index outside the plan");
      return;
    }
    const PlannedParam& w = plan_.params[*p.scale_of];
    if (w.mesh != p.mesh || w.stage != p.stage || w.rule.index != p.rule.index ||
        w.rule.kind != p.rule.kind || w.placements.size() != p.placements.size() ||
        w.geometry.per_dim.size() != p.geometry.per_dim.size()) {
      fail(p, "scale of " + w.name + " on another mesh, stage, rule or ndim");
      return;
    }
    for (std::size_t a = 0; a < w.placements.size(); ++a) {
      if (w.placements[a].kind != p.placements[a].kind ||
          w.placements[a].dim != p.placements[a].dim) {
        fail(p, "scale of " + w.name + " placed " + p.placements[a].label() + " on axis " +
                    std::to_string(a) + ", its weight " + w.placements[a].label());
        return;
      }
    }
    for (std::size_t d = 0; d < w.geometry.per_dim.size(); ++d) {
      std::vector<const DimSplit*> ws, ss;
      for (const DimSplit& s : w.geometry.per_dim[d])
        if (!s.fsdp) ws.push_back(&s);
      for (const DimSplit& s : p.geometry.per_dim[d])
        if (!s.fsdp) ss.push_back(&s);
      bool same = ws.size() == ss.size();
      for (std::size_t i = 0; same && i < ws.size(); ++i) {
        same =
            ws[i]->axes == ss[i]->axes && ws[i]->ways == ss[i]->ways && ws[i]->rule == ss[i]->rule;
      }
      if (!same) {
        fail(p, "dim " + std::to_string(d) + ": the scale's splits are not its weight " + w.name +
                    "'s");
        return;
      }
    }
  }

  // Everything enumerate_shards(plan, p) depends on: mesh, geometry and
  // (with `stage`) the stage.
  static std::string geometry_key(const PlannedParam& p, bool stage) {
    const ParamGeometry& g = p.geometry;
    std::string k = std::to_string(static_cast<int>(p.mesh)) + "|" +
                    (stage ? std::to_string(p.stage) : "") + "|" + list_text(g.global_shape) + "|" +
                    std::to_string(g.fsdp_dim) + "," + std::to_string(g.fsdp_ways) + "|" +
                    list_text(g.parts) + "@" + std::to_string(g.parts_dim);
    for (const auto& chain : g.per_dim) {
      k += "|";
      for (const DimSplit& s : chain) {
        k += list_text(s.axes) + list_text(s.axis_sizes) + std::to_string(s.ways) + "," +
             std::to_string(static_cast<int>(s.rule)) + "," + (s.fsdp ? "f" : "r") +
             std::to_string(s.pad_multiple) + "," + std::to_string(s.unit) + ";";
      }
    }
    return k;
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
  for (const PlannedParam& p : plan.params) {
    if (checker.full()) break;
    checker.param(p);
  }
  return checker.take();
}

std::vector<std::string> check_shard_classes(const Plan& plan, const PlannedParam& p,
                                             const std::vector<ShardClass>& classes,
                                             std::size_t max_reported) {
  Checker checker(plan, max_reported);
  if (checker.checked_structure(p)) checker.shards(p, classes);
  return checker.take();
}

namespace {

class BufferChecker {
 public:
  BufferChecker(const Plan& plan, std::size_t cap) : plan_(plan), cap_(cap) {}

  void rank(const std::vector<PlannedBuffer>& buffers, std::int64_t r) {
    for (const PlannedBuffer& b : buffers) {
      if (b.fsdp2) fsdp2(fsdp2_for_rank(*b.fsdp2, plan_, r), r);
      if (b.muon) muon(muon_for_rank(*b.muon, plan_, r), r);
    }
  }
  std::vector<std::string> take() { return std::move(out_); }

 private:
  void fail(std::int64_t r, const std::string& what) {
    if (cap_ == 0 || out_.size() < cap_) out_.push_back("rank " + std::to_string(r) + ": " + what);
  }

  void fsdp2(const Fsdp2RankLayout& layout, std::int64_t r) {
    for (const Fsdp2RankUnit& u : layout.units) {
      const std::string unit = "fsdp2 unit '" + u.unit->name + "'";
      if (u.index < 0 || static_cast<std::size_t>(u.index) >= u.ranks.size() ||
          u.ranks[static_cast<std::size_t>(u.index)] != r) {
        fail(r, unit + ": not at its index in the FSDP group");
      }
      std::int64_t at = 0;
      for (const Fsdp2Param& fp : u.params) {
        const PlannedParam& p = plan_.params[fp.param];
        const ShardGeom g = shard_at(p.geometry, mesh_coords(plan_.mesh_of(p), r));
        const std::int64_t unit_size = u.unit->byte_units ? element_size(p.dtype) : 1;
        if (fp.offset != at)
          fail(r, unit + ": " + p.name + " at offset " + std::to_string(fp.offset) + ", not " +
                      std::to_string(at));
        if (fp.padded_shape != g.padded_shape || fp.local_shape != g.local_shape ||
            fp.padded_numel != numel(g.padded_shape) * unit_size) {
          fail(r, unit + ": " + p.name + " packs " + shape_text(fp.padded_shape) +
                      ", its shard is padded " + shape_text(g.padded_shape));
        }
        at += fp.padded_numel;
      }
      if (u.total != at)
        fail(r, unit + ": slot " + std::to_string(u.total) + " != " + std::to_string(at));
    }
  }

  void muon(const MuonRankLayout& layout, std::int64_t r) {
    for (const MuonRankGroup& g : layout.groups) {
      for (const MuonRankBatch& batch : g.batches) {
        for (std::size_t s = 0; s < batch.stages.size(); ++s) stage(batch.stages[s], s == 0, r);
      }
    }
  }

  void stage(const MuonStage& st, bool first, std::int64_t r) {
    if (st.index < 0 || static_cast<std::size_t>(st.index) >= st.ranks.size() ||
        st.ranks[static_cast<std::size_t>(st.index)] != r) {
      fail(r, "muon stage: not at its index in the group");
    }
    std::int64_t at = 0;
    for (const MuonStageParam& mp : st.params) {
      const PlannedParam& p = plan_.params[mp.param];
      if (mp.offset != at || mp.padded_numel < mp.actual_numel ||
          mp.split_sizes.size() != st.ranks.size()) {
        fail(r, "muon stage: " + p.name + " packed at " + std::to_string(mp.offset) +
                    " (expected " + std::to_string(at) + "), " + std::to_string(mp.actual_numel) +
                    " of " + std::to_string(mp.padded_numel) + " elements, " +
                    std::to_string(mp.split_sizes.size()) + " split sizes for " +
                    std::to_string(st.ranks.size()) + " members");
      }
      if (first) {
        const ShardGeom g = shard_at(p.geometry, mesh_coords(plan_.mesh_of(p), r));
        if (mp.actual_numel != numel(g.local_shape)) {
          fail(r, "muon stage: " + p.name + " sends " + std::to_string(mp.actual_numel) +
                      " elements, its shard has " + std::to_string(numel(g.local_shape)));
        }
      }
      at += mp.padded_numel;
    }
    if (st.total_numel != at ||
        st.gathered_numel != at * static_cast<std::int64_t>(st.ranks.size())) {
      fail(r, "muon stage: totals " + std::to_string(st.total_numel) + " / " +
                  std::to_string(st.gathered_numel) + " for packed " + std::to_string(at));
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
  for (std::int64_t r : ranks) checker.rank(buffers, r);
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
