// import_checkpoint: a Hugging Face checkpoint directory (config.json,
// model.safetensors.index.json, *.safetensors) or one .safetensors file as a
// Model: headers only, module order, ties.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <set>
#include <span>
#include <unordered_map>

#include "core/fused.hpp"
#include "core/layer_blocks.hpp"
#include "core/module_buffers.hpp"
#include "frontend/frontend.hpp"
#include "import/import_internal.hpp"
#include "import/module_order.hpp"
#include "support/fqn.hpp"
#include "support/limits.hpp"

namespace shardc {
namespace {

constexpr std::string_view kIndexName = "model.safetensors.index.json";
constexpr std::int64_t kMaxJsonBytes = limits::kMaxCheckpointJsonBytes;

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir == "." ? name : dir + "/" + name;
}

std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

void fail(DiagnosticSink& sink, const std::string& file, std::string message, std::string hint,
          const std::string& tensor = {}) {
  Diagnostic diag;
  diag.code = DiagCode::ECheckpoint;
  diag.loc = SourceLoc{file, 0, 0};
  diag.param = tensor;
  diag.message = std::move(message);
  diag.hint = std::move(hint);
  sink.report(std::move(diag));
}

// The checkpoint's files and, with an index, which tensors each must hold.
struct Layout {
  std::string dir;
  std::vector<std::string> files;  // names inside dir, sorted
  // Index only: tensor -> position in `files`; the keys view `index_parser`'s strings.
  std::unordered_map<std::string_view, std::uint32_t> weight_map;
  std::unique_ptr<simdjson::dom::parser> index_parser;
  bool indexed = false;
  // *.safetensors files of the directory that are not read: with an index, those it does not
  // name; without one, all but model.safetensors when it exists.
  std::vector<std::string> unindexed;
};

constexpr std::string_view kSingleName = "model.safetensors";

bool read_index(FileSystem& fs, Layout& layout, DiagnosticSink& sink) {
  const std::string path = join(layout.dir, std::string(kIndexName));
  std::string error;
  const std::optional<std::string> text = fs.read_regular(path, kMaxJsonBytes, error);
  if (!text) {
    fail(sink, path, "cannot read the index: " + error, "check the file");
    return false;
  }
  layout.index_parser = std::make_unique<simdjson::dom::parser>();
  const simdjson::padded_string padded(*text);
  simdjson::dom::element root;
  simdjson::dom::object map;
  if (layout.index_parser->parse(padded).get(root) != simdjson::SUCCESS ||
      root["weight_map"].get_object().get(map) != simdjson::SUCCESS) {
    fail(sink, path, "the index is not a JSON object with a `weight_map` object",
         "model.safetensors.index.json maps tensor names to file names");
    return false;
  }
  std::vector<std::string> files;
  std::vector<std::string_view> file_of;
  layout.weight_map.reserve(map.size());
  for (simdjson::dom::key_value_pair kv : map) {
    std::string_view file;
    if (kv.value.get_string().get(file) != simdjson::SUCCESS || file.empty() ||
        file.find('/') != std::string_view::npos || file == "." || file == "..") {
      fail(sink, path, "`weight_map` entry names no plain file name in the checkpoint directory",
           "values are file names such as model-00001-of-00002.safetensors", std::string(kv.key));
      return false;
    }
    if (const std::string_view why = fqn_problem(kv.key, false); !why.empty()) {
      fail(sink, path,
           "`weight_map` key '" + imp::printable(kv.key) + "': the name " + std::string(why),
           "keys are tensor FQNs such as model.layers.0.mlp.up_proj.weight",
           imp::printable(kv.key));
      return false;
    }
    if (!layout.weight_map.emplace(kv.key, 0).second) {
      // simdjson keeps both members; which file holds the tensor would depend on the reader.
      fail(sink, path, "`weight_map` lists tensor '" + std::string(kv.key) + "' twice",
           "each tensor appears once in the index; regenerate it", std::string(kv.key));
      return false;
    }
    file_of.push_back(file);
    if (files.empty() || files.back() != file) files.emplace_back(file);
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  std::size_t i = 0;
  for (simdjson::dom::key_value_pair kv : map) {
    const auto pos = std::lower_bound(files.begin(), files.end(), file_of[i++]);
    layout.weight_map[kv.key] = static_cast<std::uint32_t>(pos - files.begin());
  }
  layout.files = std::move(files);
  layout.indexed = true;
  return true;
}

std::optional<Layout> find_layout(FileSystem& fs, const std::string& path,
                                  const std::optional<std::vector<std::string>>& listing,
                                  DiagnosticSink& sink) {
  Layout layout;
  if (!listing) {
    layout.dir = parent_dir(path);
    layout.files = {base_name(path)};
    return layout;
  }
  layout.dir = path;
  while (layout.dir.size() > 1 && layout.dir.back() == '/') layout.dir.pop_back();
  if (std::find(listing->begin(), listing->end(), kIndexName) != listing->end()) {
    if (!read_index(fs, layout, sink)) return std::nullopt;
    for (const std::string& listed_file : layout.files) {
      if (std::find(listing->begin(), listing->end(), listed_file) == listing->end()) {
        std::string example;
        const auto f_index = static_cast<std::uint32_t>(&listed_file - layout.files.data());
        for (const auto& [tensor, file] : layout.weight_map) {
          if (file == f_index && (example.empty() || tensor < example)) example = tensor;
        }
        fail(sink, join(layout.dir, std::string(kIndexName)),
             "the index names '" + listed_file + "' (e.g. for tensor '" + example +
                 "'), but the directory has no such file",
             "download the missing shard, or regenerate the index", example);
      }
    }
    if (sink.has_errors()) return std::nullopt;
    for (const std::string& name : *listing) {
      if (name.ends_with(".safetensors") &&
          !std::binary_search(layout.files.begin(), layout.files.end(), name))
        layout.unindexed.push_back(name);
    }
    std::sort(layout.unindexed.begin(), layout.unindexed.end());
    return layout;
  }
  // Without an index transformers' loader reads model.safetensors alone
  // (modeling_utils.py _get_resolved_checkpoint_files: SAFE_WEIGHTS_NAME, then the index):
  // a Mistral repo's consolidated.safetensors or an adapter beside it is not the model.
  // Without either, every *.safetensors file is read (transformers would find no weights).
  const bool single = std::find(listing->begin(), listing->end(), kSingleName) != listing->end();
  for (const std::string& name : *listing) {
    if (!name.ends_with(".safetensors")) continue;
    if (!single || name == kSingleName)
      layout.files.push_back(name);
    else
      layout.unindexed.push_back(name);
  }
  std::sort(layout.unindexed.begin(), layout.unindexed.end());
  if (layout.files.empty()) {
    fail(sink, path, "the directory has no *.safetensors files",
         "a checkpoint directory holds config.json and model*.safetensors");
    return std::nullopt;
  }
  return layout;
}

std::optional<CheckpointConfig> read_config(FileSystem& fs, const std::string& dir,
                                            DiagnosticSink& sink, bool& found) {
  const std::string path = join(dir, "config.json");
  std::string error;
  // Only a name that is not there means "no config.json": a directory, device, FIFO or an
  // unreadable file under that name is an error (the tie and head counts would be lost).
  const std::optional<std::vector<std::string>> names = fs.list_dir(dir);
  found = names && std::find(names->begin(), names->end(), "config.json") != names->end();
  if (!found) return CheckpointConfig{};
  const std::optional<std::string> text = fs.read_regular(path, kMaxJsonBytes, error);
  if (!text) {
    fail(sink, path, "cannot read config.json: " + error, "check the file");
    return std::nullopt;
  }
  return parse_hf_config(*text, path, sink);
}

// Reads every header; params in file order, names unique across files.
bool collect_params(FileSystem& fs, const Layout& layout, std::vector<Param>& params,
                    DiagnosticSink& sink) {
  simdjson::dom::parser parser;
  // tensor -> file path (no index; with one, the tensors the index does not list)
  std::unordered_map<std::string, std::string> owner;
  std::size_t matched = 0;
  std::vector<std::pair<std::string, std::string>> unlisted;  // (tensor, file name)
  for (std::size_t f = 0; f < layout.files.size(); ++f) {
    const std::string path = join(layout.dir, layout.files[f]);
    std::optional<SafetensorsHeader> header = imp::read_header_with(parser, fs, path, sink);
    if (!header) continue;
    for (SafetensorsTensor& tensor : header->tensors) {
      if (layout.indexed) {
        // With an index each name belongs to exactly one file: no cross-file duplicates.
        const auto it = layout.weight_map.find(tensor.name);
        if (it != layout.weight_map.end() && it->second != f) {
          spdlog::debug("{}: '{}' is indexed in another file; skipped", path, tensor.name);
          continue;
        }
        if (it != layout.weight_map.end()) {
          ++matched;
        } else if (const auto [other, fresh] = owner.emplace(tensor.name, path); !fresh) {
          fail(sink, path,
               "tensor '" + tensor.name + "', which the index does not list, is also stored in '" +
                   other->second + "'",
               "a name may appear in one file only: remove the stale copy, or list the tensor in "
               "the index",
               tensor.name);
          continue;
        } else {
          // transformers' loader reads every tensor of every indexed file (the index only
          // chooses the files), so the module gets it: kept, and said.
          unlisted.emplace_back(tensor.name, layout.files[f]);
        }
      } else if (const auto [it, fresh] = owner.emplace(tensor.name, path); !fresh) {
        fail(sink, path, "tensor '" + tensor.name + "' is also stored in '" + it->second + "'",
             "a name may appear in one file only: remove the stale shard", tensor.name);
        continue;
      }
      params.push_back(
          Param{std::move(tensor.name), std::move(tensor.shape), tensor.dtype, true, {path, 0, 0}});
    }
  }
  if (!unlisted.empty() && !sink.has_errors()) {
    std::string names;
    for (std::size_t i = 0; i < unlisted.size() && i < 3; ++i)
      names += (i == 0 ? "'" : ", '") + imp::printable(unlisted[i].first) + "' (in " +
               imp::printable(unlisted[i].second) + ")";
    if (unlisted.size() > 3) names += ", ...";
    Diagnostic diag;
    diag.severity = Severity::Warning;
    diag.code = DiagCode::WCheckpoint;
    diag.loc = SourceLoc{join(layout.dir, std::string(kIndexName)), 0, 0};
    diag.param = imp::printable(unlisted.front().first);
    diag.message = std::to_string(unlisted.size()) + " tensor" +
                   (unlisted.size() == 1 ? " that an indexed file holds is"
                                         : "s that indexed files hold are") +
                   " not listed in the index's weight_map: " + names +
                   "; transformers' loader reads every tensor of the indexed files, so " +
                   (unlisted.size() == 1 ? "it is kept as a param" : "they are kept as params");
    diag.hint =
        "regenerate model.safetensors.index.json so that it lists every tensor of its files "
        "(or remove the stale tensors from the shards)";
    sink.report(std::move(diag));
  }
  if (layout.indexed && !sink.has_errors() && matched != layout.weight_map.size()) {
    std::unordered_map<std::string_view, bool> have;
    for (const Param& param : params) have.emplace(param.name, true);
    for (const auto& [tensor, file] : layout.weight_map) {
      if (!have.contains(tensor)) {
        fail(sink, join(layout.dir, layout.files[file]),
             "the index lists tensor '" + std::string(tensor) +
                 "' in this file, but its header does not have it",
             "the shard is stale or the index is wrong: re-download both", std::string(tensor));
      }
    }
  }
  return !sink.has_errors();
}

// W-CHECKPOINT for each *.safetensors file the loader does not read: with an index, the
// files `weight_map` does not name; without one, all but model.safetensors
// (modeling_utils.py _get_resolved_checkpoint_files), so its tensors are not part of the
// model; the user should know what is left out (huggingface_hub#4725: an MTP shard skipped
// silently; a Mistral repo's consolidated.safetensors beside model.safetensors).
void warn_unindexed(FileSystem& fs, const Layout& layout, DiagnosticSink& sink) {
  simdjson::dom::parser parser;
  for (const std::string& name : layout.unindexed) {
    const std::string path = join(layout.dir, name);
    DiagnosticSink local;
    const std::optional<SafetensorsHeader> header = imp::read_header_with(parser, fs, path, local);
    std::string what;
    if (header) {
      what = "its " + std::to_string(header->tensors.size()) + " tensor" +
             (header->tensors.size() == 1 ? "" : "s");
      if (!header->tensors.empty())
        what += " (e.g. '" + imp::printable(header->tensors.front().name) + "')";
      what += " are left out of the model";
    } else {
      what = "it is left out (its header is not readable: " +
             (local.items().empty() ? std::string("?") : local.items().front().message) + ")";
    }
    Diagnostic diag;
    diag.severity = Severity::Warning;
    diag.code = DiagCode::WCheckpoint;
    diag.loc = SourceLoc{path, 0, 0};
    if (layout.indexed) {
      diag.message = "'" + imp::printable(name) + "' is a safetensors file that " +
                     std::string(kIndexName) + " does not name: " + what +
                     ", as transformers' loader reads only the indexed files";
      diag.hint =
          "if the file belongs to the model (an MTP head, a newer shard), regenerate the "
          "index; else remove the stale file";
    } else {
      diag.message = "'" + imp::printable(name) +
                     "' is a safetensors file beside model.safetensors, with no " +
                     std::string(kIndexName) + ": " + what +
                     ", as transformers' loader reads only model.safetensors without an index";
      diag.hint =
          "if the file belongs to the model, write a model.safetensors.index.json naming "
          "every file; else (a Mistral-format consolidated.safetensors, an adapter) nothing to "
          "do, or move it out of the directory";
    }
    sink.report(std::move(diag));
  }
}

// Checkpoint tensors that are module buffers or quantization metadata, not
// parameters: transformers 5 drops them on load, so they are left out of the
// model (a W-CHECKPOINT note names them). Empty when `param` is a parameter.
std::string_view left_out_reason(const Param& param, const CheckpointConfig& config) {
  if (const std::string_view why = module_buffer_reason(param.name, param.shape, param.dtype);
      !why.empty())
    return why;
  const auto dot = param.name.rfind('.');
  const std::string_view leaf = dot == std::string::npos
                                    ? std::string_view(param.name)
                                    : std::string_view(param.name).substr(dot + 1);
  // bitsandbytes 8-bit: serialized_names {"weight": ["weight", "SCB", "weight_format"]}
  // (quantizers/quantizer_bnb_8bit.py); Bnb8bitDeserialize folds SCB into the Int8Params
  // weight and drops weight_format.
  if (config.quant_method == "bitsandbytes" && leaf == "weight_format")
    return "bitsandbytes weight_format entries (serialization metadata of the int8 weight: "
           "quantizer_bnb_8bit.py serialized_names; Bnb8bitDeserialize drops it)";
  return {};
}

// A bitsandbytes quantization state beside its weight: 8-bit `SCB` (an attribute of the
// Int8Params weight, requires_grad=False: integrations/bitsandbytes.py) and the 4-bit
// `weight.absmax` / `quant_map` / `nested_*` / `quant_state.*` (quantizer_bnb_4bit.py
// serialized_names). Frozen: no grads, no optimizer state.
bool bnb_state(std::string_view name, const CheckpointConfig& config) {
  if (config.quant_method != "bitsandbytes") return false;
  for (std::string_view leaf : {".SCB", ".weight.absmax", ".weight.quant_map",
                                ".weight.nested_absmax", ".weight.nested_quant_map"})
    if (name.ends_with(leaf)) return true;
  return name.find(".weight.quant_state.") != std::string_view::npos;
}

// Leaves out the buffers and metadata left_out_reason names (a note per kind, and a
// header comment in the compact model), and marks tensors that cannot require grad
// frozen: integer dtypes (torch: only floating point tensors require gradients;
// bitsandbytes' Int8Params(requires_grad=False)) and bitsandbytes states (bnb_state).
void drop_buffers(std::vector<Param>& params, const CheckpointConfig& config,
                  const std::string& where, ImportedModel& im, DiagnosticSink& sink) {
  struct Kind {
    std::string_view reason;
    std::size_t count = 0;
    std::string first;
  };
  std::vector<Kind> kinds;
  std::size_t kept = 0;
  std::size_t total = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    Param& param = params[i];
    const std::string_view why = left_out_reason(param, config);
    if (why.empty()) {
      if (!can_require_grad(param.dtype) || bnb_state(param.name, config))
        param.requires_grad = false;
      if (kept != i) params[kept] = std::move(param);
      ++kept;
      continue;
    }
    auto it = std::find_if(kinds.begin(), kinds.end(),
                           [&](const Kind& kind) { return kind.reason == why; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), Kind{why, 0, param.name});
    ++it->count;
    ++total;
  }
  params.resize(kept);
  for (const Kind& kind : kinds) {
    Diagnostic diag;
    diag.severity = Severity::Note;
    diag.code = DiagCode::WCheckpoint;
    diag.loc = SourceLoc{where, 0, 0};
    diag.param = kind.first;
    diag.message = "left out " + std::to_string(kind.count) + " " + std::string(kind.reason) +
                   ", e.g. '" + imp::printable(kind.first) +
                   "': module buffers and metadata are not trainable params (no grads or optimizer "
                   "state)";
    diag.hint =
        "nothing to do: the module computes or ignores them; docs/import.md lists what "
        "import leaves out";
    sink.report(std::move(diag));
  }
  if (total > 0)
    im.comments.emplace_back("left out (buffers, not params)",
                             std::to_string(total) + ", e.g. " + kinds.front().first);
}

// GPT-2's hub files omit the base model prefix ("wte.weight" for "transformer.wte.weight").
void add_base_prefix(std::vector<Param>& params, const imp::ArchRules* rules) {
  if (rules == nullptr || rules->base_prefix.empty()) return;
  const std::string prefix = rules->base_prefix + ".";
  for (const Param& param : params) {
    if (param.name.starts_with(prefix)) return;
  }
  const auto root = rules->children.find("");
  for (Param& param : params) {
    const std::string first = param.name.substr(0, param.name.find('.'));
    if (root != rules->children.end() && root->second.contains(first)) continue;
    param.name = prefix + param.name;
  }
}

constexpr std::string_view kEmbeddings[] = {"model.embed_tokens.weight", "transformer.wte.weight",
                                            "model.language_model.embed_tokens.weight",
                                            "language_model.model.embed_tokens.weight",
                                            "embed_tokens.weight"};
constexpr std::string_view kOutput = "lm_head.weight";

// What decided `tie_word_embeddings`, for messages: "config.json says
// tie_word_embeddings: true", "config.json states no tie_word_embeddings (LlamaConfig's
// default: false)", ...
std::string tie_source(const CheckpointConfig& config, bool tied) {
  const std::string value = tied ? "true" : "false";
  if (config.tie_stated) return "config.json says tie_word_embeddings: " + value;
  if (!config.tie_default_class.empty())
    return "config.json states no tie_word_embeddings (" + config.tie_default_class +
           "'s default in transformers: " + value + ")";
  return "config.json states no tie_word_embeddings and shardc does not know the config "
         "class's default (" +
         std::string(tied ? "tied, as the checkpoint stores no lm_head.weight"
                          : "untied, as the checkpoint stores lm_head.weight") +
         ")";
}

// `tie_word_embeddings` absent and the config class's default unknown: tied iff the
// checkpoint stores no output head (a stored head is a trained one; PretrainedConfig's
// default true would alias it away).
void decide_tie(Model& model, const CheckpointConfig& config, ImportedModel& im) {
  if (config.tie_stated || !config.tie_default_class.empty()) return;
  const bool stores_head = std::any_of(model.params.begin(), model.params.end(),
                                       [](const Param& param) { return param.name == kOutput; });
  model.attributes.tie_word_embeddings = !stores_head;
  for (RawAttribute& raw : im.raw_attributes) {
    if (raw.key != "tie_word_embeddings") continue;
    raw.yaml = raw.json = stores_head ? "false" : "true";
  }
}

// tie_word_embeddings: lm_head.weight is the embedding's alias (added when not stored). A
// stored lm_head.weight tied to the embedding is not planned (transformers' tie_weights
// points the head at the embedding's storage too): W-CHECKPOINT, as its values are lost.
void add_ties(Model& model, const CheckpointConfig& config, const std::string& where,
              DiagnosticSink& sink) {
  if (!model.attributes.tie_word_embeddings.value_or(false)) return;
  const Param* embed = nullptr;
  const Param* head = nullptr;
  for (const Param& param : model.params) {
    if (param.name == kOutput) head = &param;
    for (std::string_view embedding : kEmbeddings) {
      if (param.name == embedding && embed == nullptr) embed = &param;
    }
  }
  if (embed == nullptr) return;
  const std::string source = embed->name;
  if (head == nullptr) {
    Param alias = *embed;
    alias.name = std::string(kOutput);
    model.params.push_back(std::move(alias));
  } else if (head->shape != embed->shape || head->dtype != embed->dtype) {
    return;  // stored separately with another shape: not a tie the planner can honour
  } else {
    Diagnostic diag;
    diag.severity = Severity::Warning;
    diag.code = DiagCode::WCheckpoint;
    diag.loc = SourceLoc{where, 0, 0};
    diag.param = std::string(kOutput);
    diag.message = tie_source(config, true) + ", but the checkpoint stores its own " +
                   std::string(kOutput) + " " + imp::shape_text(head->shape) +
                   ": tied, it is an alias of " + source +
                   " and the stored tensor is discarded (transformers ties it the same way)";
    diag.hint =
        "if the head was trained separately, set `tie_word_embeddings: false` in "
        "config.json; if it is a copy of the embedding, nothing is lost";
    sink.report(std::move(diag));
  }
  model.tied.push_back(TiePair{source, std::string(kOutput), {}});
}

// W-CHECKPOINT for quantization methods whose state tensors shardc does not know.
// Known: FP8 block scales (`weight_scale_inv`, quantization_config.weight_block_size:
// fp8_scales) and bitsandbytes (8-bit SCB per row, 4-bit absmax / quant_map blocks:
// E-QUANT-STATE when a state does not follow its weight's split).
void warn_quantization(const CheckpointConfig& config, const std::string& where,
                       DiagnosticSink& sink) {
  const std::string& method = config.quant_method;
  if (method.empty() || method == "fp8" || method == "bitsandbytes") return;
  Diagnostic diag;
  diag.severity = Severity::Warning;
  diag.code = DiagCode::WCheckpoint;
  diag.loc = SourceLoc{where, 0, 0};
  diag.message = "quantization_config.quant_method '" + imp::printable(method) +
                 "': shardc does not know this method's state tensors (per-group scales, zero "
                 "points, packed integer weights), so they are planned as ordinary tensors (the "
                 "integer ones frozen) and no check ties a state's split to its weight's";
  diag.hint =
      "replicate the quantized layers over tp, or plan the dequantized checkpoint; "
      "docs/import.md lists the quantization states shardc follows";
  sink.report(std::move(diag));
}

// A config that says untied for a causal LM whose checkpoint has no output head:
// transformers builds an untied lm_head and initializes it (a missing key on load),
// so the module has one more trainable param than the checkpoint; it is planned with
// the embedding's shape and dtype, and said (Qwen3-VL-Embedding#89: top-level false,
// text_config true; transformers 5 ties by the top-level value).
void add_untied_head(Model& model, const CheckpointConfig& config, const std::string& arch,
                     const std::string& where, DiagnosticSink& sink) {
  if (model.attributes.tie_word_embeddings.value_or(false)) return;
  if (!arch.ends_with("ForCausalLM") && !arch.ends_with("ForConditionalGeneration")) return;
  const Param* embed = nullptr;
  for (const Param& param : model.params) {
    if (param.name == kOutput) return;
    for (std::string_view embedding : kEmbeddings)
      if (param.name == embedding && embed == nullptr) embed = &param;
  }
  if (embed == nullptr) return;
  Param head = *embed;
  head.name = std::string(kOutput);
  head.requires_grad = true;
  const std::string text_says =
      config.text_tie_word_embeddings && *config.text_tie_word_embeddings
          ? " (text_config says tie_word_embeddings: true, but transformers ties by the "
            "top-level value: modeling_utils.py get_expanded_tied_weights_keys)"
          : "";
  Diagnostic diag;
  diag.severity = Severity::Warning;
  diag.code = DiagCode::WCheckpoint;
  diag.loc = SourceLoc{where, 0, 0};
  diag.param = head.name;
  diag.message =
      tie_source(config, false) + text_says + ", but the checkpoint has no " + head.name +
      ": transformers builds an untied output head and initializes it (a missing key), "
      "so " +
      head.name + " " + imp::shape_text(head.shape) + " is planned as its own trainable param";
  diag.hint =
      "if the model is tied, set the top-level `tie_word_embeddings: true` in config.json "
      "(then " +
      head.name + " is an alias of " + embed->name + "); else provide the head";
  sink.report(std::move(diag));
  model.params.push_back(std::move(head));
}

// config.json against the stored tensors (before ties add any): transformers refuses a
// load whose vocab_size differs from the embedding's rows (a size mismatch), and builds
// num_hidden_layers blocks whatever the checkpoint holds (missing keys, or unexpected ones
// it drops). The vocab tensors are found by W-VOCAB's name rule (core/layer_blocks.hpp
// has_vocab_name): a wrong vocab_size would otherwise switch W-VOCAB off silently.
void check_config_counts(const Model& model, const CheckpointConfig& config,
                         const std::string& where, DiagnosticSink& sink) {
  for (const Param& param : model.params) {
    if (param.shape.size() != 2 || !has_vocab_name(param.name)) continue;
    const std::optional<std::int64_t> vocab = model.attributes_of(param.name).vocab_size;
    if (!vocab || param.shape[0] == *vocab) continue;
    Diagnostic diag;
    diag.severity = Severity::Warning;
    diag.code = DiagCode::WCheckpoint;
    diag.loc = SourceLoc{where, 0, 0};
    diag.param = param.name;
    diag.message = "config.json says vocab_size " + std::to_string(*vocab) + ", but " + param.name +
                   " " + imp::shape_text(param.shape) + " has " + std::to_string(param.shape[0]) +
                   " rows: transformers refuses to load it (a size mismatch), and W-VOCAB, "
                   "which finds vocab tensors by vocab_size, does not see it";
    diag.hint = "set vocab_size to " + std::to_string(param.shape[0]) +
                " in config.json (or import the checkpoint it belongs to)";
    sink.report(std::move(diag));
  }
  if (!config.num_hidden_layers) return;
  std::vector<std::string_view> names;
  names.reserve(model.params.size());
  for (const Param& param : model.params) names.emplace_back(param.name);
  const std::string stack = decoder_stack(names, config.num_hidden_layers);
  if (stack.empty()) return;
  std::set<std::int64_t> blocks;
  for (std::string_view name : names)
    if (const std::int64_t block = decoder_block(name, stack); block >= 0) blocks.insert(block);
  const auto found = static_cast<std::int64_t>(blocks.size());
  const std::int64_t want = *config.num_hidden_layers;
  if (found == want || found == want + config.num_nextn_predict_layers) return;
  const std::string indices =
      blocks.empty()
          ? std::string()
          : " (indices " + std::to_string(*blocks.begin()) + ".." +
                std::to_string(*blocks.rbegin()) +
                (*blocks.rbegin() - *blocks.begin() + 1 == found ? "" : ", with gaps") + ")";
  Diagnostic diag;
  diag.severity = Severity::Warning;
  diag.code = DiagCode::WCheckpoint;
  diag.loc = SourceLoc{where, 0, 0};
  diag.message = "config.json says num_hidden_layers " + std::to_string(want) +
                 ", but the checkpoint holds " + std::to_string(found) + " blocks of " + stack +
                 indices + ": transformers builds " + std::to_string(want) + " blocks (" +
                 (found < want ? "the missing ones initialized, as missing keys"
                               : "the extra stored ones dropped, as unexpected keys") +
                 "), while the plan holds the stored ones";
  diag.hint = "fix num_hidden_layers in config.json, or the checkpoint's missing shards";
  sink.report(std::move(diag));
}

// Sub-models of a multimodal config: each `vision_config` / `audio_config` applies to
// the params under the module its model class builds from it (transformers 5 and the hub
// names: Qwen2-VL / Qwen2.5-VL `visual` (hub) / `model.visual`; Llama-4 `vision_model`;
// LLaVA, Gemma-3, PaliGemma `vision_tower` / `model.vision_tower`; Qwen2-Audio
// `audio_tower`; Qwen2.5-Omni `thinker.visual`, `thinker.audio_tower`). Only prefixes the
// checkpoint's names use are kept.
std::vector<SubModel> find_submodels(const std::vector<Param>& params,
                                     const CheckpointConfig& config) {
  static constexpr std::string_view kVision[] = {
      "visual",        "model.visual",       "vision_model",   "model.vision_model",
      "vision_tower",  "model.vision_tower", "vision_encoder", "model.vision_encoder",
      "thinker.visual"};
  static constexpr std::string_view kAudio[] = {"audio_tower", "model.audio_tower", "audio_encoder",
                                                "model.audio_encoder", "thinker.audio_tower"};
  std::vector<SubModel> out;
  for (const SubModel& sub : config.subconfigs) {
    const bool vision = sub.config == "vision_config";
    const auto candidates = vision ? std::span<const std::string_view>(kVision)
                                   : std::span<const std::string_view>(kAudio);
    for (std::string_view prefix : candidates) {
      const std::string dotted = std::string(prefix) + ".";
      const bool used = std::any_of(params.begin(), params.end(), [&](const Param& param) {
        return param.name.starts_with(dotted);
      });
      if (!used) continue;
      SubModel located = sub;
      located.prefix = std::string(prefix);
      out.push_back(std::move(located));
    }
  }
  return out;
}

}  // namespace

bool is_checkpoint_path(FileSystem& fs, const std::string& path) {
  return path.ends_with(".safetensors") || fs.list_dir(path).has_value();
}

std::optional<ImportedModel> import_checkpoint(FileSystem& fs, const std::string& path,
                                               DiagnosticSink& sink,
                                               TransformersOrder transformers) {
  const std::optional<std::vector<std::string>> listing = fs.list_dir(path);
  const std::optional<Layout> layout = find_layout(fs, path, listing, sink);
  if (!layout) return std::nullopt;
  bool has_config = false;
  const std::optional<CheckpointConfig> config = read_config(fs, layout->dir, sink, has_config);
  if (!config) return std::nullopt;
  ImportedModel im;
  Model& model = im.model;
  if (!collect_params(fs, *layout, model.params, sink)) return std::nullopt;
  if (model.params.empty()) {
    fail(sink, path, "the checkpoint holds no tensors", "check the files");
    return std::nullopt;
  }
  model.attributes = config->attributes;
  im.raw_attributes = config->raw_attributes;
  const std::string config_path = join(layout->dir, "config.json");
  const std::string where = has_config ? config_path : path;
  warn_unindexed(fs, *layout, sink);
  const std::string first_tensor = model.params.front().name;
  drop_buffers(model.params, *config, where, im, sink);
  if (model.params.empty()) {
    // The front end refuses a model without params, so import must not write one.
    fail(sink, where,
         "every tensor in the checkpoint is a buffer or metadata (e.g. '" +
             imp::printable(first_tensor) + "'): nothing is left to plan",
         "import the checkpoint that holds the weights; the notes above say why each tensor "
         "was left out (docs/import.md)");
    return std::nullopt;
  }
  warn_quantization(*config, where, sink);
  const imp::ArchRules* rules = imp::find_arch_rules(*config, transformers);
  add_base_prefix(model.params, rules);
  model.submodels = find_submodels(model.params, *config);
  check_config_counts(model, *config, where, sink);
  decide_tie(model, *config, im);
  add_ties(model, *config, where, sink);
  const std::string arch_name =
      config->architectures.empty() ? config->model_type : config->architectures.front();
  add_untied_head(model, *config, arch_name, where, sink);
  const std::size_t natural = order_params(model.params, *config, transformers);
  if (natural > 0) {
    const std::string arch = arch_name;
    model.module_order = "natural";
    sink.warning(DiagCode::WModuleOrder, SourceLoc{where, 0, 0},
                 rules == nullptr
                     ? "no module-order rules for architecture '" + imp::printable(arch) +
                           "': params are in natural order (layer indices numerically), which "
                           "may differ from named_parameters()"
                     : std::to_string(natural) + " params have names the '" + imp::printable(arch) +
                           "' order rules do not know; they are placed in natural order",
                 "FSDP2 and muon buffer offsets follow module order: for the exact order, dump "
                 "the module with tools/dump_model.py --config config.json and use that model "
                 "file (the imported one says `module_order: natural`, and validate repeats this "
                 "warning)");
  }
  // Fused layouts the architecture decides and the name alone does not (gpt-oss's
  // interleaved gate|up, GPT-NeoX's per-head query_key_value) are written as `fused:`;
  // head-indexed params (gpt-oss sinks, Cohere per-head norms) as `head_indexed:`.
  for (Param& param : model.params) {
    const ModelAttributes& attrs = model.attributes_of(param.name);
    auto by_arch = known_fused(param.name, param.shape, attrs, arch_name);
    if (by_arch && by_arch != known_fused(param.name, param.shape, attrs, ""))
      param.fused = by_arch;
    param.head_indexed = known_head_indexed(param.name, param.shape, attrs, arch_name);
  }
  model.name = !config->name.empty() ? config->name : base_name(listing ? layout->dir : path);
  if (!listing && model.name.ends_with(".safetensors")) model.name.resize(model.name.size() - 12);
  model.source_path = path;
  im.source = base_name(path);
  if (!config->architectures.empty())
    im.comments.emplace_back("architecture", config->architectures.front());
  if (transformers == TransformersOrder::V5)
    im.comments.emplace_back("module order", "transformers 5 (shardc import --transformers 5)");
  std::string first_frozen;
  if (const std::size_t frozen =
          imp::freeze_gradient_free_params(model.params, arch_name, first_frozen))
    im.comments.emplace_back("frozen: no gradient reaches them",
                             std::to_string(frozen) + ", e.g. " + first_frozen);
  for (auto& comment : imp::prestacked_expert_comments(model))
    im.comments.push_back(std::move(comment));
  model.sha256 = sha256_hex(render_model_yaml(im));
  spdlog::debug("imported {} params from {} files of {}", model.params.size(), layout->files.size(),
                path);
  return im;
}

// Tensors checkpoints store beside the weights that no gradient reaches: DeepSeek-V3's
// router `e_score_correction_bias` (transformers 5: an `nn.Buffer`; DeepSeek's own
// modeling code: an nn.Parameter used only to pick the top-k experts, whose indices carry
// no gradient; the auxiliary-loss-free balancing updates it by a rule, DeepSeek-V3 report
// Sec. 2.1.2). They stay in the model, as the checkpoint stores them, but frozen under
// both transformers versions: no grad, no optimizer state, replicated beside FSDP
// (fsdp.frozen: ignore). Trainable, its float32 dtype in a bfloat16 FSDP unit is what
// FSDP2 refuses (E-FSDP, trial E 1). Returns how many.
std::size_t imp::freeze_gradient_free_params(std::vector<Param>& params, const std::string& arch,
                                             std::string& first) {
  if (arch != "DeepseekV3ForCausalLM" && arch != "deepseek_v3") return 0;
  std::size_t count = 0;
  for (Param& param : params) {
    if (!param.name.ends_with(".mlp.gate.e_score_correction_bias")) continue;
    if (count++ == 0) first = param.name;
    param.requires_grad = false;
  }
  return count;
}

}  // namespace shardc
