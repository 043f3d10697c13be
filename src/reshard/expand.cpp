// Per-rank read lists: which (param, class) each requested rank holds in
// plan B, and for each piece of its class the source rank.
#include <algorithm>
#include <utility>

#include "reshard/reshard.hpp"

namespace shardc::reshard {
namespace {

struct Held {
  std::uint32_t param;
  std::uint32_t cls;
};

// For every requested rank (by index in `ranks`), the B (param, class)
// pairs it holds, in B order.
std::vector<std::vector<Held>> index_ranks(const Layout& layout_b,
                                           const std::vector<std::int64_t>& ranks) {
  std::vector<std::int32_t> pos(static_cast<std::size_t>(layout_b.world_size), -1);
  for (std::size_t i = 0; i < ranks.size(); ++i)
    pos[static_cast<std::size_t>(ranks[i])] = static_cast<std::int32_t>(i);
  std::vector<std::vector<Held>> held(ranks.size());
  const auto hold = [&](std::int64_t rank, std::size_t j, std::size_t k) {
    const std::int32_t at = pos[static_cast<std::size_t>(rank)];
    if (at >= 0)
      held[static_cast<std::size_t>(at)].push_back(
          {static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(k)});
  };
  for (std::size_t j = 0; j < layout_b.params.size(); ++j) {
    const auto& classes = layout_b.params[j].classes;
    for (std::size_t k = 0; k < classes.size(); ++k) {
      for (const Progression& run : classes[k].ranks.runs()) {
        const auto lo = std::lower_bound(ranks.begin(), ranks.end(), run.start);
        const auto hi = std::upper_bound(lo, ranks.end(), run.last());
        if (run.count <= hi - lo) {
          for (std::int64_t x = run.start, n = 0; n < run.count; ++n, x += run.stride)
            hold(x, j, k);
        } else {
          for (auto it = lo; it != hi; ++it)
            if ((*it - run.start) % run.stride == 0) hold(*it, j, k);
        }
      }
    }
  }
  return held;
}

RankParamReads reads_of(const Layout& layout_a, const Layout& layout_b, const Result& result,
                        std::int64_t rank, Held held, const Options& opt) {
  RankParamReads out;
  out.b_param = held.param;
  out.dst_class = held.cls;
  const LayoutParam& pb = layout_b.params[held.param];
  out.shares_storage = pb.shares_storage;
  const ParamPlan& pp = result.params[held.param];
  if (pb.shares_storage || !pp.a_param) return out;
  const LayoutParam& pa = layout_a.params[*pp.a_param];
  const ShardClassBox& dst = pb.classes[held.cls];
  const std::int64_t esize = element_size(pb.dtype);
  for (std::size_t i = pp.class_pieces[held.cls]; i < pp.class_pieces[held.cls + 1]; ++i) {
    const Piece& piece = pp.pieces[i];
    std::size_t src_class = piece.src_class;
    std::size_t src_part = piece.src_part;
    std::int64_t from = choose_source(pa.classes[src_class].ranks, rank, opt.ranks_per_node);
    if (piece.shared >= 0) {
      // Several classes hold the box: the rule over all their ranks (in place, else the
      // lowest on the node, else the lowest) is the best of each class's own choice.
      const auto preference = [&](std::int64_t holder) {
        const bool same_node =
            opt.ranks_per_node && holder / *opt.ranks_per_node == rank / *opt.ranks_per_node;
        return std::pair{holder == rank ? 0 : same_node ? 1 : 2, holder};
      };
      for (const auto& [a_class, part] :
           pp.shared_sources[static_cast<std::size_t>(piece.shared)]) {
        const std::int64_t holder =
            choose_source(pa.classes[a_class].ranks, rank, opt.ranks_per_node);
        if (preference(holder) < preference(from)) {
          from = holder;
          src_class = a_class;
          src_part = part;
        }
      }
    }
    const ShardClassBox& src = pa.classes[src_class];
    out.reads.push_back({from, piece.box, local_offset_in(piece.box, dst, piece.dst_part),
                         local_offset_in(piece.box, src, src_part), numel(piece.box) * esize});
  }
  return out;
}

}  // namespace

void for_each_rank_reads(
    const Layout& layout_a, const Layout& layout_b, const Result& result,
    const std::vector<std::int64_t>& ranks, const Options& opt,
    const std::function<void(std::int64_t, const std::vector<RankParamReads>&)>& fn) {
  const auto held = index_ranks(layout_b, ranks);
  std::vector<RankParamReads> list;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    list.clear();
    for (const Held& holder : held[i])
      list.push_back(reads_of(layout_a, layout_b, result, ranks[i], holder, opt));
    fn(ranks[i], list);
  }
}

}  // namespace shardc::reshard
