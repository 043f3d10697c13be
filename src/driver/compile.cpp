// `shardc compile`: plan.json and the rank files into OUTDIR.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ostream>
#include <set>

#include "driver/out_dir.hpp"
#include "driver/rank_option.hpp"
#include "driver/rank_writer.hpp"
#include "driver/session.hpp"
#include "driver/text_format.hpp"
#include "shardc/backend.hpp"
#include "shardc/check_plan.hpp"
#include "shardc/frontend.hpp"
#include "shardc/memory.hpp"
#include "shardc/rank_set.hpp"
#include "support/utf8.hpp"

namespace shardc {
namespace {

using driver::path_join;

// The ranks whose files to write: --ranks, or every rank.
std::optional<std::vector<std::int64_t>> selected_ranks(const CompileOptions& opt, const Plan& plan,
                                                        std::ostream& err) {
  if (!opt.rank_files) return std::vector<std::int64_t>{};
  if (!opt.ranks) return driver::all_ranks(plan.world_size);
  return driver::parse_ranks_option(*opt.ranks, plan.world_size, err);
}

// --with-groups: the ranks of every buffer group of the selected ranks.
void add_group_ranks(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                     std::vector<std::int64_t>& ranks, std::ostream& out) {
  if (static_cast<std::int64_t>(ranks.size()) == plan.world_size) return;
  std::vector<std::int64_t> all = ranks;
  for (const std::int64_t r : ranks) {
    const auto peers = buffer_peers(plan, buffers, r);
    all.insert(all.end(), peers.begin(), peers.end());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  out << "--with-groups: " << all.size() - ranks.size()
      << " rank(s) added so every buffer group of the selected ranks is complete: --ranks "
      << RankSet::from_sorted(all).to_string() << "\n";
  ranks = std::move(all);
}

std::int64_t lower_median(std::vector<std::int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

void print_summary(const Plan& plan, const RankBytes& bytes, const CompileOptions& opt,
                   std::size_t files, std::ostream& out) {
  std::int64_t count = 0;
  for (const auto& p : plan.params) {
    if (!p.alias_of) count += numel(p.global_shape);
  }
  const auto& b = bytes.param_bytes;
  const std::int64_t lo = b.empty() ? 0 : *std::min_element(b.begin(), b.end());
  const std::int64_t hi = b.empty() ? 0 : *std::max_element(b.begin(), b.end());
  out << "compiled " << printable(plan.model_name) << ": world size " << plan.world_size << " ("
      << driver::mesh_text(plan.dense) << "), " << plan.params.size() << " params ("
      << driver::group_digits(count) << " elements), " << plan.num_stages
      << (plan.num_stages == 1 ? " stage\n" : " stages\n");
  out << "per-rank param bytes: min " << driver::human_bytes(lo) << ", median "
      << driver::human_bytes(lower_median(b)) << ", max " << driver::human_bytes(hi) << "\n";
  out << "wrote " << path_join(opt.out_dir, "plan.json");
  if (opt.rank_files)
    out << " and " << files << " rank files in " << path_join(opt.out_dir, "ranks");
  out << "\n";
}

// plan.json into `dir`; its digest into `digest`.
bool write_plan(const Plan& plan, const RankBytes& bytes,
                const std::vector<BufferRankBytes>& buffer_bytes, const MemoryReport& memory,
                const std::string& dir, FileDigest& digest, FileSystem& fs, std::ostream& err) {
  const std::string path = path_join(dir, "plan.json");
  const std::string text = render_plan_json(plan, bytes, buffer_bytes, &memory);
  digest = FileDigest{"plan.json", -1, static_cast<std::int64_t>(text.size()), sha256_hex(text)};
  std::string error;
  if (!fs.write_atomic(path, text, error)) {
    driver::print_error(err, "cannot write '" + path + "': " + error);
    return false;
  }
  spdlog::debug("wrote {}", path);
  return true;
}

// The rank files into `t.write_dir/ranks`; stale ones removed (in place).
bool write_ranks(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                 const MemoryReport& memory, const std::vector<std::int64_t>& ranks,
                 const CompileOptions& opt, const driver::OutputTarget& t,
                 std::vector<FileDigest>& digests, FileSystem& fs, std::ostream& err) {
  const std::string ranks_dir = path_join(t.write_dir, "ranks");
  if (!ranks.empty()) {
    if (!driver::prepare_ranks_dir(ranks_dir, fs, err)) return false;
    driver::RankWriteJob job{&plan,    &buffers,           &memory, ranks, ranks_dir,
                             opt.jobs, opt.common.progress};
    job.digests = &digests;
    if (!driver::write_rank_files(job, fs, err)) return false;
  }
  if (t.in_place) {
    std::set<std::string> keep;
    for (const auto r : ranks) keep.insert(rank_file_name(r, plan.world_size));
    driver::remove_stale_rank_files(ranks_dir, keep, fs, err);
  }
  return true;
}

// plan.json, the rank files and (last) manifest.json.
bool write_outputs(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                   const std::vector<std::int64_t>& ranks, const CompileOptions& opt,
                   const driver::OutputTarget& t, const RankBytes& bytes, FileSystem& fs,
                   std::ostream& err) {
  const auto buffer_bytes = buffer_rank_bytes(plan, buffers);
  const MemoryReport memory = compute_memory(plan, buffer_bytes);  // once, for every file
  FileDigest plan_digest;
  std::vector<FileDigest> rank_digests;
  if (!write_plan(plan, bytes, buffer_bytes, memory, t.write_dir, plan_digest, fs, err))
    return false;
  if (!write_ranks(plan, buffers, memory, ranks, opt, t, rank_digests, fs, err)) return false;
  const std::string ranks_text = RankSet::from_sorted(ranks).to_string();
  return driver::commit_output(t, render_manifest_json(plan, plan_digest, ranks_text, rank_digests),
                               fs, err);
}

}  // namespace

ExitCode run_compile(const CompileOptions& opt, FileSystem& fs, std::ostream& out,
                     std::ostream& err) {
  driver::SessionScope scope(opt.common);
  driver::Session& s = *scope;
  CommonOptions common = opt.common;
  common.memory_report = true;  // plan.json and every rank file carry per-rank memory
  common.per_rank_memory = true;
  const ExitCode code = driver::plan_or_report(common, fs, s, err);
  if (code != ExitCode::Ok) return code;
  const Plan& plan = *s.plan;
  auto ranks = selected_ranks(opt, plan, err);
  if (!ranks) return ExitCode::Usage;
  const RankBytes bytes = rank_bytes(plan);
  const std::vector<PlannedBuffer> buffers = plan_buffers(plan);  // once, shared by the writers
  if (opt.common.check_invariants || invariants_checked_always()) {
    // First and last rank of the selection: the layouts agree with the shards.
    std::vector<std::int64_t> sample;
    if (!ranks->empty()) sample = {ranks->front(), ranks->back()};
    assert_buffer_invariants(plan, buffers, sample);
  }
  const auto target = driver::begin_output(opt.out_dir, opt.force, fs, err);
  if (!target) return ExitCode::Usage;
  if (opt.with_groups) add_group_ranks(plan, buffers, *ranks, out);
  if (!write_outputs(plan, buffers, *ranks, opt, *target, bytes, fs, err)) {
    driver::abandon_output(*target, fs);
    return ExitCode::Usage;
  }
  print_summary(plan, bytes, opt, ranks->size(), out);
  return ExitCode::Ok;
}

}  // namespace shardc
