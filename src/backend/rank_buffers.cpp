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

void write_axis_names(Writer& writer, const Mesh& mesh, const std::vector<int>& axes) {
  writer.begin_array();
  for (int axis : axes) writer.value(mesh.axes.at(static_cast<std::size_t>(axis)).name);
  writer.end_array();
}

// `params` as indices into this rank file's `params` array.
void write_indices(Writer& writer, const FileIndex& fi, const std::vector<std::size_t>& params) {
  writer.begin_array();
  for (std::size_t i : params) writer.value(fi.at(i));
  writer.end_array();
}

// split_sizes run-length encoded: [[size, count], ...] in member order, so
// its length does not grow with the group size (chunk: at most 3 runs).
void write_runs(Writer& writer, const std::vector<std::int64_t>& sizes) {
  writer.begin_array();
  for (std::size_t i = 0; i < sizes.size();) {
    std::size_t j = i;
    while (j < sizes.size() && sizes[j] == sizes[i]) ++j;
    const std::array<std::int64_t, 2> run{sizes[i], static_cast<std::int64_t>(j - i)};
    writer.ints(run);
    i = j;
  }
  writer.end_array();
}

// Per param (group order): owner and, per stage, the members' split sizes.
// `slots[i]`: the batch holding g.params[i] and its position there (every
// stage of the batch lists its params in batch order).
void write_group_params(Writer& writer, const FileIndex& fi, const MuonRankGroup& rg,
                        const std::vector<MuonSlot>& slots) {
  const MuonGroup& group = *rg.group;
  writer.key("params").begin_array();
  for (std::size_t i = 0; i < group.params.size(); ++i) {
    writer.line_break().begin_object().member("param", fi.at(group.params[i]));
    writer.member_ints("owner", group.owners[i]).key("split_sizes").begin_array();
    for (const MuonStage& st : rg.batches[slots[i].batch].stages)
      write_runs(writer, st.params[slots[i].pos].split_sizes);
    writer.end_array().end_object();
  }
  writer.end_array();
}

// The members of a group that depend on the rank's shard class only.
void write_group_body(Writer& writer, const FileIndex& fi, const MuonRankGroup& rg,
                      const std::vector<MuonSlot>& slots) {
  const MuonGroup& group = *rg.group;
  write_group_params(writer, fi, rg, slots);
  writer.line_break().key("batches").begin_array();
  for (std::size_t b = 0; b < rg.batches.size(); ++b) {
    writer.line_break().begin_object().member("dtype", dtype_name(rg.batches[b].dtype));
    writer.key("params");
    write_indices(writer, fi, group.batches[b].params);
    writer.key("total_numel").begin_array();
    for (const MuonStage& st : rg.batches[b].stages) writer.value(st.total_numel);
    writer.end_array().end_object();
  }
  writer.end_array();
}

// Members rendered on their own: the text after the object's '{'.
template <typename F>
std::string render_members(F&& write) {
  std::string text;
  Writer writer(text);
  writer.begin_object();
  write(writer);
  return text.substr(1);
}

void write_fsdp2_param(Writer& writer, const Plan& plan, const FileIndex& fi,
                       const Fsdp2Param& fp) {
  const PlannedParam& param = plan.params[fp.param];
  writer.begin_object();
  writer.member("param", fi.at(fp.param)).member("shard_dim", param.geometry.fsdp_dim);
  writer.member("offset", fp.offset).member("padded_numel", fp.padded_numel);
  writer.member_ints("unsharded_shape", fp.unsharded_shape);
  writer.end_object();
}

void write_fsdp2_unit(Writer& writer, const Plan& plan, const FileIndex& fi,
                      const Fsdp2RankUnit& ru) {
  const Fsdp2Unit& unit = *ru.unit;
  const auto ways = static_cast<std::int64_t>(ru.ranks.size());
  writer.begin_object();
  writer.member("name", unit.name).member("mesh", mesh_kind_name(unit.mesh));
  writer.member("units", unit.byte_units ? "bytes" : "elements");
  writer.member("ranks", rank_list_text(ru.ranks)).member("index", ru.index);
  writer.member("total", ru.total).member("total_bytes", ru.total_bytes);
  const std::vector<std::int64_t> output{ways, ru.total};
  writer.member_ints("output_shape", output);
  writer.key("params").begin_array();
  for (const Fsdp2Param& fp : ru.params) {
    writer.line_break();
    write_fsdp2_param(writer, plan, fi, fp);
  }
  writer.end_array().end_object();
}

void write_fsdp2(Writer& writer, const Plan& plan, const FileIndex& fi, const Fsdp2Plan& fsdp2,
                 std::int64_t rank) {
  const Fsdp2RankLayout layout = fsdp2_for_rank(fsdp2, plan, rank);
  writer.key("units").begin_array();
  for (const Fsdp2RankUnit& ru : layout.units) {
    writer.line_break();
    write_fsdp2_unit(writer, plan, fi, ru);
  }
  writer.end_array();
  writer.line_break().key("not_communicated");
  write_indices(writer, fi, *layout.not_communicated);
}

// One flat optimizer buffer: its DP group, buckets, the param pieces in
// buffer order ([param, param_offset, numel, start, bucket]) and the ranges
// this rank's shard owns ([entry, param_offset, numel, buffer_start]): the
// fp32 main params and optimizer state it keeps (src/planner/buffers.hpp).
void write_flat_buffer(Writer& writer, const FileIndex& fi, const FlatRankBuffer& buffer) {
  writer.begin_object().member("mesh", mesh_kind_name(buffer.mesh)).member("expert", buffer.expert);
  writer.member("model_chunk", buffer.virtual_stage);
  writer.member("param_dtype", dtype_name(buffer.param_dtype))
      .member("grad_dtype", dtype_name(buffer.grad_dtype));
  writer.member("ranks", rank_list_text(buffer.ranks)).member("index", buffer.index);
  if (buffer.bucket_size < 0) {
    writer.member_null("bucket_size");
  } else {
    writer.member("bucket_size", buffer.bucket_size);
  }
  writer.member("numel", buffer.numel).member("shard_numel", buffer.shard_numel);
  writer.member("owned_numel", buffer.owned_numel);
  writer.line_break().key("buckets").begin_array();
  for (const FlatBucket& bucket : buffer.buckets) {
    const std::array<std::int64_t, 3> row{bucket.start, bucket.end, bucket.numel_unpadded};
    writer.ints(row);
  }
  writer.end_array();
  writer.line_break().key("params").begin_array();
  for (const FlatEntry& entry : buffer.entries) {
    const std::array<std::int64_t, 5> row{fi.at(entry.param), entry.param_offset, entry.numel,
                                          entry.start, entry.bucket};
    writer.line_break().ints(row);
  }
  writer.end_array();
  writer.line_break().key("owned").begin_array();
  for (const FlatOwned& owned : buffer.owned) {
    const std::array<std::int64_t, 4> row{static_cast<std::int64_t>(owned.entry),
                                          owned.param_offset, owned.numel, owned.buffer_start};
    writer.line_break().ints(row);
  }
  writer.end_array().end_object();
}

void write_flat(Writer& writer, const Plan& plan, const FileIndex& fi, const BufferSpec& spec,
                std::int64_t rank) {
  const FlatRankLayout layout = flat_for_rank(plan, spec, rank);
  writer.member("zero_stage", plan.zero.stage);
  if (spec.kind == BufferKind::MegatronDistOpt)
    writer.member("pad_for_high_nccl_busbw", spec.pad_for_high_nccl_busbw);
  writer.key("flat").begin_array();
  for (const FlatRankBuffer& buffer : layout.buffers) {
    writer.line_break();
    write_flat_buffer(writer, fi, buffer);
  }
  writer.end_array();
  writer.line_break().key("not_communicated");
  write_indices(writer, fi, layout.not_communicated);
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
    for (const MuonGroup& group : buffers[b].muon->groups) {
      const Mesh& mesh = mesh_for(plan, group.mesh);
      GroupText gt;
      gt.head = render_members([&](Writer& writer) {
        writer.member("key", group.key).member("mesh", mesh_kind_name(group.mesh));
        writer.key("replicate_axes");
        write_axis_names(writer, mesh, group.replicate_axes);
      });
      if (!group.batches.empty()) {
        const ParamGeometry& geom = plan.params[group.batches.front().params.front()].geometry;
        for (const auto& [d, index] : group.splits) {
          const DimSplit& split =
              geom.per_dim[static_cast<std::size_t>(d)][static_cast<std::size_t>(index)];
          const int dim = d;  // clang 14 captures no structured bindings
          gt.stage_heads.push_back(render_members([&](Writer& writer) {
            writer.key("axes");
            write_axis_names(writer, mesh, split.axes);
            writer.member("tensor_dim", dim);
          }));
        }
      }
      for (std::size_t bi = 0; bi < group.batches.size(); ++bi)
        for (std::size_t k = 0; k < group.batches[bi].params.size(); ++k) {
          batch_of[group.batches[bi].params[k]] = bi;
          pos_of[group.batches[bi].params[k]] = k;
        }
      for (std::size_t i : group.params) gt.slots.push_back({batch_of[i], pos_of[i]});
      gt.split_axes = muon_split_axes(group, plan);
      std::int64_t classes = 1;
      for (int axis : gt.split_axes) classes *= mesh.axes[static_cast<std::size_t>(axis)].size;
      gt.memo = memo_budget_bytes > 0 && 2 * classes <= stage_ranks;
      groups_[b].push_back(std::move(gt));
    }
  }
}

void RankBuffersWriter::write_muon_group(Writer& writer, std::size_t buffer_index, std::size_t gi,
                                         std::int64_t rank, const FileIndex& fi) const {
  const MuonPlan& muon = *buffers_[buffer_index].muon;
  const MuonGroup& group = muon.groups[gi];
  const GroupText& gt = groups_[buffer_index][gi];
  const std::vector<std::int64_t> coords = mesh_coords(mesh_for(plan_, group.mesh), rank);
  writer.begin_object().raw_members(gt.head);
  std::vector<std::int64_t> replicate_coord;
  replicate_coord.reserve(group.replicate_axes.size());
  for (int axis : group.replicate_axes)
    replicate_coord.push_back(coords[static_cast<std::size_t>(axis)]);
  writer.member_ints("replicate_coord", replicate_coord);
  writer.line_break().key("stages").begin_array();
  const std::vector<MuonStageRanks> stages = muon_stage_ranks(group, plan_, rank);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    writer.begin_object().raw_members(gt.stage_heads[s]);
    writer.member("ranks", rank_list_text(stages[s].ranks)).member("index", stages[s].index);
    writer.end_object();
  }
  writer.end_array();
  writer.line_break();
  if (!gt.memo) {
    write_group_body(writer, fi, muon_group_for_rank(muon, group, plan_, rank), gt.slots);
  } else {
    ClassMemo<Body>::Key key{static_cast<std::int64_t>(buffer_index),
                             static_cast<std::int64_t>(gi)};
    for (int axis : gt.split_axes) key.push_back(coords[static_cast<std::size_t>(axis)]);
    const auto body = memo_.get(key, [&] {
      const MuonRankGroup rg = muon_group_for_rank(muon, group, plan_, rank);
      return Body{render_members([&](Writer& bw) { write_group_body(bw, fi, rg, gt.slots); })};
    });
    writer.raw_members(body->text);
  }
  writer.end_object();
}

void RankBuffersWriter::write_muon(Writer& writer, std::size_t buffer_index, const MuonPlan& muon,
                                   std::int64_t rank, const FileIndex& fi) const {
  const int stage = plan_.stage_of_rank(rank);
  writer.member("alignment_bytes", muon.alignment_bytes);
  writer.member("max_batch_numel", muon.max_batch_numel);
  writer.key("groups").begin_array();
  for (std::size_t gi = 0; gi < muon.groups.size(); ++gi) {
    if (muon.groups[gi].stage != stage) continue;
    writer.line_break();
    write_muon_group(writer, buffer_index, gi, rank, fi);
  }
  writer.end_array();
  writer.line_break().key("not_communicated");
  write_indices(writer, fi, muon.not_communicated[static_cast<std::size_t>(stage)]);
}

void RankBuffersWriter::write(Writer& writer, std::int64_t rank, const FileIndex& fi) const {
  writer.begin_array();
  for (std::size_t b = 0; b < buffers_.size(); ++b) {
    const PlannedBuffer& pb = buffers_[b];
    writer.line_break().begin_object().member("kind", buffer_kind_name(pb.spec.kind));
    if (pb.muon) write_muon(writer, b, *pb.muon, rank, fi);
    if (pb.fsdp2) write_fsdp2(writer, plan_, fi, *pb.fsdp2, rank);
    if (pb.spec.kind == BufferKind::MegatronDistOpt || pb.spec.kind == BufferKind::DeepSpeedZero)
      write_flat(writer, plan_, fi, pb.spec, rank);
    writer.end_object();
  }
  if (!buffers_.empty()) writer.line_break();
  writer.end_array();
}

}  // namespace shardc::backend
