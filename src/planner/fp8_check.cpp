// E-FP8-BLOCK: a block-quantized weight whose shard boundary cuts an FP8
// block (src/planner/fp8.hpp: a rank holding weight rows [a, e) must hold
// scale rows [a / b, ceil(e / b)), so every boundary must be a multiple of
// the block b or the dim's end).
//
// Per paired scale and per block dim (b > 1), the weight's rule splits of
// that dim (in chain order: nested axes, then flattened groups; any
// `uneven`: torch.chunk's uneven last pieces, balanced, pad, units) are
// walked level by level: every piece's real rows must be block-aligned and
// the scale's piece with the same coordinates must be their block image.
// Pieces of equal extents behave alike, so each level is memoized on
// (extents) and the walk costs O(distinct extents x pieces per level), not
// O(ranks). FSDP splits are not walked: FSDP2 all-gathers the weight and
// the scale (each FSDP-sharded as its own param) before use.
//
// The message names a representative rank (the lowest coordinates on the
// split axes, the param's pipeline stage, 0 elsewhere), the number of ranks
// holding such a piece, the dim, the boundary row, the block and the valid
// sizes of the split's axes.
//
// A dim whose rule labels are `_StridedShard` splits that are no shard order
// (docs/shard-order.md: a rank holds several runs of rows, as DTensor reads the
// labels; the scale follows with the same labels on its blocks) is checked
// rank by rank on those runs (`check_strided_dim`): every run of the weight must
// start on a block and end on one (or at the dim's end), and the scale's runs
// must be exactly the block images of the weight's, in local order. The nested
// walk above knows contiguous pieces only and would pass a layout whose runs
// cut blocks (768 rows, block 128, packed_colwise over tp 2: runs of 192 rows).
#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>

#include "core/shard_order.hpp"
#include "planner/buffer_util.hpp"
#include "planner/fp8.hpp"
#include "planner/passes.hpp"
#include "support/saturating.hpp"

namespace shardc::passes {
namespace {

constexpr std::int64_t kBudget = std::int64_t{1} << 24;  // pieces visited per compile
constexpr std::int64_t kMaxTried = 4096;                 // sizes tried for the hint
constexpr std::size_t kMaxListed = 64;                   // sizes listed in the hint

// The first bad piece found (depth-first, lowest coordinates first).
struct Offender {
  bool found = false;
  std::size_t level = 0;
  std::vector<std::int64_t> path;  // split coordinate per level, through `level`
  fp8::PieceVerdict verdict;
  Piece rows;                   // global weight rows of the piece
  Piece scale_rows;             // global scale rows the scale's split gives it
  std::int64_t parent_len = 0;  // real rows of the piece the offending split cuts
};

// A piece of a dim at one level of its split chain: its allocated extent, its
// real rows (a prefix of them) and its global start.
struct ParentPiece {
  std::int64_t allocated = 0;
  std::int64_t real = 0;
  std::int64_t start = 0;
};

class Walk {
 public:
  Walk(const std::vector<DimSplit>& weight_chain, const std::vector<DimSplit>& scale_chain,
       std::int64_t block, std::int64_t& budget)
      : w_(weight_chain),
        s_(scale_chain),
        b_(block),
        budget_(budget),
        below_(weight_chain.size(), 1) {
    for (std::size_t l = weight_chain.size(); l-- > 1;)
      below_[l - 1] = below_[l] * weight_chain[l].ways;
  }

  // Bad leaf pieces (coordinate combinations over all levels) under one
  // piece of `level`'s parent, given as the weight's and the scale's piece.
  std::int64_t run(std::size_t level, const ParentPiece& weight, const ParentPiece& scale) {
    const std::int64_t wa = weight.allocated;
    const std::int64_t wr = weight.real;
    const std::int64_t w_abs = weight.start;
    const std::int64_t sa = scale.allocated;
    const std::int64_t sr = scale.real;
    const std::int64_t s_abs = scale.start;
    const std::array<std::int64_t, 5> key{static_cast<std::int64_t>(level), wa, wr, sa, sr};
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    std::int64_t bad = 0;
    const DimSplit& ws = w_[level];
    const DimSplit& ss = s_[level];
    for (std::int64_t k = 0; k < ws.ways; ++k) {
      if (budget_-- <= 0) {
        skipped = true;
        return bad;
      }
      const Piece wp = split_piece(wa, k, ws);
      const Piece sp = split_piece(sa, k, ss);
      const Piece wrr{wp.start, std::clamp(wr - wp.start, std::int64_t{0}, wp.size)};
      const Piece srr{sp.start, std::clamp(sr - sp.start, std::int64_t{0}, sp.size)};
      const fp8::PieceVerdict verdict = fp8::judge_piece(wrr, wr, srr, b_);
      path_.push_back(k);
      if (!verdict.ok) {
        bad += below_[level];
        if (!first.found)
          first = {true,
                   level,
                   path_,
                   verdict,
                   {w_abs + wrr.start, wrr.size},
                   {s_abs + srr.start, srr.size},
                   wr};
      } else if (level + 1 < w_.size()) {
        bad += run(level + 1, {wp.size, wrr.size, w_abs + wrr.start},
                   {sp.size, srr.size, s_abs + srr.start});
      }
      path_.pop_back();
      if (skipped) return bad;
      if (wp.start >= wr && sp.start >= sr) break;  // every later piece is empty
    }
    if (!skipped) memo_.emplace(key, bad);
    return bad;
  }

  Offender first;
  bool skipped = false;

 private:
  const std::vector<DimSplit>& w_;
  const std::vector<DimSplit>& s_;
  std::int64_t b_;
  std::int64_t& budget_;
  std::vector<std::int64_t> below_;  // product of the ways of the deeper levels
  std::vector<std::int64_t> path_;
  std::map<std::array<std::int64_t, 5>, std::int64_t> memo_;
};

std::vector<DimSplit> rule_splits(const PlannedParam& param, std::size_t d) {
  std::vector<DimSplit> out;
  for (const DimSplit& split : param.geometry.per_dim[d])
    if (!split.fsdp) out.push_back(split);
  return out;
}

// The lowest rank whose coordinates on the chain's axes are `path`, on the
// param's pipeline stage.
std::int64_t representative_rank(const Plan& plan, const PlannedParam& param,
                                 const std::vector<DimSplit>& chain,
                                 const std::vector<std::int64_t>& path) {
  const Mesh& mesh = plan.mesh_of(param);
  std::vector<std::int64_t> coords(mesh.axes.size(), 0);
  const int pp = param.mesh == MeshKind::Expert ? plan.expert_pipeline_axis : plan.pipeline_axis;
  if (pp >= 0) coords[static_cast<std::size_t>(pp)] = param.stage;
  for (std::size_t level = 0; level < path.size(); ++level)
    set_axes_coords(chain[level].axes, chain[level].axis_sizes, path[level], coords);
  return rank_of(mesh, coords);
}

std::string rows_text(Piece rows) {
  return "[" + std::to_string(rows.start) + ", " + std::to_string(rows.start + rows.size) + ")";
}

std::string sizes_hint(const PlannedParam& weight, const DimSplit& split, const Mesh& mesh,
                       std::int64_t len, std::int64_t block, const Recipe& recipe) {
  const std::int64_t blocks = saturating::ceil_div(len, block);
  const std::vector<std::int64_t> ok =
      fp8::valid_ways(len, block, split, std::min(kMaxTried, blocks), kMaxListed);
  std::string list;
  for (std::int64_t ways : ok) list += (list.empty() ? "" : ", ") + std::to_string(ways);
  std::string hint = "sizes of " + split_axes_text(split, mesh) +
                     " that keep every boundary a multiple of " + std::to_string(block) +
                     " (extent " + std::to_string(len) + " = " + std::to_string(blocks) +
                     " blocks, " + uneven_text(split) + "): " + list;
  if (weight.rule.kind == RuleRef::Kind::Rule &&
      std::max<std::int64_t>(1, weight.unit) % block != 0 && len % block == 0)
    hint += "; or `unit: " + std::to_string(block) + "` on " +
            rule_label(recipe, false, weight.rule.index) +
            " so every rank holds whole blocks (block counts may then differ)";
  return hint +
         "; or `fp8_scales: rules` and replicate the scales (FSDP shards are exempt: FSDP2 "
         "all-gathers before use)";
}

// One dim of a block-quantized weight and its scale: the block and the
// weight's rule splits of the dim.
struct BlockedDim {
  const PlannedParam& weight;
  const PlannedParam& scale;
  std::size_t dim;
  std::int64_t block;
  const std::vector<DimSplit>& chain;
};

// How many hold a bad shard: `ranks` of the world, or for a packed dim (each part split on
// its own) `pieces` of `of_pieces` part pieces, on at most `ranks` ranks.
struct OffenderCount {
  std::int64_t ranks = 0;
  std::int64_t pieces = 0;  ///< packed dims only, else 0
  std::int64_t of_pieces = 0;
};

// E-FP8-BLOCK for the first offender `walk` found.
Diagnostic offender_diagnostic(const BlockedDim& at, const Walk& walk, const OffenderCount& count,
                               const Plan& plan, const Recipe& recipe) {
  const PlannedParam& weight = at.weight;
  const PlannedParam& scale = at.scale;
  const std::size_t d = at.dim;
  const std::int64_t block = at.block;
  const std::vector<DimSplit>& chain = at.chain;
  const Offender& offender = walk.first;
  const std::int64_t rank = representative_rank(plan, weight, chain, offender.path);
  Diagnostic diag = param_diagnostic(weight, DiagCode::EFp8Block, rule_loc(weight, recipe));
  const std::string where = weight.name + " dim " + std::to_string(d) + ": rank " +
                            std::to_string(rank) + " holds elements " + rows_text(offender.rows) +
                            " of " + std::to_string(weight.global_shape[d]);
  const std::string at_least = walk.skipped ? "at least " : "";
  // A packed dim counts part pieces (trial C 10: "4 of 2 ranks" for 2 parts x 2 ranks).
  const std::string others =
      count.pieces > 0
          ? " (" + at_least + std::to_string(count.pieces) + " of the " +
                std::to_string(count.of_pieces) + " part pieces, on up to " +
                std::to_string(count.ranks) + " of " + std::to_string(plan.world_size) + " ranks)"
          : " (" + at_least + std::to_string(count.ranks) + " of " +
                std::to_string(plan.world_size) + " ranks hold such a shard)";
  if (!offender.verdict.mismatch) {
    // The parent piece starts on a block, so the relative cut is the global one.
    const std::int64_t boundary = offender.rows.start % block != 0
                                      ? offender.rows.start
                                      : offender.rows.start + offender.rows.size;
    diag.message = where + "; its shard boundary at element " + std::to_string(boundary) +
                   " cuts an FP8 block of " + std::to_string(block) + " (" +
                   std::to_string(boundary) + " = " + std::to_string(boundary / block) + " x " +
                   std::to_string(block) + " + " + std::to_string(boundary % block) + "), so " +
                   scale.name + " cannot follow it in whole blocks" + others;
  } else {
    diag.message = where + " = FP8 blocks " + rows_text(fp8::block_image(offender.rows, block)) +
                   " of " + std::to_string(block) + ", but the " +
                   uneven_text(chain[offender.level]) + " split gives " + scale.name +
                   " elements " + rows_text(offender.scale_rows) + " there" + others;
  }
  diag.hint = sizes_hint(weight, chain[offender.level], plan.mesh_of(weight), offender.parent_len,
                         block, recipe);
  return diag;
}

// The first rank (in rule coordinates, lowest first) whose runs of a strided dim cut a
// block or whose scale runs are not their block images; `bad` counts such coordinate
// combinations (each stands for the same number of ranks).
struct StridedOffender {
  bool found = false;
  bool mismatch = false;  ///< aligned runs, but the scale's runs are not their block images
  std::vector<std::int64_t> path;
  std::vector<RowRun> rows;        ///< the weight's runs
  std::vector<RowRun> scale_rows;  ///< the scale's runs
  std::int64_t boundary = -1;      ///< a run boundary that cuts a block
  std::int64_t bad = 0;
  bool skipped = false;
};

// The block indices of `runs` in local order (each run's block image), or nullopt with the
// first boundary that cuts a block of `block` rows in a dim of `length`.
std::optional<std::vector<std::int64_t>> blocks_of(const std::vector<RowRun>& runs,
                                                   std::int64_t length, std::int64_t block,
                                                   std::int64_t& boundary) {
  std::vector<std::int64_t> out;
  for (const RowRun& run : runs) {
    if (!fp8::block_aligned({run.start, run.size}, length, block)) {
      boundary = run.start % block != 0 ? run.start : run.start + run.size;
      return std::nullopt;
    }
    const Piece img = fp8::block_image({run.start, run.size}, block);
    for (std::int64_t k = 0; k < img.size; ++k) out.push_back(img.start + k);
  }
  return out;
}

std::vector<std::int64_t> rows_of(const std::vector<RowRun>& runs) {
  std::vector<std::int64_t> out;
  for (const RowRun& run : runs)
    for (std::int64_t k = 0; k < run.size; ++k) out.push_back(run.start + k);
  return out;
}

StridedOffender check_strided_dim(std::int64_t length, std::int64_t scale_length,
                                  std::int64_t block, const std::vector<DimSplit>& wc,
                                  const std::vector<DimSplit>& sc, std::int64_t& budget) {
  StridedOffender offender;
  std::int64_t combos = 1;
  for (const DimSplit& split : wc) combos *= split.ways;
  std::vector<std::int64_t> ks(wc.size(), 0);
  std::vector<MeshDimSplit> weight(wc.size());
  std::vector<MeshDimSplit> scale(sc.size());
  for (std::int64_t c = 0; c < combos; ++c) {
    std::int64_t rem = c;
    for (std::size_t i = wc.size(); i-- > 0;) {
      ks[i] = rem % wc[i].ways;
      rem /= wc[i].ways;
    }
    for (std::size_t i = 0; i < wc.size(); ++i) {
      weight[i] = {wc[i].ways, ks[i], wc[i].split_factor};
      scale[i] = {sc[i].ways, ks[i], sc[i].split_factor};
    }
    const std::vector<RowRun> w_runs = dtensor_rows(length, weight);
    const std::vector<RowRun> s_runs = dtensor_rows(scale_length, scale);
    budget -= static_cast<std::int64_t>(w_runs.size() + s_runs.size()) + 1;
    if (budget <= 0) {
      offender.skipped = true;
      return offender;
    }
    std::int64_t boundary = -1;
    const auto blocks = blocks_of(w_runs, length, block, boundary);
    if (blocks && *blocks == rows_of(s_runs)) continue;
    ++offender.bad;
    if (offender.found) continue;
    offender = {true, blocks.has_value(), ks, w_runs, s_runs, boundary, offender.bad, false};
  }
  return offender;
}

std::string runs_text(const std::vector<RowRun>& runs) {
  std::string text;
  constexpr std::size_t kShown = 4;
  for (std::size_t i = 0; i < runs.size() && i < kShown; ++i)
    text += (text.empty() ? "" : " + ") + rows_text({runs[i].start, runs[i].size});
  if (runs.size() > kShown) text += " + " + std::to_string(runs.size() - kShown) + " more";
  return text.empty() ? "nothing" : text;
}

// E-FP8-BLOCK for a strided dim's first offender.
Diagnostic strided_diagnostic(const BlockedDim& at, const StridedOffender& offender,
                              std::int64_t ranks, const Plan& plan, const Recipe& recipe) {
  const PlannedParam& weight = at.weight;
  const std::size_t d = at.dim;
  const std::int64_t block = at.block;
  const std::int64_t rank = representative_rank(plan, weight, at.chain, offender.path);
  Diagnostic diag = param_diagnostic(weight, DiagCode::EFp8Block, rule_loc(weight, recipe));
  std::string labels;
  for (const DimSplit& split : at.chain)
    labels += (labels.empty() ? "" : ", ") + split_axes_text(split, plan.mesh_of(weight)) +
              (split.split_factor > 1 ? ": _StridedShard(" + std::to_string(d) +
                                            ", sf=" + std::to_string(split.split_factor) + ")"
                                      : ": Shard(" + std::to_string(d) + ")");
  const std::string where = weight.name + " dim " + std::to_string(d) + " (" + labels + "): rank " +
                            std::to_string(rank) + " holds elements " + runs_text(offender.rows) +
                            " of " + std::to_string(weight.global_shape[d]);
  const std::string others = " (" + std::string(offender.skipped ? "at least " : "") +
                             std::to_string(ranks) + " of " + std::to_string(plan.world_size) +
                             " ranks hold such a shard)";
  if (!offender.mismatch) {
    diag.message = where + "; a run boundary at element " + std::to_string(offender.boundary) +
                   " cuts an FP8 block of " + std::to_string(block) + " (" +
                   std::to_string(offender.boundary) + " = " +
                   std::to_string(offender.boundary / block) + " x " + std::to_string(block) +
                   " + " + std::to_string(offender.boundary % block) + "), so " + at.scale.name +
                   " cannot follow it in whole blocks" + others;
  } else {
    diag.message = where + ", but the same labels give " + at.scale.name + " elements " +
                   runs_text(offender.scale_rows) + ", not the FP8 blocks of those runs" + others;
  }
  diag.hint = "every run DTensor's _StridedShard labels give a rank must be whole blocks of " +
              std::to_string(block) + ": make the extent a multiple of " + std::to_string(block) +
              " x the split factors x the ways (each label's sf pieces split into whole "
              "blocks), or `fp8_scales: rules` and replicate the scales (FSDP shards are "
              "exempt: FSDP2 all-gathers before use)";
  return diag;
}

// The note when a weight's block check ran out of its budget (hostile meshes only).
Diagnostic skipped_note(const PlannedParam& weight, const Recipe& recipe) {
  Diagnostic note =
      param_diagnostic(weight, DiagCode::EFp8Block, rule_loc(weight, recipe), Severity::Note);
  note.message = "FP8 block check of " + weight.name + " skipped: more than 2^24 shard pieces";
  note.hint = "only hostile meshes get here; check the block alignment by hand";
  return note;
}

// Ranks that hold one leaf of the rule splits `chain` of `weight` (a stage's ranks over the
// leaves): a count of bad leaves times this is the count of ranks holding a bad shard.
std::int64_t ranks_per_leaf(const Plan& plan, const PlannedParam& weight,
                            const std::vector<DimSplit>& chain) {
  std::int64_t leaves = 1;
  for (const DimSplit& split : chain) leaves *= split.ways;
  const int pp_axis =
      weight.mesh == MeshKind::Expert ? plan.expert_pipeline_axis : plan.pipeline_axis;
  const std::int64_t stages = pp_axis >= 0 ? plan.num_stages : 1;
  return plan.world_size / stages / leaves;
}

}  // namespace

void check_fp8_blocks(const std::vector<PlannedParam>& params, const Plan& plan, const Model& model,
                      const Recipe& recipe, DiagnosticSink& sink) {
  GroupedReporter rep;
  std::set<std::string> seen;
  std::int64_t budget = kBudget;
  for (const PlannedParam& scale : params) {
    if (!scale.scale_of || scale.rule.index < 0) continue;
    const PlannedParam& weight = params[*scale.scale_of];
    if (weight.geometry.per_dim.size() != scale.global_shape.size() ||
        scale.geometry.per_dim.size() != scale.global_shape.size())
      continue;
    const std::vector<std::int64_t> blocks =
        fp8::dim_blocks(weight.global_shape.size(), model.attributes.weight_block_size);
    for (std::size_t d = 0; d < blocks.size(); ++d) {
      const std::int64_t block = blocks[d];
      const std::vector<DimSplit> wc = rule_splits(weight, d);
      const std::vector<DimSplit> sc = rule_splits(scale, d);
      if (block <= 1 || wc.empty() || wc.size() != sc.size()) continue;
      if (strided_chain(wc)) {
        const StridedOffender offender =
            check_strided_dim(weight.global_shape[d], scale.global_shape[d], block, wc, sc, budget);
        const std::string key = std::to_string(weight.rule.index) + ":" + std::to_string(d) + ":" +
                                std::to_string(weight.global_shape[d]) + ":strided";
        if (!offender.found) {
          if (offender.skipped) rep.add(skipped_note(weight, recipe), "skipped");
          continue;
        }
        if (!seen.insert(key).second) {
          rep.add(param_diagnostic(weight, DiagCode::EFp8Block, {}), key);
          continue;
        }
        rep.add(strided_diagnostic({weight, scale, d, block, wc}, offender,
                                   offender.bad * ranks_per_leaf(plan, weight, wc), plan, recipe),
                key);
        continue;
      }
      const bool packed = !weight.geometry.parts.empty() &&
                          static_cast<std::size_t>(weight.geometry.parts_dim) == d &&
                          scale.geometry.parts.size() == weight.geometry.parts.size();
      const std::vector<std::int64_t> wl =
          packed ? weight.geometry.parts : std::vector{weight.global_shape[d]};
      const std::vector<std::int64_t> sl =
          packed ? scale.geometry.parts : std::vector{scale.global_shape[d]};
      Walk walk(wc, sc, block, budget);
      std::int64_t bad = 0;
      std::int64_t w_abs = 0;
      std::int64_t s_abs = 0;
      for (std::size_t i = 0; i < wl.size() && !walk.skipped; ++i) {
        bad += walk.run(0, {wl[i], wl[i], w_abs}, {sl[i], sl[i], s_abs});
        w_abs += wl[i];
        s_abs += sl[i];
      }
      const std::string key = std::to_string(weight.rule.index) + ":" + std::to_string(d) + ":" +
                              std::to_string(weight.global_shape[d]);
      if (!walk.first.found) {
        if (walk.skipped) rep.add(skipped_note(weight, recipe), "skipped");
        continue;
      }
      const std::string full = key + (walk.first.verdict.mismatch ? ":m" : "");
      if (!seen.insert(full).second) {  // counted by the reporter; the message is built once
        rep.add(param_diagnostic(weight, DiagCode::EFp8Block, {}), full);
        continue;
      }
      std::int64_t leaves = 1;
      for (const DimSplit& split : wc) leaves *= split.ways;
      OffenderCount count;
      count.ranks = std::min(bad, leaves) * ranks_per_leaf(plan, weight, wc);
      if (packed) {
        count.pieces = bad;
        count.of_pieces = leaves * static_cast<std::int64_t>(wl.size());
      }
      rep.add(offender_diagnostic({weight, scale, d, block, wc}, walk, count, plan, recipe), full);
    }
  }
  rep.flush(sink);
}

}  // namespace shardc::passes
