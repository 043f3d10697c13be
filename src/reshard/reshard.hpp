// Resharding: which bytes every rank of plan B must read, and from which
// rank of plan A, to go from holding its shards under A to holding them
// under B (`shardc reshard PLAN_A PLAN_B`). Pure planning, no I/O
// (src/reshard/); the driver reads the plans, the back end renders JSON.
//
// Model. A plan is seen as a `Layout`: per param its distinct shard classes,
// each a box of the global tensor (global offset + shape, in elements) with
// the replica set of ranks holding it (contract §6.1 `shards`). A rank that a
// plan does not have (rank >= world_size) holds nothing in it; so do the
// ranks of other pipeline stages. The two plans may have different world
// sizes, meshes, degrees and pipeline splits: only boxes and rank sets
// matter.
//
// Cost. Transfers are planned per shard class, never per rank pair: for
// every param, each B class box is intersected with the A class boxes
// (found through a per-dim index of A's boxes, brute force as a fallback),
// giving `Piece`s whose rank sets stay progressions. Per-rank byte totals
// are accumulated per progression (difference arrays by stride), so the
// summary costs O(params x pieces x runs + world x distinct strides).
// Per-rank read lists (`reads_for_rank`) are expanded only when asked for.
//
// Source choice. Each piece of a destination rank's box is read from exactly
// one rank of the A class holding it (of the classes holding it, for a packed
// part with `replicas`, whose one piece several classes hold): the destination itself when it holds
// the piece under A ("in place", 0 bytes moved); else, when ranks per node
// are known (`Options::ranks_per_node`, node = rank / N), the lowest rank of
// that class on the destination's node; else the lowest rank of the class.
// So the bytes read by a destination sum exactly to its local bytes.
//
// Aliases (tied weights). A B param that is an alias of a param on the same
// pipeline stage shares its source's storage on every rank that holds it
// (contract §5.5): it is not transferred (its reads are empty, `shares_storage`
// is set) and its bytes are not counted. An alias on another stage than its
// source is a separate copy and is transferred like any param. Sources are
// matched by name: A's holders of the alias's name are its sources. A B alias
// sharing storage whose A param is not an alias of the same source (A holds
// it as a param of its own: an untied lm_head) would drop A's values:
// E-RESHARD-MISMATCH (tied -> untied copies the source: allowed).
//
// Padding. FSDP padding (`padded_shape`) holds no data: only `local_shape`
// elements are transferred; a runtime zero-fills the padding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/diagnostics.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "outputs/readback.hpp"
#include "support/box.hpp"
#include "support/dtype.hpp"
#include "support/rank_set.hpp"

namespace shardc::reshard {

/// Boxes of a tensor and their arithmetic (numel, intersect, offset_within):
/// support/box.hpp.
using shardc::Box;
using shardc::intersect;
using shardc::numel;
using shardc::offset_within;

/// The intersection of two rank sets, as sorted non-interleaving
/// progressions (each pair of runs meets in at most one progression, found
/// by the Chinese remainder theorem). Cost O(runs(a) x runs(b)).
std::vector<Progression> intersect_ranks(const RankSet& first, const RankSet& second);

/// The rank of `holders` that destination `dst` reads from: `dst` itself
/// when it is a holder; else the lowest holder on dst's node when
/// `ranks_per_node` is set (node = rank / ranks_per_node); else the lowest
/// holder. Precondition: `holders` non-empty. Cost O(runs).
std::int64_t choose_source(const RankSet& holders, std::int64_t dst,
                           std::optional<std::int64_t> ranks_per_node);

/// One contiguous box of a packed piece: `box` of the global tensor sits at
/// `local_offset` in the rank's local tensor.
struct ShardPart {
  Box box;
  Shape local_offset;
};

/// One distinct shard of a param and its replica set. An empty shard (some
/// extent 0) has a box with numel 0 and is never a source. `box` is the
/// shard's `global_offset` + `local_shape` (real elements, padding
/// excluded). A packed piece (several global boxes concatenated in the local
/// tensor) lists them in `parts`, which are then what is read and sent;
/// `parts` is empty for an ordinary piece (one part: `box` at local 0).
struct ShardClassBox {
  Box box;
  RankSet ranks;
  std::vector<ShardPart> parts;
};

/// Calls `fn(part index, global box)` for every part of `shard_class` (`shard_class.box` alone,
/// index 0, when `shard_class.parts` is empty).
void for_each_part(const ShardClassBox& shard_class,
                   const std::function<void(std::size_t, const Box&)>& fn);

/// Where `piece` (inside part `part` of `shard_class`) starts in the local tensor of a
/// rank holding `shard_class`: its offset within the part's box plus the part's
/// local offset.
Shape local_offset_in(const Box& piece, const ShardClassBox& shard_class, std::size_t part);

struct LayoutParam {
  std::string name;
  DType dtype = DType::BFloat16;
  Shape global_shape;
  int stage = 0;
  std::optional<std::string> alias_of;  ///< tie source's name
  bool shares_storage = false;          ///< alias on its source's stage: never transferred
  std::vector<ShardClassBox> classes;
  std::int64_t vocab_rows = 0;      ///< padded vocabulary: real rows (0 = none)
  std::int64_t vocab_multiple = 0;  ///< padded vocabulary: the multiple of its padding
  SourceLoc loc;                    ///< where the param is described (for diagnostics)
};

/// One plan as resharding sees it.
struct Layout {
  std::string label;  ///< file or recipe the layout came from (for messages)
  /// Planned by shardc in memory (MODEL RECIPE), not read from a plan.json: a
  /// shard that does not tile is then shardc's fault, never the user's edit.
  bool in_memory = false;
  std::int64_t world_size = 1;
  std::vector<LayoutParam> params;  ///< plan order
};

/// A compiled plan.json (readback). `path` labels diagnostics; `text` (the
/// file's bytes) locates each param's `"name"` for file:line:col (may be
/// empty: lines are then 0). Every param's shard `ranks` text is parsed; a
/// malformed one is an E-RESHARD-INPUT error and the param is left without
/// classes. A packed param's shards become classes with `parts` (their
/// `boxes`: each inside the global shape and the allocated piece, together
/// holding local_shape's elements, else E-RESHARD-INPUT).
Layout layout_from_plan_file(const readback::PlanFile& plan, const std::string& path,
                             const std::string& text, DiagnosticSink& sink);

/// A plan built in memory (MODEL RECIPE inputs), via `enumerate_shards`.
/// Locations are the params' model entries.
Layout layout_from_plan(const Plan& plan, const std::string& label);

struct Options {
  std::optional<std::int64_t> ranks_per_node;  ///< >= 1; none = no node locality
};

/// The intersection of one A class with one B class of a param.
struct Piece {
  Box box;                    ///< global offset + shape (elements), numel > 0
  std::size_t src_class = 0;  ///< index into the A param's `classes`
  std::size_t src_part = 0;   ///< part of that class (0 unless packed)
  std::size_t dst_class = 0;  ///< index into the B param's `classes`
  std::size_t dst_part = 0;   ///< part of that class (0 unless packed)
  /// -1, or the index in ParamPlan::shared_sources of every (class, part) of
  /// A holding this same global box (a packed part with `replicas`: several
  /// shard classes hold one piece of it, each perhaps at another local
  /// offset); src_class / src_part is then the first of them.
  std::int32_t shared = -1;
};

/// Every (A class, part) holding one global box.
using SourceOwners = std::vector<std::pair<std::size_t, std::size_t>>;

/// How one B param is obtained.
struct ParamPlan {
  std::size_t b_param = 0;                ///< index into B's params
  std::optional<std::size_t> a_param;     ///< index into A's params (absent on error)
  std::vector<Piece> pieces;              ///< grouped by dst_class, then A class order
  std::vector<std::size_t> class_pieces;  ///< start of dst_class j's pieces; size classes+1
  /// A boxes held by several classes (replicated packed parts), see Piece::shared.
  std::vector<SourceOwners> shared_sources;
};

/// Byte totals (bytes = elements x dtype size, padding excluded).
struct Totals {
  std::int64_t dest_bytes = 0;      ///< bytes every B rank holds, summed over ranks
  std::int64_t moved_bytes = 0;     ///< of those, read from another rank
  std::int64_t in_place_bytes = 0;  ///< of those, already held by the same rank under A
  std::int64_t pieces = 0;          ///< class-level pieces (A class x B class intersections)
  std::int64_t params = 0;          ///< B params transferred
  std::int64_t shared_aliases = 0;  ///< B aliases sharing storage (not transferred)
};

struct Result {
  std::vector<ParamPlan> params;  ///< one per B param, B order (also on error, pieces empty)
  Totals totals;
  std::vector<std::int64_t> dest_bytes;      ///< per B rank (size B world)
  std::vector<std::int64_t> moved_bytes;     ///< per B rank
  std::vector<std::int64_t> in_place_bytes;  ///< per B rank
};

/// Plans the transfers from `layout_a` to `layout_b`. Errors (to `sink`, located at B's
/// param): E-RESHARD-MISMATCH when a param's global shape or dtype differ
/// between the plans, E-RESHARD-MISSING when a B param is absent from A,
/// E-RESHARD-COVERAGE when A's shards do not cover a piece B needs: one
/// diagnostic for all such params (at the first, naming it, the count and
/// the next few), blaming an edited plan.json only when A was read from one
/// (`Layout::in_memory`: a shardc bug to report). A param with an error gets
/// no pieces; the caller stops on `sink.has_errors()`.
Result plan_reshard(const Layout& layout_a, const Layout& layout_b, const Options& opt,
                    DiagnosticSink& sink);

/// One box a destination reads.
struct Read {
  std::int64_t src = 0;  ///< source rank (== destination when in place)
  Box box;               ///< global offset + shape
  Shape dst_offset;      ///< where the box starts in the destination's local tensor
  Shape src_offset;      ///< where it starts in the source's local tensor
  std::int64_t bytes = 0;
};

/// What one destination rank does for one B param it holds.
struct RankParamReads {
  std::size_t b_param = 0;
  std::size_t dst_class = 0;  ///< the rank's class in the B param
  bool shares_storage = false;
  std::vector<Read> reads;  ///< tile the local box exactly once (empty when sharing or empty)
};

/// Calls `fn(rank, reads)` for every rank of `ranks` (ascending, each <
/// B's world size) with every B param the rank holds, in B order, and its
/// reads. Finding the ranks' classes costs, per class run, the smaller of
/// its length and the number of requested ranks in its span; then O(reads).
void for_each_rank_reads(
    const Layout& layout_a, const Layout& layout_b, const Result& result,
    const std::vector<std::int64_t>& ranks, const Options& opt,
    const std::function<void(std::int64_t, const std::vector<RankParamReads>&)>& fn);

}  // namespace shardc::reshard
