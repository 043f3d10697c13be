// The sharding recipe after parsing (SPEC §4): meshes, placement rules,
// expert stacking, ties, pipeline stages, FSDP/HSDP and buffer layouts.
//
// The front end checks syntax (types, unknown keys, placement spelling,
// pattern syntax) and records a SourceLoc on every node; the planner checks
// meaning (axes exist, dims in range, products match).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardc/diagnostics.hpp"
#include "shardc/pattern.hpp"

namespace shardc {

/// How one tensor dim of length L is split over n ranks (SPEC §5.1).
enum class SplitRule {
  Chunk,     ///< torch.chunk / DTensor Shard / FSDP2: c = ceil(L/n)
  Balanced,  ///< hyper-parallel: q, r = divmod(L, n); first r ranks get q+1
  Even,      ///< error unless L % n == 0 (then as Chunk)
};

/// "chunk", "balanced", "even".
const char* split_rule_name(SplitRule r);

struct MeshAxis {
  std::string name;
  std::int64_t size = 1;
  SourceLoc loc;
};

/// A device mesh, row-major: the first axis is the slowest-varying.
struct Mesh {
  std::vector<MeshAxis> axes;
  SourceLoc loc;
  /// Index of the axis named `name`, or -1.
  [[nodiscard]] int find(std::string_view name) const;
};

/// A placement as written in the recipe. `dim` may be negative (counted from
/// the end, as torch does); the planner normalizes it against the param's ndim.
struct Placement {
  enum class Kind { Replicate, Shard, Partial };
  Kind kind = Kind::Replicate;
  int dim = 0;            ///< Shard only
  std::string reduce_op;  ///< Partial only: "sum" (default), "avg", "min", "max"
  std::string text;       ///< as written, for messages
};

/// Parses torch spellings (`Shard(0)`, `Shard(-1)`, `Replicate()`,
/// `Partial()`, `Partial(sum)`) and hyper-parallel DSL spellings (`shard(0)`,
/// `replicate`, `partial`). nullopt on anything else.
std::optional<Placement> parse_placement(std::string_view text);

/// `{axis: placement}` as written, in written order.
struct AxisPlacement {
  std::string axis;
  Placement placement;
  SourceLoc loc;
};

struct Rule {
  std::vector<Pattern> match;  ///< one or more patterns; any may match
  /// Where each pattern of `match` is written (same length as `match`): a
  /// list element that matches nothing is reported at its own line:col.
  std::vector<SourceLoc> match_locs;
  std::vector<AxisPlacement> placements;
  std::optional<SplitRule> uneven;  ///< overrides the recipe default
  SourceLoc loc;
  /// The `match` text as written (patterns joined by ", "), for messages and the manifest.
  [[nodiscard]] std::string match_text() const;
};

/// EP stacking entry (SPEC §5.4): sources matching `match` (which must
/// contain an `{E}` capture) are grouped by their other captures into
/// stacked params named by `stack`.
struct ExpertsEntry {
  Pattern match;
  SourceLoc match_loc;                    ///< where `match` is written
  std::string stack;                      ///< name template with `{capture}` references
  std::vector<AxisPlacement> placements;  ///< on the expert mesh
  std::optional<SplitRule> uneven;
  SourceLoc loc;
};

enum class TiedMode { Auto, None, Explicit };

struct TiedSpec {
  TiedMode mode = TiedMode::Auto;
  std::vector<std::pair<std::string, std::string>> pairs;  ///< Explicit: (source, alias)
  SourceLoc loc;
};

struct PipelineSpec {
  std::string axis;    ///< dense mesh axis, usually "pp"
  SourceLoc axis_loc;  ///< where `axis` is written (the section when defaulted)
  bool auto_stages = true;
  std::vector<std::vector<Pattern>> stages;  ///< explicit: glob list per stage
  SourceLoc loc;
};

enum class ExpertDim { Zero, One, Auto };

struct FsdpSpec {
  std::vector<std::string> shard;         ///< dense axes, flattened row-major
  std::optional<std::string> replicate;   ///< HSDP replicate axis
  std::vector<std::string> expert_shard;  ///< expert-mesh axes for stacked experts
  std::vector<SourceLoc> shard_locs;      ///< where each `shard` axis is written
  SourceLoc replicate_loc;
  std::vector<SourceLoc> expert_shard_locs;  ///< where each `expert_shard` axis is written
  int dim = 0;
  ExpertDim expert_dim = ExpertDim::Auto;
  SourceLoc loc;
};

enum class BufferKind { MuonAllGather, Fsdp2AllGather };

struct BufferSpec {
  BufferKind kind = BufferKind::MuonAllGather;
  std::int64_t alignment_bytes = 512;                  ///< muon only
  std::int64_t max_batch_numel = 512LL * 1024 * 1024;  ///< muon only, elements
  std::vector<Pattern> units;                          ///< fsdp2 only
  SourceLoc loc;
};

struct Recipe {
  std::string source_path;
  std::string sha256;
  /// Optional `world_size:` (the intended number of ranks); when set, both
  /// meshes' products are checked against it (E-MESH names the mesh that differs).
  std::optional<std::int64_t> world_size;
  SourceLoc world_size_loc;
  Mesh mesh;
  std::optional<Mesh> expert_mesh;
  SplitRule uneven = SplitRule::Chunk;
  std::vector<Rule> rules;
  std::vector<ExpertsEntry> experts;
  TiedSpec tied;
  std::optional<PipelineSpec> pipeline;
  std::optional<FsdpSpec> fsdp;
  std::vector<BufferSpec> buffers;
};

/// How messages name rule `index` (0-based) of `recipe.rules`, or of
/// `recipe.experts` when `experts`: 1-based number and recipe line, e.g.
/// "rule 4 (line 12)" or "experts entry 1 (line 30)".
std::string rule_label(const Recipe& recipe, bool experts, int index);

}  // namespace shardc
