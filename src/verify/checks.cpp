// `shardc verify`: the report, the rank-file store, and the per-rank checks
// that need no simulation (coverage, muon owners, slice-back).
#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_map>

#include "backend/backend.hpp"
#include "outputs/output_dir.hpp"
#include "verify/engine.hpp"

namespace shardc::verify {

void Report::mismatch(const std::string& what) {
  ++num_mismatches;
  if (static_cast<int>(mismatches.size()) < max_listed) mismatches.push_back(what);
}

void Report::warning(const std::string& what) {
  ++num_warnings;
  if (static_cast<int>(warnings.size()) < max_listed) warnings.push_back(what);
}

void Report::not_verifiable(const std::string& what) {
  ++unverifiable;
  if (static_cast<int>(unverifiable_list.size()) < max_listed) unverifiable_list.push_back(what);
}

RankStore::RankStore(FileSystem& fs, std::string ranks_dir, const readback::ManifestFile& manifest,
                     Report& report)
    : fs_(fs),
      dir_(std::move(ranks_dir)),
      world_(manifest.world_size),
      report_(report),
      listed_text_(manifest.ranks) {
  for (const auto& entry : manifest.rank_files) entries_.emplace(entry.rank, &entry);
}

const RankFile* RankStore::get(std::int64_t rank) {
  if (const auto it = files_.find(rank); it != files_.end()) return &it->second.file;
  const auto entry = entries_.find(rank);
  if (missing_.contains(rank) || entry == entries_.end()) return nullptr;
  const std::string path = path_join(dir_, rank_file_name(rank, world_));
  std::string error;
  // The manifest bounds what to read (plus slack for a changed file's report).
  const auto text = fs_.read_regular(path, read_limit(entry->second->bytes), error);
  if (!text) {
    report_.mismatch(entry->second->path +
                     " is listed in manifest.json but cannot be read: " + error);
    missing_.insert(rank);
    return nullptr;
  }
  if (const std::string change = digest_change(*entry->second, *text); !change.empty())
    report_.mismatch(change);
  auto file = readback::parse_rank_file(*text, error);
  if (!file) {
    if (fatal.empty()) fatal = "'" + path + "': " + error;
    missing_.insert(rank);
    return nullptr;
  }
  if (file->rank != rank) {
    report_.mismatch(entry->second->path + " rank " + std::to_string(file->rank) +
                     " but its name and manifest.json say " + std::to_string(rank));
    missing_.insert(rank);
    return nullptr;
  }
  if (on_load) on_load(*file, entry->second->path);
  Loaded& loaded = files_.emplace(rank, Loaded{std::move(*file), {}}).first->second;
  loaded.by_name.reserve(loaded.file.params.size());
  for (const auto& param : loaded.file.params)
    loaded.by_name.emplace(param.name, &param);  // the first wins
  return &loaded.file;
}

const readback::RankParam* RankStore::held(const RankFile& rank_file, std::string_view name) const {
  if (const auto it = files_.find(rank_file.rank);
      it != files_.end() && &it->second.file == &rank_file) {
    const auto found = it->second.by_name.find(name);
    return found == it->second.by_name.end() ? nullptr : found->second;
  }
  for (const auto& param : rank_file.params)
    if (param.name == name) return &param;
  return nullptr;
}

namespace {

std::string at(const RankFile& rank_file, std::size_t buffer_index) {
  return "rank " + std::to_string(rank_file.rank) + " buffer " + std::to_string(buffer_index);
}

std::vector<std::string_view> communicated(const readback::Buffer& buf) {
  std::vector<std::string_view> out;
  for (const auto& group : buf.groups)
    out.insert(out.end(), group.params.begin(), group.params.end());
  for (const auto& unit : buf.units)
    for (const auto& param : unit.params) out.push_back(param.name);
  for (const auto& flat : buf.flat) {  // a stacked param is several pieces of one buffer
    std::set<std::string_view> names;
    for (const auto& entry : flat.entries) names.insert(entry.name);
    out.insert(out.end(), names.begin(), names.end());
  }
  return out;
}

const std::vector<readback::PlanMeshAxis>& mesh_of(const PlanFile& plan, const std::string& mesh) {
  return mesh == "expert" ? plan.expert : plan.dense;
}

std::vector<std::int64_t> coords_of(const std::vector<readback::PlanMeshAxis>& axes,
                                    std::int64_t rank) {
  std::vector<std::int64_t> coords(axes.size(), 0);
  for (std::size_t a = axes.size(); a-- > 0;) {
    coords[a] = rank % axes[a].size;
    rank /= axes[a].size;
  }
  return coords;
}

// The greedy owner assignment (hyper-parallel build_owner_by_size).
std::vector<std::vector<std::int64_t>> expected_owners(const Context& cx,
                                                       const readback::MuonGroup& group,
                                                       const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> numels;
  for (const auto& name : group.params)
    numels.push_back(cx.param(name) ? numel(cx.param(name)->global_shape) : 0);
  std::vector<std::size_t> order(numels.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t left, std::size_t right) {
    return numels[left] > numels[right];
  });
  std::int64_t grid = 1;
  for (std::int64_t size : sizes) grid *= size;
  // Only the lowest min(grid, params) coordinates can ever be least loaded
  // (an untouched one below that always ties at 0 with a lower index), so
  // the loop is bounded by the params listed, not by the mesh sizes read.
  std::set<std::pair<std::int64_t, std::int64_t>> load;
  const auto slots = std::min<std::int64_t>(grid, static_cast<std::int64_t>(numels.size()));
  for (std::int64_t c = 0; c < slots; ++c) load.insert({0, c});
  std::vector<std::vector<std::int64_t>> out(numels.size());
  for (std::size_t i : order) {
    auto best = *load.begin();
    load.erase(load.begin());
    std::int64_t rem = best.second;
    out[i].assign(sizes.size(), 0);
    for (std::size_t k = sizes.size(); k-- > 0;) {
      out[i][k] = rem % sizes[k];
      rem /= sizes[k];
    }
    best.first += numels[i];
    load.insert(best);
  }
  return out;
}

void check_owners(Context& cx, const RankFile& rank_file, const readback::MuonGroup& group) {
  const auto& axes = mesh_of(cx.plan, group.mesh);
  const auto coords = coords_of(axes, rank_file.rank);
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> mine;
  for (const auto& name : group.replicate_axes) {
    const auto it =
        std::find_if(axes.begin(), axes.end(), [&](const auto& axis) { return axis.name == name; });
    if (it == axes.end())
      return cx.report.mismatch("rank " + std::to_string(rank_file.rank) + " muon group '" +
                                group.key + "': replicate axis " + name + " not in the mesh");
    sizes.push_back(it->size);
    mine.push_back(coords[static_cast<std::size_t>(it - axes.begin())]);
  }
  const std::string where =
      "rank " + std::to_string(rank_file.rank) + " muon group '" + group.key + "'";
  if (mine != group.replicate_coord)
    return cx.report.mismatch(where + ": replicate_coord " + shape_text(group.replicate_coord) +
                              ", expected " + shape_text(mine));
  // The reader gives one owner per param, in the params' order, with is_owner
  // = (owner == replicate_coord): only the owner coordinates are stated.
  const auto want = expected_owners(cx, group, sizes);
  for (std::size_t i = 0; i < group.owners.size(); ++i) {
    const auto& stated = group.owners[i];
    if (stated.owner != want[i])
      return cx.report.mismatch(where + " param " + stated.param + ": owner " +
                                shape_text(stated.owner) + ", expected " + shape_text(want[i]));
  }
}

// The reader gives one slice-back per param, its narrows from the stages'
// split sizes (muon_slice_step): applied to the global box they must cut out
// the piece this rank holds.
void check_slices(Context& cx, const RankFile& rank_file, const readback::MuonGroup& group) {
  for (const auto& sb : group.slice_back) {
    const std::string where = "rank " + std::to_string(rank_file.rank) + " muon group '" +
                              group.key + "' param " + sb.param + " slice_back";
    const PlanParam* pp = cx.param(sb.param);
    if (!pp) return cx.report.mismatch(where + ": not in plan.json");
    // The reader lists only params the file holds.
    const readback::RankParam& held = *cx.held(rank_file, sb.param);
    ++cx.report.slice_checks;
    Box box{Shape(pp->global_shape.size(), 0), pp->global_shape};
    for (const SliceStep& step : sb.steps) {
      const auto d = static_cast<std::size_t>(step.dim);
      if (step.dim < 0 || d >= box.shape.size() || step.start < 0 || step.length < 0 ||
          step.start + step.length > box.shape[d])
        return cx.report.mismatch(where + ": narrow(" + std::to_string(step.dim) + ", " +
                                  std::to_string(step.start) + ", " + std::to_string(step.length) +
                                  ") out of " + box_text(box));
      box.offset[d] += step.start;
      box.shape[d] = step.length;
    }
    const Box own{held.global_offset, held.local_shape};
    if (box.shape != own.shape || (!is_empty(own) && box.offset != own.offset))
      return cx.report.mismatch(where + ": gives " + box_text(box) + ", this rank holds " +
                                box_text(own));
  }
}

}  // namespace

void check_owners_and_slices(Context& cx, const RankFile& rank_file,
                             const readback::MuonGroup& group) {
  check_owners(cx, rank_file, group);
  check_slices(cx, rank_file, group);
}

void check_coverage(Context& cx, const RankFile& rank_file, std::size_t buffer_index) {
  const readback::Buffer& buf = rank_file.buffers[buffer_index];
  std::unordered_map<std::string_view, int> seen;
  for (const auto name : communicated(buf)) ++seen[name];
  for (const auto& name : buf.not_communicated) seen[name] += 100;
  const bool muon = buf.kind == BufferKind::MuonAllGather;
  for (const auto& param : rank_file.params) {
    const auto it = seen.find(param.name);
    const int listed = it == seen.end() ? 0 : it->second;
    const bool must_skip = param.alias || (muon && param.local_shape.size() < 2);
    if (listed != 1 && listed != 100)
      cx.report.mismatch(at(rank_file, buffer_index) + " param " + param.name + ": listed " +
                         std::to_string(listed % 100 + listed / 100) +
                         " times in groups/units and not_communicated");
    else if (must_skip && listed == 1)
      cx.report.mismatch(at(rank_file, buffer_index) + " param " + param.name +
                         ": an alias or ndim < 2 param is communicated");
    if (it != seen.end()) seen.erase(it);
  }
  if (!seen.empty()) {
    std::string_view first = seen.begin()->first;  // the smallest name left
    for (const auto& kv : seen) first = std::min(first, kv.first);
    cx.report.mismatch(at(rank_file, buffer_index) + ": lists " + std::string(first) +
                       ", which the rank does not hold");
  }
}

}  // namespace shardc::verify
