// plan_reshard: per param, B class boxes intersected with A class boxes,
// checked for exact coverage; per-rank byte totals per progression
// (contract §6.5).
#include <algorithm>
#include <map>
#include <unordered_map>

#include "reshard/accumulate.hpp"
#include "reshard/box_index.hpp"
#include "reshard/reshard.hpp"

namespace shardc::reshard {
namespace {

struct Accumulators {
  RankAccumulator dest;
  RankAccumulator in_place;
};

// "128,256 real rows padded to a multiple of 1,024 (768 padding rows)".
std::string vocab_text(const LayoutParam& p) {
  if (p.vocab_multiple <= 0) return std::to_string(p.global_shape[0]) + " rows, not padded";
  return std::to_string(p.vocab_rows) + " real rows padded to a multiple of " +
         std::to_string(p.vocab_multiple) + " (" +
         std::to_string(p.global_shape[0] - p.vocab_rows) + " padding rows)";
}

// A padded vocabulary whose checkpoint shape changes with the TP degree
// (Megatron's make_vocab_size_divisible_by x TP): the reshard is refused with
// the row mapping spelled out, since moving bytes cannot change the stored shape.
bool padded_vocab_change(const LayoutParam& pa, const LayoutParam& pb, const Layout& a,
                         const Layout& b, DiagnosticSink& sink) {
  Diagnostic d;
  d.code = DiagCode::EReshardMismatch;
  d.loc = pb.loc;
  d.param = pb.name;
  const std::int64_t real_a = pa.vocab_multiple > 0 ? pa.vocab_rows : pa.global_shape[0];
  const std::int64_t real_b = pb.vocab_multiple > 0 ? pb.vocab_rows : pb.global_shape[0];
  std::string rest_same = "";
  for (std::size_t i = 1; i < pa.global_shape.size(); ++i)
    if (pa.global_shape[i] != pb.global_shape[i])
      rest_same = " (and dim " + std::to_string(i) + " differs)";
  d.message = "param '" + pb.name + "' is a padded vocabulary whose checkpoint shape changes: " +
              shape_text(pa.global_shape) + " in plan A (" + a.label + ": " + vocab_text(pa) +
              ") but " + shape_text(pb.global_shape) + " in plan B (" + b.label + ": " +
              vocab_text(pb) + ")" + rest_same;
  if (real_a == real_b && rest_same.empty()) {
    d.hint = "rows 0.." + std::to_string(real_a - 1) + " (the real vocabulary) map one to one; " +
             "A's rows " + std::to_string(real_a) + ".." + std::to_string(pa.global_shape[0] - 1) +
             " are padding to drop and B's rows " + std::to_string(real_b) + ".." +
             std::to_string(pb.global_shape[0] - 1) +
             " padding to fill (Megatron zero-fills them): resharding moves bytes and keeps "
             "shapes, so re-pad the checkpoint (Megatron's checkpoint converter) and reshard the "
             "rest, or plan both with the same vocab_padding multiple";
  } else {
    d.hint = "the real vocabularies differ (" + std::to_string(real_a) + " vs " +
             std::to_string(real_b) + " rows): compile both plans from the same model";
  }
  sink.report(std::move(d));
  return false;
}

// Checks that A's param can feed B's: same global shape and dtype.
bool compatible(const LayoutParam& pa, const LayoutParam& pb, const Layout& a, const Layout& b,
                DiagnosticSink& sink) {
  if (pa.global_shape == pb.global_shape && pa.dtype == pb.dtype) return true;
  if (pa.dtype == pb.dtype && !pa.global_shape.empty() &&
      pa.global_shape.size() == pb.global_shape.size() &&
      (pa.vocab_multiple > 0 || pb.vocab_multiple > 0))
    return padded_vocab_change(pa, pb, a, b, sink);
  Diagnostic d;
  d.code = DiagCode::EReshardMismatch;
  d.loc = pb.loc;
  d.param = pb.name;
  d.message = "param '" + pb.name + "' differs between the plans: " + shape_text(pa.global_shape) +
              " " + std::string(dtype_name(pa.dtype)) + " in plan A (" + a.label + ") but " +
              shape_text(pb.global_shape) + " " + std::string(dtype_name(pb.dtype)) +
              " in plan B (" + b.label + ")";
  d.hint =
      "resharding moves bytes, it does not reshape or convert: compile both plans from the same "
      "model description (same vocab padding, expert count and dtypes)";
  sink.report(std::move(d));
  return false;
}

// A's parts of one param, indexed: the distinct non-empty boxes and which (class, part) holds
// each. A box several classes hold (a packed part with `replicas`) is indexed once, its
// holders listed in `shared` (index into `owners`, -1 for a box of one class).
struct SourceIndex {
  std::vector<std::pair<std::size_t, std::size_t>> owner;  // first (class, part) per box
  std::vector<std::int32_t> shared;                        // per box
  std::vector<SourceOwners> owners;
  BoxIndex index;
};

SourceIndex index_sources(const LayoutParam& pa) {
  std::vector<Box> boxes;
  std::vector<std::pair<std::size_t, std::size_t>> owner;
  std::vector<std::int32_t> shared;
  std::vector<SourceOwners> owners;
  const bool packed = std::any_of(pa.classes.begin(), pa.classes.end(),
                                  [](const ShardClassBox& c) { return !c.parts.empty(); });
  std::map<std::pair<Shape, Shape>, std::size_t> seen;  // packed only: box -> its index
  for (std::size_t i = 0; i < pa.classes.size(); ++i)
    for_each_part(pa.classes[i], [&](std::size_t part, const Box& b) {
      if (packed && numel(b) > 0) {
        const auto [it, fresh] = seen.try_emplace({b.offset, b.shape}, boxes.size());
        if (!fresh) {
          std::int32_t& k = shared[it->second];
          if (k < 0) {
            k = static_cast<std::int32_t>(owners.size());
            owners.push_back({owner[it->second]});
          }
          owners[static_cast<std::size_t>(k)].emplace_back(i, part);
          return;
        }
      }
      boxes.push_back(b);
      owner.emplace_back(i, part);
      shared.push_back(-1);
    });
  return {std::move(owner), std::move(shared), std::move(owners), BoxIndex(std::move(boxes))};
}

// The pieces of B class `k` (appended to `pp.pieces`); false when A's parts
// do not tile its parts exactly.
bool cut_class(const SourceIndex& src, const ShardClassBox& c, std::size_t k, ParamPlan& pp) {
  const std::size_t first = pp.pieces.size();
  std::int64_t covered = 0;
  std::size_t dst_part = 0;
  const auto add = [&](std::size_t i, const Box& m) {
    covered += numel(m);
    pp.pieces.push_back({m, src.owner[i].first, src.owner[i].second, k, dst_part, src.shared[i]});
  };
  const auto cut = [&](bool brute) {
    for_each_part(c, [&](std::size_t part, const Box& want) {
      dst_part = part;
      if (brute) {
        src.index.for_each_meeting_brute(want, add);
      } else {
        src.index.for_each_meeting(want, add);
      }
    });
  };
  cut(false);
  if (covered == numel(c.box)) return true;
  if (!src.index.is_grid()) return false;
  pp.pieces.resize(first);
  covered = 0;
  cut(true);
  return covered == numel(c.box);
}

// A B param whose box A's shards do not tile, and the box (the first such of the param).
struct Uncovered {
  std::size_t b_param = 0;
  Box want;
};

// One E-RESHARD-COVERAGE for every uncovered param (grouped: one cause, a count), at the
// first: its box, then the count and the next few names. The hint blames an edited plan.json
// only when plan A was read from one; a plan shardc planned in memory is shardc's fault.
void report_coverage(const std::vector<Uncovered>& uncovered, const Layout& a, const Layout& b,
                     DiagnosticSink& sink) {
  if (uncovered.empty()) return;
  constexpr std::size_t kNamed = 3;  // params named besides the first
  const LayoutParam& first = b.params[uncovered.front().b_param];
  const Box& want = uncovered.front().want;
  Diagnostic d;
  d.code = DiagCode::EReshardCoverage;
  d.loc = first.loc;
  d.param = first.name;
  d.message = "the shards of '" + first.name + "' in plan A (" + a.label + ")" +
              " do not tile the box at offset " + shape_text(want.offset) + " shape " +
              shape_text(want.shape) + " exactly once";
  if (uncovered.size() > 1) {
    d.message += "; so for " + std::to_string(uncovered.size() - 1) + " more param" +
                 (uncovered.size() > 2 ? "s" : "") + " (";
    for (std::size_t i = 1; i < uncovered.size() && i <= kNamed; ++i)
      d.message += (i > 1 ? ", '" : "'") + b.params[uncovered[i].b_param].name + "'";
    if (uncovered.size() > kNamed + 1) d.message += ", ...";
    d.message += ")";
  }
  d.hint = a.in_memory
               ? "plan A was planned by shardc in memory from its MODEL and RECIPE, so this is a "
                 "shardc bug: please report it with both model and recipe files"
               : "plan A is not a shardc plan or was edited: recompile it with shardc compile";
  sink.report(std::move(d));
}

// Pieces and per-rank bytes of one B param sourced from A's `pa`; false (no pieces) when A's
// shards do not tile one of its boxes, which is then `want`.
bool plan_param(const LayoutParam& pa, const LayoutParam& pb, ParamPlan& pp, Accumulators& acc,
                Box& want) {
  const SourceIndex src = index_sources(pa);
  const std::int64_t esize = element_size(pb.dtype);
  for (std::size_t k = 0; k < pb.classes.size(); ++k) {
    pp.class_pieces.push_back(pp.pieces.size());
    const ShardClassBox& c = pb.classes[k];
    if (numel(c.box) == 0) continue;
    const std::size_t first = pp.pieces.size();
    if (!cut_class(src, c, k, pp)) {
      want = c.box;
      pp.pieces.clear();
      pp.class_pieces.clear();
      return false;
    }
    acc.dest.add(c.ranks, numel(c.box) * esize);
    for (std::size_t i = first; i < pp.pieces.size(); ++i) {
      const Piece& piece = pp.pieces[i];
      const auto in_place = [&](std::size_t a_class) {
        for (const auto& run : intersect_ranks(pa.classes[a_class].ranks, c.ranks))
          acc.in_place.add(run, numel(piece.box) * esize);
      };
      if (piece.shared < 0) {
        in_place(piece.src_class);
      } else {  // the holders' classes are disjoint rank sets
        for (const auto& holder : src.owners[static_cast<std::size_t>(piece.shared)])
          in_place(holder.first);
      }
    }
  }
  pp.class_pieces.push_back(pp.pieces.size());
  pp.shared_sources = src.owners;
  return true;
}

void report_missing(const LayoutParam& pb, const Layout& a, DiagnosticSink& sink) {
  Diagnostic d;
  d.code = DiagCode::EReshardMissing;
  d.loc = pb.loc;
  d.param = pb.name;
  d.message = "param '" + pb.name + "' of plan B is not in plan A (" + a.label + ")";
  d.hint = "both plans must be compiled from the same model description";
  sink.report(std::move(d));
}

}  // namespace

Result plan_reshard(const Layout& a, const Layout& b, const Options& opt, DiagnosticSink& sink) {
  (void)opt;  // the source choice happens at expansion; totals do not depend on it
  std::unordered_map<std::string, std::size_t> by_name;
  for (std::size_t i = 0; i < a.params.size(); ++i) by_name.emplace(a.params[i].name, i);
  Accumulators acc{RankAccumulator(b.world_size), RankAccumulator(b.world_size)};
  Result r;
  r.params.reserve(b.params.size());
  std::vector<Uncovered> uncovered;
  for (std::size_t j = 0; j < b.params.size(); ++j) {
    const LayoutParam& pb = b.params[j];
    ParamPlan pp;
    pp.b_param = j;
    const auto it = by_name.find(pb.name);
    if (it == by_name.end()) {
      report_missing(pb, a, sink);
    } else if (compatible(a.params[it->second], pb, a, b, sink)) {
      pp.a_param = it->second;
      if (pb.shares_storage) {
        ++r.totals.shared_aliases;
        pp.class_pieces.assign(pb.classes.size() + 1, 0);
      } else {
        Box want;
        if (!plan_param(a.params[it->second], pb, pp, acc, want)) uncovered.push_back({j, want});
        ++r.totals.params;
        r.totals.pieces += static_cast<std::int64_t>(pp.pieces.size());
      }
    }
    if (pp.class_pieces.empty()) pp.class_pieces.assign(pb.classes.size() + 1, 0);
    r.params.push_back(std::move(pp));
  }
  report_coverage(uncovered, a, b, sink);
  r.dest_bytes = acc.dest.finish();
  r.in_place_bytes = acc.in_place.finish();
  r.moved_bytes.resize(r.dest_bytes.size());
  for (std::size_t i = 0; i < r.dest_bytes.size(); ++i) {
    r.moved_bytes[i] = r.dest_bytes[i] - r.in_place_bytes[i];
    r.totals.dest_bytes += r.dest_bytes[i];
    r.totals.in_place_bytes += r.in_place_bytes[i];
    r.totals.moved_bytes += r.moved_bytes[i];
  }
  return r;
}

}  // namespace shardc::reshard
