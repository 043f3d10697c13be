// The `buffers` array of a rank file (contract §6.3, lean form): muon_allgather
// groups with their stages, owners and run-length split sizes; fsdp2_allgather
// units. Params are referenced by their index in the file's `params` array;
// everything a reader can derive (member shapes, pad shapes, offsets, slice-back)
// is left out (docs/formats.md "Rank files: derived fields").
#include "backend/rank_buffers.hpp"

#include <algorithm>
#include <array>

#include "support/rank_set.hpp"

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
    const std::array<std::int64_t, 2> run{v[i], static_cast<std::int64_t>(j - i)};
    w.ints(run);
    i = j;
  }
  w.end_array();
}

// Per param (group order): owner and, per stage, the members' split sizes.
// `slots[i]`: the batch holding g.params[i] and its position there (every
// stage of the batch lists its params in batch order).
void write_group_params(Writer& w, const FileIndex& fi, const MuonRankGroup& rg,
                        const std::vector<MuonSlot>& slots) {
  const MuonGroup& g = *rg.group;
  w.key("params").begin_array();
  for (std::size_t i = 0; i < g.params.size(); ++i) {
    w.line_break().begin_object().member("param", fi.at(g.params[i]));
    w.member_ints("owner", g.owners[i]).key("split_sizes").begin_array();
    for (const MuonStage& st : rg.batches[slots[i].batch].stages)
      write_runs(w, st.params[slots[i].pos].split_sizes);
    w.end_array().end_object();
  }
  w.end_array();
}

// The members of a group that depend on the rank's shard class only.
void write_group_body(Writer& w, const FileIndex& fi, const MuonRankGroup& rg,
                      const std::vector<MuonSlot>& slots) {
  const MuonGroup& g = *rg.group;
  write_group_params(w, fi, rg, slots);
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
}

// Members rendered on their own: the text after the object's '{'.
template <typename F>
std::string render_members(F&& write) {
  std::string text;
  Writer w(text);
  w.begin_object();
  write(w);
  return text.substr(1);
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

// One flat optimizer buffer: its DP group, buckets, the param pieces in
// buffer order ([param, param_offset, numel, start, bucket]) and the ranges
// this rank's shard owns ([entry, param_offset, numel, buffer_start]): the
// fp32 main params and optimizer state it keeps (src/planner/buffers.hpp).
void write_flat_buffer(Writer& w, const FileIndex& fi, const FlatRankBuffer& b) {
  w.begin_object().member("mesh", mesh_kind_name(b.mesh)).member("expert", b.expert);
  w.member("model_chunk", b.virtual_stage);
  w.member("param_dtype", dtype_name(b.param_dtype)).member("grad_dtype", dtype_name(b.grad_dtype));
  w.member("ranks", rank_list_text(b.ranks)).member("index", b.index);
  if (b.bucket_size < 0) {
    w.member_null("bucket_size");
  } else {
    w.member("bucket_size", b.bucket_size);
  }
  w.member("numel", b.numel).member("shard_numel", b.shard_numel);
  w.member("owned_numel", b.owned_numel);
  w.line_break().key("buckets").begin_array();
  for (const FlatBucket& k : b.buckets) {
    const std::array<std::int64_t, 3> v{k.start, k.end, k.numel_unpadded};
    w.ints(v);
  }
  w.end_array();
  w.line_break().key("params").begin_array();
  for (const FlatEntry& e : b.entries) {
    const std::array<std::int64_t, 5> v{fi.at(e.param), e.param_offset, e.numel, e.start, e.bucket};
    w.line_break().ints(v);
  }
  w.end_array();
  w.line_break().key("owned").begin_array();
  for (const FlatOwned& o : b.owned) {
    const std::array<std::int64_t, 4> v{static_cast<std::int64_t>(o.entry), o.param_offset, o.numel,
                                        o.buffer_start};
    w.line_break().ints(v);
  }
  w.end_array().end_object();
}

void write_flat(Writer& w, const Plan& plan, const FileIndex& fi, const BufferSpec& spec,
                std::int64_t rank) {
  const FlatRankLayout layout = flat_for_rank(plan, spec, rank);
  w.member("zero_stage", plan.zero.stage);
  if (spec.kind == BufferKind::MegatronDistOpt)
    w.member("pad_for_high_nccl_busbw", spec.pad_for_high_nccl_busbw);
  w.key("flat").begin_array();
  for (const FlatRankBuffer& b : layout.buffers) {
    w.line_break();
    write_flat_buffer(w, fi, b);
  }
  w.end_array();
  w.line_break().key("not_communicated");
  write_indices(w, fi, layout.not_communicated);
}

}  // namespace

RankBuffersWriter::RankBuffersWriter(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                                     std::size_t memo_budget_bytes)
    : plan_(plan), buffers_(buffers), memo_(memo_budget_bytes) {
  const std::int64_t stage_ranks = plan.world_size / std::max(plan.num_stages, 1);
  groups_.resize(buffers.size());
  for (std::size_t b = 0; b < buffers.size(); ++b) {
    if (!buffers[b].muon) continue;
    // A param is in at most one group of a layout.
    std::vector<std::size_t> pos_of(plan.params.size(), 0);
    std::vector<std::size_t> batch_of(plan.params.size(), 0);
    for (const MuonGroup& g : buffers[b].muon->groups) {
      const Mesh& mesh = mesh_for(plan, g.mesh);
      GroupText gt;
      gt.head = render_members([&](Writer& w) {
        w.member("key", g.key).member("mesh", mesh_kind_name(g.mesh));
        w.key("replicate_axes");
        write_axis_names(w, mesh, g.replicate_axes);
      });
      if (!g.batches.empty()) {
        const ParamGeometry& geom = plan.params[g.batches.front().params.front()].geometry;
        for (const auto& [d, index] : g.splits) {
          const DimSplit& split =
              geom.per_dim[static_cast<std::size_t>(d)][static_cast<std::size_t>(index)];
          const int dim = d;  // clang 14 captures no structured bindings
          gt.stage_heads.push_back(render_members([&](Writer& w) {
            w.key("axes");
            write_axis_names(w, mesh, split.axes);
            w.member("tensor_dim", dim);
          }));
        }
      }
      for (std::size_t bi = 0; bi < g.batches.size(); ++bi)
        for (std::size_t k = 0; k < g.batches[bi].params.size(); ++k) {
          batch_of[g.batches[bi].params[k]] = bi;
          pos_of[g.batches[bi].params[k]] = k;
        }
      for (std::size_t i : g.params) gt.slots.push_back({batch_of[i], pos_of[i]});
      gt.split_axes = muon_split_axes(g, plan);
      std::int64_t classes = 1;
      for (int a : gt.split_axes) classes *= mesh.axes[static_cast<std::size_t>(a)].size;
      gt.memo = memo_budget_bytes > 0 && 2 * classes <= stage_ranks;
      groups_[b].push_back(std::move(gt));
    }
  }
}

void RankBuffersWriter::write_muon_group(Writer& w, std::size_t b, std::size_t gi,
                                         std::int64_t rank, const FileIndex& fi) const {
  const MuonPlan& muon = *buffers_[b].muon;
  const MuonGroup& g = muon.groups[gi];
  const GroupText& gt = groups_[b][gi];
  const std::vector<std::int64_t> coords = mesh_coords(mesh_for(plan_, g.mesh), rank);
  w.begin_object().raw_members(gt.head);
  std::vector<std::int64_t> replicate_coord;
  replicate_coord.reserve(g.replicate_axes.size());
  for (int a : g.replicate_axes) replicate_coord.push_back(coords[static_cast<std::size_t>(a)]);
  w.member_ints("replicate_coord", replicate_coord);
  w.line_break().key("stages").begin_array();
  const std::vector<MuonStageRanks> stages = muon_stage_ranks(g, plan_, rank);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    w.begin_object().raw_members(gt.stage_heads[s]);
    w.member("ranks", rank_list_text(stages[s].ranks)).member("index", stages[s].index);
    w.end_object();
  }
  w.end_array();
  w.line_break();
  if (!gt.memo) {
    write_group_body(w, fi, muon_group_for_rank(muon, g, plan_, rank), gt.slots);
  } else {
    ClassMemo<Body>::Key key{static_cast<std::int64_t>(b), static_cast<std::int64_t>(gi)};
    for (int a : gt.split_axes) key.push_back(coords[static_cast<std::size_t>(a)]);
    const auto body = memo_.get(key, [&] {
      const MuonRankGroup rg = muon_group_for_rank(muon, g, plan_, rank);
      return Body{render_members([&](Writer& bw) { write_group_body(bw, fi, rg, gt.slots); })};
    });
    w.raw_members(body->text);
  }
  w.end_object();
}

void RankBuffersWriter::write_muon(Writer& w, std::size_t b, const MuonPlan& muon,
                                   std::int64_t rank, const FileIndex& fi) const {
  const int stage = plan_.stage_of_rank(rank);
  w.member("alignment_bytes", muon.alignment_bytes);
  w.member("max_batch_numel", muon.max_batch_numel);
  w.key("groups").begin_array();
  for (std::size_t gi = 0; gi < muon.groups.size(); ++gi) {
    if (muon.groups[gi].stage != stage) continue;
    w.line_break();
    write_muon_group(w, b, gi, rank, fi);
  }
  w.end_array();
  w.line_break().key("not_communicated");
  write_indices(w, fi, muon.not_communicated[static_cast<std::size_t>(stage)]);
}

void RankBuffersWriter::write(Writer& w, std::int64_t rank, const FileIndex& fi) const {
  w.begin_array();
  for (std::size_t b = 0; b < buffers_.size(); ++b) {
    const PlannedBuffer& pb = buffers_[b];
    w.line_break().begin_object().member("kind", buffer_kind_name(pb.spec.kind));
    if (pb.muon) write_muon(w, b, *pb.muon, rank, fi);
    if (pb.fsdp2) write_fsdp2(w, plan_, fi, *pb.fsdp2, rank);
    if (pb.spec.kind == BufferKind::MegatronDistOpt || pb.spec.kind == BufferKind::DeepSpeedZero)
      write_flat(w, plan_, fi, pb.spec, rank);
    w.end_object();
  }
  if (!buffers_.empty()) w.line_break();
  w.end_array();
}

}  // namespace shardc::backend
