// Layout search (issue 22): every layout of a model on N ranks, ranked by an
// estimated step time, the best checked exactly by the planner and the
// memory model. Pure: no I/O (src/search/, the driver reads the files).
//
// Two phases:
//  1. Enumerate. Every ordered factorization of the world into the dense
//     mesh pp x dp_replicate x dp_shard x cp x tp (rank order: pp slowest,
//     tp fastest; torchtitan's ParallelDims order) and, for a MoE model, the
//     expert mesh pp x dp_replicate x efsdp x ep with efsdp x ep = dp_shard x
//     cp x tp (torchtitan's second unflatten; experts not tensor parallel),
//     times the choices: recompute (none, selective, full, and block: full for
//     the fewest layers of each model chunk that brings the estimate under the
//     budget when none does not fit), sequence
//     parallel (tp > 1), the pipeline schedule (pp > 1: 1f1b, interleaved
//     with v = 2, 4, 8, 16 virtual stages while pp x v layer blocks exist,
//     the V schedules zbv and dualpipev with 2; zero bubble and GPipe when
//     asked) and ZeRO-1 over dp_replicate
//     (dp_replicate > 1, no FSDP: the planner refuses ZeRO beside `fsdp`); a vocabulary tp
//     does not divide under `uneven: even` is padded (`Layout::vocab_padding`). Each layout is
//     screened by the model's own sizes (heads, KV heads and vocab over tp, experts over ep, layers
//     over pp, the batch over dp, an expert FSDP axis under FSDP; see `ScreenReason`) and costed
//     (src/search/cost.cpp, docs/search.md): compute, exposed communication per axis, pipeline
//     bubble, optimizer step. Its memory is estimated from the params'
//     sizes and the activation model (src/core/activations.hpp).
//  2. Check exactly. In order of estimated step time, each screened layout
//     (those whose memory estimate is within the budget first, then those
//     within the screen's margin) is written as a recipe
//     (`layout_recipe_text`), parsed by the front
//     end, planned by `build_plan` and measured by `memory_classes`: the
//     same path `validate` and `memory` take, so a layout called valid is
//     one the planner accepted and its memory is what `memory` prints for
//     the emitted recipe. It stops after `top` valid layouts that fit, or
//     `max_exact` checks.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.hpp"
#include "core/recipe.hpp"

namespace shardc {

/// One GPU type and its interconnect. Units: FLOP/s, bytes, bytes/s, seconds.
struct Hardware {
  std::string name;
  double peak_flops = 0;     ///< dense BF16 tensor-core FLOP/s (no sparsity)
  double hbm_bytes = 0;      ///< device memory
  double hbm_bandwidth = 0;  ///< bytes/s
  std::int64_t gpus_per_node = 8;
  double intra_bandwidth = 0;  ///< per GPU, one direction, inside a node (NVLink / xGMI)
  double inter_bandwidth = 0;  ///< per GPU, one direction, across nodes (the GPU's NIC)
  double intra_latency = 0;    ///< per ring step
  double inter_latency = 0;    ///< per ring step
  /// Fraction of `peak_flops` the model's matrix multiplies reach (an
  /// assumption, stated and overridable: docs/search.md).
  double gemm_efficiency = 0.6;
  std::string source;  ///< where the figures come from
};

/// The presets `a100`, `h100`, `h800`, `h200`, `b200`, `mi300x` (vendor
/// figures, cited in src/search/hardware.cpp); nullopt for another name.
std::optional<Hardware> hardware_preset(std::string_view name);
/// Their names, in that order.
std::vector<std::string> hardware_preset_names();

/// A hardware file: `key: value` lines (`#` comments), starting from the
/// preset named by `preset:` (else h100): peak_tflops, hbm_gb, hbm_tbs,
/// gpus_per_node, intra_gbs, inter_gbs (GB/s per GPU, one direction),
/// intra_latency_us, inter_latency_us, gemm_efficiency (0 < x <= 1), name.
/// nullopt with `error` naming the line on an unknown key (with the closest key within
/// two edits), a key given twice, an unknown preset or a bad value; `hint`, when given,
/// receives what the line may hold (the keys, or the preset names).
std::optional<Hardware> parse_hardware_text(std::string_view text, std::string& error,
                                            std::string* hint = nullptr);

/// One candidate layout: the degrees and the choices.
struct Layout {
  std::int64_t pp = 1;
  std::int64_t dp_replicate = 1;
  std::int64_t dp_shard = 1;  ///< FSDP
  std::int64_t cp = 1;
  std::int64_t tp = 1;
  std::int64_t ep = 1;     ///< expert mesh, MoE only
  std::int64_t efsdp = 1;  ///< expert FSDP, efsdp x ep = dp_shard x cp x tp
  Recompute recompute = Recompute::None;
  /// With `recompute` Full: recompute only the first `recompute_block` layer
  /// blocks of every model chunk, keep the others' activations (Megatron-Core
  /// `--recompute-granularity full --recompute-method block
  /// --recompute-num-layers N`, applied per model chunk); 0 = every layer.
  std::int64_t recompute_block = 0;
  bool sequence_parallel = false;
  PipelineScheduleKind schedule = PipelineScheduleKind::OneFOneB;
  std::int64_t virtual_stages = 1;
  bool zero1 = false;  ///< optimizer state sharded over dp_replicate (ZeRO-1)
  /// FSDP2 reshard_after_forward (dp_shard > 1). Without a pipeline both are
  /// enumerated (false: every unit stays gathered from its forward to its
  /// backward, one all-gather per micro-batch fewer); with one it is false,
  /// torchtitan's default: torch.distributed.pipelining keeps every unit
  /// gathered until the step's last micro-batch either way
  /// (src/memory/memory.hpp), so true would only add all-gathers.
  bool reshard_after_forward = true;
  /// The vocabulary params (embedding, lm_head) are padded to a multiple of 128 x tp rows
  /// (Megatron's `make_vocab_size_divisible_by` 128, the recipe rule's `vocab_padding`):
  /// set when the rule set splits them over tp under `uneven: even` and tp does not divide
  /// the vocabulary, which would otherwise be E-EVEN. Named "padded-vocab".
  bool vocab_padding = false;
  [[nodiscard]] std::int64_t dp() const { return dp_replicate * dp_shard; }
  friend bool operator==(const Layout&, const Layout&) = default;
  /// The ranks FSDP shards a dense param over: dp_shard x cp when dp_shard > 1
  /// (torchtitan's `dp_shard_cp` mesh: the emitted recipe's `fsdp.shard: [dp_shard, cp]`),
  /// else 1 (no FSDP).
  [[nodiscard]] std::int64_t fsdp_degree() const { return dp_shard > 1 ? dp_shard * cp : 1; }
};

/// Every divisor of `value` (>= 1), in increasing order: the degrees an axis of a world
/// of `value` ranks may take. Cost O(sqrt(value)).
std::vector<std::int64_t> divisors(std::int64_t value);

/// True when the search enumerates pipeline schedule `kind` given `--schedules`
/// (`requested`; empty = the default: the schedules torch.distributed.pipelining runs
/// but GPipe, which has 1F1B's bubble and holds every micro-batch's activations, so it
/// never ranks above 1F1B: 1f1b, interleaved, zbv, dualpipev. `zero_bubble` (ZB-H1 with
/// one chunk per rank, which torch has no schedule for) only when asked).
bool schedule_enumerated(const std::vector<PipelineScheduleKind>& requested,
                         PipelineScheduleKind kind);

/// "pp16 dp_shard128 tp8 sp recompute=full 1f1b" (degrees > 1 only; block
/// recompute of N layers per model chunk: "recompute=block3"; FSDP without a
/// pipeline and reshard_after_forward false: "no-reshard"; a padded vocabulary:
/// "padded-vocab").
std::string layout_name(const Layout& layout);

/// One communication term of a step, per rank, with its time (not comm.hpp's CommTerm:
/// a second class of that name in namespace shardc was an ODR violation that ASan caught).
struct AxisCommTime {
  std::string axis;         ///< "tp", "cp", "ep", "dp_shard", "dp_replicate", "pp"
  std::string collective;   ///< "all-reduce", "all-gather + reduce-scatter", ...
  double bytes = 0;         ///< sent per rank per step (ring counts)
  bool inter_node = false;  ///< the group crosses nodes (from the mesh's rank order)
  double seconds = 0;       ///< bytes / bandwidth + ring steps x latency
  double exposed = 0;       ///< not hidden behind compute (the term's overlap rule)
  std::string overlap;      ///< the rule, in words
};

/// The estimated step time, term by term (seconds per optimizer step).
struct StepCost {
  double flops_per_token = 0;  ///< model FLOPs: 6 N_active + attention (no recompute)
  double compute = 0;          ///< model FLOPs / (peak x efficiency), per rank
  double recompute = 0;        ///< the extra forward work recompute adds
  double imbalance = 0;        ///< the slowest pipeline stage's work above the mean stage's
  double bubble = 0;           ///< pipeline fill and drain
  double optimizer = 0;        ///< optimizer step: bytes read and written / HBM bandwidth
  std::vector<AxisCommTime> comm;
  double exposed_comm = 0;
  double step = 0;
  double tokens_per_second_per_gpu = 0;
  double mfu = 0;        ///< model FLOPs per second / peak (the FP8 peak with fp8_gemm)
  std::string dominant;  ///< the largest term: "compute", "bubble", "comm tp", ...
};

/// Why phase 1 drops a layout (counted per reason, `--explain-pruned`),
/// each named after the planner diagnostic the layout would get.
enum class ScreenReason {
  HeadsTp,  ///< E-HEADS: attention / KV heads not divisible by tp
  /// E-EVEN: vocab rows not divisible by tp (recipe `uneven: even`) and a vocabulary param
  /// the rule set splits cannot be padded (`packed`, a `unit`, not 2-D); otherwise the
  /// layout pads the vocabulary (`Layout::vocab_padding`)
  VocabTp,
  ExpertsEp,       ///< E-EXPERTS: experts not divisible by ep
  LayersPp,        ///< E-TRAINING: fewer layers than pipeline stages (x virtual)
  BatchDp,         ///< E-TRAINING: global batch not divisible by dp x micro-batch
  SeqCp,           ///< E-TRAINING: seq_len not divisible by cp (x 2 for load balance)
  MicrobatchesPp,  ///< E-TRAINING: interleaved needs m % pp == 0, dualpipev m >= 2 pp
  ExpertFsdpAxis,  ///< E-FSDP: FSDP with ep = dp_shard x cp x tp leaves the experts no FSDP axis
  OverBudget,      ///< estimated memory above the budget by more than the margin
  Fixed,           ///< a degree other than `SearchRequest::fixed` holds
};
const char* screen_reason_text(ScreenReason reason);
inline constexpr int kScreenReasons = 10;

/// What the search was asked.
struct SearchRequest {
  const Model* model = nullptr;
  /// The rule set: the rules, experts, tied, uneven and fp8 sections of a
  /// shipped plan for the architecture (its mesh, pipeline, fsdp, buffers
  /// and training are replaced per layout). Its rules name `tp` and `ep`.
  const Recipe* rules = nullptr;
  std::string rules_text;  ///< the sections above as YAML, copied into every recipe
  std::int64_t world = 1;
  TrainingSpec training;  ///< optimizer, dtypes, seq_len, micro-batch, global batch
  std::int64_t budget = 0;
  int top = 5;
  int max_exact = 24;
  Hardware hardware;
  /// Degrees held fixed (`--fix pp=16,tp=8`): 0 = free. Order pp, dp_replicate,
  /// dp_shard, cp, tp, ep.
  std::array<std::int64_t, 6> fixed{};
  /// `--fp8`: the linear layers' GEMMs in FP8 (twice the BF16 peak; the
  /// attention core stays BF16), as DeepSeek-V3 trains (its report, Sec. 3.3).
  bool fp8_gemm = false;
  /// `--moe-node-limit M`: node-limited routing, each token sent to experts
  /// on at most M nodes (DeepSeek-V3 Sec. 2.1.2: M = 4); 0 = unlimited.
  std::int64_t moe_node_limit = 0;
  /// `--schedules 1f1b,interleaved`: the pipeline schedules the framework runs (Megatron-LM:
  /// 1F1B and interleaved; torchtitan also zero bubble); empty = 1F1B, interleaved and
  /// zero bubble. Layouts without a pipeline are enumerated whatever it says.
  std::vector<PipelineScheduleKind> schedules;
};

/// One layout checked by the planner.
struct CheckedLayout {
  Layout layout;
  StepCost cost;
  double estimated_memory = 0;  ///< phase 1's estimate (bytes)
  bool valid = false;
  std::string first_code;     ///< the first error's code when invalid ("E-HEADS")
  std::string first_message;  ///< and its message
  std::int64_t peak = 0;      ///< exact peak bytes per rank (valid only)
  std::int64_t peak_rank = 0;
  int peak_stage = 0;
  std::int64_t activations = 0;  ///< activation bytes of the peak rank
  bool fits = false;
};

struct SearchResult {
  std::int64_t enumerated = 0;  ///< layouts x choices
  std::int64_t screened = 0;    ///< left after phase 1
  std::array<std::int64_t, kScreenReasons> pruned{};
  std::vector<CheckedLayout> checked;  ///< phase 2, in the order checked
  std::vector<CheckedLayout> ranked;   ///< valid and fitting, by step time, at most `top`
  /// Closest when nothing is ranked: the smallest exact peak found, and
  /// the world sizes one node (gpus_per_node) away that have screened layouts.
  std::optional<CheckedLayout> smallest;
  /// The last of `checked` was planned only for `smallest` (nothing ranked, none of the
  /// checked valid): the layout of the smallest memory estimate, the screen's included.
  bool closest_planned = false;
  /// Layouts estimated just over the budget, faster than the slowest ranked, planned after
  /// the ranked ones (at most a third of `max_exact`).
  std::int64_t near_budget_checked = 0;
  /// Screened layouts never planned (the exact phase stopped: `top` ranked or `max_exact`).
  std::int64_t unplanned = 0;
  std::string error;  ///< why the search itself could not run ("" = it ran)
  /// The model attribute the activation model lacks (`hidden_size`, ...): the search
  /// did not run, since every layout's peak would leave the activations out.
  std::string arch_missing;
};

SearchResult run_search(const SearchRequest& request);

/// True when a rule of `rules` places a param on mesh axis `axis` with a Shard: a rule
/// set that shards nothing over tp (a tp-1 recipe search emitted, used as rules) would
/// make "tp 8" layouts that split no weight, so the search then keeps tp at 1.
bool rules_shard_over(const Recipe* rules, std::string_view axis);

/// The layout as a shardc recipe (YAML): the rule set, the meshes, pipeline,
/// fsdp, buffers and training section. Axes of size 1 are left out, except
/// `tp` and `ep`, which the rule set names.
std::string layout_recipe_text(const SearchRequest& request, const Layout& layout);

/// The rule set of a recipe's text: its top-level `uneven`, `pad_multiple`,
/// `rules`, `experts`, `tied`, `fp8_scales` and `vocab_padding` sections
/// verbatim (comment lines at column 0 dropped), for `SearchRequest::rules_text`.
std::string rule_set_text(std::string_view recipe_text);

/// The layouts of `world` that pass the screen and whose phase-1 memory estimate is
/// within the budget (the estimate is within a few per cent of the exact peak), for the
/// "closest world" hint of a search that ranked nothing.
std::int64_t fitting_layouts(const SearchRequest& request, std::int64_t world);

}  // namespace shardc
