// Diagnostic codes: one typed table (docs/diagnostics.md).
//
// Every diagnostic shardc reports has one of these codes. The table gives
// each code's stable name ("E-HEADS"), its default severity, the exit class
// an error of that code implies (Usage = 2 for input that cannot be read or
// parsed: a model, recipe, checkpoint or plan.json; Invalid = 1 for a
// readable input whose plan is invalid; a warning's class applies under
// --strict; Internal = 3 is no code's: it is a broken invariant of shardc
// itself, SHARDC_ASSERT / check_plan), and the
// one-line meaning and typical fix of docs/diagnostics.md, whose table
// tools/update-docs generates from this one (checked: CTest docs/diagnostics,
// tests/unit/core/diag_code_test.cpp).
//
// Adding a code: append an enumerator and its row here (same order), run
// tools/update-docs, add a tests/bad/ case that reports it (CONTRIBUTING.md).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

#include "shardc/exit_code.hpp"

namespace shardc {

enum class Severity { Error, Warning, Note };

enum class DiagCode {
  EModel,
  ERecipe,
  ECheckpoint,
  EHfTpPlan,
  EMesh,
  EAxis,
  EPlacement,
  EShardOrder,
  EPartial,
  EShardDim,
  EUncovered,
  EEven,
  EHeads,
  EUnit,
  EPacked,
  EFusedLayout,
  EPad,
  EExperts,
  ETied,
  EPipeline,
  EFsdp,
  EZero,
  EFp8Block,
  EFp8Scale,
  EQuantState,
  ETraining,
  EBudget,
  EMemoryWorld,
  EReshardMismatch,
  EReshardMissing,
  EReshardCoverage,
  EReshardInput,
  ESearch,
  ESearchOption,
  EHardware,
  EReportInput,
  EUsage,
  EOutput,
  EPlanFile,
  WUnusedRule,
  WExperts,
  WStrided,
  WShadowedRule,
  WReplicatedLarge,
  WVocab,
  WActivationSplit,
  WFusedSplit,
  WPackedBuffer,
  WAxisSize1,
  WModuleOrder,
  WFlatYaml,
  WHeadsUnknown,
  WPipelineSplit,
  WHeadIndexed,
  WCheckpoint,
  WBalance,
  WModuleBuffer,
  WFsdpDtypes,
};

/// One row of the table.
struct DiagCodeInfo {
  DiagCode code;
  std::string_view name;     ///< stable text, e.g. "E-HEADS"
  Severity severity;         ///< default severity (a W-* may be reported as a note)
  ExitCode exit;             ///< exit class of an error with this code
  std::string_view meaning;  ///< docs/diagnostics.md "meaning" column
  std::string_view fix;      ///< docs/diagnostics.md "typical fix" column
};

inline constexpr std::array kDiagCodes = {
    DiagCodeInfo{DiagCode::EModel, "E-MODEL", Severity::Error, ExitCode::Usage,
                 "model unreadable or malformed; duplicate FQN; bad shape, dtype or repeat",
                 "fix the entry at the reported line; regenerate with `shardc import`"},
    DiagCodeInfo{DiagCode::ERecipe, "E-RECIPE", Severity::Error, ExitCode::Usage,
                 "recipe unreadable or malformed (a tab in the indentation and a key indented off "
                 "its parent are named as such); bad pattern; unknown key",
                 "check spelling against `shardc schema recipe`"},
    DiagCodeInfo{
        DiagCode::ECheckpoint, "E-CHECKPOINT", Severity::Error, ExitCode::Usage,
        "checkpoint unreadable or hostile: header length past the file or over 100 MB, header not "
        "a JSON object, bad/overlapping/out-of-file `data_offsets`, offsets ≠ numel × dtype size, "
        "tensors that do not tile the data section (a gap, bytes after the last one), a "
        "non-string `__metadata__` value, a dtype shardc does not support, a name in two files, "
        "an index naming a missing file or tensor, config.json counts outside [1, 2^31) (file "
        "and tensor named)",
        "re-download the shard / fix config.json"},
    DiagCodeInfo{DiagCode::EHfTpPlan, "E-HF-TP-PLAN", Severity::Error, ExitCode::Usage,
                 "`shardc recipe --from-hf-tp-plan`: the plan file is not a tensor-parallel plan "
                 "dump, names a style shardc cannot translate (grouped GEMM, MLA kv_a), an "
                 "entry that matches no param of the model (fused experts without the dump's "
                 "`sources`), or a fused param whose placement no placement of its checkpoint "
                 "tensors states (the entry and the reason named)",
                 "dump the plan with tools/hf_tp_plan.py CHECKPOINT; write the rules for the "
                 "named modules by hand (experts entries for MoE)"},
    DiagCodeInfo{DiagCode::EMesh, "E-MESH", Severity::Error, ExitCode::Invalid,
                 "axis size < 1, duplicate axis name, a mesh without axes or of more than 2^31-1 "
                 "ranks, `world_size:` outside [1, 2^31-1], a mesh product differs from "
                 "`world_size:` (names that mesh) or from the other mesh",
                 "fix the named mesh's sizes; state `world_size:` to find which one"},
    DiagCodeInfo{DiagCode::EAxis, "E-AXIS", Severity::Error, ExitCode::Invalid,
                 "a placement or section (`fsdp`, `pipeline`) names an axis its mesh lacks; the "
                 "caret is on the axis, the hint lists the mesh's axes",
                 "use an axis of that mesh (`ep` lives on `expert_mesh`)"},
    DiagCodeInfo{DiagCode::EPlacement, "E-PLACEMENT", Severity::Error, ExitCode::Invalid,
                 "unparseable placement", "`Shard(d)`, `Replicate()`, `shard(d)`, `replicate`"},
    DiagCodeInfo{DiagCode::EShardOrder, "E-SHARD-ORDER", Severity::Error, ExitCode::Invalid,
                 "a rule's `shard_order` (or its `_StridedShard` labels) states no order shardc "
                 "can plan: an axis listed twice, left out or not sharding that dim, a dim "
                 "listed twice, the order stated twice (labels and `shard_order`), FSDP's axes "
                 "anywhere but last on `fsdp.dim` in `fsdp.shard`'s order; `_StridedShard` "
                 "labels that are no order on a split DTensor has no reading for (the reason "
                 "named)",
                 "list every axis that shards the dim once, outermost split first, FSDP's axes "
                 "last or not at all (docs/shard-order.md)"},
    DiagCodeInfo{DiagCode::EPartial, "E-PARTIAL", Severity::Error, ExitCode::Invalid,
                 "`Partial` on a parameter", "parameters are never partial: use `Replicate()`"},
    DiagCodeInfo{DiagCode::EShardDim, "E-SHARD-DIM", Severity::Error, ExitCode::Invalid,
                 "shard dim out of range for the param's ndim",
                 "fix the dim (negative dims count from the end) or narrow the `match`"},
    DiagCodeInfo{DiagCode::EUncovered, "E-UNCOVERED", Severity::Error, ExitCode::Invalid,
                 "a param matched by no rule; params that look like routed experts are reported "
                 "first, at the `experts` entry that matched nothing",
                 "add a rule (the hint gives a pattern); for experts fix the `experts` entry — "
                 "never a catch-all that would replicate them"},
    DiagCodeInfo{DiagCode::EEven, "E-EVEN", Severity::Error, ExitCode::Invalid,
                 "`uneven: even` and an extent (or, with `unit`, a unit count) that does not "
                 "divide; lists the valid sizes when a unit is set",
                 "pick a divisible size, or `uneven: chunk`/`balanced`"},
    DiagCodeInfo{DiagCode::EHeads, "E-HEADS", Severity::Error, ExitCode::Invalid,
                 "a sharded attention projection's head count does not divide by its tp (names "
                 "only the failing count: q heads or KV heads — query groups for Megatron's "
                 "linear_qkv, see below); a whole-unit split with fewer units than tp ranks "
                 "(ranks without attention rows); Megatron's per-group linear_qkv `packed` as "
                 "q/k/v blocks; a 1-D `q_norm` / `k_norm` split by a rule (of [head_dim] shared "
                 "by every head, Qwen3; of [heads x head_dim] a norm over the whole "
                 "projection, OLMo-2)",
                 "use one of the listed valid tp sizes, or `unit: head_dim` with chunk/balanced"},
    DiagCodeInfo{
        DiagCode::EUnit, "E-UNIT", Severity::Error, ExitCode::Invalid,
        "an extent that is not a whole number of the rule's `unit` (a split would cut a unit)",
        "use a unit that divides the extent"},
    DiagCodeInfo{DiagCode::EPacked, "E-PACKED", Severity::Error, ExitCode::Invalid,
                 "`packed` parts that do not tile the dim, or a dim out of range",
                 "list the part extents so they sum to the dim"},
    DiagCodeInfo{DiagCode::EFusedLayout, "E-FUSED-LAYOUT", Severity::Error, ExitCode::Invalid,
                 "a rule's `packed` contradicts the param's known fused layout (dim, part "
                 "extents, or blocked parts on an interleaved / per-group tensor)",
                 "use the `packed` line the message gives"},
    DiagCodeInfo{DiagCode::EPad, "E-PAD", Severity::Error, ExitCode::Invalid,
                 "a padded tensor of 2^62+ elements (hostile pad multiples)",
                 "use a smaller pad multiple"},
    DiagCodeInfo{DiagCode::EExperts, "E-EXPERTS", Severity::Error, ExitCode::Invalid,
                 "expert index gaps/duplicates, mixed shapes/dtypes, `num_experts` mismatch, `E % "
                 "ep` under `even`",
                 "fix the model, or the `experts` match/ep size"},
    DiagCodeInfo{
        DiagCode::ETied, "E-TIED", Severity::Error, ExitCode::Invalid,
        "a tie end is missing, or the ends differ in shape, dtype, mesh, placements or split rule",
        "give both ends the same rule/placements, or `tied: none`"},
    DiagCodeInfo{
        DiagCode::EPipeline, "E-PIPELINE", Severity::Error, ExitCode::Invalid,
        "stage count ≠ pp size, a param in no or several stages, a rule sharding the pp axis",
        "fix `pipeline.stages` globs or the pp size"},
    DiagCodeInfo{DiagCode::EFsdp, "E-FSDP", Severity::Error, ExitCode::Invalid,
                 "FSDP dim > 0 not divisible, dim out of range, FSDP axis also sharded by a rule "
                 "or by the `experts` entry (at `fsdp.shard` / `fsdp.expert_shard`), no expert "
                 "FSDP axis",
                 "shard dim 0, or set `fsdp.expert_shard` to an axis the placements leave free"},
    DiagCodeInfo{DiagCode::EZero, "E-ZERO", Severity::Error, ExitCode::Invalid,
                 "`training.zero` (or `distributed_optimizer`, `zero_optimization.stage`): an "
                 "axis its mesh lacks, the pipeline axis, an axis that shards a param of the "
                 "group, stage 1/2 beside `fsdp` (FSDP is stage 3), stage 3 without `fsdp`",
                 "list DP axes the placements leave free (or omit them: they are inferred); "
                 "ZeRO-3 is the `fsdp` section"},
    DiagCodeInfo{DiagCode::EFp8Block, "E-FP8-BLOCK", Severity::Error, ExitCode::Invalid,
                 "`fp8_scales: follow`: a block-quantized weight's shard boundary (any rule split; "
                 "FSDP exempt) cuts an FP8 block, so its `weight_scale_inv` cannot follow in whole "
                 "blocks; names a representative rank and the count, the dim, the boundary "
                 "element, the block and the valid sizes (also: a packed part boundary inside a "
                 "block, a `pad` multiple the scale cannot mirror)",
                 "use a listed size, or `unit: 128` on the rule, or `fp8_scales: rules`"},
    DiagCodeInfo{DiagCode::EFp8Scale, "E-FP8-SCALE", Severity::Error, ExitCode::Invalid,
                 "`fp8_scales: follow`: a `weight_scale_inv` without its weight, of a shape other "
                 "than ceil(O/B0) x ceil(I/B1), scales for only some experts of a stacked weight, "
                 "or `follow` without the model's `weight_block_size`",
                 "fix the model / `weight_block_size` (from config.json), or `fp8_scales: rules`"},
    DiagCodeInfo{DiagCode::EQuantState, "E-QUANT-STATE", Severity::Error, ExitCode::Invalid,
                 "a quantized weight's state (bitsandbytes `SCB` per row, the 4-bit `absmax` / "
                 "`quant_map` blocks of the flattened weight) does not follow its weight's rule "
                 "split: a rank would hold other rows' scales (the per-row state replicated "
                 "while the weight is row-split, or split another way)",
                 "give the state its weight's rule (the same axes and `uneven` on its rows), or "
                 "replicate the weight; 4-bit states cannot follow a split"},
    DiagCodeInfo{DiagCode::ETraining, "E-TRAINING", Severity::Error, ExitCode::Usage,
                 "the training shape (`training.seq_len`, `micro_batch_size`, "
                 "`global_batch_size`, `gradient_accumulation_steps`, `recompute` ranges, "
                 "`pipeline_schedule`, `context_parallel`, `ranks_per_node`): a value out of "
                 "range, a micro-batch larger than the batch, a batch the data-parallel ranks "
                 "do not divide, a schedule that needs more stages or micro-batches than exist",
                 "the message names the bound; docs/memory.md lists every key and default"},
    DiagCodeInfo{DiagCode::EBudget, "E-BUDGET", Severity::Error, ExitCode::Invalid,
                 "(`validate`, `compile`, `memory` with `--budget` or `training.budget`) a rank's "
                 "memory "
                 "total exceeds the budget; names the worst ranks and the breakdown",
                 "the FSDP degree the hint names, smaller optimizer state, more tp/pp/ep, or a "
                 "larger budget"},
    DiagCodeInfo{DiagCode::EMemoryWorld, "E-MEMORY-WORLD", Severity::Error, ExitCode::Usage,
                 "a world above 2^20 ranks where a row per rank is needed (`compile`'s plan.json "
                 "and rank files, `verify --against`), or whose memory classes cannot be formed "
                 "without one (`memory`, budgets, `inspect` on a plan with an expert mesh); such "
                 "worlds still plan and `validate` without a budget",
                 "validate without a budget, or check the memory of a smaller world with the same "
                 "per-rank layout"},
    DiagCodeInfo{
        DiagCode::EReshardMismatch, "E-RESHARD-MISMATCH", Severity::Error, ExitCode::Invalid,
        "`reshard`: a param's global shape or dtype differs between the two plans (located at plan "
        "B's param)",
        "compile both plans from the same model description (same vocab padding, experts, dtypes)"},
    DiagCodeInfo{DiagCode::EReshardMissing, "E-RESHARD-MISSING", Severity::Error, ExitCode::Invalid,
                 "`reshard`: a param of plan B is absent from plan A",
                 "same model description for both plans"},
    DiagCodeInfo{DiagCode::EReshardCoverage, "E-RESHARD-COVERAGE", Severity::Error,
                 ExitCode::Invalid,
                 "`reshard`: plan A's shards of a param do not tile a box plan B needs exactly "
                 "once (an edited or foreign plan.json; for MODEL RECIPE inputs a shardc bug): "
                 "one diagnostic for all such params, naming the first and the count",
                 "recompile plan A with `shardc compile` (MODEL RECIPE form: report it)"},
    DiagCodeInfo{
        DiagCode::EReshardInput, "E-RESHARD-INPUT", Severity::Error, ExitCode::Usage,
        "`reshard`: a shard entry of plan.json is malformed (bad rank set, shape of another "
        "rank, packed `boxes` outside the tensor or the allocation, or not holding "
        "`local_shape`'s elements)",
        "recompile; never edit plan.json by hand"},
    DiagCodeInfo{DiagCode::ESearch, "E-SEARCH", Severity::Error, ExitCode::Invalid,
                 "`search`: no layout of the world size is valid, or none fits the budget",
                 "the message names why: the screen's reasons with counts, the planner's "
                 "error on the best layout, or the smallest memory found; the hint names the "
                 "world sizes near it (a GPU and a node either way, whole nodes) that have "
                 "layouts estimated to fit, else the first doubling of the world that has some"},
    DiagCodeInfo{DiagCode::ESearchOption, "E-SEARCH-OPTION", Severity::Error, ExitCode::Usage,
                 "`search`: an option is missing, malformed or contradicts another (no "
                 "--global-batch-tokens, --world and --nodes that disagree, a --fix axis given "
                 "twice or a degree that does not divide the world, --pick without "
                 "--emit-recipe or past the ranked layouts, --emit-recipe over an input, an "
                 "existing file or a directory, an unknown --schedules name, a budget without a "
                 "unit, no rule set)",
                 "the message names the option and the hint the value it takes; `shardc "
                 "search --help` lists them"},
    DiagCodeInfo{DiagCode::EHardware, "E-HARDWARE", Severity::Error, ExitCode::Usage,
                 "`search --hardware`: an unknown preset, or a hardware file with an unknown key "
                 "or a value out of range",
                 "presets: a100, h100, h800, h200, b200, mi300x; a file holds `key: value` "
                 "lines (docs/search.md)"},
    DiagCodeInfo{DiagCode::EReportInput, "E-REPORT-INPUT", Severity::Error, ExitCode::Usage,
                 "`report OUTDIR`: the directory is not a complete compile (no readable "
                 "manifest.json), or plan.json or a rank file is missing, changed since compile, "
                 "truncated, malformed, or disagrees with plan.json or the manifest",
                 "recompile the OUTDIR with `shardc compile` (never edit its files), or give the "
                 "MODEL RECIPE it was compiled from"},
    DiagCodeInfo{DiagCode::EUsage, "E-USAGE", Severity::Error, ExitCode::Usage,
                 "the command line: an unknown subcommand or option, an option's value "
                 "malformed or out of range, a required argument missing, the wrong number of "
                 "inputs, or options that contradict each other (`search`'s own: "
                 "E-SEARCH-OPTION)",
                 "`shardc COMMAND --help` lists the command's arguments and the values each "
                 "option takes"},
    DiagCodeInfo{DiagCode::EOutput, "E-OUTPUT", Severity::Error, ExitCode::Usage,
                 "an output cannot be written: the file or directory is not writable, a "
                 "directory that is not a shardc OUTDIR, an OUTDIR another compile is writing "
                 "(locked), a symbolic link shardc does not write through",
                 "the message names the path and the system's reason; choose another path, or "
                 "`--force` where the command has it"},
    DiagCodeInfo{DiagCode::EPlanFile, "E-PLAN-FILE", Severity::Error, ExitCode::Usage,
                 "a compiled plan given to `verify` or `reshard` (plan.json, manifest.json, a "
                 "rank file) cannot be read, is not shardc's, is incomplete, or changed since "
                 "compile",
                 "recompile the OUTDIR with `shardc compile` (never edit its files)"},
    DiagCodeInfo{DiagCode::WUnusedRule, "W-UNUSED-RULE", Severity::Warning, ExitCode::Invalid,
                 "a rule, one pattern of a rule's `match` list (at that pattern), or an `experts` "
                 "entry matches nothing (error with `--strict`)",
                 "delete it or fix its pattern"},
    DiagCodeInfo{DiagCode::WExperts, "W-EXPERTS", Severity::Warning, ExitCode::Invalid,
                 "`E % ep != 0` under `chunk`/`balanced` (lists each ep rank's expert range)",
                 "choose ep dividing E, or accept the imbalance"},
    DiagCodeInfo{DiagCode::WStrided, "W-STRIDED", Severity::Warning, ExitCode::Invalid,
                 "the plan's labels would be read differently by DTensor than FSDP2 stores "
                 "the rows (the newest `_StridedShard` rule on uneven FSDP2 x TP extents; FSDP2 "
                 "over a `_StridedShard` TP split, even ones; FSDP over several axes, or after "
                 "a TP axis in mesh order, on uneven extents: FSDP2 chunks once over the "
                 "flattened axes)",
                 "make the sharded extent divisible (FSDP over a `_StridedShard` split: gather "
                 "with FSDP2, or FSDP on another dim); the manifest is the physical truth"},
    DiagCodeInfo{DiagCode::WShadowedRule, "W-SHADOWED-RULE", Severity::Warning, ExitCode::Invalid,
                 "a rule that matches parameters but never wins: earlier rules take all of them",
                 "move it above the broader rule, or delete it"},
    DiagCodeInfo{DiagCode::WReplicatedLarge, "W-REPLICATED-LARGE", Severity::Warning,
                 ExitCode::Invalid,
                 "a parameter of 2^24+ elements replicated over an axis that shards other "
                 "parameters (likely a missing rule)",
                 "add a rule for it, or say `axis: Replicate()` in its rule (that silences it)"},
    DiagCodeInfo{
        DiagCode::WVocab, "W-VOCAB", Severity::Warning, ExitCode::Invalid,
        "an embedding / output head whose vocab dim does not divide over the ranks sharding it "
        "(found by the model's `vocab_size` attribute: a 2-D param whose dim 0 equals it; without "
        "the attribute by name: `embed_tokens`, `lm_head`, `wte`, `tok_embeddings`, "
        "`word_embeddings`, `output`, `output_layer`, `embed_in`, `embed_out`)",
        "use a listed size, or `uneven: {pad: 64}` on its rule (silences it)"},
    DiagCodeInfo{DiagCode::WActivationSplit, "W-ACTIVATION-SPLIT", Severity::Warning,
                 ExitCode::Invalid,
                 "in one parent module, a colwise weight's output dim and a later rowwise weight's "
                 "input dim of the same extent are split differently (rule, unit, pad, axes or "
                 "_StridedShard split factor; 3-D expert weights too: gate_up_proj and "
                 "down_proj): the activation between them does not line up; or a bias "
                 "(`m.bias`, gpt-oss `m.gate_up_proj_bias`) split otherwise than its weight's "
                 "output dim (a colwise weight with a whole bias, a rowwise one with a split "
                 "bias)",
                 "give both rules the same `uneven` / `unit` and the same placement kind; split a "
                 "bias as its weight's output dim, or replicate it when that is whole"},
    DiagCodeInfo{DiagCode::WFusedSplit, "W-FUSED-SPLIT", Severity::Warning, ExitCode::Invalid,
                 "a fused param (q, k, v or gate, up in one tensor: by its name and architecture "
                 "or the model's "
                 "`fused:`) split on its fused dim as one tensor, so a rank holds other parts "
                 "than the ones its neighbours' rows need (or cuts an interleaved group)",
                 "add the `packed` line the message gives (each part split on its own)"},
    DiagCodeInfo{DiagCode::WPackedBuffer, "W-PACKED-BUFFER", Severity::Warning, ExitCode::Invalid,
                 "a packed param split on its packed dim is left out of the `muon_allgather` "
                 "layout (its concatenate-by-member unpack would interleave the parts)",
                 "gather it per part in the runtime from its `boxes`, or drop `packed`"},
    DiagCodeInfo{DiagCode::WAxisSize1, "W-AXIS-SIZE-1", Severity::Warning, ExitCode::Invalid,
                 "`Shard` on an axis of size 1, or a ZeRO stage whose data-parallel group is one "
                 "rank (no effect)",
                 "drop it, or give the axis a size > 1"},
    DiagCodeInfo{DiagCode::WModuleOrder, "W-MODULE-ORDER", Severity::Warning, ExitCode::Invalid,
                 "a checkpoint's architecture (or some of its names) has no module-order rules: "
                 "natural order used, buffer offsets may differ from `named_parameters()`",
                 "dump the module with `tools/dump_model.py` and use that model file"},
    DiagCodeInfo{DiagCode::WFlatYaml, "W-FLAT-YAML", Severity::Warning, ExitCode::Invalid,
                 "a YAML model lists more than 10,000 params one by one (no `repeat` groups "
                 "around them): yaml-cpp reads such a file at a few MB/s (a JSON inventory is "
                 "read ~10× faster)",
                 "write repeated layers as `repeat` groups (`shardc import` writes that compact "
                 "form), or pass the JSON inventory"},
    DiagCodeInfo{DiagCode::WHeadsUnknown, "W-HEADS-UNKNOWN", Severity::Warning, ExitCode::Invalid,
                 "an attention projection is sharded by head over tp > 1 but the model gives no "
                 "`num_attention_heads`, so E-HEADS (whole heads per rank) was not checked; a "
                 "checkpoint without config.json also loses its ties (`lm_head`)",
                 "add `num_attention_heads` / `num_key_value_heads` to the model's `attributes` "
                 "(`shardc import` copies them from config.json)"},
    DiagCodeInfo{
        DiagCode::WPipelineSplit, "W-PIPELINE-SPLIT", Severity::Warning, ExitCode::Invalid,
        "`stages: auto` cuts the layer blocks into model chunks (stages x `virtual_stages`) of "
        "unequal sizes (e.g. 80 layers over pp 6: 14/14/13/13/13/13); reported for "
        "Megatron-Core names (`decoder.layers.N`) only: Megatron refuses it unless told how "
        "(transformer_config.py), torchtitan cuts unequal stages itself",
        "a pp (x vp) dividing the layers, or Megatron's `num_layers_in_first_pipeline_stage` / "
        "`num_layers_in_last_pipeline_stage`, `account_for_embedding_in_pipeline_split` / "
        "`account_for_loss_in_pipeline_split`, `pipeline_model_parallel_layout` with explicit "
        "`stages`"},
    DiagCodeInfo{DiagCode::WHeadIndexed, "W-HEAD-INDEXED", Severity::Warning, ExitCode::Invalid,
                 "a param indexed by attention head (gpt-oss `sinks`, a per-head norm, the "
                 "model's `head_indexed:`) is replicated over the axes that split its q (or k) "
                 "projection by head: each rank holds every head's entries but computes only "
                 "its own heads (split differently: E-HEADS)",
                 "split it like the projection's head dim (the message names the axes), as "
                 "transformers' Granite-SWA tp plan shards `self_attn.sinks` colwise with "
                 "`q_proj`"},
    DiagCodeInfo{DiagCode::WCheckpoint, "W-CHECKPOINT", Severity::Warning, ExitCode::Invalid,
                 "what a checkpoint says that `import` did not take as a trainable param: "
                 "module buffers left out (rotary `inv_freq`, GPT-2 `attn.bias` / "
                 "`attn.masked_bias`, int64 `position_ids`; a note), a safetensors file the "
                 "loader does not read (not named by the index, or beside model.safetensors "
                 "without one: left out, as the loaders do), a tensor of an indexed file the "
                 "index does not list (kept), a config that says untied for a checkpoint "
                 "without an output head or tied for one that stores its own, config.json's "
                 "vocab_size or num_hidden_layers against the tensors, quantization state of a "
                 "method shardc does not know",
                 "read the message: re-download or re-index the files, fix config.json, or "
                 "check the imported model (docs/import.md lists what each case means)"},
    DiagCodeInfo{DiagCode::WBalance, "W-BALANCE", Severity::Warning, ExitCode::Invalid,
                 "a layout leaves ranks holding only padding of a param of at least 2^20 "
                 "elements (FSDP on dim 0 of 16 experts over 32 ranks; routers and norms are "
                 "left out), or the largest and smallest rank of a pipeline stage differ by "
                 "more than 2x in parameter or optimizer-state bytes (gaps under 2^20 bytes left "
                 "out); names the param, dim and degree",
                 "the `expert_dim` / FSDP `dim` or the degree the hint gives (one dividing the "
                 "extent)"},
    DiagCodeInfo{DiagCode::WModuleBuffer, "W-MODULE-BUFFER", Severity::Warning, ExitCode::Invalid,
                 "a model file lists a tensor named as a module buffer, not a parameter "
                 "(rotary `inv_freq`, Gemma's 0-d `embed_scale`, GPT-2's causal masks "
                 "`attn.bias` / `attn.masked_bias`) and trainable: it would be planned with "
                 "grads, optimizer state and an FSDP shard, where FSDP2 shards only parameters "
                 "and leaves buffers whole on every rank (integer tensors, `position_ids`, are "
                 "frozen: torch lets only floating point tensors require grad)",
                 "drop it from the model (`shardc import` leaves buffers out), or mark it "
                 "`requires_grad: false` if it really is a frozen param"},
    DiagCodeInfo{DiagCode::WFsdpDtypes, "W-FSDP-DTYPES", Severity::Warning, ExitCode::Invalid,
                 "an FSDP unit of an `fsdp2_allgather` buffer holds trainable params of more "
                 "than one dtype (as the model lists them): FSDP2 refuses such a unit at its "
                 "first forward (\"FSDP expects uniform original parameter dtype\", torch 2.13 "
                 "FSDPParamGroup._init_mp_dtypes), mixed-precision policy or not, unless the "
                 "runtime casts them to one dtype on load",
                 "if your runtime keeps these dtypes, cast the odd param, freeze it "
                 "(`requires_grad: false`) or name its module as a unit of its own; if it "
                 "casts on load (from_pretrained(torch_dtype=...)), list the dtype it trains "
                 "in"},
};

/// The row of `code`.
constexpr const DiagCodeInfo& diag_code_info(DiagCode code) {
  return kDiagCodes[static_cast<std::size_t>(code)];
}

/// The stable name of `code`, e.g. "E-HEADS".
constexpr std::string_view code_name(DiagCode code) { return diag_code_info(code).name; }

/// The code named `name` ("E-HEADS"); nullopt for an unknown name.
constexpr std::optional<DiagCode> find_diag_code(std::string_view name) {
  for (const DiagCodeInfo& info : kDiagCodes) {
    if (info.name == name) return info.code;
  }
  return std::nullopt;
}

namespace detail {
constexpr bool diag_table_in_order() {
  for (std::size_t i = 0; i < kDiagCodes.size(); ++i) {
    if (static_cast<std::size_t>(kDiagCodes[i].code) != i) return false;
  }
  return true;
}
}  // namespace detail
static_assert(detail::diag_table_in_order(), "kDiagCodes rows must follow DiagCode's order");

}  // namespace shardc
