// The `buffers` array of a rank file (SPEC §6.3): muon_allgather groups with
// their stages, owners and slice-back recipe; fsdp2_allgather units.
#include "backend/rank_buffers.hpp"

#include <algorithm>

namespace shardc::backend {
namespace {

using json::Writer;

const Mesh& mesh_for(const Plan& plan, MeshKind k) {
  return k == MeshKind::Expert ? *plan.expert : plan.dense;
}

void write_axis_names(Writer& w, const Mesh& mesh, const std::vector<int>& axes) {
  w.begin_array();
  for (int a : axes) w.value(mesh.axes.at(static_cast<std::size_t>(a)).name);
  w.end_array();
}

void write_names(Writer& w, const Plan& plan, const std::vector<std::size_t>& params) {
  w.begin_array();
  for (std::size_t i : params) w.value(plan.params[i].name);
  w.end_array();
}

void write_stage_param(Writer& w, const Plan& plan, const MuonStageParam& sp) {
  w.begin_object();
  w.member("name", plan.params[sp.param].name).member("tensor_dim", sp.tensor_dim);
  w.member_ints("split_sizes", sp.split_sizes);
  w.key("rank_shapes").begin_array();
  for (const Shape& s : sp.rank_shapes) w.ints(s);
  w.end_array();
  w.member_ints("pad_shape", sp.pad_shape).member("offset", sp.offset);
  w.member("actual_numel", sp.actual_numel).member("padded_numel", sp.padded_numel);
  w.end_object();
}

void write_stage(Writer& w, const Plan& plan, const Mesh& mesh, const MuonStage& st) {
  w.begin_object();
  w.key("axes");
  write_axis_names(w, mesh, st.axes);
  w.member_ints("ranks", st.ranks).member("index", st.index);
  w.member("total_numel", st.total_numel).member("gathered_numel", st.gathered_numel);
  w.key("params").begin_array();
  for (const MuonStageParam& sp : st.params) {
    w.line_break();
    write_stage_param(w, plan, sp);
  }
  w.end_array();
  w.end_object();
}

void write_owners(Writer& w, const Plan& plan, const MuonRankGroup& rg) {
  const MuonGroup& g = *rg.group;
  w.key("owners").begin_array();
  for (std::size_t i = 0; i < g.params.size(); ++i) {
    w.begin_object();
    w.member("param", plan.params[g.params[i]].name).member_ints("owner", g.owners[i]);
    w.member("is_owner", g.owners[i] == rg.replicate_coord);
    w.end_object();
  }
  w.end_array();
}

void write_slice_back(Writer& w, const Plan& plan, const MuonRankGroup& rg) {
  w.key("slice_back").begin_array();
  for (std::size_t i = 0; i < rg.group->params.size(); ++i) {
    w.begin_object().member("param", plan.params[rg.group->params[i]].name);
    w.key("steps").begin_array();
    for (const SliceStep& s : rg.slice_back[i]) {
      w.begin_object().member("dim", s.dim).member("start", s.start);
      w.member("length", s.length).end_object();
    }
    w.end_array().end_object();
  }
  w.end_array();
}

void write_muon_group(Writer& w, const Plan& plan, const MuonRankGroup& rg) {
  const MuonGroup& g = *rg.group;
  const Mesh& mesh = mesh_for(plan, g.mesh);
  w.begin_object();
  w.member("key", g.key).member("mesh", mesh_kind_name(g.mesh));
  w.key("replicate_axes");
  write_axis_names(w, mesh, g.replicate_axes);
  w.member_ints("replicate_coord", rg.replicate_coord);
  w.line_break().key("params");
  write_names(w, plan, g.params);
  w.line_break();
  write_owners(w, plan, rg);
  w.line_break().key("batches").begin_array();
  for (const MuonRankBatch& b : rg.batches) {
    w.line_break().begin_object().member("dtype", dtype_name(b.dtype));
    w.key("stages").begin_array();
    for (const MuonStage& st : b.stages) {
      w.line_break();
      write_stage(w, plan, mesh, st);
    }
    w.end_array().end_object();
  }
  w.end_array();
  w.line_break();
  write_slice_back(w, plan, rg);
  w.end_object();
}

void write_muon(Writer& w, const Plan& plan, const MuonPlan& muon, std::int64_t rank) {
  const MuonRankLayout layout = muon_for_rank(muon, plan, rank);
  w.member("alignment_bytes", muon.alignment_bytes);
  w.member("max_batch_numel", muon.max_batch_numel);
  w.key("groups").begin_array();
  for (const MuonRankGroup& rg : layout.groups) {
    w.line_break();
    write_muon_group(w, plan, rg);
  }
  w.end_array();
  w.line_break().key("not_communicated");
  write_names(w, plan, *layout.not_communicated);
}

void write_fsdp2_param(Writer& w, const Plan& plan, const Fsdp2Param& fp) {
  const PlannedParam& p = plan.params[fp.param];
  w.begin_object();
  w.member("name", p.name).member("shard_dim", p.geometry.fsdp_dim);
  w.member("offset", fp.offset).member("padded_numel", fp.padded_numel);
  w.member_ints("padded_shape", fp.padded_shape).member_ints("local_shape", fp.local_shape);
  w.member_ints("unsharded_shape", fp.unsharded_shape);
  w.end_object();
}

void write_fsdp2_unit(Writer& w, const Plan& plan, const Fsdp2RankUnit& ru) {
  const Fsdp2Unit& u = *ru.unit;
  const auto ways = static_cast<std::int64_t>(ru.ranks.size());
  w.begin_object();
  w.member("name", u.name).member("mesh", mesh_kind_name(u.mesh));
  w.member("units", u.byte_units ? "bytes" : "elements");
  w.member_ints("ranks", ru.ranks).member("index", ru.index);
  w.member("total", ru.total).member("total_bytes", ru.total_bytes);
  const std::vector<std::int64_t> output{ways, ru.total};
  w.member_ints("output_shape", output);
  w.key("params").begin_array();
  for (const Fsdp2Param& fp : ru.params) {
    w.line_break();
    write_fsdp2_param(w, plan, fp);
  }
  w.end_array().end_object();
}

void write_fsdp2(Writer& w, const Plan& plan, const Fsdp2Plan& fsdp2, std::int64_t rank) {
  const Fsdp2RankLayout layout = fsdp2_for_rank(fsdp2, plan, rank);
  w.key("units").begin_array();
  for (const Fsdp2RankUnit& ru : layout.units) {
    w.line_break();
    write_fsdp2_unit(w, plan, ru);
  }
  w.end_array();
  w.line_break().key("not_communicated");
  write_names(w, plan, *layout.not_communicated);
}

}  // namespace

void write_rank_buffers(Writer& w, const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                        std::int64_t rank) {
  w.begin_array();
  for (const PlannedBuffer& b : buffers) {
    w.line_break().begin_object().member("kind", buffer_kind_name(b.spec.kind));
    if (b.muon) write_muon(w, plan, *b.muon, rank);
    if (b.fsdp2) write_fsdp2(w, plan, *b.fsdp2, rank);
    w.end_object();
  }
  if (!buffers.empty()) w.line_break();
  w.end_array();
}

}  // namespace shardc::backend
