// verify: the redundant fields of plan.json, manifest.json and the rank
// files agree. Every number a file repeats (world size, rank, coords, stage,
// shapes, numel/bytes, totals) is recomputed from the one it repeats, and a
// disagreement is a mismatch naming the file, the field and both values.
// Sizes are checked here before anything loops over or allocates by them.
#include <algorithm>
#include <charconv>
#include <climits>
#include <optional>
#include <set>

#include "support/limits.hpp"
#include "support/rank_set.hpp"
#include "verify/engine.hpp"

namespace shardc::verify {
namespace {

using limits::kMaxNumel;

std::string num(std::int64_t value) { return std::to_string(value); }

// Saturating arithmetic on sizes read from files (INT64_MAX on overflow).
std::int64_t sat_mul(std::int64_t lhs, std::int64_t rhs) {
  std::int64_t product = 0;
  return __builtin_mul_overflow(lhs, rhs, &product) ? INT64_MAX : product;
}
std::int64_t sat_add(std::int64_t lhs, std::int64_t rhs) {
  std::int64_t sum = 0;
  return __builtin_add_overflow(lhs, rhs, &sum) ? INT64_MAX : sum;
}

// Product of the axis sizes, or -1 above 2^31 - 1 (sizes are >= 1, parsed).
std::int64_t mesh_product(const std::vector<readback::PlanMeshAxis>& axes) {
  std::int64_t product = 1;
  for (const auto& axis : axes) {
    if (__builtin_mul_overflow(product, axis.size, &product) || product > readback::kMaxWorldSize)
      return -1;
  }
  return product;
}

std::string coords_text(const readback::RankCoords& coords) {
  std::string out = "{";
  for (const auto& [name, coord] : coords)
    out += (out.size() > 1 ? ", " : "") + name + ": " + num(coord);
  return out + "}";
}

// The coordinates of `rank`, sorted by axis name (as the reader returns them).
readback::RankCoords expected_coords(const std::vector<readback::PlanMeshAxis>& axes,
                                     std::int64_t rank) {
  readback::RankCoords coords(axes.size());
  for (std::size_t a = axes.size(); a-- > 0;) {
    coords[a] = {axes[a].name, rank % axes[a].size};
    rank /= axes[a].size;
  }
  std::sort(coords.begin(), coords.end());
  return coords;
}

bool check_meshes(const PlanFile& plan, Report& report) {
  bool ok = true;
  const std::int64_t dense = mesh_product(plan.dense);
  if (dense != plan.world_size) {
    report.mismatch("plan.json meshes.dense: product of the axis sizes " +
                    (dense < 0 ? std::string("above 2^31 - 1") : num(dense)) + " but world_size " +
                    num(plan.world_size));
    ok = false;
  }
  const std::int64_t expert = mesh_product(plan.expert);
  if (!plan.expert.empty() && expert != plan.world_size) {
    report.mismatch("plan.json meshes.expert: product of the axis sizes " +
                    (expert < 0 ? std::string("above 2^31 - 1") : num(expert)) +
                    " but world_size " + num(plan.world_size));
    ok = false;
  }
  if (plan.pipeline_axis) {
    const auto it = std::find_if(plan.dense.begin(), plan.dense.end(), [&](const auto& axis) {
      return axis.name == *plan.pipeline_axis;
    });
    if (it == plan.dense.end()) {
      report.mismatch("plan.json pipeline.axis: '" + *plan.pipeline_axis +
                      "' is not an axis of meshes.dense");
      ok = false;
    } else if (it->size != plan.num_stages) {
      report.mismatch("plan.json pipeline.num_stages " + num(plan.num_stages) + " but axis '" +
                      it->name + "' has size " + num(it->size));
      ok = false;
    }
  }
  return ok;
}

// One shard's shapes against the param's global shape.
void check_shard(const PlanParam& param, std::size_t i, Report& report) {
  const readback::PlanShard& shard = param.shards[i];
  const std::string where =
      "plan.json param " + param.name + " shard " + num(static_cast<std::int64_t>(i));
  const std::size_t nd = param.global_shape.size();
  if (shard.local_shape.size() != nd || shard.global_offset.size() != nd ||
      shard.padded_shape.size() != nd)
    return report.mismatch(where + ": local_shape " + shape_text(shard.local_shape) +
                           ", global_offset " + shape_text(shard.global_offset) +
                           ", padded_shape " + shape_text(shard.padded_shape) +
                           " do not have the " + num(static_cast<std::int64_t>(nd)) +
                           " dims of global_shape " + shape_text(param.global_shape));
  for (std::size_t d = 0; d < nd; ++d) {
    const std::int64_t global = param.global_shape[d];
    const std::int64_t local = shard.local_shape[d];
    const std::int64_t offset = shard.global_offset[d];
    if (local < 0 || offset < 0 || local > global || offset > global - local ||
        shard.padded_shape[d] < local)
      return report.mismatch(where + " dim " + num(static_cast<std::int64_t>(d)) + ": local " +
                             num(local) + " at offset " + num(offset) + " (padded " +
                             num(shard.padded_shape[d]) + ") does not fit global extent " +
                             num(global));
  }
}

// The tensor dim a placement label splits: d for `Shard(d)` and `_StridedShard(d, sf=F)`, -1
// for `Replicate()`, nullopt for any other text (plan.schema.json's label pattern).
std::optional<std::int64_t> label_dim(std::string_view label) {
  if (label == "Replicate()") return -1;
  const bool strided = label.starts_with("_StridedShard(");
  if (!strided && !label.starts_with("Shard(")) return std::nullopt;
  const std::string_view rest = label.substr(strided ? 14 : 6);
  std::int64_t dim = -1;
  const auto parsed = std::from_chars(rest.data(), rest.data() + rest.size(), dim);
  if (parsed.ec != std::errc() || dim < 0) return std::nullopt;
  const std::string_view tail = rest.substr(static_cast<std::size_t>(parsed.ptr - rest.data()));
  const bool closed = strided ? tail.starts_with(", sf=") && tail.ends_with(")") : tail == ")";
  if (!closed) return std::nullopt;
  return dim;
}

std::string labels_text(const std::vector<std::string>& labels) {
  std::string out = "[";
  for (const std::string& label : labels) out += (out.size() > 1 ? ", " : "") + label;
  return out + "]";
}

// The stride of axis `axis` of a mesh in rank numbers (row-major: the last axis varies fastest);
// rank / stride % size is a rank's coordinate. The meshes are checked (product = world size).
std::int64_t axis_stride(const std::vector<readback::PlanMeshAxis>& axes, std::size_t axis) {
  std::int64_t stride = 1;
  for (std::size_t b = axis + 1; b < axes.size(); ++b) stride *= axes[b].size;
  return stride;
}

// plan.json `placements` of a param against its shards and mesh, the labels a DTensor /
// FSDP2 runtime builds from (hostile/verify_fields_unchecked: a label changed with the
// manifest re-signed passed). Re-derived from the shards as far as they tell:
// * one label per axis of the param's mesh (a param moved to the other mesh has the other
//   mesh's axis count, or coordinates the shards contradict);
// * a Replicate() axis of size > 1 does not change what a rank holds: the rank differing
//   from a shard's first rank only on that axis (on the same pipeline stage) is in the same
//   shard;
// * a dim no axis of size > 1 splits is whole in every non-empty shard.
// The first contradiction per param is reported.
void check_placements(const PlanFile& plan, const PlanParam& param, Report& report) {
  const auto& axes = param.mesh == "expert" ? plan.expert : plan.dense;
  const std::string where = "plan.json param " + param.name + " placements";
  const std::size_t nd = param.global_shape.size();
  if (param.placements.size() != axes.size())
    return report.mismatch(where + ": " + num(static_cast<std::int64_t>(param.placements.size())) +
                           " labels but mesh '" + param.mesh + "' has " +
                           num(static_cast<std::int64_t>(axes.size())) + " axes");
  std::vector<bool> split(nd, false);
  std::vector<std::size_t> replicated;  // axes of size > 1 labelled Replicate()
  for (std::size_t a = 0; a < axes.size(); ++a) {
    const auto dim = label_dim(param.placements[a]);
    if (!dim || *dim >= static_cast<std::int64_t>(nd))
      return report.mismatch(where + ": '" + param.placements[a] + "' on axis '" + axes[a].name +
                             "' is not Replicate(), Shard(d) or _StridedShard(d, sf=F) with d "
                             "below " +
                             num(static_cast<std::int64_t>(nd)));
    if (axes[a].size == 1) continue;
    if (*dim >= 0) {
      split[static_cast<std::size_t>(*dim)] = true;
    } else {
      replicated.push_back(a);
    }
  }
  std::optional<std::size_t> pipeline;
  for (std::size_t a = 0; a < plan.dense.size(); ++a)
    if (plan.pipeline_axis && plan.dense[a].name == *plan.pipeline_axis) pipeline = a;
  const auto stage_of = [&](std::int64_t rank) -> std::int64_t {
    if (!pipeline) return 0;
    return rank / axis_stride(plan.dense, *pipeline) % plan.dense[*pipeline].size;
  };
  for (std::size_t i = 0; i < param.shards.size(); ++i) {
    const readback::PlanShard& shard_entry = param.shards[i];
    const std::string shard = " shard " + num(static_cast<std::int64_t>(i)) + " (ranks " +
                              shard_entry.ranks.substr(0, 40) + ")";
    std::string error;
    const auto ranks = RankSet::parse(shard_entry.ranks, plan.world_size, error);
    if (!ranks || ranks->empty()) continue;  // the shard checks report it
    const std::int64_t first = ranks->first();
    for (const std::size_t axis : replicated) {
      const std::int64_t stride = axis_stride(axes, axis);
      const std::int64_t at = first / stride % axes[axis].size;
      const std::int64_t other = first + ((at + 1) % axes[axis].size - at) * stride;
      if (stage_of(other) != stage_of(first) || ranks->contains(other)) continue;
      return report.mismatch(where + ": axis '" + axes[axis].name + "' is Replicate(), but" +
                             shard + " holds rank " + num(first) + " and not rank " + num(other) +
                             ", which differs from it only on that axis");
    }
    const auto held = shape_numel(shard_entry.local_shape);
    if (!held || *held == 0 || shard_entry.local_shape.size() != nd ||
        shard_entry.global_offset.size() != nd)
      continue;
    for (std::size_t d = 0; d < nd; ++d) {
      if (split[d] || (shard_entry.local_shape[d] == param.global_shape[d] &&
                       shard_entry.global_offset[d] == 0))
        continue;
      return report.mismatch(where + " " + labels_text(param.placements) + ": no axis splits dim " +
                             num(static_cast<std::int64_t>(d)) + ", but" + shard + " holds " +
                             num(shard_entry.local_shape[d]) + " of its " +
                             num(param.global_shape[d]) + " at offset " +
                             num(shard_entry.global_offset[d]));
    }
  }
}

// The decimal segment in which `left` and `right` (same segment count) differ, if exactly one.
std::optional<std::size_t> differing_segment(const std::vector<std::string_view>& left,
                                             const std::vector<std::string_view>& right) {
  if (left.size() != right.size()) return std::nullopt;
  std::optional<std::size_t> at;
  for (std::size_t i = 0; i < left.size(); ++i) {
    if (left[i] == right[i]) continue;
    if (at) return std::nullopt;
    at = i;
  }
  return at;
}

std::vector<std::string_view> segments(std::string_view name) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      out.push_back(name.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

// stacked_from of a stacked expert param: count = sources = global_shape[0], first/last are
// the ends, the sources distinct, none a planned param, and source k the stack pattern at
// expert index first + k (one decimal segment counting up): a swapped or renamed source would
// load another expert's (or another tensor's) weights into row k.
void check_stacked(const PlanParam& param, const std::set<std::string_view>& planned,
                   Report& report) {
  if (!param.stacked_from) return;
  const PlanParam::Stacked& stacked = *param.stacked_from;
  const std::string where = "plan.json param " + param.name + " stacked_from ";
  const auto count = static_cast<std::int64_t>(stacked.sources.size());
  if (stacked.count != count || param.global_shape.empty() || param.global_shape[0] != count)
    return report.mismatch(where + "count " + num(stacked.count) + ", " + num(count) +
                           " sources, global_shape " + shape_text(param.global_shape) +
                           ": all three must agree");
  if (count == 0) return;
  if (stacked.first != stacked.sources.front() || stacked.last != stacked.sources.back())
    report.mismatch(where + "first '" + stacked.first + "' / last '" + stacked.last +
                    "' are not the first and last sources");
  std::set<std::string_view> seen;
  for (const std::string& src : stacked.sources) {
    if (!seen.insert(src).second) report.mismatch(where + "lists '" + src + "' twice");
    if (planned.contains(src)) report.mismatch(where + "source '" + src + "' is a planned param");
  }
  if (count < 2) return;
  const auto first = segments(stacked.sources[0]);
  const auto at = differing_segment(first, segments(stacked.sources[1]));
  std::int64_t base = 0;
  // The index is a whole segment (`experts.17`) or the decimal end of one after a literal
  // prefix (Megatron's grouped-GEMM `linear_fc1.weight17`, docs/experts.md).
  const std::string_view seg = at ? first[*at] : std::string_view();
  const std::size_t digits = seg.find_last_not_of("0123456789") + 1;  // npos + 1 = 0
  const std::string_view prefix = seg.substr(0, digits);
  const std::string_view number = seg.substr(digits);
  const bool numeric = at && !number.empty() && number.size() < 10;
  if (!numeric)
    return report.mismatch(where + "sources '" + stacked.sources[0] + "' and '" +
                           stacked.sources[1] + "' do not differ in one expert index");
  for (const char digit : number) base = base * 10 + (digit - '0');
  for (std::int64_t k = 0; k < count; ++k) {
    auto want = first;
    const std::string index = std::to_string(base + k);
    const std::string segment = std::string(prefix) + index;
    want[*at] = segment;
    const auto got = segments(stacked.sources[static_cast<std::size_t>(k)]);
    if (got != want) {
      report.mismatch(where + "source " + num(k) + " is '" +
                      stacked.sources[static_cast<std::size_t>(k)] + "', not expert " + index +
                      " of the pattern of '" + stacked.sources[0] + "'");
      return;
    }
  }
}

void check_params(const PlanFile& plan, Report& report, bool& ok, bool meshes_ok) {
  std::set<std::string_view> names_of;
  for (const PlanParam& param : plan.params) names_of.insert(param.name);
  // alias_of in plan.json names another param, itself no alias, of the same dtype and shape.
  for (const PlanParam& param : plan.params) {
    if (!param.alias_of) continue;
    const auto src =
        std::find_if(plan.params.begin(), plan.params.end(),
                     [&](const PlanParam& other) { return other.name == *param.alias_of; });
    if (src == plan.params.end() || src->alias_of || src->name == param.name ||
        src->dtype != param.dtype || src->global_shape != param.global_shape)
      report.mismatch("plan.json param " + param.name + " alias_of '" + *param.alias_of + "': " +
                      (src == plan.params.end() ? std::string("no such param")
                                                : "not a param of the same dtype and shape that "
                                                  "is no alias itself"));
  }
  std::set<std::string_view> names;
  for (const PlanParam& param : plan.params) {
    if (!names.insert(param.name).second)
      report.mismatch("plan.json param " + param.name + ": listed twice");
    if (!shape_numel(param.global_shape)) {
      report.mismatch("plan.json param " + param.name + " global_shape " +
                      shape_text(param.global_shape) + ": negative extent or 2^62+ elements");
      ok = false;
      continue;
    }
    if (param.stage < 0 || param.stage >= plan.num_stages)
      report.mismatch("plan.json param " + param.name + " stage " + num(param.stage) + " but " +
                      num(plan.num_stages) + " stages");
    if (param.mesh != "dense" && !(param.mesh == "expert" && !plan.expert.empty())) {
      report.mismatch("plan.json param " + param.name + " mesh '" + param.mesh +
                      "' is not a mesh of the plan");
      ok = false;
    }
    if (param.shards.empty()) report.mismatch("plan.json param " + param.name + ": no shards");
    check_stacked(param, names_of, report);
    for (std::size_t i = 0; i < param.shards.size(); ++i) check_shard(param, i, report);
    if (meshes_ok) check_placements(plan, param, report);
  }
  if (plan.summary_num_params != static_cast<std::int64_t>(plan.params.size()))
    report.mismatch("plan.json summary.num_params " + num(plan.summary_num_params) + " but " +
                    num(static_cast<std::int64_t>(plan.params.size())) + " params listed");
}

void check_header(const PlanFile& plan, const RankFile& rank_file, const std::string& file,
                  Report& report) {
  if (rank_file.world_size != plan.world_size)
    report.mismatch(file + " world_size " + num(rank_file.world_size) +
                    " but plan.json world_size " + num(plan.world_size));
  const auto dense = expected_coords(plan.dense, rank_file.rank);
  if (rank_file.dense != dense)
    report.mismatch(file + " coords.dense " + coords_text(rank_file.dense) +
                    " but plan.json meshes give " + coords_text(dense));
  if (plan.expert.empty() != !rank_file.expert) {
    report.mismatch(file + " coords.expert " +
                    (rank_file.expert ? coords_text(*rank_file.expert) : "null") +
                    " but plan.json meshes.expert is " + (plan.expert.empty() ? "null" : "set"));
  } else if (rank_file.expert &&
             *rank_file.expert != expected_coords(plan.expert, rank_file.rank)) {
    report.mismatch(file + " coords.expert " + coords_text(*rank_file.expert) +
                    " but plan.json meshes give " +
                    coords_text(expected_coords(plan.expert, rank_file.rank)));
  }
  std::int64_t stage = 0;
  for (const auto& [name, coord] : dense)
    if (plan.pipeline_axis && name == *plan.pipeline_axis) stage = coord;
  if (rank_file.stage != stage)
    report.mismatch(file + " stage " + num(rank_file.stage) + " but plan.json gives rank " +
                    num(rank_file.rank) + " stage " + num(stage));
}

// One held param's repeated fields; adds it to `totals` (aliases share storage).
void check_held(const Context& cx, const RankFile& rank_file, const readback::RankParam& held,
                const std::string& file, readback::RankTotals& totals) {
  Report& report = cx.report;
  const std::string where = file + " param " + held.name + " ";
  const auto local_numel = shape_numel(held.local_shape);
  const auto padded = shape_numel(held.padded_shape);
  if (!local_numel || !padded)
    return report.mismatch(where + "local_shape " + shape_text(held.local_shape) +
                           " / padded_shape " + shape_text(held.padded_shape) +
                           ": negative extent or 2^62+ elements");
  if (held.numel != *local_numel)
    report.mismatch(where + "numel " + num(held.numel) + " but local_shape " +
                    shape_text(held.local_shape) + " has " + num(*local_numel));
  const std::int64_t bytes = sat_mul(*local_numel, element_size(held.dtype));
  if (held.bytes != bytes)
    report.mismatch(where + "bytes " + num(held.bytes) + " but " + num(*local_numel) +
                    " elements of " + std::string(dtype_name(held.dtype)) + " are " + num(bytes));
  if (held.stage != rank_file.stage)
    report.mismatch(where + "stage " + num(held.stage) + " but the rank's stage " +
                    num(rank_file.stage));
  if (const PlanParam* planned = cx.param(held.name)) {
    if (held.dtype != planned->dtype)
      report.mismatch(where + "dtype " + std::string(dtype_name(held.dtype)) + " but plan.json " +
                      std::string(dtype_name(planned->dtype)));
    if (held.global_shape != planned->global_shape)
      report.mismatch(where + "global_shape " + shape_text(held.global_shape) + " but plan.json " +
                      shape_text(planned->global_shape));
    if (held.stage != planned->stage)
      report.mismatch(where + "stage " + num(held.stage) + " but plan.json stage " +
                      num(planned->stage));
    // The rank file names the same source as plan.json: a re-pointed alias would hand the
    // runtime another tensor's storage (hostile/verify_fields_unchecked).
    if (held.alias_of != planned->alias_of)
      report.mismatch(where + "alias_of " + (held.alias_of ? "'" + *held.alias_of + "'" : "null") +
                      " but plan.json alias_of " +
                      (planned->alias_of ? "'" + *planned->alias_of + "'" : std::string("null")));
  }
  if (held.alias) return;
  totals.param_bytes = sat_add(totals.param_bytes, bytes);
  totals.padded_param_bytes =
      sat_add(totals.padded_param_bytes, sat_mul(*padded, element_size(held.dtype)));
  ++totals.num_params;
}

// One of a rank file's totals: its value, the file (relative to OUTDIR) and its rank.
struct RankTotal {
  std::int64_t value;
  const std::string& file;
  std::int64_t rank;
};

// `total` within plan.json's per-rank statistic `stat` (summary.`name`), and equal to
// its min / max when the rank is listed for it.
void check_stat(const PlanFile& plan, const readback::PlanRankStat& stat, const char* name,
                const RankTotal& total, Report& report) {
  const std::int64_t value = total.value;
  const std::string& file = total.file;
  const std::int64_t rank = total.rank;
  std::string error;
  const auto lo = RankSet::parse(stat.min_ranks, plan.world_size, error);
  const auto hi = RankSet::parse(stat.max_ranks, plan.world_size, error);
  const std::string field = std::string("plan.json summary.") + name;
  if (!lo || !hi) return report.mismatch(field + ": " + error);
  if (value < stat.min || value > stat.max || (lo->contains(rank) && value != stat.min) ||
      (hi->contains(rank) && value != stat.max))
    report.mismatch(file + " totals " + num(value) + " bytes but " + field + " gives min " +
                    num(stat.min) + " (ranks " + stat.min_ranks + "), max " + num(stat.max) +
                    " (ranks " + stat.max_ranks + ")");
}

}  // namespace

std::optional<std::int64_t> shape_numel(const Shape& shape) { return checked_numel(shape); }

bool check_plan_fields(const PlanFile& plan, const readback::ManifestFile& manifest,
                       Report& report) {
  const bool meshes_ok = check_meshes(plan, report);
  bool ok = meshes_ok;
  if (manifest.world_size != plan.world_size) {
    report.mismatch("plan.json world_size " + num(plan.world_size) +
                    " but manifest.json world_size " + num(manifest.world_size));
    ok = false;
  }
  if (manifest.model_sha256 != plan.model_sha256 || manifest.recipe_sha256 != plan.recipe_sha256)
    report.mismatch("plan.json inputs (model sha256 " + plan.model_sha256.substr(0, 12) +
                    "…, recipe " + plan.recipe_sha256.substr(0, 12) +
                    "…) differ from manifest.json inputs (model " +
                    manifest.model_sha256.substr(0, 12) + "…, recipe " +
                    manifest.recipe_sha256.substr(0, 12) + "…)");
  check_params(plan, report, ok, meshes_ok);
  return ok;
}

void check_rank_fields(const Context& cx, const RankFile& rank_file, const std::string& file) {
  check_header(cx.plan, rank_file, file, cx.report);
  std::set<std::string_view> names;
  readback::RankTotals totals;
  for (const auto& held : rank_file.params) {
    if (!names.insert(held.name).second)
      cx.report.mismatch(file + " param " + held.name + ": listed twice");
    check_held(cx, rank_file, held, file, totals);
  }
  const auto& ft = rank_file.totals;
  if (ft.param_bytes != totals.param_bytes || ft.padded_param_bytes != totals.padded_param_bytes ||
      ft.num_params != totals.num_params)
    cx.report.mismatch(file + " totals {param_bytes " + num(ft.param_bytes) +
                       ", padded_param_bytes " + num(ft.padded_param_bytes) + ", num_params " +
                       num(ft.num_params) + "} but its params sum to {" + num(totals.param_bytes) +
                       ", " + num(totals.padded_param_bytes) + ", " + num(totals.num_params) + "}");
  check_stat(cx.plan, cx.plan.per_rank_param_bytes, "per_rank_param_bytes",
             {ft.param_bytes, file, rank_file.rank}, cx.report);
  check_stat(cx.plan, cx.plan.per_rank_padded_param_bytes, "per_rank_padded_param_bytes",
             {ft.padded_param_bytes, file, rank_file.rank}, cx.report);
}

}  // namespace shardc::verify
