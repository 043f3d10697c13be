// The `buffers` array of a rank file (contract §6.3, lean form): muon_allgather
// groups with their stages, owners and run-length split sizes; fsdp2_allgather
// units. Params are referenced by their index in the file's `params` array;
// everything a reader can derive (member shapes, pad shapes, offsets, slice-back)
// is left out (README "Rank files: derived fields").
#include "backend/rank_buffers.hpp"

#include <algorithm>
#include <map>

#include "shardc/rank_set.hpp"

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

// `params` as indices into this rank file's `params` array.
void write_indices(Writer& w, const FileIndex& fi, const std::vector<std::size_t>& params) {
  w.begin_array();
  for (std::size_t i : params) w.value(fi.at(i));
  w.end_array();
}

// split_sizes run-length encoded: [[size, count], ...] in member order, so
// its length does not grow with the group size (chunk: at most 3 runs).
void write_runs(Writer& w, const std::vector<std::int64_t>& v) {
  w.begin_array();
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j] == v[i]) ++j;
    const std::vector<std::int64_t> run{v[i], static_cast<std::int64_t>(j - i)};
    w.ints(run);
    i = j;
  }
  w.end_array();
}

// Group-level stage geometry: every batch gathers over the same ranks.
void write_stages(Writer& w, const Mesh& mesh, const MuonRankGroup& rg) {
  w.key("stages").begin_array();
  if (!rg.batches.empty())
    for (const MuonStage& st : rg.batches.front().stages) {
      w.begin_object().key("axes");
      write_axis_names(w, mesh, st.axes);
      const int dim = st.params.empty() ? 0 : st.params.front().tensor_dim;  // one per stage
      w.member("tensor_dim", dim).member("ranks", rank_list_text(st.ranks));
      w.member("index", st.index).end_object();
    }
  w.end_array();
}

// Per param (group order): owner and, per stage, the members' split sizes.
void write_group_params(Writer& w, const FileIndex& fi, const MuonRankGroup& rg) {
  const MuonGroup& g = *rg.group;
  std::map<std::size_t, std::vector<const MuonStageParam*>> by_param;
  for (const MuonRankBatch& b : rg.batches)
    for (const MuonStage& st : b.stages)
      for (const MuonStageParam& sp : st.params) by_param[sp.param].push_back(&sp);
  w.key("params").begin_array();
  for (std::size_t i = 0; i < g.params.size(); ++i) {
    w.line_break().begin_object().member("param", fi.at(g.params[i]));
    w.member_ints("owner", g.owners[i]).key("split_sizes").begin_array();
    for (const MuonStageParam* sp : by_param[g.params[i]]) write_runs(w, sp->split_sizes);
    w.end_array().end_object();
  }
  w.end_array();
}

void write_muon_group(Writer& w, const Plan& plan, const FileIndex& fi, const MuonRankGroup& rg) {
  const MuonGroup& g = *rg.group;
  const Mesh& mesh = mesh_for(plan, g.mesh);
  w.begin_object();
  w.member("key", g.key).member("mesh", mesh_kind_name(g.mesh));
  w.key("replicate_axes");
  write_axis_names(w, mesh, g.replicate_axes);
  w.member_ints("replicate_coord", rg.replicate_coord);
  w.line_break();
  write_stages(w, mesh, rg);
  w.line_break();
  write_group_params(w, fi, rg);
  w.line_break().key("batches").begin_array();
  for (std::size_t b = 0; b < rg.batches.size(); ++b) {
    w.line_break().begin_object().member("dtype", dtype_name(rg.batches[b].dtype));
    w.key("params");
    write_indices(w, fi, g.batches[b].params);
    w.key("total_numel").begin_array();
    for (const MuonStage& st : rg.batches[b].stages) w.value(st.total_numel);
    w.end_array().end_object();
  }
  w.end_array();
  w.end_object();
}

void write_muon(Writer& w, const Plan& plan, const FileIndex& fi, const MuonPlan& muon,
                std::int64_t rank) {
  const MuonRankLayout layout = muon_for_rank(muon, plan, rank);
  w.member("alignment_bytes", muon.alignment_bytes);
  w.member("max_batch_numel", muon.max_batch_numel);
  w.key("groups").begin_array();
  for (const MuonRankGroup& rg : layout.groups) {
    w.line_break();
    write_muon_group(w, plan, fi, rg);
  }
  w.end_array();
  w.line_break().key("not_communicated");
  write_indices(w, fi, *layout.not_communicated);
}

void write_fsdp2_param(Writer& w, const Plan& plan, const FileIndex& fi, const Fsdp2Param& fp) {
  const PlannedParam& p = plan.params[fp.param];
  w.begin_object();
  w.member("param", fi.at(fp.param)).member("shard_dim", p.geometry.fsdp_dim);
  w.member("offset", fp.offset).member("padded_numel", fp.padded_numel);
  w.member_ints("unsharded_shape", fp.unsharded_shape);
  w.end_object();
}

void write_fsdp2_unit(Writer& w, const Plan& plan, const FileIndex& fi, const Fsdp2RankUnit& ru) {
  const Fsdp2Unit& u = *ru.unit;
  const auto ways = static_cast<std::int64_t>(ru.ranks.size());
  w.begin_object();
  w.member("name", u.name).member("mesh", mesh_kind_name(u.mesh));
  w.member("units", u.byte_units ? "bytes" : "elements");
  w.member("ranks", rank_list_text(ru.ranks)).member("index", ru.index);
  w.member("total", ru.total).member("total_bytes", ru.total_bytes);
  const std::vector<std::int64_t> output{ways, ru.total};
  w.member_ints("output_shape", output);
  w.key("params").begin_array();
  for (const Fsdp2Param& fp : ru.params) {
    w.line_break();
    write_fsdp2_param(w, plan, fi, fp);
  }
  w.end_array().end_object();
}

void write_fsdp2(Writer& w, const Plan& plan, const FileIndex& fi, const Fsdp2Plan& fsdp2,
                 std::int64_t rank) {
  const Fsdp2RankLayout layout = fsdp2_for_rank(fsdp2, plan, rank);
  w.key("units").begin_array();
  for (const Fsdp2RankUnit& ru : layout.units) {
    w.line_break();
    write_fsdp2_unit(w, plan, fi, ru);
  }
  w.end_array();
  w.line_break().key("not_communicated");
  write_indices(w, fi, *layout.not_communicated);
}

}  // namespace

void write_rank_buffers(Writer& w, const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                        std::int64_t rank, const FileIndex& fi) {
  w.begin_array();
  for (const PlannedBuffer& b : buffers) {
    w.line_break().begin_object().member("kind", buffer_kind_name(b.spec.kind));
    if (b.muon) write_muon(w, plan, fi, *b.muon, rank);
    if (b.fsdp2) write_fsdp2(w, plan, fi, *b.fsdp2, rank);
    w.end_object();
  }
  if (!buffers.empty()) w.line_break();
  w.end_array();
}

}  // namespace shardc::backend
