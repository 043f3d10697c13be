// plan_reshard: per param, B class boxes intersected with A class boxes,
// checked for exact coverage; per-rank byte totals per progression
// (contract §6.5).
#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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
std::string vocab_text(const LayoutParam& param) {
  if (param.vocab_multiple <= 0) return std::to_string(param.global_shape[0]) + " rows, not padded";
  return std::to_string(param.vocab_rows) + " real rows padded to a multiple of " +
         std::to_string(param.vocab_multiple) + " (" +
         std::to_string(param.global_shape[0] - param.vocab_rows) + " padding rows)";
}

// A padded vocabulary whose checkpoint shape changes with the TP degree
// (Megatron's make_vocab_size_divisible_by x TP): the reshard is refused with
// the row mapping spelled out, since moving bytes cannot change the stored shape.
bool padded_vocab_change(const LayoutParam& pa, const LayoutParam& pb, const Layout& layout_a,
                         const Layout& layout_b, DiagnosticSink& sink) {
  Diagnostic diag;
  diag.code = DiagCode::EReshardMismatch;
  diag.loc = pb.loc;
  diag.param = pb.name;
  const std::int64_t real_a = pa.vocab_multiple > 0 ? pa.vocab_rows : pa.global_shape[0];
  const std::int64_t real_b = pb.vocab_multiple > 0 ? pb.vocab_rows : pb.global_shape[0];
  std::string rest_same = "";
  for (std::size_t i = 1; i < pa.global_shape.size(); ++i)
    if (pa.global_shape[i] != pb.global_shape[i])
      rest_same = " (and dim " + std::to_string(i) + " differs)";
  diag.message = "param '" + pb.name + "' is a padded vocabulary whose checkpoint shape changes: " +
                 shape_text(pa.global_shape) + " in plan A (" + layout_a.label + ": " +
                 vocab_text(pa) + ") but " + shape_text(pb.global_shape) + " in plan B (" +
                 layout_b.label + ": " + vocab_text(pb) + ")" + rest_same;
  if (real_a == real_b && rest_same.empty()) {
    diag.hint =
        "rows 0.." + std::to_string(real_a - 1) + " (the real vocabulary) map one to one; " +
        "A's rows " + std::to_string(real_a) + ".." + std::to_string(pa.global_shape[0] - 1) +
        " are padding to drop and B's rows " + std::to_string(real_b) + ".." +
        std::to_string(pb.global_shape[0] - 1) +
        " padding to fill (Megatron zero-fills them): resharding moves bytes and keeps "
        "shapes, so re-pad the checkpoint (Megatron's checkpoint converter) and reshard the "
        "rest, or plan both with the same vocab_padding multiple";
  } else {
    diag.hint = "the real vocabularies differ (" + std::to_string(real_a) + " vs " +
                std::to_string(real_b) + " rows): compile both plans from the same model";
  }
  sink.report(std::move(diag));
  return false;
}

// Checks that A's param can feed B's: same global shape and dtype.
bool compatible(const LayoutParam& pa, const LayoutParam& pb, const Layout& layout_a,
                const Layout& layout_b, DiagnosticSink& sink) {
  if (pa.global_shape == pb.global_shape && pa.dtype == pb.dtype) return true;
  if (pa.dtype == pb.dtype && !pa.global_shape.empty() &&
      pa.global_shape.size() == pb.global_shape.size() &&
      (pa.vocab_multiple > 0 || pb.vocab_multiple > 0))
    return padded_vocab_change(pa, pb, layout_a, layout_b, sink);
  Diagnostic diag;
  diag.code = DiagCode::EReshardMismatch;
  diag.loc = pb.loc;
  diag.param = pb.name;
  diag.message = "param '" + pb.name +
                 "' differs between the plans: " + shape_text(pa.global_shape) + " " +
                 std::string(dtype_name(pa.dtype)) + " in plan A (" + layout_a.label + ") but " +
                 shape_text(pb.global_shape) + " " + std::string(dtype_name(pb.dtype)) +
                 " in plan B (" + layout_b.label + ")";
  diag.hint =
      "resharding moves bytes, it does not reshape or convert: compile both plans from the same "
      "model description (same vocab padding, expert count and dtypes)";
  sink.report(std::move(diag));
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
  const bool packed =
      std::any_of(pa.classes.begin(), pa.classes.end(),
                  [](const ShardClassBox& shard_class) { return !shard_class.parts.empty(); });
  std::map<std::pair<Shape, Shape>, std::size_t> seen;  // packed only: box -> its index
  for (std::size_t i = 0; i < pa.classes.size(); ++i)
    for_each_part(pa.classes[i], [&](std::size_t part, const Box& box) {
      if (packed && numel(box) > 0) {
        const auto [it, fresh] = seen.try_emplace({box.offset, box.shape}, boxes.size());
        if (!fresh) {
          std::int32_t& shared_index = shared[it->second];
          if (shared_index < 0) {
            shared_index = static_cast<std::int32_t>(owners.size());
            owners.push_back({owner[it->second]});
          }
          owners[static_cast<std::size_t>(shared_index)].emplace_back(i, part);
          return;
        }
      }
      boxes.push_back(box);
      owner.emplace_back(i, part);
      shared.push_back(-1);
    });
  return {std::move(owner), std::move(shared), std::move(owners), BoxIndex(std::move(boxes))};
}

// The pieces of B class `k` (appended to `pp.pieces`); false when A's parts
// do not tile its parts exactly.
bool cut_class(const SourceIndex& src, const ShardClassBox& shard_class, std::size_t k,
               ParamPlan& pp) {
  const std::size_t first = pp.pieces.size();
  std::int64_t covered = 0;
  std::size_t dst_part = 0;
  const auto add = [&](std::size_t i, const Box& met) {
    covered += numel(met);
    pp.pieces.push_back({met, src.owner[i].first, src.owner[i].second, k, dst_part, src.shared[i]});
  };
  const auto cut = [&](bool brute) {
    for_each_part(shard_class, [&](std::size_t part, const Box& want) {
      dst_part = part;
      if (brute) {
        src.index.for_each_meeting_brute(want, add);
      } else {
        src.index.for_each_meeting(want, add);
      }
    });
  };
  cut(false);
  if (covered == numel(shard_class.box)) return true;
  if (!src.index.is_grid()) return false;
  pp.pieces.resize(first);
  covered = 0;
  cut(true);
  return covered == numel(shard_class.box);
}

// A B param whose box A's shards do not tile, and the box (the first such of the param).
struct Uncovered {
  std::size_t b_param = 0;
  Box want;
};

// One E-RESHARD-COVERAGE for every uncovered param (grouped: one cause, a count), at the
// first: its box, then the count and the next few names. The hint blames an edited plan.json
// only when plan A was read from one; a plan shardc planned in memory is shardc's fault.
void report_coverage(const std::vector<Uncovered>& uncovered, const Layout& layout_a,
                     const Layout& layout_b, DiagnosticSink& sink) {
  if (uncovered.empty()) return;
  constexpr std::size_t kNamed = 3;  // params named besides the first
  const LayoutParam& first = layout_b.params[uncovered.front().b_param];
  const Box& want = uncovered.front().want;
  Diagnostic diag;
  diag.code = DiagCode::EReshardCoverage;
  diag.loc = first.loc;
  diag.param = first.name;
  diag.message = "the shards of '" + first.name + "' in plan A (" + layout_a.label + ")" +
                 " do not tile the box at offset " + shape_text(want.offset) + " shape " +
                 shape_text(want.shape) + " exactly once";
  if (uncovered.size() > 1) {
    diag.message += "; so for " + std::to_string(uncovered.size() - 1) + " more param" +
                    (uncovered.size() > 2 ? "s" : "") + " (";
    for (std::size_t i = 1; i < uncovered.size() && i <= kNamed; ++i)
      diag.message += (i > 1 ? ", '" : "'") + layout_b.params[uncovered[i].b_param].name + "'";
    if (uncovered.size() > kNamed + 1) diag.message += ", ...";
    diag.message += ")";
  }
  diag.hint =
      layout_a.in_memory
          ? "plan A was planned by shardc in memory from its MODEL and RECIPE, so this is a "
            "shardc bug: please report it with both model and recipe files"
          : "plan A is not a shardc plan or was edited: recompile it with shardc compile";
  sink.report(std::move(diag));
}

// Pieces and per-rank bytes of one B param sourced from A's `pa`; false (no pieces) when A's
// shards do not tile one of its boxes, which is then `want`.
bool plan_param(const LayoutParam& pa, const LayoutParam& pb, ParamPlan& pp, Accumulators& acc,
                Box& want) {
  const SourceIndex src = index_sources(pa);
  const std::int64_t esize = element_size(pb.dtype);
  for (std::size_t k = 0; k < pb.classes.size(); ++k) {
    pp.class_pieces.push_back(pp.pieces.size());
    const ShardClassBox& shard_class = pb.classes[k];
    if (numel(shard_class.box) == 0) continue;
    const std::size_t first = pp.pieces.size();
    if (!cut_class(src, shard_class, k, pp)) {
      want = shard_class.box;
      pp.pieces.clear();
      pp.class_pieces.clear();
      return false;
    }
    acc.dest.add(shard_class.ranks, numel(shard_class.box) * esize);
    for (std::size_t i = first; i < pp.pieces.size(); ++i) {
      const Piece& piece = pp.pieces[i];
      const auto in_place = [&](std::size_t a_class) {
        for (const auto& run : intersect_ranks(pa.classes[a_class].ranks, shard_class.ranks))
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

bool is_index(std::string_view segment) {
  return !segment.empty() && segment.find_first_not_of("0123456789") == std::string_view::npos;
}

// A param of plan A that names the same experts as `name` the other way: plan B's stacked
// "m.experts.gate_proj" where A holds "m.experts.<e>.gate_proj.weight", or B's per-expert
// "m.experts.<e>.gate_proj.weight" where A holds a stacked "m.experts.<x>" (a recipe's
// `experts: stack` differs). Empty when there is none.
std::string other_expert_form(const std::string& name, const Layout& layout_a) {
  std::vector<std::string_view> segments;
  for (std::size_t at = 0; at <= name.size();) {
    const std::size_t dot = std::min(name.find('.', at), name.size());
    segments.emplace_back(std::string_view(name).substr(at, dot - at));
    at = dot + 1;
  }
  // B per-expert: the module path before its last index segment.
  std::string prefix;
  std::string projection;  // the stacked name of the same projection: "m.experts.up_proj"
  for (std::size_t k = segments.size(); k-- > 1;) {
    if (!is_index(segments[k])) continue;
    for (std::size_t i = 0; i < k; ++i) prefix += std::string(segments[i]) + ".";
    if (k + 1 < segments.size()) projection = prefix + std::string(segments[k + 1]);
    break;
  }
  // B stacked: its module path ("m.experts.").
  const std::string stacked = name.substr(0, name.rfind('.') + 1);
  const std::string leaf = "." + name.substr(stacked.size()) + ".";
  std::string any;
  for (const LayoutParam& pa : layout_a.params) {
    const std::string& a_name = pa.name;
    if (!prefix.empty() && a_name.starts_with(prefix) &&
        a_name.find('.', prefix.size()) == std::string::npos) {
      if (a_name == projection) return a_name;
      if (any.empty()) any = a_name;
    }
    if (!stacked.empty() && a_name.starts_with(stacked)) {
      const std::size_t dot = a_name.find('.', stacked.size());
      if (dot != std::string::npos &&
          is_index(std::string_view(a_name).substr(stacked.size(), dot - stacked.size()))) {
        if (a_name.compare(dot, leaf.size(), leaf) == 0) return a_name;  // the same projection
        if (any.empty()) any = a_name;
      }
    }
  }
  return any;
}

void report_missing(const LayoutParam& pb, const Layout& layout_a, DiagnosticSink& sink) {
  Diagnostic diag;
  diag.code = DiagCode::EReshardMissing;
  diag.loc = pb.loc;
  diag.param = pb.name;
  diag.message = "param '" + pb.name + "' of plan B is not in plan A (" + layout_a.label + ")";
  if (const std::string other = other_expert_form(pb.name, layout_a); !other.empty()) {
    diag.hint = "plan A holds these experts in the other form ('" + other +
                "'): one recipe stacks them (`experts: stack`) and the other does not; resharding "
                "moves bytes between the same params, so compile both with the same stacking";
  } else {
    diag.hint = "both plans must be compiled from the same model description";
  }
  sink.report(std::move(diag));
}

// Plan B ties `pb` to a source on its stage (no storage of its own) where plan A holds it as
// a param of its own or tied to another source: A's values of it would be dropped.
void report_new_tie(const LayoutParam& pa, const LayoutParam& pb, const Layout& layout_a,
                    const Layout& layout_b, DiagnosticSink& sink) {
  Diagnostic diag;
  diag.code = DiagCode::EReshardMismatch;
  diag.loc = pb.loc;
  diag.param = pb.name;
  diag.message =
      "param '" + pb.name + "' is an alias of '" + pb.alias_of.value_or("") + "' in plan B (" +
      layout_b.label + ") but " +
      (pa.alias_of ? "an alias of '" + *pa.alias_of + "'" : std::string("a param of its own")) +
      " in plan A (" + layout_a.label + "): its plan-A values would be dropped";
  diag.hint =
      "resharding moves bytes, it does not convert: compile both plans with the same ties "
      "(tie_word_embeddings / the recipe's ties), or load plan A's weights into the untied model";
  sink.report(std::move(diag));
}

}  // namespace

Result plan_reshard(const Layout& layout_a, const Layout& layout_b, const Options& opt,
                    DiagnosticSink& sink) {
  (void)opt;  // the source choice happens at expansion; totals do not depend on it
  std::unordered_map<std::string, std::size_t> by_name;
  for (std::size_t i = 0; i < layout_a.params.size(); ++i)
    by_name.emplace(layout_a.params[i].name, i);
  Accumulators acc{RankAccumulator(layout_b.world_size), RankAccumulator(layout_b.world_size)};
  Result result;
  result.params.reserve(layout_b.params.size());
  std::vector<Uncovered> uncovered;
  for (std::size_t j = 0; j < layout_b.params.size(); ++j) {
    const LayoutParam& pb = layout_b.params[j];
    ParamPlan pp;
    pp.b_param = j;
    const auto it = by_name.find(pb.name);
    if (it == by_name.end()) {
      report_missing(pb, layout_a, sink);
    } else if (compatible(layout_a.params[it->second], pb, layout_a, layout_b, sink)) {
      pp.a_param = it->second;
      if (pb.shares_storage && layout_a.params[it->second].alias_of != pb.alias_of) {
        report_new_tie(layout_a.params[it->second], pb, layout_a, layout_b, sink);
      } else if (pb.shares_storage) {
        ++result.totals.shared_aliases;
        pp.class_pieces.assign(pb.classes.size() + 1, 0);
      } else {
        Box want;
        if (!plan_param(layout_a.params[it->second], pb, pp, acc, want))
          uncovered.push_back({j, want});
        ++result.totals.params;
        result.totals.pieces += static_cast<std::int64_t>(pp.pieces.size());
      }
    }
    if (pp.class_pieces.empty()) pp.class_pieces.assign(pb.classes.size() + 1, 0);
    result.params.push_back(std::move(pp));
  }
  report_coverage(uncovered, layout_a, layout_b, sink);
  result.dest_bytes = acc.dest.finish();
  result.in_place_bytes = acc.in_place.finish();
  result.moved_bytes.resize(result.dest_bytes.size());
  for (std::size_t i = 0; i < result.dest_bytes.size(); ++i) {
    result.moved_bytes[i] = result.dest_bytes[i] - result.in_place_bytes[i];
    result.totals.dest_bytes += result.dest_bytes[i];
    result.totals.in_place_bytes += result.in_place_bytes[i];
    result.totals.moved_bytes += result.moved_bytes[i];
  }
  return result;
}

}  // namespace shardc::reshard
