// Back end: plan to JSON (contract §6) and diagnostics to text/JSON/GitHub
// annotations. The only code that includes nlohmann/json for output.
// Output is byte-identical for identical inputs: fixed key order, no
// timestamps, integers only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/diagnostics.hpp"
#include "core/plan.hpp"
#include "memory/memory.hpp"
#include "outputs/output_dir.hpp"
#include "planner/buffers.hpp"
#include "reshard/reshard.hpp"

namespace shardc {

/// `plan.json` (contract §6.1): meshes, every param with placements, rule,
/// stage, alias, stacked sources and its distinct shards with rank sets,
/// the warnings, tie sync groups and the per-rank byte summary.
/// `buffer_bytes` adds `summary.per_rank_buffer_bytes` (one entry per layout);
/// `memory` adds `summary.per_rank_memory` (training assumptions, min /
/// median / max per memory kind and total, the peak ranks).
std::string render_plan_json(const Plan& plan, const RankBytes& bytes,
                             const std::vector<BufferRankBytes>& buffer_bytes = {},
                             const MemoryReport* memory = nullptr);

/// `ranks/rank-<r>.json` (contract §6.2, §6.3) for one rank: coords, every param
/// the rank holds, buffer layouts, totals. Cost O(params) for the rank.
/// Plans the buffers and the memory report itself; a writer of many rank
/// files passes the buffers planned once (`plan_buffers`) and the rank's
/// entry of `compute_memory` to the second overload (`memory`: bytes per
/// kind and total, src/memory/memory.hpp).
std::string render_rank_json(const Plan& plan, std::int64_t rank);
std::string render_rank_json(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                             std::int64_t rank, const RankMemory& memory);

/// The `local_attributes` member of `rank`'s file (contract §6.7; what a
/// runtime tells each sharded module: attention head counts, expert ids,
/// vocab ranges; shardc/local_attributes.hpp), the value text exactly as
/// the rank file holds it after `"local_attributes":`. verify --against
/// compares it. Cost O(modules).
std::string render_local_attributes_json(const Plan& plan, std::int64_t rank);

/// Renders many rank files of one plan, byte-identical to `render_rank_json`.
/// Built once per compile (O(params x stages)) and shared by the writer
/// threads (`render` is thread-safe): each param's rank-independent members
/// are rendered once, and sections whose bytes depend only on the rank's
/// coordinates on the axes splitting them (the `params` array, a muon
/// group's sizes) once per such shard class, when ranks share classes; the
/// memoized text is bounded (`memo_budget_bytes`, default 256 MiB; 0
/// memoizes nothing).
class RankRenderer {
 public:
  RankRenderer(const Plan& plan, const std::vector<PlannedBuffer>& buffers);
  RankRenderer(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
               std::size_t memo_budget_bytes);
  ~RankRenderer();
  RankRenderer(const RankRenderer&) = delete;
  RankRenderer& operator=(const RankRenderer&) = delete;

  /// Replaces `out` with `rank`'s file (`memory`: its entry of
  /// `compute_memory`); reusing one `out` per thread reuses its capacity.
  void render(std::int64_t rank, const RankMemory& memory, std::string& out) const;

 private:
  struct Impl;
  std::unique_ptr<const Impl> impl_;
};

/// `shardc memory --format json` (schemas/memory.schema.json): training
/// assumptions, which layouts were planned, per stage min / median / max of
/// every kind and the total, the peak rank (coords, breakdown), `budget_bytes`
/// and `fits` (null without a budget), and the breakdown of each of `ranks`.
std::string render_memory_json(const Plan& plan, const MemoryReport& memory,
                               std::optional<std::int64_t> budget,
                               const std::vector<std::int64_t>& ranks);

struct CommReport;
/// `shardc cost --format json` (schemas/cost.schema.json): the assumptions, the
/// groups (axes, size, node crossing), min / median / max over ranks per
/// collective and per (role, collective), the peak rank, and every class of
/// ranks with its terms (src/comm/comm.hpp). Bytes sent per rank per step.
std::string render_cost_json(const Plan& plan, const CommReport& report);

/// The reshard listing (`shardc.reshard/v1`, schemas/reshard.schema.json):
/// both plans' labels and world sizes, `ranks_per_node`, byte totals, per-rank
/// min/median/max of destination, moved and in-place bytes, then for every
/// rank of `ranks` (ascending, < B's world size) each B param it holds with
/// its reads (source rank, global box, offsets in the destination's and the
/// source's local tensors, bytes). Cost O(listed reads) after the index.
std::string render_reshard_json(const reshard::Layout& from, const reshard::Layout& to,
                                const reshard::Result& result, const reshard::Options& opt,
                                const std::vector<std::int64_t>& ranks);
/// One output file as written: its path relative to OUTDIR, size and
/// sha256 (hex), computed from the bytes in memory (never re-read).
struct FileDigest {
  std::string path;        ///< "plan.json", "ranks/rank-03.json"
  std::int64_t rank = -1;  ///< the rank of a rank file; -1 for plan.json
  std::int64_t bytes = 0;
  std::string sha256;
};

/// `manifest.json` (`shardc.manifest/v1`, schemas/manifest.schema.json):
/// the inputs' digests, world size, plan.json's digest, the rank-file set
/// (`ranks_text` in rank-set syntax; "" with --no-rank-files) and every rank
/// file's digest, ascending by rank. Byte-identical for identical inputs.
std::string render_manifest_json(const Plan& plan, const FileDigest& plan_file,
                                 const std::string& ranks_text,
                                 const std::vector<FileDigest>& rank_files);

/// Source texts by path, so text diagnostics can quote the offending line.
using SourceMap = std::map<std::string, std::string>;

/// Compiler-style text: `file:line:col: error[CODE]: message`, the source
/// line with a caret, then `  hint: ...`; a final count line.
std::string render_diagnostics_text(const DiagnosticSink& sink, const SourceMap& sources);
/// A JSON array of {code, severity, message, file, line, column, hint, param, rule}.
std::string render_diagnostics_json(const DiagnosticSink& sink);
/// GitHub workflow commands: `::error file=F,line=L,col=C,title=CODE::message`.
std::string render_diagnostics_github(const DiagnosticSink& sink);

}  // namespace shardc
