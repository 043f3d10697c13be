// The planner's passes, one file each, called in order by build_plan
// (planner.cpp). Each pass is a pure function of its inputs; problems go to
// the sink. Internal to src/planner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/diagnostics.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/recipe.hpp"

namespace shardc::passes {

/// meshes.cpp: E-MESH for sizes < 1, duplicate names, world-size overflow
/// (> 2^40 ranks) and an expert mesh whose product differs. Returns the world
/// size, or nullopt when the meshes are unusable.
std::optional<std::int64_t> check_meshes(const Recipe& recipe, DiagnosticSink& sink);

/// experts.cpp (contract §5.4): groups params matched by `experts` entries into
/// stacked params `[E, *source_shape]` at their first source; other params
/// pass through. E-EXPERTS for index gaps/duplicates, mixed shapes/dtypes,
/// `num_experts` disagreeing, a stacked name that collides. `owned`: null,
/// or `&model.params` when the caller gives them up (build_plan(Model&&)):
/// names, shapes and locations then move out of them instead of being copied.
std::vector<PlannedParam> stack_experts(const Model& model, const Recipe& recipe,
                                        DiagnosticSink& sink, std::vector<Param>* owned = nullptr);

/// fp8_scales.cpp: with `fp8_scales: follow` (or `auto` and the model's
/// `weight_block_size`), pairs each `X.weight_scale_inv` with `X.weight`
/// (PlannedParam::scale_of), stacking expert scales like their stacked
/// weights (`<stacked weight>_scale_inv`). E-FP8-SCALE for a scale without
/// its weight, a scale shape other than ceil(O/B0) x ceil(I/B1), `follow`
/// without a block size; such scales are dropped from `params`.
void pair_fp8_scales(std::vector<PlannedParam>& params, const Model& model, const Recipe& recipe,
                     DiagnosticSink& sink);

/// fp8_scales.cpp: after resolve_placements, each paired scale takes its
/// weight's rule, mesh, stage and placements and the weight's rule splits
/// in block units (fp8::scale_split). E-FP8-BLOCK for a packed part boundary
/// that cuts a block.
void follow_fp8_weights(std::vector<PlannedParam>& params, const Model& model, const Recipe& recipe,
                        DiagnosticSink& sink);

/// fused_check.cpp (contract §5.12): sets PlannedParam::fused from the
/// table of shardc/fused.hpp where the model gave none; W-FUSED-SPLIT for a
/// fused dim split by a rule as one tensor (blocked parts without `packed`,
/// or a boundary inside an interleaved / per-group group), naming a rank and
/// what it holds; E-FUSED-LAYOUT for a `packed` contradicting the layout.
void check_fused(std::vector<PlannedParam>& params, const Plan& plan, const Model& model,
                 const Recipe& recipe, DiagnosticSink& sink);

/// fp8_check.cpp: E-FP8-BLOCK where a weight's rule-split boundary (any
/// nesting, any `uneven`) cuts a block, or the scale's split is not the
/// block image of the weight's; FSDP splits are exempt (the scale is then
/// FSDP-sharded as its own param). Names a representative rank, the count
/// of ranks, the boundary, the block and the valid sizes.
void check_fp8_blocks(const std::vector<PlannedParam>& params, const Plan& plan, const Model& model,
                      const Recipe& recipe, DiagnosticSink& sink);

/// rules.cpp: first matching rule per non-stacked param (E-UNCOVERED when
/// none); W-UNUSED-RULE for rules matching nothing (E with --strict is the
/// driver's job). Sets PlannedParam::rule and ::uneven.
void resolve_rules(std::vector<PlannedParam>& params, const Recipe& recipe, DiagnosticSink& sink);

/// uncovered.cpp: E-UNCOVERED for `uncovered` (params no rule matched). A
/// param that looks like a routed expert (a segment naming experts followed by
/// an index) is reported first, at the `experts` entry that matched nothing
/// when there is one; no hint suggests a catch-all that would replicate experts.
void report_uncovered(const std::vector<const PlannedParam*>& uncovered,
                      const std::vector<PlannedParam>& params, const Recipe& recipe,
                      DiagnosticSink& sink);

/// uncovered.cpp: W-UNUSED-RULE for an `experts` entry that stacked nothing,
/// naming the rule that placed expert-looking params instead (if any).
void report_unused_experts(const std::vector<PlannedParam>& params, const Recipe& recipe,
                           DiagnosticSink& sink);

/// balance.cpp: W-BALANCE on the finished plan: ranks holding only padding
/// of a param, and pipeline stages whose most and least loaded ranks differ
/// by more than 2x in parameter bytes or optimizer-state elements. Cost
/// O(params x shard classes + world).
void check_balance(const Plan& plan, DiagnosticSink& sink);

/// rules.cpp: where the rule (or experts entry) that placed `param` is written in
/// the recipe; diagnostics about a placement point there.
SourceLoc rule_loc(const PlannedParam& param, const Recipe& recipe);

/// rules.cpp: the `packed:` of the rule or experts entry that placed `param`, or
/// null (none, or not placed by one).
const PackedSpec* packed_spec(const PlannedParam& param, const Recipe& recipe);

/// placements.cpp: the layout a `packed:` spec declares for a param of
/// `shape` (dim normalized, parts, groups; part names "part i"), or nullopt
/// with *why / *hint saying why it does not fit (E-PACKED).
std::optional<FusedLayout> packed_layout(const PackedSpec& spec, const Shape& shape,
                                         std::string* why, std::string* hint);

/// placements.cpp: normalizes the matched rule's or experts entry's
/// placements into one ResolvedPlacement per mesh axis and builds the split
/// chains. E-AXIS, E-PARTIAL, E-SHARD-DIM, E-PIPELINE (rule shards the pp axis).
void resolve_placements(std::vector<PlannedParam>& params, const Plan& plan, const Recipe& recipe,
                        DiagnosticSink& sink);

/// shard_order.cpp (docs/shard-order.md): reads each dim's execution order
/// from its `_StridedShard(d, sf=F)` labels (a rule's `shard_order` as the
/// front end wrote it, or written by hand) as DTensorSpec does, puts the
/// dim's rule splits in that order and labels the axes. E-PLACEMENT for
/// labels that are no shard order.
void order_shards(std::vector<PlannedParam>& params, const Plan& plan, const Recipe& recipe,
                  DiagnosticSink& sink);

/// shard_order.cpp, after apply_fsdp: W-STRIDED where DTensor reads an
/// order's labels with other rows than its nested chunks.
void check_shard_order(const std::vector<PlannedParam>& params, const Plan& plan,
                       DiagnosticSink& sink);

/// fsdp.cpp (contract §5.3): the FSDP split on top, labels, padded shapes. E-FSDP.
void apply_fsdp(std::vector<PlannedParam>& params, const Plan& plan, const Recipe& recipe,
                DiagnosticSink& sink);

/// stages.cpp (contract §5.6): sets PlannedParam::stage. E-PIPELINE, E-AXIS.
/// Also sets plan.pipeline_axis / expert_pipeline_axis / num_stages.
void assign_stages(std::vector<PlannedParam>& params, Plan& plan, const Recipe& recipe,
                   DiagnosticSink& sink);

/// zero.cpp: `training.zero` resolved into plan.zero (the dense and expert
/// data-parallel groups the optimizer state is sharded over). E-ZERO.
void resolve_zero(const std::vector<PlannedParam>& params, Plan& plan, const Recipe& recipe,
                  DiagnosticSink& sink);

/// tied.cpp (contract §5.5): sets alias_of and plan.tie_sync. E-TIED.
void resolve_ties(std::vector<PlannedParam>& params, Plan& plan, const Model& model,
                  const Recipe& recipe, DiagnosticSink& sink);

/// checks.cpp (contract §5.7): E-EVEN, E-HEADS, E-EXPERTS / W-EXPERTS (E % ep);
/// head-indexed params vs their projection's head split (W-HEAD-INDEXED, E-HEADS;
/// contract §5.13); head counts of a sub-model's params from its attributes.
void run_checks(const std::vector<PlannedParam>& params, const Plan& plan, const Model& model,
                const Recipe& recipe, DiagnosticSink& sink);

/// strided.cpp (contract §5.3): W-STRIDED where the newest DTensor reading of
/// `_StridedShard` differs from the physical FSDP-over-TP rows.
void check_strided(const std::vector<PlannedParam>& params, const Plan& plan, DiagnosticSink& sink);

/// lints.cpp: warnings beyond contract §5.7 (W-REPLICATED-LARGE, W-VOCAB,
/// W-AXIS-SIZE-1, W-ACTIVATION-SPLIT); see the file's header. Runs even when
/// an error was reported; params whose placements failed are skipped.
void run_lints(const std::vector<PlannedParam>& params, const Plan& plan, const Model& model,
               const Recipe& recipe, DiagnosticSink& sink);

/// lints.cpp: a vocab tensor (embedding / output head): 2-D, not stacked,
/// dim 0 equal to the model's `vocab_size`, or by name without it.
bool is_vocab_param(const PlannedParam& param, const Model& model);

/// local_attributes.cpp (contract §6.7): which params carry the local
/// attributes a runtime sets (attention head counts, expert ids, vocab
/// ranges; shardc/local_attributes.hpp). Runs on the finished params (their
/// indices are Plan::params'); reports nothing.
LocalAttributeSpec find_local_attributes(const std::vector<PlannedParam>& params,
                                         const Model& model);

/// activation_split.cpp: W-ACTIVATION-SPLIT (colwise output vs the next
/// rowwise input split differently in one parent module).
void lint_activation_splits(const std::vector<PlannedParam>& params, const Plan& plan,
                            DiagnosticSink& sink);

/// A diagnostic about `param` placed by its rule: code, severity, location
/// and the param / rule context fields set; message and hint left to fill.
Diagnostic param_diagnostic(const PlannedParam& param, DiagCode code, SourceLoc loc,
                            Severity severity = Severity::Error);

/// fsdp2_units_check.cpp: what FSDP2 refuses at its first forward (torch 2.13, found on
/// gloo) in an fsdp2_allgather buffer's units: W-FSDP-DTYPES for trainable params of more
/// than one dtype in a unit, E-FSDP for the two ends of a tie in different units.
void check_fsdp2_units(const std::vector<PlannedParam>& params, const Plan& plan,
                       DiagnosticSink& sink);

/// checks.cpp: the mesh axes `split` spans as diagnostics name them, joined by "x"
/// ("dp_shardxtp").
std::string split_axes_text(const DimSplit& split, const Mesh& mesh);

/// Reports a diagnostic at most once per (code, key), counting the others;
/// `flush` appends "(and N more params)" to each and reports them in order.
class GroupedReporter {
 public:
  void add(Diagnostic diag, const std::string& key);
  void flush(DiagnosticSink& sink);

 private:
  struct Entry {
    Diagnostic first;
    std::string key;
    std::int64_t more = 0;
  };
  std::vector<Entry> entries_;
};

/// training_shape.cpp: the training shape (`training.seq_len`, batch, schedule,
/// context parallel, recompute ranges) against the plan: E-TRAINING for a
/// context-parallel axis the dense mesh lacks or a sequence it does not
/// divide, a global batch the data-parallel ranks x micro-batch do not
/// divide, a schedule on a plan without the stages it needs (interleaved:
/// pp > 1 and pipeline.virtual_stages > 1; any written schedule: pp > 1),
/// interleaved micro-batches not a multiple of pp (Megatron), explicit
/// micro-batches disagreeing with the accumulation steps, a recompute range
/// past the model's layers. Fills plan.training_layout (degrees, micro-batches,
/// layers per stage by kind and recompute mode) when seq_len is given.
void resolve_training(const std::vector<PlannedParam>& params, Plan& plan, const Model& model,
                      const Recipe& recipe, DiagnosticSink& sink);

}  // namespace shardc::passes
