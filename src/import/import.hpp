// Import: Hugging Face checkpoints (config.json + safetensors headers) and
// plain inventories as models, and the compact model writer (`shardc import`).
//
// Only safetensors *headers* are read (the 8-byte little-endian length, then
// the JSON header: name -> {dtype, shape, data_offsets}); tensor data never
// is, so a 671B checkpoint is planned from a few MB of headers. Every problem
// is an E-CHECKPOINT diagnostic naming the file (and the tensor when there is
// one), exit 2. Nothing is allocated in proportion to a size the input claims:
// a header is read only after its length was checked against the file size
// and the 100 MB bound.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/diagnostics.hpp"
#include "core/model.hpp"
#include "shardc/file_system.hpp"
#include "support/limits.hpp"
#include "support/shape.hpp"

namespace shardc {

/// Largest safetensors JSON header accepted (shardc/limits.hpp).
using limits::kMaxSafetensorsHeaderBytes;

/// One tensor entry of a safetensors header.
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;             ///< elements
  std::int64_t begin = 0;  ///< data_offsets[0], bytes from the start of the data section
  std::int64_t end = 0;    ///< data_offsets[1] (exclusive)
};

/// A parsed header: tensors in the header's (file) order.
struct SafetensorsHeader {
  std::int64_t header_bytes = 0;  ///< N, the JSON length (the data starts at 8 + N)
  std::vector<SafetensorsTensor> tensors;
};

/// Reads the header length from the first 8 bytes of `prefix` (little
/// endian) and checks it against `file_size` and kMaxSafetensorsHeaderBytes.
/// E-CHECKPOINT (file `path`) and nullopt when the file is shorter than 8
/// bytes or the length is out of bounds.
std::optional<std::int64_t> safetensors_header_length(std::string_view prefix,
                                                      std::int64_t file_size,
                                                      const std::string& path,
                                                      DiagnosticSink& sink);

/// Parses the JSON header `json` (the N bytes after the length) of a file of
/// `file_size` bytes. Checks: the JSON is an object; `__metadata__` is an
/// object of strings (or null); each other entry is an object with a known
/// `dtype` (safetensors codes BOOL, U8, U16, U32, U64, I8, I16, I32, I64,
/// F8_E4M3, F8_E5M2, F8_E8M0, F16, BF16, F32, F64), a `shape` of non-negative
/// int64 extents with numel < 2^62 and `data_offsets` [begin, end] with begin
/// <= end <= the data size; end - begin equals numel x element size; no name
/// repeats; and, as safetensors' `Metadata::validate`, the tensors sorted by
/// offset tile the data section exactly (from 0, no gap, no overlap, the last
/// one ending at the file's end).
/// Every problem is an E-CHECKPOINT error with `path` and the tensor name;
/// nullopt if any was found.
std::optional<SafetensorsHeader> parse_safetensors_header(std::string_view json,
                                                          std::int64_t file_size,
                                                          const std::string& path,
                                                          DiagnosticSink& sink);

/// Reads and parses the header of one safetensors file through `fs` with two
/// bounded reads (8 bytes, then exactly N bytes).
std::optional<SafetensorsHeader> read_safetensors_header(FileSystem& fs, const std::string& path,
                                                         DiagnosticSink& sink);

/// One attribute value as written to the compact model: its YAML scalar
/// text and its JSON text (equal for numbers, booleans and lists of them).
struct RawAttribute {
  std::string key;
  std::string yaml;
  std::string json;
};

/// What `config.json` contributes (Hugging Face names; `text_config` of
/// multimodal configs is merged under the top level).
struct CheckpointConfig {
  std::vector<std::string> architectures;  ///< e.g. {"LlamaForCausalLM"}
  std::string model_type;                  ///< e.g. "llama"
  std::string name;                        ///< last segment of `_name_or_path`, or empty
  ModelAttributes attributes;              ///< heads, experts, vocab, tie, block size
  /// Attributes in output order (`num_attention_heads: 32`), for the compact writer.
  std::vector<RawAttribute> raw_attributes;
  /// `quantization_config.quant_method` ("bitsandbytes", "fp8", "gptq", ...), or empty.
  std::string quant_method;
  /// `text_config.tie_word_embeddings` when the config has one: transformers 5 ties
  /// the output head by the top-level value of a composite config (modeling_utils.py
  /// get_expanded_tied_weights_keys reads `self.config.tie_word_embeddings`; e.g.
  /// Qwen3VLConfig's own default false), so this one only decides a note.
  std::optional<bool> text_tie_word_embeddings;
  /// True when the top level states `tie_word_embeddings` (else transformers' default).
  bool tie_stated = false;
  /// Not stated: the transformers config class whose default `attributes` holds
  /// ("LlamaConfig"), or empty when shardc does not know the class's default (then
  /// import_checkpoint ties iff the checkpoint stores no lm_head.weight).
  std::string tie_default_class;
  /// `num_hidden_layers` (`n_layer`), text_config first.
  std::optional<std::int64_t> num_hidden_layers;
  /// DeepSeek's `num_nextn_predict_layers` (MTP blocks stored after the decoder's), else 0.
  std::int64_t num_nextn_predict_layers = 0;
  /// `vision_config`, `audio_config`, ... of a multimodal config: each sub-config's
  /// attributes (config key aliases `num_heads`, `encoder_attention_heads`, `embed_dim`,
  /// `d_model`), with `prefix` still empty (import finds it in the checkpoint's names).
  std::vector<SubModel> subconfigs;
};

/// Parses config.json text. Accepts the attribute aliases of the
/// transformers configs (`n_head`, `n_embd`, `n_layer`, `n_routed_experts`,
/// `num_local_experts`); counts from `text_config` first, then the top level;
/// `tie_word_embeddings` from the top level (as transformers ties); absent, the default
/// of the config class the model type selects when shardc knows it (`tie_default_class`),
/// else true (PretrainedConfig's; import decides by the tensors). E-CHECKPOINT for text that is
/// not a JSON object and for counts outside [1, 2^31) (experts [0, 2^31)).
std::optional<CheckpointConfig> parse_hf_config(std::string_view text, const std::string& path,
                                                DiagnosticSink& sink);

/// Whose modules' registration order `order_params` follows: transformers 4
/// (the default) or 5. They differ for Qwen3-MoE only: transformers 5's
/// Qwen3MoeSparseMoeBlock registers `experts` before `gate` (4.x: `gate`
/// first), which moves FSDP2 and muon offsets.
enum class TransformersOrder { V4, V5 };

/// Puts `params` in the module's registration (named_parameters()) order.
/// For the architectures with ordering rules (see module_order_rules.cpp:
/// Llama, Qwen2, Qwen3-MoE, Mixtral, DeepSeek-V3, Gemma-2, GPT-2; matched by
/// `architectures` then `model_type`) that order is exact. Otherwise, and for
/// names the rules do not know, the natural order is used: names compared
/// segment by segment, numeric segments as numbers. Returns the number of
/// params that were placed by the natural order (0 = exact).
std::size_t order_params(std::vector<Param>& params, const CheckpointConfig& config,
                         TransformersOrder transformers = TransformersOrder::V4);

/// A model with what the compact writer needs beyond `Model`.
struct ImportedModel {
  Model model;  ///< params in module order, ties, attributes, name
  /// Attributes in output order.
  std::vector<RawAttribute> raw_attributes;
  /// `# key: value` lines of the header (hf_repo, architecture, ...).
  std::vector<std::pair<std::string, std::string>> comments;
  std::string source;                        ///< file or directory name, for the header comment
  std::optional<std::string> default_dtype;  ///< the inventory's `dtype`, if given
};

/// True when `path` names a checkpoint: a directory, or a file ending in
/// `.safetensors`.
bool is_checkpoint_path(FileSystem& fs, const std::string& path);

/// Imports a checkpoint directory (`config.json` and `*.safetensors`, with
/// or without `model.safetensors.index.json`) or one `.safetensors` file
/// (its directory's config.json used when present). Params in module order
/// (order_params; W-MODULE-ORDER when the order is not exact), ties from
/// `tie_word_embeddings` (lm_head.weight added as an alias of the input
/// embedding when the checkpoint does not store it). E-CHECKPOINT for
/// unreadable or hostile files, an index naming a missing file or tensor,
/// names repeated across files. `model.sha256` is the digest of the compact
/// YAML `render_model_yaml` writes for it (so compiling the directory and
/// compiling `shardc import DIR -o m.yaml` give the same plan.json).
std::optional<ImportedModel> import_checkpoint(
    FileSystem& fs, const std::string& path, DiagnosticSink& sink,
    TransformersOrder transformers = TransformersOrder::V4);

/// Imports a model description or plain inventory (`*.params.json`) already
/// read: parse_model, plus the inventory's raw `attributes` and header keys
/// for the compact writer.
std::optional<ImportedModel> import_model_file(const std::string& path, const std::string& text,
                                               DiagnosticSink& sink);

/// The compact shardc.model/v1 YAML: runs of consecutive blocks
/// `<prefix>.<n>.<rest>` with identical per-block lists (suffix, shape,
/// dtype) folded into nested `repeat` groups; the default dtype is the
/// inventory's `dtype` or the most common one; `tied` pairs last. Expanding
/// it gives back `imported.model.params` exactly. Deterministic bytes.
std::string render_model_yaml(const ImportedModel& imported);

/// The plain inventory JSON (`{model, dtype, tie_word_embeddings,
/// tied_weights, attributes, params}`), one param per line.
std::string render_model_json(const ImportedModel& imported);

/// A param of transformers' module that its loader builds from checkpoint tensors of
/// other names (tools/hf_tp_plan.py `sources`, from transformers' own key conversion:
/// conversion_mapping.py, core_model_loading.py `rename_source_key`): Mixtral's
/// `model.layers.0.mlp.experts.gate_up_proj` [E, 2I, H] is `MergeModulelist(dim=0)` of
/// `...block_sparse_moe.experts.{0..E-1}.w1.weight` and of `...w3.weight`, then
/// `Concatenate(dim=1)`; a pure renaming (`block_sparse_moe.gate` -> `mlp.gate`) has no
/// operation and one part of one key.
struct HfSource {
  std::string param;  ///< transformers' name
  Shape shape;        ///< its shape in transformers' module
  /// (op, dim) in the order the loader runs them; dim nullopt when the op has none
  std::vector<std::pair<std::string, std::optional<std::int64_t>>> operations;
  std::vector<std::vector<std::string>> parts;  ///< checkpoint keys per source pattern, load order
};

/// A Hugging Face tensor-parallel plan (transformers' `model.tp_plan`: module FQN
/// patterns, `*` for one segment, to a style name such as `colwise`), as written by
/// tools/hf_tp_plan.py: `{"format": "shardc.hf-tp-plan/v1", "architecture": ...,
/// "transformers": <version>, "tp_plan": {pattern: style}, "sources": {...}}`
/// (`sources` optional: only a dump of a checkpoint directory has it).
struct HfTpPlan {
  std::string architecture;
  std::string transformers_version;
  std::vector<std::pair<std::string, std::string>>
      entries;  ///< (module pattern, style), file order
  /// transformers' `model.ep_plan` (expert parallelism: `grouped_gemm` on the experts'
  /// params, `ep_dispatch_experts` on the experts module), file order; empty when the
  /// dump has none (an architecture without `base_model_ep_plan`, or an older dump)
  std::vector<std::pair<std::string, std::string>> ep_entries;
  std::vector<HfSource> sources;  ///< file order
};

/// The parallel sizes a recipe is written for: `tp` ranks on the dense mesh's `tp` axis,
/// `ep` on the expert mesh's `ep` axis (1: no expert parallelism).
struct HfParallelSizes {
  std::int64_t tp = 1;
  std::int64_t ep = 1;
};

/// Parses the plan file `json`; E-HF-TP-PLAN (file `path`) and nullopt when it is not one.
std::optional<HfTpPlan> parse_hf_tp_plan(std::string_view json, const std::string& path,
                                         DiagnosticSink& sink);

/// The shardc recipe (YAML text) that places `model`'s params as transformers' tensor
/// parallelism does over one axis `tp` of `tp_size` ranks. Styles and the placement
/// transformers gives each (transformers/distributed/tensor_parallel.py): colwise,
/// colwise_rep, colwise_gather_output: weight Shard(-2), bias Shard(-1); rowwise,
/// rowwise_rep, rowwise_split_input: weight Shard(-1), bias replicated;
/// embedding_rowwise: weight Shard(0); embedding_colwise: weight Shard(1);
/// packed_colwise / packed_rowwise: as colwise / rowwise with `packed: {parts: 2}` on
/// the split dim (gate|up); sequence_parallel, replicated_with_grad_allreduce,
/// all_reduce, replicate, local_params: replicated. A rule per (entry, `.weight` /
/// `.bias`) that matches params of `model`, then `**` replicated; `tied: auto`.
/// An entry naming a param transformers builds from other checkpoint tensors
/// (`plan.sources`: the fused MoE experts) places those tensors as transformers'
/// loader cuts them for the fused param's placement (DtensorShardOperation: each
/// expert's tensor on its own, the stacked dim 0 dropped): `_StridedShard(c, sf=n)` of
/// the dim `Concatenate` joins n parts on is `Shard(c - 1)` of each part, `Shard(d)` of
/// another dim `Shard(d - 1)`. E-HF-TP-PLAN for any other style (grouped GEMM, MLA
/// kv_a), a placement no per-tensor placement states (dim 0 of the stacked experts, a
/// plain Shard of the concatenated dim), and an expert entry that matches nothing;
/// nullopt then.
///
/// With `sizes.ep` > 1 the plan's `ep_plan` is translated too, as transformers 5.24
/// applies it (transformers/distributed/expert_parallel.py, mixin.py
/// `_resolve_parallel_plans`): an expert mesh `[ep]` over the same ranks (transformers'
/// `(pp, dp_replicate, efsdp, ep)` with efsdp = fsdp x tp / ep = 1 without FSDP, so ep must
/// equal tp), `grouped_gemm` (MoEParamShard(Shard(0))) of a param as an `experts` entry
/// `placements: {ep: Shard(0)}` — `stacked_dim: 0` on the param itself when the checkpoint
/// stores it pre-stacked, else one entry per source pattern of its `sources` (the
/// per-expert checkpoint tensors, the expert index `{E}`, the other indices `{L}`) — and
/// `ep_dispatch_experts` as a comment (it hooks the module's forward). The tp_plan's
/// entries on an ep_plan module or below it are dropped (transformers: "EP rules take
/// precedence"), each named in a comment. E-HF-TP-PLAN for ep != tp, a dump without
/// `ep_plan`, another ep style, and a grouped_gemm entry that matches nothing.
std::optional<std::string> hf_tp_plan_recipe(const HfTpPlan& plan, const Model& model,
                                             HfParallelSizes sizes, const std::string& path,
                                             DiagnosticSink& sink);

}  // namespace shardc
