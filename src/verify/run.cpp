// verify_outputs: the order of the checks of one verify run (verify/verify.hpp).
#include <algorithm>
#include <ostream>

#include "core/diagnostics.hpp"
#include "outputs/output_dir.hpp"
#include "support/print_error.hpp"
#include "verify/engine.hpp"

namespace shardc::verify {
namespace {

// Loads the sample's files and drops those that are listed but unreadable or
// hold another rank (a mismatch already recorded). false (exit 2) when one is
// malformed or not part of the compile.
bool load_sample(RankStore& store, std::vector<std::int64_t>& sample, const std::string& dir,
                 std::ostream& err) {
  std::vector<std::int64_t> kept;
  for (const std::int64_t rank : sample) {
    if (store.get(rank)) {
      kept.push_back(rank);
      continue;
    }
    if (!store.fatal.empty()) {
      print_error(err, DiagCode::EPlanFile, store.fatal);
      return false;
    }
    if (!store.listed(rank)) {
      print_error(err, DiagCode::EPlanFile,
                  "rank " + std::to_string(rank) + ": no rank file in '" + dir +
                      "' (not part of the compile: manifest.json lists ranks '" +
                      store.listed_text() + "')");
      return false;
    }
  }
  sample = std::move(kept);
  return true;
}

// Every sampled file must list the same buffers, in the same kinds.
bool same_buffers(Context& cx, const std::vector<std::int64_t>& sample) {
  const RankFile& first = *cx.store.get(sample.front());
  for (const std::int64_t rank : sample) {
    const RankFile& file = *cx.store.get(rank);
    bool same = file.buffers.size() == first.buffers.size();
    for (std::size_t i = 0; same && i < file.buffers.size(); ++i)
      same = file.buffers[i].kind == first.buffers[i].kind;
    if (!same) {
      cx.report.mismatch("rank " + std::to_string(rank) + ": buffers differ from rank " +
                         std::to_string(first.rank) + "'s");
      return false;
    }
  }
  return true;
}

// The smallest rank set whose files make every sampled rank verifiable:
// the sample plus the closure of each of its muon groups and FSDP2 units
// and the DP group of each flat optimizer buffer.
RankSet needed_ranks(RankStore& store, const std::vector<std::int64_t>& sample) {
  std::vector<std::int64_t> all(sample.begin(), sample.end());
  for (const std::int64_t rank : sample) {
    const RankFile* file = store.get(rank);
    if (!file) continue;
    for (const auto& buffer : file->buffers) {
      for (const auto& group : buffer.groups) {
        std::vector<std::vector<std::int64_t>> stages;
        for (const auto& batch : group.batches)
          for (const auto& stage : batch.stages) stages.push_back(stage.ranks);
        const auto closure = group_closure(rank, stages);
        all.insert(all.end(), closure.begin(), closure.end());
      }
      for (const auto& unit : buffer.units)
        all.insert(all.end(), unit.ranks.begin(), unit.ranks.end());
      for (const auto& flat : buffer.flat)
        all.insert(all.end(), flat.ranks.begin(), flat.ranks.end());
    }
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return RankSet::from_sorted(all);
}

}  // namespace

Outcome verify_outputs(const PlanFile& plan, const readback::ManifestFile& manifest,
                       const Request& request, Report& report, FileSystem& fs, std::ostream& err) {
  Outcome outcome;
  outcome.sample = request.sample;
  const std::string dir = path_join(request.out_dir, "ranks");
  RankStore store(fs, dir, manifest, report);
  Context cx{plan, {}, store, report, request.max_elements, {}};
  for (const auto& param : plan.params) cx.params.emplace(param.name, &param);
  if (!check_plan_fields(plan, manifest, report)) {
    outcome.status = Outcome::Status::PlanUnusable;
    outcome.sample.clear();
    return outcome;
  }
  store.on_load = [&cx](const RankFile& loaded, const std::string& file) {
    check_rank_fields(cx, loaded, file);
  };
  check_ranks_listing(dir, manifest, fs, report);
  std::vector<std::int64_t>& sample = outcome.sample;
  if (!load_sample(store, sample, dir, err)) {
    outcome.status = Outcome::Status::OutputsUnusable;
    return outcome;
  }
  check_manifest(cx, sample);
  if (request.after_load) {
    std::vector<std::int64_t> sorted = sample;
    std::sort(sorted.begin(), sorted.end());
    request.after_load(sorted);
  }
  if (!sample.empty() && same_buffers(cx, sample)) {
    const auto& buffers = store.get(sample.front())->buffers;
    for (std::size_t i = 0; i < buffers.size() && store.fatal.empty(); ++i) {
      ++report.buffers;
      if (buffers[i].kind == BufferKind::MuonAllGather) verify_muon(cx, i, sample);
      if (buffers[i].kind == BufferKind::Fsdp2AllGather) verify_fsdp2(cx, i, sample);
      if (buffers[i].kind == BufferKind::MegatronDistOpt ||
          buffers[i].kind == BufferKind::DeepSpeedZero)
        verify_flat(cx, i, sample);
    }
  }
  if (!store.fatal.empty()) {
    print_error(err, DiagCode::EPlanFile, store.fatal);
    outcome.status = Outcome::Status::OutputsUnusable;
    return outcome;
  }
  outcome.files_read = store.loaded();
  if (report.unverifiable > 0) outcome.needed = needed_ranks(store, sample);
  return outcome;
}

}  // namespace shardc::verify
