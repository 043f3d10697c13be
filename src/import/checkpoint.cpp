// import_checkpoint: a Hugging Face checkpoint directory (config.json,
// model.safetensors.index.json, *.safetensors) or one .safetensors file as a
// Model: headers only, module order, ties.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "import/import_internal.hpp"
#include "import/module_order.hpp"
#include "shardc/frontend.hpp"
#include "shardc/fused.hpp"
#include "shardc/limits.hpp"
#include "support/fqn.hpp"

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
  Diagnostic d;
  d.code = DiagCode::ECheckpoint;
  d.loc = SourceLoc{file, 0, 0};
  d.param = tensor;
  d.message = std::move(message);
  d.hint = std::move(hint);
  sink.report(std::move(d));
}

// The checkpoint's files and, with an index, which tensors each must hold.
struct Layout {
  std::string dir;
  std::vector<std::string> files;  // names inside dir, sorted
  // Index only: tensor -> position in `files`; the keys view `index_parser`'s strings.
  std::unordered_map<std::string_view, std::uint32_t> weight_map;
  std::unique_ptr<simdjson::dom::parser> index_parser;
  bool indexed = false;
};

bool read_index(FileSystem& fs, Layout& l, DiagnosticSink& sink) {
  const std::string path = join(l.dir, std::string(kIndexName));
  std::string error;
  const std::optional<std::string> text = fs.read_regular(path, kMaxJsonBytes, error);
  if (!text) {
    fail(sink, path, "cannot read the index: " + error, "check the file");
    return false;
  }
  l.index_parser = std::make_unique<simdjson::dom::parser>();
  const simdjson::padded_string padded(*text);
  simdjson::dom::element root;
  simdjson::dom::object map;
  if (l.index_parser->parse(padded).get(root) != simdjson::SUCCESS ||
      root["weight_map"].get_object().get(map) != simdjson::SUCCESS) {
    fail(sink, path, "the index is not a JSON object with a `weight_map` object",
         "model.safetensors.index.json maps tensor names to file names");
    return false;
  }
  std::vector<std::string> files;
  std::vector<std::string_view> file_of;
  l.weight_map.reserve(map.size());
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
    if (!l.weight_map.emplace(kv.key, 0).second) {
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
    l.weight_map[kv.key] = static_cast<std::uint32_t>(pos - files.begin());
  }
  l.files = std::move(files);
  l.indexed = true;
  return true;
}

std::optional<Layout> find_layout(FileSystem& fs, const std::string& path,
                                  const std::optional<std::vector<std::string>>& listing,
                                  DiagnosticSink& sink) {
  Layout l;
  if (!listing) {
    l.dir = parent_dir(path);
    l.files = {base_name(path)};
    return l;
  }
  l.dir = path;
  while (l.dir.size() > 1 && l.dir.back() == '/') l.dir.pop_back();
  if (std::find(listing->begin(), listing->end(), kIndexName) != listing->end()) {
    if (!read_index(fs, l, sink)) return std::nullopt;
    for (const std::string& f : l.files) {
      if (std::find(listing->begin(), listing->end(), f) == listing->end()) {
        std::string example;
        const auto f_index = static_cast<std::uint32_t>(&f - l.files.data());
        for (const auto& [tensor, file] : l.weight_map) {
          if (file == f_index && (example.empty() || tensor < example)) example = tensor;
        }
        fail(sink, join(l.dir, std::string(kIndexName)),
             "the index names '" + f + "' (e.g. for tensor '" + example +
                 "'), but the directory has no such file",
             "download the missing shard, or regenerate the index", example);
      }
    }
    if (sink.has_errors()) return std::nullopt;
    return l;
  }
  for (const std::string& name : *listing) {
    if (name.ends_with(".safetensors")) l.files.push_back(name);
  }
  if (l.files.empty()) {
    fail(sink, path, "the directory has no *.safetensors files",
         "a checkpoint directory holds config.json and model*.safetensors");
    return std::nullopt;
  }
  return l;
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
bool collect_params(FileSystem& fs, const Layout& l, std::vector<Param>& params,
                    DiagnosticSink& sink) {
  simdjson::dom::parser parser;
  std::unordered_map<std::string, std::string> owner;  // tensor -> file path (no index)
  std::size_t matched = 0;
  for (std::size_t f = 0; f < l.files.size(); ++f) {
    const std::string path = join(l.dir, l.files[f]);
    std::optional<SafetensorsHeader> h = imp::read_header_with(parser, fs, path, sink);
    if (!h) continue;
    for (SafetensorsTensor& t : h->tensors) {
      if (l.indexed) {
        // With an index each name belongs to exactly one file: no cross-file duplicates.
        const auto it = l.weight_map.find(t.name);
        if (it == l.weight_map.end() || it->second != f) {
          spdlog::debug("{}: '{}' is not in the index for this file; skipped", path, t.name);
          continue;
        }
        ++matched;
      } else if (const auto [it, fresh] = owner.emplace(t.name, path); !fresh) {
        fail(sink, path, "tensor '" + t.name + "' is also stored in '" + it->second + "'",
             "a name may appear in one file only: remove the stale shard", t.name);
        continue;
      }
      params.push_back(Param{std::move(t.name), std::move(t.shape), t.dtype, true, {path, 0, 0}});
    }
  }
  if (l.indexed && !sink.has_errors() && matched != l.weight_map.size()) {
    std::unordered_map<std::string_view, bool> have;
    for (const Param& p : params) have.emplace(p.name, true);
    for (const auto& [tensor, file] : l.weight_map) {
      if (!have.contains(tensor)) {
        fail(sink, join(l.dir, l.files[file]),
             "the index lists tensor '" + std::string(tensor) +
                 "' in this file, but its header does not have it",
             "the shard is stale or the index is wrong: re-download both", std::string(tensor));
      }
    }
  }
  return !sink.has_errors();
}

// GPT-2's hub files omit the base model prefix ("wte.weight" for "transformer.wte.weight").
void add_base_prefix(std::vector<Param>& params, const imp::ArchRules* rules) {
  if (rules == nullptr || rules->base_prefix.empty()) return;
  const std::string prefix = rules->base_prefix + ".";
  for (const Param& p : params) {
    if (p.name.starts_with(prefix)) return;
  }
  const auto root = rules->children.find("");
  for (Param& p : params) {
    const std::string first = p.name.substr(0, p.name.find('.'));
    if (root != rules->children.end() && root->second.contains(first)) continue;
    p.name = prefix + p.name;
  }
}

constexpr std::string_view kEmbeddings[] = {"model.embed_tokens.weight", "transformer.wte.weight",
                                            "model.language_model.embed_tokens.weight",
                                            "language_model.model.embed_tokens.weight",
                                            "embed_tokens.weight"};
constexpr std::string_view kOutput = "lm_head.weight";

// tie_word_embeddings: lm_head.weight is the embedding's alias (added when not stored).
void add_ties(Model& m) {
  if (!m.attributes.tie_word_embeddings.value_or(false)) return;
  const Param* embed = nullptr;
  const Param* head = nullptr;
  for (const Param& p : m.params) {
    if (p.name == kOutput) head = &p;
    for (std::string_view e : kEmbeddings) {
      if (p.name == e && embed == nullptr) embed = &p;
    }
  }
  if (embed == nullptr) return;
  const std::string source = embed->name;
  if (head == nullptr) {
    Param alias = *embed;
    alias.name = std::string(kOutput);
    m.params.push_back(std::move(alias));
  } else if (head->shape != embed->shape || head->dtype != embed->dtype) {
    return;  // stored separately with another shape: not a tie the planner can honour
  }
  m.tied.push_back(TiePair{source, std::string(kOutput), {}});
}

}  // namespace

bool is_checkpoint_path(FileSystem& fs, const std::string& path) {
  return path.ends_with(".safetensors") || fs.list_dir(path).has_value();
}

std::optional<ImportedModel> import_checkpoint(FileSystem& fs, const std::string& path,
                                               DiagnosticSink& sink) {
  const std::optional<std::vector<std::string>> listing = fs.list_dir(path);
  const std::optional<Layout> layout = find_layout(fs, path, listing, sink);
  if (!layout) return std::nullopt;
  bool has_config = false;
  const std::optional<CheckpointConfig> config = read_config(fs, layout->dir, sink, has_config);
  if (!config) return std::nullopt;
  ImportedModel im;
  Model& m = im.model;
  if (!collect_params(fs, *layout, m.params, sink)) return std::nullopt;
  if (m.params.empty()) {
    fail(sink, path, "the checkpoint holds no tensors", "check the files");
    return std::nullopt;
  }
  m.attributes = config->attributes;
  im.raw_attributes = config->raw_attributes;
  const imp::ArchRules* rules = imp::find_arch_rules(*config);
  add_base_prefix(m.params, rules);
  add_ties(m);
  const std::size_t natural = order_params(m.params, *config);
  const std::string config_path = join(layout->dir, "config.json");
  if (natural > 0) {
    const std::string arch =
        config->architectures.empty() ? config->model_type : config->architectures.front();
    sink.warning(DiagCode::WModuleOrder, SourceLoc{has_config ? config_path : path, 0, 0},
                 rules == nullptr
                     ? "no module-order rules for architecture '" + imp::printable(arch) +
                           "': params are in natural order (layer indices numerically), which "
                           "may differ from named_parameters()"
                     : std::to_string(natural) + " params have names the '" + imp::printable(arch) +
                           "' order rules do not know; they are placed in natural order",
                 "FSDP2 and muon buffer offsets follow module order: for the exact order, dump "
                 "the module with tools/dump_model.py and use that model file");
  }
  // Fused layouts the architecture decides and the name alone does not (gpt-oss's
  // interleaved gate|up, GPT-NeoX's per-head query_key_value) are written as `fused:`.
  const std::string arch_name =
      config->architectures.empty() ? config->model_type : config->architectures.front();
  for (Param& p : m.params) {
    auto by_arch = known_fused(p.name, p.shape, m.attributes, arch_name);
    if (by_arch && by_arch != known_fused(p.name, p.shape, m.attributes, "")) p.fused = by_arch;
  }
  m.name = !config->name.empty() ? config->name : base_name(listing ? layout->dir : path);
  if (!listing && m.name.ends_with(".safetensors")) m.name.resize(m.name.size() - 12);
  m.source_path = path;
  im.source = base_name(path);
  if (!config->architectures.empty())
    im.comments.emplace_back("architecture", config->architectures.front());
  for (auto& comment : imp::prestacked_expert_comments(m))
    im.comments.push_back(std::move(comment));
  m.sha256 = sha256_hex(render_model_yaml(im));
  spdlog::debug("imported {} params from {} files of {}", m.params.size(), layout->files.size(),
                path);
  return im;
}

}  // namespace shardc
