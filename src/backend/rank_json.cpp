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
  [[nodiscard]] bool holds(const Plan& plan, const PlannedParam& param) const {
    return plan.pipeline_axis < 0 || param.stage == stage;
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

std::string attributes_text(const Plan& plan, const RankCoords& rank_coords) {
  std::string text;
  Writer writer(text);
  backend::write_local_attributes(
      writer, plan,
      local_attributes_at(plan, rank_coords.dense, rank_coords.expert, rank_coords.stage));
  return text;
}

void write_coords(Writer& writer, const Mesh& mesh, const std::vector<std::int64_t>& coords) {
  writer.begin_object();
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) writer.member(mesh.axes[i].name, coords[i]);
  writer.end_object();
}

void write_header(Writer& writer, const Plan& plan, std::int64_t rank,
                  const RankCoords& rank_coords) {
  writer.line_break().member("format", "shardc.rank/v1");
  writer.line_break().member("rank", rank).member("world_size", plan.world_size);
  writer.member("stage", rank_coords.stage);
  writer.line_break().key("coords").begin_object();
  writer.key("dense");
  write_coords(writer, plan.dense, rank_coords.dense);
  writer.key("expert");
  if (plan.expert) {
    write_coords(writer, *plan.expert, rank_coords.expert);
  } else {
    writer.null();
  }
  writer.end_object();
}

// The tie source of `p` as this rank sees it: an alias when the rank holds
// the source too (same storage), a tied copy when the source sits on
// another pipeline stage.
void write_alias(Writer& writer, const Plan& plan, const RankCoords& rank_coords,
                 const PlannedParam& param, bool& counted) {
  counted = true;
  writer.key("alias_of");
  if (!param.alias_of) {
    writer.null();
    return;
  }
  const PlannedParam& src = plan.params.at(*param.alias_of);
  if (rank_coords.holds(plan, src)) {
    writer.value(src.name);
    counted = false;
    return;
  }
  writer.null().member("tied_copy_of", src.name);
}

// `head`: the members "name", "dtype", "stage", "global_shape", pre-rendered.
void write_param(Writer& writer, const Plan& plan, const PlannedParam& param,
                 const std::string& head, const RankCoords& rank_coords, Totals& totals) {
  const auto& coords = param.mesh == MeshKind::Expert ? rank_coords.expert : rank_coords.dense;
  const ShardGeom geom = shard_at(param.geometry, coords);
  const std::int64_t local_numel = numel(geom.local_shape);
  const std::int64_t bytes = bytes_of(local_numel, param.dtype);
  writer.begin_object().raw_members(head);
  writer.member_ints("local_shape", geom.local_shape)
      .member_ints("global_offset", geom.global_offset);
  writer.member_ints("padded_shape", geom.padded_shape);
  backend::write_boxes(writer, param, geom);
  writer.member("numel", local_numel).member("bytes", bytes);
  bool counted = true;
  write_alias(writer, plan, rank_coords, param, counted);
  writer.end_object();
  if (!counted) return;
  totals.param_bytes += bytes;
  totals.padded_param_bytes += bytes_of(numel(geom.padded_shape), param.dtype);
  ++totals.num_params;
}

void write_totals(Writer& writer, const Totals& totals) {
  writer.line_break().key("totals").begin_object();
  writer.member("param_bytes", totals.param_bytes)
      .member("padded_param_bytes", totals.padded_param_bytes);
  writer.member("num_params", totals.num_params);
  writer.end_object();
}

// Mesh axes any param of `stage` is split over (dense and expert mesh).
void split_axes_of_stage(const Plan& plan, int stage, std::vector<int>& dense,
                         std::vector<int>& expert) {
  for (const PlannedParam& param : plan.params) {
    if (plan.pipeline_axis >= 0 && param.stage != stage) continue;
    auto& axes = param.mesh == MeshKind::Expert ? expert : dense;
    for (const auto& chain : param.geometry.per_dim)
      for (const DimSplit& split : chain)
        axes.insert(axes.end(), split.axes.begin(), split.axes.end());
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

  Impl(const Plan& rendered_plan, const std::vector<PlannedBuffer>& planned_buffers,
       std::size_t budget)
      : plan(rendered_plan), buffers(rendered_plan, planned_buffers, budget / 2), memo(budget / 2) {
    heads.reserve(plan.params.size());
    for (const PlannedParam& param : plan.params) {
      std::string text;
      Writer writer(text);
      writer.begin_object();
      writer.member("name", param.name)
          .member("dtype", dtype_name(param.dtype))
          .member("stage", param.stage);
      writer.member_ints("global_shape", param.global_shape);
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
      for (int axis : st.dense_axes)
        classes *= plan.dense.axes[static_cast<std::size_t>(axis)].size;
      for (int axis : st.expert_axes)
        classes *= plan.expert->axes[static_cast<std::size_t>(axis)].size;
      st.memo = budget > 0 && 2 * classes <= stage_ranks;
      stages.push_back(std::move(st));
    }
  }

  void write_params(Writer& writer, const RankCoords& rank_coords, Totals& totals) const {
    std::int64_t held = 0;
    writer.begin_array();
    for (std::size_t i = 0; i < plan.params.size(); ++i) {
      if (!rank_coords.holds(plan, plan.params[i])) continue;
      writer.line_break();
      write_param(writer, plan, plan.params[i], heads[i], rank_coords, totals);
      ++held;
    }
    if (held > 0) writer.line_break();
    writer.end_array();
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
  RankCoords rank_coords;
  rank_coords.dense = mesh_coords(plan.dense, rank);
  if (plan.expert) rank_coords.expert = mesh_coords(*plan.expert, rank);
  rank_coords.stage = plan.stage_of_rank(rank);
  const Impl::Stage& st =
      im.stages[plan.pipeline_axis >= 0 ? static_cast<std::size_t>(rank_coords.stage) : 0];
  out.clear();
  out.reserve(1024 + plan.params.size() * 256);
  Writer writer(out);
  writer.begin_object();
  write_header(writer, plan, rank, rank_coords);
  Totals totals;
  writer.line_break().key("params");
  std::shared_ptr<const ParamsText> memoized;
  if (!st.memo) {
    im.write_params(writer, rank_coords, totals);
  } else {
    backend::ClassMemo<ParamsText>::Key key{rank_coords.stage};
    for (int axis : st.dense_axes) key.push_back(rank_coords.dense[static_cast<std::size_t>(axis)]);
    for (int axis : st.expert_axes)
      key.push_back(rank_coords.expert[static_cast<std::size_t>(axis)]);
    memoized = im.memo.get(key, [&] {
      ParamsText pt;
      Writer pw(pt.text);
      im.write_params(pw, rank_coords, pt.totals);
      pt.attributes = attributes_text(plan, rank_coords);
      return pt;
    });
    writer.raw(memoized->text);
    totals = memoized->totals;
  }
  writer.line_break().key("buffers");
  im.buffers.write(writer, rank, st.index);
  write_totals(writer, totals);
  writer.line_break().key("memory");
  backend::write_rank_memory(writer, memory, backend::activations_counted(plan));
  writer.line_break().key("local_attributes");
  writer.raw(memoized ? memoized->attributes : attributes_text(plan, rank_coords));
  if (plan.virtual_stages > 1) {
    writer.line_break().key("model_chunks");
    backend::write_model_chunks(writer, plan, rank_coords.stage);
  }
  if (plan.zero.stage > 0) {
    writer.line_break().key("optimizer_shard");
    backend::write_rank_zero(writer, plan, rank);
  }
  writer.line_break().end_object();
  out += '\n';
}

std::string render_rank_json(const Plan& plan, std::int64_t rank) {
  std::vector<PlannedBuffer> buffers = plan_buffers(plan);
  const MemoryReport memory = compute_memory(plan, buffer_rank_bytes(plan, buffers));
  return render_rank_json(plan, buffers, rank, memory.ranks.at(static_cast<std::size_t>(rank)));
}

std::string render_rank_json(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                             std::int64_t rank, const RankMemory& memory) {
  std::string out;
  RankRenderer(plan, buffers, 0).render(rank, memory, out);
  return out;
}

}  // namespace shardc
