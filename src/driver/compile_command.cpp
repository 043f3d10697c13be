// `shardc compile`: plan.json and the rank files into OUTDIR.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ostream>
#include <set>

#include "backend/backend.hpp"
#include "driver/out_dir.hpp"
#include "driver/rank_option.hpp"
#include "driver/rank_writer.hpp"
#include "driver/session.hpp"
#include "driver/text_format.hpp"
#include "frontend/frontend.hpp"
#include "memory/memory.hpp"
#include "planner/check_plan.hpp"
#include "support/rank_set.hpp"
#include "support/utf8.hpp"

namespace shardc {
namespace {

using driver::path_join;

// The ranks whose files to write: --ranks, or every rank.
std::optional<std::vector<std::int64_t>> selected_ranks(const CompileOptions& opt, const Plan& plan,
                                                        std::ostream& err) {
  if (!opt.rank_files) return std::vector<std::int64_t>{};
  if (!opt.ranks) return driver::all_ranks(plan.world_size);
  return driver::parse_ranks_option(*opt.ranks, plan.world_size, opt.common.diag_format, err);
}

// --with-groups: the ranks of every buffer group of the selected ranks.
void add_group_ranks(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                     std::vector<std::int64_t>& ranks, std::ostream& out) {
  if (static_cast<std::int64_t>(ranks.size()) == plan.world_size) return;
  std::vector<std::int64_t> all = ranks;
  for (const std::int64_t rank : ranks) {
    const auto peers = buffer_peers(plan, buffers, rank);
    all.insert(all.end(), peers.begin(), peers.end());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  out << "--with-groups: " << all.size() - ranks.size()
      << " rank(s) added so every buffer group of the selected ranks is complete: --ranks "
      << RankSet::from_sorted(all).to_string() << "\n";
  ranks = std::move(all);
}

std::int64_t lower_median(std::vector<std::int64_t> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) / 2];
}

void print_summary(const Plan& plan, const RankBytes& bytes, const CompileOptions& opt,
                   std::size_t files, std::ostream& out) {
  std::int64_t count = 0;
  for (const auto& param : plan.params) {
    if (!param.alias_of) count += numel(param.global_shape);
  }
  const auto& param_bytes = bytes.param_bytes;
  const std::int64_t lo =
      param_bytes.empty() ? 0 : *std::min_element(param_bytes.begin(), param_bytes.end());
  const std::int64_t hi =
      param_bytes.empty() ? 0 : *std::max_element(param_bytes.begin(), param_bytes.end());
  out << "compiled " << printable(plan.model_name) << ": world size " << plan.world_size << " ("
      << driver::mesh_text(plan.dense) << "), " << plan.params.size() << " params ("
      << driver::group_digits(count) << " elements), " << plan.num_stages
      << (plan.num_stages == 1 ? " stage\n" : " stages\n");
  out << "per-rank param bytes: min " << binary_bytes_text(lo) << ", median "
      << binary_bytes_text(lower_median(param_bytes)) << ", max " << binary_bytes_text(hi) << "\n";
  out << "wrote " << path_join(opt.out_dir, "plan.json");
  if (opt.rank_files)
    out << " and " << files << " rank files in " << path_join(opt.out_dir, "ranks");
  out << "\n";
}

// What one compile writes and where: the plan and what was computed from it
// once for every file, the selected ranks, the output target.
struct CompileOutput {
  const Plan& plan;
  const RankBytes& bytes;
  const std::vector<PlannedBuffer>& buffers;
  const std::vector<std::int64_t>& ranks;
  const CompileOptions& opt;
  const driver::OutputTarget& target;
  FileSystem& fs;
  std::ostream& err;
};

// plan.json into the write directory; its digest into `digest`.
bool write_plan(const CompileOutput& out, const std::vector<BufferRankBytes>& buffer_bytes,
                const MemoryReport& memory, FileDigest& digest) {
  const std::string path = path_join(out.target.write_dir, "plan.json");
  const std::string text = render_plan_json(out.plan, out.bytes, buffer_bytes, &memory);
  digest = FileDigest{"plan.json", -1, static_cast<std::int64_t>(text.size()), sha256_hex(text)};
  std::string error;
  if (!out.fs.write_atomic(path, text, error)) {
    driver::print_error(out.err, DiagCode::EOutput, "cannot write '" + path + "': " + error);
    return false;
  }
  spdlog::debug("wrote {}", path);
  return true;
}

// The rank files into `write_dir/ranks`; stale ones removed (in place).
bool write_ranks(const CompileOutput& out, const MemoryReport& memory,
                 std::vector<FileDigest>& digests) {
  const std::string ranks_dir = path_join(out.target.write_dir, "ranks");
  if (!out.ranks.empty()) {
    if (!driver::prepare_ranks_dir(ranks_dir, out.fs, out.err)) return false;
    driver::RankWriteJob job{&out.plan,    &out.buffers,           &memory, out.ranks, ranks_dir,
                             out.opt.jobs, out.opt.common.progress};
    job.digests = &digests;
    if (!driver::write_rank_files(job, out.fs, out.err)) return false;
  }
  if (out.target.in_place) {
    std::set<std::string> keep;
    for (const auto rank : out.ranks) keep.insert(rank_file_name(rank, out.plan.world_size));
    driver::remove_stale_rank_files(ranks_dir, keep, out.fs, out.err);
  }
  return true;
}

// plan.json, the rank files and (last) manifest.json.
bool write_outputs(const CompileOutput& out) {
  const auto buffer_bytes = buffer_rank_bytes(out.plan, out.buffers);
  const MemoryReport memory = compute_memory(out.plan, buffer_bytes);  // once, for every file
  FileDigest plan_digest;
  std::vector<FileDigest> rank_digests;
  if (!write_plan(out, buffer_bytes, memory, plan_digest)) return false;
  if (!write_ranks(out, memory, rank_digests)) return false;
  const std::string ranks_text = RankSet::from_sorted(out.ranks).to_string();
  return driver::commit_output(
      out.target, render_manifest_json(out.plan, plan_digest, ranks_text, rank_digests), out.fs,
      out.err);
}

}  // namespace

ExitCode run_compile(const CompileOptions& opt, FileSystem& fs, std::ostream& out,
                     std::ostream& err) {
  driver::SessionScope scope(opt.common);
  driver::Session& session = *scope;
  CommonOptions common = opt.common;
  common.memory_report = true;  // plan.json and every rank file carry per-rank memory
  common.per_rank_memory = true;
  const ExitCode code = driver::plan_or_report(common, fs, session, err);
  if (code != ExitCode::Ok) return code;
  const Plan& plan = *session.plan;
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
  if (!write_outputs({plan, bytes, buffers, *ranks, opt, *target, fs, err})) {
    driver::abandon_output(*target, fs);
    return ExitCode::Usage;
  }
  if (!opt.quiet) print_summary(plan, bytes, opt, ranks->size(), out);
  return ExitCode::Ok;
}

}  // namespace shardc
