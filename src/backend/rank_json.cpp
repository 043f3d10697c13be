// ranks/rank-<r>.json (contract §6.2): everything one rank holds, in model
// order. Cost O(params) for the rank; geometry comes from shard_at. A
// RankRenderer renders each param's rank-independent members once, and the
// `params` array once per shard class of the rank's stage when ranks share
// classes (ClassMemo), so a compile writing every rank file mostly copies.
#include <algorithm>
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "backend/class_memo.hpp"
#include "backend/json_writer.hpp"
#include "backend/local_attributes_json.hpp"
#include "backend/memory_json.hpp"
#include "backend/rank_buffers.hpp"
#include "backend/render_util.hpp"

namespace shardc {
namespace {

using backend::bytes_of;
using json::Writer;

/// Memoized text in one compile at most (both memos together stay below).
constexpr std::size_t kMemoBudgetBytes = std::size_t{256} << 20;

struct RankCoords {
  std::vector<std::int64_t> dense;
  std::vector<std::int64_t> expert;
  int stage = 0;
  /// Same as Plan::holds, without recomputing the rank's coordinates.
  [[nodiscard]] bool holds(const Plan& plan, const PlannedParam& p) const {
    return plan.pipeline_axis < 0 || p.stage == stage;
  }
};

struct Totals {
  std::int64_t param_bytes = 0;
  std::int64_t padded_param_bytes = 0;
  std::int64_t num_params = 0;
};

// The `params` array of one shard class, with its totals and its
// `local_attributes` (they depend on the same coordinates; the memo's
// budget counts `text` only, the smaller `attributes` rides along).
struct ParamsText {
  std::string text;
  Totals totals;
  std::string attributes;
};

std::string attributes_text(const Plan& plan, const RankCoords& c) {
  std::string text;
  Writer w(text);
  backend::write_local_attributes(w, plan, local_attributes_at(plan, c.dense, c.expert, c.stage));
  return text;
}

void write_coords(Writer& w, const Mesh& mesh, const std::vector<std::int64_t>& coords) {
  w.begin_object();
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) w.member(mesh.axes[i].name, coords[i]);
  w.end_object();
}

void write_header(Writer& w, const Plan& plan, std::int64_t rank, const RankCoords& c) {
  w.line_break().member("format", "shardc.rank/v1");
  w.line_break().member("rank", rank).member("world_size", plan.world_size);
  w.member("stage", c.stage);
  w.line_break().key("coords").begin_object();
  w.key("dense");
  write_coords(w, plan.dense, c.dense);
  w.key("expert");
  if (plan.expert) {
    write_coords(w, *plan.expert, c.expert);
  } else {
    w.null();
  }
  w.end_object();
}

// The tie source of `p` as this rank sees it: an alias when the rank holds
// the source too (same storage), a tied copy when the source sits on
// another pipeline stage.
void write_alias(Writer& w, const Plan& plan, const RankCoords& c, const PlannedParam& p,
                 bool& counted) {
  counted = true;
  w.key("alias_of");
  if (!p.alias_of) {
    w.null();
    return;
  }
  const PlannedParam& src = plan.params.at(*p.alias_of);
  if (c.holds(plan, src)) {
    w.value(src.name);
    counted = false;
    return;
  }
  w.null().member("tied_copy_of", src.name);
}

// `head`: the members "name", "dtype", "stage", "global_shape", pre-rendered.
void write_param(Writer& w, const Plan& plan, const PlannedParam& p, const std::string& head,
                 const RankCoords& c, Totals& totals) {
  const auto& coords = p.mesh == MeshKind::Expert ? c.expert : c.dense;
  const ShardGeom g = shard_at(p.geometry, coords);
  const std::int64_t n = numel(g.local_shape);
  const std::int64_t bytes = bytes_of(n, p.dtype);
  w.begin_object().raw_members(head);
  w.member_ints("local_shape", g.local_shape).member_ints("global_offset", g.global_offset);
  w.member_ints("padded_shape", g.padded_shape);
  backend::write_boxes(w, p, g);
  w.member("numel", n).member("bytes", bytes);
  bool counted = true;
  write_alias(w, plan, c, p, counted);
  w.end_object();
  if (!counted) return;
  totals.param_bytes += bytes;
  totals.padded_param_bytes += bytes_of(numel(g.padded_shape), p.dtype);
  ++totals.num_params;
}

void write_totals(Writer& w, const Totals& t) {
  w.line_break().key("totals").begin_object();
  w.member("param_bytes", t.param_bytes).member("padded_param_bytes", t.padded_param_bytes);
  w.member("num_params", t.num_params);
  w.end_object();
}

// Mesh axes any param of `stage` is split over (dense and expert mesh).
void split_axes_of_stage(const Plan& plan, int stage, std::vector<int>& dense,
                         std::vector<int>& expert) {
  for (const PlannedParam& p : plan.params) {
    if (plan.pipeline_axis >= 0 && p.stage != stage) continue;
    auto& axes = p.mesh == MeshKind::Expert ? expert : dense;
    for (const auto& chain : p.geometry.per_dim)
      for (const DimSplit& s : chain) axes.insert(axes.end(), s.axes.begin(), s.axes.end());
  }
  for (auto* axes : {&dense, &expert}) {
    std::sort(axes->begin(), axes->end());
    axes->erase(std::unique(axes->begin(), axes->end()), axes->end());
  }
}

}  // namespace

struct RankRenderer::Impl {
  // What every rank of one pipeline stage shares.
  struct Stage {
    backend::FileIndex index{{}};
    std::vector<int> dense_axes;   // the params' split axes: the shard class
    std::vector<int> expert_axes;  // (empty when not memoized)
    bool memo = false;             // ranks share classes
  };

  Impl(const Plan& p, const std::vector<PlannedBuffer>& b, std::size_t budget)
      : plan(p), buffers(p, b, budget / 2), memo(budget / 2) {
    heads.reserve(plan.params.size());
    for (const PlannedParam& q : plan.params) {
      std::string text;
      Writer w(text);
      w.begin_object();
      w.member("name", q.name).member("dtype", dtype_name(q.dtype)).member("stage", q.stage);
      w.member_ints("global_shape", q.global_shape);
      heads.push_back(text.substr(1));
    }
    const int num_stages = plan.pipeline_axis >= 0 ? std::max(plan.num_stages, 1) : 1;
    const std::int64_t stage_ranks = plan.world_size / num_stages;
    for (int s = 0; s < num_stages; ++s) {
      Stage st;
      std::vector<std::int64_t> index(plan.params.size(), -1);
      std::int64_t held = 0;
      for (std::size_t i = 0; i < plan.params.size(); ++i)
        if (plan.pipeline_axis < 0 || plan.params[i].stage == s) index[i] = held++;
      st.index = backend::FileIndex(std::move(index));
      split_axes_of_stage(plan, s, st.dense_axes, st.expert_axes);
      std::int64_t classes = 1;
      for (int a : st.dense_axes) classes *= plan.dense.axes[static_cast<std::size_t>(a)].size;
      for (int a : st.expert_axes) classes *= plan.expert->axes[static_cast<std::size_t>(a)].size;
      st.memo = budget > 0 && 2 * classes <= stage_ranks;
      stages.push_back(std::move(st));
    }
  }

  void write_params(Writer& w, const RankCoords& c, Totals& totals) const {
    std::int64_t held = 0;
    w.begin_array();
    for (std::size_t i = 0; i < plan.params.size(); ++i) {
      if (!c.holds(plan, plan.params[i])) continue;
      w.line_break();
      write_param(w, plan, plan.params[i], heads[i], c, totals);
      ++held;
    }
    if (held > 0) w.line_break();
    w.end_array();
  }

  const Plan& plan;
  backend::RankBuffersWriter buffers;
  std::vector<std::string> heads;  // per param: "name" .. "global_shape" members
  std::vector<Stage> stages;       // per pipeline stage (one without a pipeline)
  backend::ClassMemo<ParamsText> memo;
};

RankRenderer::RankRenderer(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                           std::size_t memo_budget_bytes)
    : impl_(std::make_unique<Impl>(plan, buffers, memo_budget_bytes)) {}

RankRenderer::RankRenderer(const Plan& plan, const std::vector<PlannedBuffer>& buffers)
    : RankRenderer(plan, buffers, kMemoBudgetBytes) {}

RankRenderer::~RankRenderer() = default;

void RankRenderer::render(std::int64_t rank, const RankMemory& memory, std::string& out) const {
  const Impl& im = *impl_;
  const Plan& plan = im.plan;
  RankCoords c;
  c.dense = mesh_coords(plan.dense, rank);
  if (plan.expert) c.expert = mesh_coords(*plan.expert, rank);
  c.stage = plan.stage_of_rank(rank);
  const Impl::Stage& st =
      im.stages[plan.pipeline_axis >= 0 ? static_cast<std::size_t>(c.stage) : 0];
  out.clear();
  out.reserve(1024 + plan.params.size() * 256);
  Writer w(out);
  w.begin_object();
  write_header(w, plan, rank, c);
  Totals totals;
  w.line_break().key("params");
  std::shared_ptr<const ParamsText> memoized;
  if (!st.memo) {
    im.write_params(w, c, totals);
  } else {
    backend::ClassMemo<ParamsText>::Key key{c.stage};
    for (int a : st.dense_axes) key.push_back(c.dense[static_cast<std::size_t>(a)]);
    for (int a : st.expert_axes) key.push_back(c.expert[static_cast<std::size_t>(a)]);
    memoized = im.memo.get(key, [&] {
      ParamsText pt;
      Writer pw(pt.text);
      im.write_params(pw, c, pt.totals);
      pt.attributes = attributes_text(plan, c);
      return pt;
    });
    w.raw(memoized->text);
    totals = memoized->totals;
  }
  w.line_break().key("buffers");
  im.buffers.write(w, rank, st.index);
  write_totals(w, totals);
  w.line_break().key("memory");
  backend::write_rank_memory(w, memory, backend::activations_counted(plan));
  w.line_break().key("local_attributes");
  w.raw(memoized ? memoized->attributes : attributes_text(plan, c));
  if (plan.virtual_stages > 1) {
    w.line_break().key("model_chunks");
    backend::write_model_chunks(w, plan, c.stage);
  }
  if (plan.zero.stage > 0) {
    w.line_break().key("optimizer_shard");
    backend::write_rank_zero(w, plan, rank);
  }
  w.line_break().end_object();
  out += '\n';
}

std::string render_rank_json(const Plan& plan, std::int64_t rank) {
  std::vector<PlannedBuffer> buffers = plan_buffers(plan);
  const MemoryReport m = compute_memory(plan, buffer_rank_bytes(plan, buffers));
  return render_rank_json(plan, buffers, rank, m.ranks.at(static_cast<std::size_t>(rank)));
}

std::string render_rank_json(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                             std::int64_t rank, const RankMemory& memory) {
  std::string out;
  RankRenderer(plan, buffers, 0).render(rank, memory, out);
  return out;
}

}  // namespace shardc
