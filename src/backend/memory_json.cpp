// The memory report as JSON: `shardc memory --format json`
// (schemas/memory.schema.json) and the pieces plan.json and rank files use.
#include "backend/memory_json.hpp"

#include <algorithm>

#include "backend/render_util.hpp"
#include "shardc/backend.hpp"

namespace shardc {
namespace backend {

namespace {

void write_group(json::Writer& w, const Plan& plan, const ZeroGroup& g) {
  const Mesh& mesh = g.mesh == MeshKind::Expert && plan.expert ? *plan.expert : plan.dense;
  w.begin_object().member("mesh", mesh_kind_name(g.mesh)).key("axes").begin_array();
  for (int a : g.axes) w.value(mesh.axes[static_cast<std::size_t>(a)].name);
  w.end_array().member("degree", g.degree).end_object();
}

}  // namespace

void write_zero(json::Writer& w, const Plan& plan) {
  w.begin_object()
      .member("stage", static_cast<std::int64_t>(plan.zero.stage))
      .member("spelling", plan.training.zero.spelling)
      .key("shard");
  write_group(w, plan, plan.zero.dense);
  w.key("expert_shard");
  if (plan.zero.has_experts) {
    write_group(w, plan, plan.zero.expert);
  } else {
    w.null();
  }
  w.end_object();
}

void write_rank_zero(json::Writer& w, const Plan& plan, std::int64_t rank) {
  auto shard = [&](const ZeroGroup& g) {
    w.begin_object().member("index", plan.zero_index(g, rank)).member("of", g.degree).end_object();
  };
  w.begin_object().member("stage", static_cast<std::int64_t>(plan.zero.stage)).key("dense");
  shard(plan.zero.dense);
  w.key("expert");
  if (plan.zero.has_experts) {
    shard(plan.zero.expert);
  } else {
    w.null();
  }
  w.end_object();
}

void write_training(json::Writer& w, const Plan& plan) {
  const TrainingSpec& t = plan.training;
  auto dtype = [&w](std::string_view key, const std::optional<DType>& d) {
    if (d) {
      w.member(key, dtype_name(*d));
    } else {
      w.member_null(key);
    }
  };
  w.begin_object().member("optimizer", optimizer_name(t.optimizer));
  dtype("master_weights", t.master_weights);
  dtype("grad_dtype", t.grad_dtype);
  dtype("state_dtype", t.state_dtype);
  if (plan.zero.stage > 0) {
    w.key("zero");
    write_zero(w, plan);
  }
  w.end_object();
}

void write_rank_memory(json::Writer& w, const RankMemory& rm) {
  w.begin_object();
  for (std::size_t k = 0; k < kMemoryKinds; ++k)
    w.member(memory_kind_name(static_cast<MemoryKind>(k)), rm.bytes[k]);
  w.member("total", rm.total);
  w.end_object();
}

}  // namespace backend

namespace {

using json::Writer;

void write_stats(Writer& w, std::string_view key, const KindStats& s) {
  w.key(key).begin_object();
  w.member("min", s.min).member("median", s.median).member("max", s.max);
  w.end_object();
}

void write_coords(Writer& w, const Mesh& mesh, std::int64_t rank) {
  const std::vector<std::int64_t> c = mesh_coords(mesh, rank);
  w.begin_object();
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) w.member(mesh.axes[i].name, c[i]);
  w.end_object();
}

void write_rank(Writer& w, const Plan& plan, const MemoryReport& m, std::int64_t rank) {
  w.begin_object().member("rank", rank).member("stage", plan.stage_of_rank(rank));
  w.key("coords").begin_object().key("dense");
  write_coords(w, plan.dense, rank);
  w.key("expert");
  if (plan.expert) {
    write_coords(w, *plan.expert, rank);
  } else {
    w.null();
  }
  w.end_object();
  w.key("bytes");
  backend::write_rank_memory(w, m.at(rank));
  w.end_object();
}

}  // namespace

std::string render_memory_json(const Plan& plan, const MemoryReport& m,
                               std::optional<std::int64_t> budget,
                               const std::vector<std::int64_t>& ranks) {
  std::string out;
  Writer w(out);
  w.begin_object();
  w.line_break().member("format", "shardc.memory/v1");
  w.line_break().member("model", plan.model_name).member("world_size", plan.world_size);
  w.member("num_stages", plan.num_stages);
  w.line_break().key("training");
  backend::write_training(w, plan);
  w.line_break().key("layouts").begin_object();
  w.member("fsdp2_allgather", m.fsdp2_declared).member("muon_allgather", m.muon_declared);
  w.end_object();
  w.line_break().member("not_counted", backend::kNotCounted);
  w.line_break().key("budget_bytes");
  if (budget) {
    w.value(*budget);
  } else {
    w.null();
  }
  w.key("fits");
  if (budget) {
    w.value(m.peak <= *budget);
  } else {
    w.null();
  }
  w.line_break().key("stages").begin_array();
  for (const StageMemory& s : stage_memory(plan, m)) {
    w.line_break().begin_object().member("stage", s.stage).member("num_ranks", s.num_ranks);
    for (std::size_t k = 0; k < kMemoryKinds; ++k)
      write_stats(w, memory_kind_name(static_cast<MemoryKind>(k)), s.kinds[k]);
    write_stats(w, "total", s.total);
    w.end_object();
  }
  w.line_break().end_array();
  w.line_break().key("peak").begin_object();
  w.member("bytes", m.peak).member("ranks", m.peak_ranks.to_string());
  w.key("first");
  write_rank(w, plan, m, m.peak_ranks.first());
  w.end_object();
  w.line_break().key("ranks").begin_array();
  for (std::int64_t r : ranks) {
    w.line_break();
    write_rank(w, plan, m, r);
  }
  if (!ranks.empty()) w.line_break();
  w.end_array();
  w.line_break().end_object();
  out += '\n';
  return out;
}

}  // namespace shardc
