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

std::string num(std::int64_t v) { return std::to_string(v); }

// Saturating arithmetic on sizes read from files (INT64_MAX on overflow).
std::int64_t sat_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
std::int64_t sat_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

// Product of the axis sizes, or -1 above 2^31 - 1 (sizes are >= 1, parsed).
std::int64_t mesh_product(const std::vector<readback::PlanMeshAxis>& axes) {
  std::int64_t p = 1;
  for (const auto& a : axes) {
    if (__builtin_mul_overflow(p, a.size, &p) || p > readback::kMaxWorldSize) return -1;
  }
  return p;
}

std::string coords_text(const readback::RankCoords& c) {
  std::string out = "{";
  for (const auto& [name, v] : c) out += (out.size() > 1 ? ", " : "") + name + ": " + num(v);
  return out + "}";
}

// The coordinates of `rank`, sorted by axis name (as the reader returns them).
readback::RankCoords expected_coords(const std::vector<readback::PlanMeshAxis>& axes,
                                     std::int64_t rank) {
  readback::RankCoords c(axes.size());
  for (std::size_t a = axes.size(); a-- > 0;) {
    c[a] = {axes[a].name, rank % axes[a].size};
    rank /= axes[a].size;
  }
  std::sort(c.begin(), c.end());
  return c;
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
    const auto it = std::find_if(plan.dense.begin(), plan.dense.end(),
                                 [&](const auto& a) { return a.name == *plan.pipeline_axis; });
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
void check_shard(const PlanParam& p, std::size_t i, Report& report) {
  const readback::PlanShard& s = p.shards[i];
  const std::string where =
      "plan.json param " + p.name + " shard " + num(static_cast<std::int64_t>(i));
  const std::size_t nd = p.global_shape.size();
  if (s.local_shape.size() != nd || s.global_offset.size() != nd || s.padded_shape.size() != nd)
    return report.mismatch(where + ": local_shape " + shape_text(s.local_shape) +
                           ", global_offset " + shape_text(s.global_offset) + ", padded_shape " +
                           shape_text(s.padded_shape) + " do not have the " +
                           num(static_cast<std::int64_t>(nd)) + " dims of global_shape " +
                           shape_text(p.global_shape));
  for (std::size_t d = 0; d < nd; ++d) {
    const std::int64_t g = p.global_shape[d];
    const std::int64_t l = s.local_shape[d];
    const std::int64_t o = s.global_offset[d];
    if (l < 0 || o < 0 || l > g || o > g - l || s.padded_shape[d] < l)
      return report.mismatch(where + " dim " + num(static_cast<std::int64_t>(d)) + ": local " +
                             num(l) + " at offset " + num(o) + " (padded " +
                             num(s.padded_shape[d]) + ") does not fit global extent " + num(g));
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

// The stride of axis `a` of a mesh in rank numbers (row-major: the last axis varies fastest);
// rank / stride % size is a rank's coordinate. The meshes are checked (product = world size).
std::int64_t axis_stride(const std::vector<readback::PlanMeshAxis>& axes, std::size_t a) {
  std::int64_t stride = 1;
  for (std::size_t b = a + 1; b < axes.size(); ++b) stride *= axes[b].size;
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
void check_placements(const PlanFile& plan, const PlanParam& p, Report& report) {
  const auto& axes = p.mesh == "expert" ? plan.expert : plan.dense;
  const std::string where = "plan.json param " + p.name + " placements";
  const std::size_t nd = p.global_shape.size();
  if (p.placements.size() != axes.size())
    return report.mismatch(where + ": " + num(static_cast<std::int64_t>(p.placements.size())) +
                           " labels but mesh '" + p.mesh + "' has " +
                           num(static_cast<std::int64_t>(axes.size())) + " axes");
  std::vector<bool> split(nd, false);
  std::vector<std::size_t> replicated;  // axes of size > 1 labelled Replicate()
  for (std::size_t a = 0; a < axes.size(); ++a) {
    const auto dim = label_dim(p.placements[a]);
    if (!dim || *dim >= static_cast<std::int64_t>(nd))
      return report.mismatch(where + ": '" + p.placements[a] + "' on axis '" + axes[a].name +
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
  for (std::size_t i = 0; i < p.shards.size(); ++i) {
    const readback::PlanShard& s = p.shards[i];
    const std::string shard =
        " shard " + num(static_cast<std::int64_t>(i)) + " (ranks " + s.ranks.substr(0, 40) + ")";
    std::string error;
    const auto ranks = RankSet::parse(s.ranks, plan.world_size, error);
    if (!ranks || ranks->empty()) continue;  // the shard checks report it
    const std::int64_t first = ranks->first();
    for (const std::size_t a : replicated) {
      const std::int64_t stride = axis_stride(axes, a);
      const std::int64_t at = first / stride % axes[a].size;
      const std::int64_t other = first + ((at + 1) % axes[a].size - at) * stride;
      if (stage_of(other) != stage_of(first) || ranks->contains(other)) continue;
      return report.mismatch(where + ": axis '" + axes[a].name + "' is Replicate(), but" + shard +
                             " holds rank " + num(first) + " and not rank " + num(other) +
                             ", which differs from it only on that axis");
    }
    const auto held = shape_numel(s.local_shape);
    if (!held || *held == 0 || s.local_shape.size() != nd || s.global_offset.size() != nd) continue;
    for (std::size_t d = 0; d < nd; ++d) {
      if (split[d] || (s.local_shape[d] == p.global_shape[d] && s.global_offset[d] == 0)) continue;
      return report.mismatch(where + " " + labels_text(p.placements) + ": no axis splits dim " +
                             num(static_cast<std::int64_t>(d)) + ", but" + shard + " holds " +
                             num(s.local_shape[d]) + " of its " + num(p.global_shape[d]) +
                             " at offset " + num(s.global_offset[d]));
    }
  }
}

// The decimal segment in which `a` and `b` (same segment count) differ, if exactly one.
std::optional<std::size_t> differing_segment(const std::vector<std::string_view>& a,
                                             const std::vector<std::string_view>& b) {
  if (a.size() != b.size()) return std::nullopt;
  std::optional<std::size_t> at;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
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
void check_stacked(const PlanParam& p, const std::set<std::string_view>& planned, Report& report) {
  if (!p.stacked_from) return;
  const PlanParam::Stacked& s = *p.stacked_from;
  const std::string where = "plan.json param " + p.name + " stacked_from ";
  const auto n = static_cast<std::int64_t>(s.sources.size());
  if (s.count != n || p.global_shape.empty() || p.global_shape[0] != n)
    return report.mismatch(where + "count " + num(s.count) + ", " + num(n) +
                           " sources, global_shape " + shape_text(p.global_shape) +
                           ": all three must agree");
  if (n == 0) return;
  if (s.first != s.sources.front() || s.last != s.sources.back())
    report.mismatch(where + "first '" + s.first + "' / last '" + s.last +
                    "' are not the first and last sources");
  std::set<std::string_view> seen;
  for (const std::string& src : s.sources) {
    if (!seen.insert(src).second) report.mismatch(where + "lists '" + src + "' twice");
    if (planned.contains(src)) report.mismatch(where + "source '" + src + "' is a planned param");
  }
  if (n < 2) return;
  const auto first = segments(s.sources[0]);
  const auto at = differing_segment(first, segments(s.sources[1]));
  std::int64_t base = 0;
  // The index is a whole segment (`experts.17`) or the decimal end of one after a literal
  // prefix (Megatron's grouped-GEMM `linear_fc1.weight17`, docs/experts.md).
  const std::string_view seg = at ? first[*at] : std::string_view();
  const std::size_t digits = seg.find_last_not_of("0123456789") + 1;  // npos + 1 = 0
  const std::string_view prefix = seg.substr(0, digits);
  const std::string_view number = seg.substr(digits);
  const bool numeric = at && !number.empty() && number.size() < 10;
  if (!numeric)
    return report.mismatch(where + "sources '" + s.sources[0] + "' and '" + s.sources[1] +
                           "' do not differ in one expert index");
  for (const char c : number) base = base * 10 + (c - '0');
  for (std::int64_t k = 0; k < n; ++k) {
    auto want = first;
    const std::string index = std::to_string(base + k);
    const std::string segment = std::string(prefix) + index;
    want[*at] = segment;
    const auto got = segments(s.sources[static_cast<std::size_t>(k)]);
    if (got != want) {
      report.mismatch(where + "source " + num(k) + " is '" +
                      s.sources[static_cast<std::size_t>(k)] + "', not expert " + index +
                      " of the pattern of '" + s.sources[0] + "'");
      return;
    }
  }
}

void check_params(const PlanFile& plan, Report& report, bool& ok, bool meshes_ok) {
  std::set<std::string_view> names_of;
  for (const PlanParam& p : plan.params) names_of.insert(p.name);
  // alias_of in plan.json names another param, itself no alias, of the same dtype and shape.
  for (const PlanParam& p : plan.params) {
    if (!p.alias_of) continue;
    const auto src = std::find_if(plan.params.begin(), plan.params.end(),
                                  [&](const PlanParam& q) { return q.name == *p.alias_of; });
    if (src == plan.params.end() || src->alias_of || src->name == p.name || src->dtype != p.dtype ||
        src->global_shape != p.global_shape)
      report.mismatch("plan.json param " + p.name + " alias_of '" + *p.alias_of + "': " +
                      (src == plan.params.end() ? std::string("no such param")
                                                : "not a param of the same dtype and shape that "
                                                  "is no alias itself"));
  }
  std::set<std::string_view> names;
  for (const PlanParam& p : plan.params) {
    if (!names.insert(p.name).second)
      report.mismatch("plan.json param " + p.name + ": listed twice");
    if (!shape_numel(p.global_shape)) {
      report.mismatch("plan.json param " + p.name + " global_shape " + shape_text(p.global_shape) +
                      ": negative extent or 2^62+ elements");
      ok = false;
      continue;
    }
    if (p.stage < 0 || p.stage >= plan.num_stages)
      report.mismatch("plan.json param " + p.name + " stage " + num(p.stage) + " but " +
                      num(plan.num_stages) + " stages");
    if (p.mesh != "dense" && !(p.mesh == "expert" && !plan.expert.empty())) {
      report.mismatch("plan.json param " + p.name + " mesh '" + p.mesh +
                      "' is not a mesh of the plan");
      ok = false;
    }
    if (p.shards.empty()) report.mismatch("plan.json param " + p.name + ": no shards");
    check_stacked(p, names_of, report);
    for (std::size_t i = 0; i < p.shards.size(); ++i) check_shard(p, i, report);
    if (meshes_ok) check_placements(plan, p, report);
  }
  if (plan.summary_num_params != static_cast<std::int64_t>(plan.params.size()))
    report.mismatch("plan.json summary.num_params " + num(plan.summary_num_params) + " but " +
                    num(static_cast<std::int64_t>(plan.params.size())) + " params listed");
}

void check_header(const PlanFile& plan, const RankFile& f, const std::string& file,
                  Report& report) {
  if (f.world_size != plan.world_size)
    report.mismatch(file + " world_size " + num(f.world_size) + " but plan.json world_size " +
                    num(plan.world_size));
  const auto dense = expected_coords(plan.dense, f.rank);
  if (f.dense != dense)
    report.mismatch(file + " coords.dense " + coords_text(f.dense) + " but plan.json meshes give " +
                    coords_text(dense));
  if (plan.expert.empty() != !f.expert) {
    report.mismatch(file + " coords.expert " + (f.expert ? coords_text(*f.expert) : "null") +
                    " but plan.json meshes.expert is " + (plan.expert.empty() ? "null" : "set"));
  } else if (f.expert && *f.expert != expected_coords(plan.expert, f.rank)) {
    report.mismatch(file + " coords.expert " + coords_text(*f.expert) +
                    " but plan.json meshes give " +
                    coords_text(expected_coords(plan.expert, f.rank)));
  }
  std::int64_t stage = 0;
  for (const auto& [name, v] : dense)
    if (plan.pipeline_axis && name == *plan.pipeline_axis) stage = v;
  if (f.stage != stage)
    report.mismatch(file + " stage " + num(f.stage) + " but plan.json gives rank " + num(f.rank) +
                    " stage " + num(stage));
}

// One held param's repeated fields; adds it to `t` (aliases share storage).
void check_held(const Context& cx, const RankFile& f, const readback::RankParam& h,
                const std::string& file, readback::RankTotals& t) {
  Report& report = cx.report;
  const std::string where = file + " param " + h.name + " ";
  const auto n = shape_numel(h.local_shape);
  const auto padded = shape_numel(h.padded_shape);
  if (!n || !padded)
    return report.mismatch(where + "local_shape " + shape_text(h.local_shape) + " / padded_shape " +
                           shape_text(h.padded_shape) + ": negative extent or 2^62+ elements");
  if (h.numel != *n)
    report.mismatch(where + "numel " + num(h.numel) + " but local_shape " +
                    shape_text(h.local_shape) + " has " + num(*n));
  const std::int64_t bytes = sat_mul(*n, element_size(h.dtype));
  if (h.bytes != bytes)
    report.mismatch(where + "bytes " + num(h.bytes) + " but " + num(*n) + " elements of " +
                    std::string(dtype_name(h.dtype)) + " are " + num(bytes));
  if (h.stage != f.stage)
    report.mismatch(where + "stage " + num(h.stage) + " but the rank's stage " + num(f.stage));
  if (const PlanParam* p = cx.param(h.name)) {
    if (h.dtype != p->dtype)
      report.mismatch(where + "dtype " + std::string(dtype_name(h.dtype)) + " but plan.json " +
                      std::string(dtype_name(p->dtype)));
    if (h.global_shape != p->global_shape)
      report.mismatch(where + "global_shape " + shape_text(h.global_shape) + " but plan.json " +
                      shape_text(p->global_shape));
    if (h.stage != p->stage)
      report.mismatch(where + "stage " + num(h.stage) + " but plan.json stage " + num(p->stage));
    // The rank file names the same source as plan.json: a re-pointed alias would hand the
    // runtime another tensor's storage (hostile/verify_fields_unchecked).
    if (h.alias_of != p->alias_of)
      report.mismatch(where + "alias_of " + (h.alias_of ? "'" + *h.alias_of + "'" : "null") +
                      " but plan.json alias_of " +
                      (p->alias_of ? "'" + *p->alias_of + "'" : std::string("null")));
  }
  if (h.alias) return;
  t.param_bytes = sat_add(t.param_bytes, bytes);
  t.padded_param_bytes = sat_add(t.padded_param_bytes, sat_mul(*padded, element_size(h.dtype)));
  ++t.num_params;
}

// One of a rank file's totals: its value, the file (relative to OUTDIR) and its rank.
struct RankTotal {
  std::int64_t value;
  const std::string& file;
  std::int64_t rank;
};

// `total` within plan.json's per-rank statistic `s` (summary.`name`), and equal to
// its min / max when the rank is listed for it.
void check_stat(const PlanFile& plan, const readback::PlanRankStat& s, const char* name,
                const RankTotal& total, Report& report) {
  const std::int64_t value = total.value;
  const std::string& file = total.file;
  const std::int64_t rank = total.rank;
  std::string error;
  const auto lo = RankSet::parse(s.min_ranks, plan.world_size, error);
  const auto hi = RankSet::parse(s.max_ranks, plan.world_size, error);
  const std::string field = std::string("plan.json summary.") + name;
  if (!lo || !hi) return report.mismatch(field + ": " + error);
  if (value < s.min || value > s.max || (lo->contains(rank) && value != s.min) ||
      (hi->contains(rank) && value != s.max))
    report.mismatch(file + " totals " + num(value) + " bytes but " + field + " gives min " +
                    num(s.min) + " (ranks " + s.min_ranks + "), max " + num(s.max) + " (ranks " +
                    s.max_ranks + ")");
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

void check_rank_fields(const Context& cx, const RankFile& f, const std::string& file) {
  check_header(cx.plan, f, file, cx.report);
  std::set<std::string_view> names;
  readback::RankTotals t;
  for (const auto& h : f.params) {
    if (!names.insert(h.name).second)
      cx.report.mismatch(file + " param " + h.name + ": listed twice");
    check_held(cx, f, h, file, t);
  }
  const auto& ft = f.totals;
  if (ft.param_bytes != t.param_bytes || ft.padded_param_bytes != t.padded_param_bytes ||
      ft.num_params != t.num_params)
    cx.report.mismatch(file + " totals {param_bytes " + num(ft.param_bytes) +
                       ", padded_param_bytes " + num(ft.padded_param_bytes) + ", num_params " +
                       num(ft.num_params) + "} but its params sum to {" + num(t.param_bytes) +
                       ", " + num(t.padded_param_bytes) + ", " + num(t.num_params) + "}");
  check_stat(cx.plan, cx.plan.per_rank_param_bytes, "per_rank_param_bytes",
             {ft.param_bytes, file, f.rank}, cx.report);
  check_stat(cx.plan, cx.plan.per_rank_padded_param_bytes, "per_rank_padded_param_bytes",
             {ft.padded_param_bytes, file, f.rank}, cx.report);
}

}  // namespace shardc::verify
