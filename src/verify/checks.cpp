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
  for (const auto& e : manifest.rank_files) entries_.emplace(e.rank, &e);
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
  Loaded& l = files_.emplace(rank, Loaded{std::move(*file), {}}).first->second;
  l.by_name.reserve(l.file.params.size());
  for (const auto& p : l.file.params) l.by_name.emplace(p.name, &p);  // the first wins
  return &l.file;
}

const readback::RankParam* RankStore::held(const RankFile& f, std::string_view name) const {
  if (const auto it = files_.find(f.rank); it != files_.end() && &it->second.file == &f) {
    const auto p = it->second.by_name.find(name);
    return p == it->second.by_name.end() ? nullptr : p->second;
  }
  for (const auto& p : f.params)
    if (p.name == name) return &p;
  return nullptr;
}

namespace {

std::string at(const RankFile& f, std::size_t b) {
  return "rank " + std::to_string(f.rank) + " buffer " + std::to_string(b);
}

std::vector<std::string_view> communicated(const readback::Buffer& buf) {
  std::vector<std::string_view> out;
  for (const auto& g : buf.groups) out.insert(out.end(), g.params.begin(), g.params.end());
  for (const auto& u : buf.units)
    for (const auto& p : u.params) out.push_back(p.name);
  for (const auto& f : buf.flat) {  // a stacked param is several pieces of one buffer
    std::set<std::string_view> names;
    for (const auto& e : f.entries) names.insert(e.name);
    out.insert(out.end(), names.begin(), names.end());
  }
  return out;
}

const std::vector<readback::PlanMeshAxis>& mesh_of(const PlanFile& plan, const std::string& mesh) {
  return mesh == "expert" ? plan.expert : plan.dense;
}

std::vector<std::int64_t> coords_of(const std::vector<readback::PlanMeshAxis>& axes,
                                    std::int64_t rank) {
  std::vector<std::int64_t> c(axes.size(), 0);
  for (std::size_t a = axes.size(); a-- > 0;) {
    c[a] = rank % axes[a].size;
    rank /= axes[a].size;
  }
  return c;
}

// The greedy owner assignment (hyper-parallel build_owner_by_size).
std::vector<std::vector<std::int64_t>> expected_owners(const Context& cx,
                                                       const readback::MuonGroup& g,
                                                       const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> n;
  for (const auto& name : g.params)
    n.push_back(cx.param(name) ? numel(cx.param(name)->global_shape) : 0);
  std::vector<std::size_t> order(n.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return n[a] > n[b]; });
  std::int64_t grid = 1;
  for (std::int64_t s : sizes) grid *= s;
  // Only the lowest min(grid, params) coordinates can ever be least loaded
  // (an untouched one below that always ties at 0 with a lower index), so
  // the loop is bounded by the params listed, not by the mesh sizes read.
  std::set<std::pair<std::int64_t, std::int64_t>> load;
  const auto slots = std::min<std::int64_t>(grid, static_cast<std::int64_t>(n.size()));
  for (std::int64_t c = 0; c < slots; ++c) load.insert({0, c});
  std::vector<std::vector<std::int64_t>> out(n.size());
  for (std::size_t i : order) {
    auto best = *load.begin();
    load.erase(load.begin());
    std::int64_t rem = best.second;
    out[i].assign(sizes.size(), 0);
    for (std::size_t k = sizes.size(); k-- > 0;) {
      out[i][k] = rem % sizes[k];
      rem /= sizes[k];
    }
    best.first += n[i];
    load.insert(best);
  }
  return out;
}

void check_owners(Context& cx, const RankFile& f, const readback::MuonGroup& g) {
  const auto& axes = mesh_of(cx.plan, g.mesh);
  const auto coords = coords_of(axes, f.rank);
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> mine;
  for (const auto& name : g.replicate_axes) {
    const auto it =
        std::find_if(axes.begin(), axes.end(), [&](const auto& a) { return a.name == name; });
    if (it == axes.end())
      return cx.report.mismatch("rank " + std::to_string(f.rank) + " muon group '" + g.key +
                                "': replicate axis " + name + " not in the mesh");
    sizes.push_back(it->size);
    mine.push_back(coords[static_cast<std::size_t>(it - axes.begin())]);
  }
  const std::string where = "rank " + std::to_string(f.rank) + " muon group '" + g.key + "'";
  if (mine != g.replicate_coord)
    return cx.report.mismatch(where + ": replicate_coord " + shape_text(g.replicate_coord) +
                              ", expected " + shape_text(mine));
  // The reader gives one owner per param, in the params' order, with is_owner
  // = (owner == replicate_coord): only the owner coordinates are stated.
  const auto want = expected_owners(cx, g, sizes);
  for (std::size_t i = 0; i < g.owners.size(); ++i) {
    const auto& o = g.owners[i];
    if (o.owner != want[i])
      return cx.report.mismatch(where + " param " + o.param + ": owner " + shape_text(o.owner) +
                                ", expected " + shape_text(want[i]));
  }
}

// The reader gives one slice-back per param, its narrows from the stages'
// split sizes (muon_slice_step): applied to the global box they must cut out
// the piece this rank holds.
void check_slices(Context& cx, const RankFile& f, const readback::MuonGroup& g) {
  for (const auto& sb : g.slice_back) {
    const std::string where = "rank " + std::to_string(f.rank) + " muon group '" + g.key +
                              "' param " + sb.param + " slice_back";
    const PlanParam* pp = cx.param(sb.param);
    if (!pp) return cx.report.mismatch(where + ": not in plan.json");
    // The reader lists only params the file holds.
    const readback::RankParam& held = *cx.held(f, sb.param);
    ++cx.report.slice_checks;
    Box b{Shape(pp->global_shape.size(), 0), pp->global_shape};
    for (const SliceStep& s : sb.steps) {
      const auto d = static_cast<std::size_t>(s.dim);
      if (s.dim < 0 || d >= b.shape.size() || s.start < 0 || s.length < 0 ||
          s.start + s.length > b.shape[d])
        return cx.report.mismatch(where + ": narrow(" + std::to_string(s.dim) + ", " +
                                  std::to_string(s.start) + ", " + std::to_string(s.length) +
                                  ") out of " + box_text(b));
      b.offset[d] += s.start;
      b.shape[d] = s.length;
    }
    const Box own{held.global_offset, held.local_shape};
    if (b.shape != own.shape || (!is_empty(own) && b.offset != own.offset))
      return cx.report.mismatch(where + ": gives " + box_text(b) + ", this rank holds " +
                                box_text(own));
  }
}

}  // namespace

void check_owners_and_slices(Context& cx, const RankFile& f, const readback::MuonGroup& g) {
  check_owners(cx, f, g);
  check_slices(cx, f, g);
}

void check_coverage(Context& cx, const RankFile& f, std::size_t b) {
  const readback::Buffer& buf = f.buffers[b];
  std::unordered_map<std::string_view, int> seen;
  for (const auto name : communicated(buf)) ++seen[name];
  for (const auto& name : buf.not_communicated) seen[name] += 100;
  const bool muon = buf.kind == BufferKind::MuonAllGather;
  for (const auto& p : f.params) {
    const auto it = seen.find(p.name);
    const int n = it == seen.end() ? 0 : it->second;
    const bool must_skip = p.alias || (muon && p.local_shape.size() < 2);
    if (n != 1 && n != 100)
      cx.report.mismatch(at(f, b) + " param " + p.name + ": listed " +
                         std::to_string(n % 100 + n / 100) +
                         " times in groups/units and not_communicated");
    else if (must_skip && n == 1)
      cx.report.mismatch(at(f, b) + " param " + p.name +
                         ": an alias or ndim < 2 param is communicated");
    if (it != seen.end()) seen.erase(it);
  }
  if (!seen.empty()) {
    std::string_view first = seen.begin()->first;  // the smallest name left
    for (const auto& kv : seen) first = std::min(first, kv.first);
    cx.report.mismatch(at(f, b) + ": lists " + std::string(first) +
                       ", which the rank does not hold");
  }
}

}  // namespace shardc::verify
