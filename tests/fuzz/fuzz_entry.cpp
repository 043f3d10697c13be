// The fuzz entry points (see fuzz_entry.hpp). Anything but a clean return
// (a crash, a sanitizer report, an uncaught exception) is a bug.
#include "fuzz_entry.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "../unit/driver/fake_file_system.hpp"
#include "../unit/frontend/model_compare.hpp"
#include "backend/backend.hpp"
#include "frontend/doc.hpp"
#include "frontend/frontend.hpp"
#include "frontend/model_internal.hpp"
#include "import/import.hpp"
#include "outputs/readback.hpp"
#include "planner/planner.hpp"
#include "shardc/driver.hpp"
#include "support/byte_size.hpp"
#include "support/limits.hpp"

namespace shardc::fuzz {
namespace {

constexpr std::string_view kModel = R"(format: shardc.model/v1
name: fuzz
dtype: bfloat16
attributes: {num_attention_heads: 4, num_key_value_heads: 2, num_experts: 4,
             tie_word_embeddings: true}
params:
  - {name: model.embed_tokens.weight, shape: [100, 16]}
  - repeat: {i: [0, 2]}
    params:
      - {name: "model.layers.{i}.self_attn.q_proj.weight", shape: [16, 16]}
      - {name: "model.layers.{i}.self_attn.o_proj.weight", shape: [16, 16]}
      - {name: "model.layers.{i}.input_layernorm.weight", shape: [16], dtype: float32}
      - repeat: {e: [0, 4]}
        params:
          - {name: "model.layers.{i}.mlp.experts.{e}.up_proj.weight", shape: [8, 16]}
  - {name: model.norm.weight, shape: [16], dtype: float32}
  - {name: model.scalar, shape: []}
  - {name: lm_head.weight, shape: [100, 16]}
)";

constexpr std::string_view kRecipe = R"(format: shardc.recipe/v1
mesh:
  - {name: pp, size: 2}
  - {name: dp_shard, size: 2}
  - {name: tp, size: 2}
rules:
  - match: "**.q_proj.weight"
    placements: {tp: Shard(0)}
  - match: "**"
    placements: {}
pipeline: {axis: pp, stages: auto}
fsdp: {shard: dp_shard}
buffers:
  - {kind: muon_allgather}
  - {kind: fsdp2_allgather, units: ["model.layers.{i}", "**"]}
)";

template <typename T>
const T& fixed(std::string_view text,
               std::optional<T> (*parse)(const SourceFile&, DiagnosticSink&)) {
  static const T value = [&] {
    DiagnosticSink sink;
    std::optional<T> v = parse(SourceFile{"fixed", std::string(text)}, sink);
    if (!v) __builtin_trap();  // the fixed inputs must parse
    return std::move(*v);
  }();
  return value;
}

void render(const DiagnosticSink& sink, const std::string& path, std::string_view bytes) {
  SourceMap sources;
  sources[path] = std::string(bytes);
  (void)render_diagnostics_text(sink, sources);
  (void)render_diagnostics_json(sink);
  (void)render_diagnostics_github(sink);
}

void plan(const Model& model, const Recipe& recipe, DiagnosticSink& sink) {
  std::optional<Plan> p = build_plan(model, recipe, sink);
  (void)p;
}

// kModel + kRecipe compiled once (8 ranks, both buffer kinds) into an
// in-memory OUTDIR "out": the files and directories.
struct Compiled {
  std::map<std::string, std::string> files;
  std::set<std::string> dirs;
};

const Compiled& compiled() {
  static const Compiled c = [] {
    test::FakeFileSystem f;
    f.files["m.yaml"] = std::string(kModel);
    f.files["r.yaml"] = std::string(kRecipe);
    CompileOptions o;
    o.common.model_path = "m.yaml";
    o.common.recipe_path = "r.yaml";
    o.out_dir = "out";
    o.jobs = 1;
    std::ostringstream out;
    std::ostringstream err;
    if (run_compile(o, f, out, err) != ExitCode::Ok) __builtin_trap();
    return Compiled{f.files, f.dirs};
  }();
  return c;
}

// Same kinds, texts, keys and positions, recursively.
bool same_tree(const fe::Node& a, const fe::Node& b) {
  if (a.kind != b.kind || a.quoted != b.quoted || a.line != b.line || a.col != b.col ||
      a.key_line != b.key_line || a.key_col != b.key_col || a.key() != b.key() ||
      a.text() != b.text() || a.items().size() != b.items().size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.items().size(); ++i) {
    if (!same_tree(a.items()[i], b.items()[i])) return false;
  }
  return true;
}

// Points manifest.json's entry for `rel` at the current bytes of the file.
void resign(test::FakeFileSystem& fs, const std::string& rel) {
  auto m = nlohmann::json::parse(fs.files.at("out/manifest.json"));
  const std::string& bytes = fs.files.at("out/" + rel);
  auto sign = [&](nlohmann::json& e) {
    e["bytes"] = bytes.size();
    e["sha256"] = sha256_hex(bytes);
  };
  if (rel == "plan.json") sign(m["plan"]);
  for (auto& e : m["rank_files"]["files"])
    if (e["path"] == rel) sign(e);
  fs.files["out/manifest.json"] = m.dump();
}

}  // namespace

// Differential: the readback parser (simdjson fast path) must give the
// reference reader's result, or its error message word for word.
template <typename T>
void same_readback(std::string_view text, std::optional<T> (*parse)(std::string_view, std::string&),
                   std::optional<T> (*reference)(std::string_view, std::string&)) {
  std::string error;
  std::string ref_error;
  const std::optional<T> got = parse(text, error);
  const std::optional<T> want = reference(text, ref_error);
  if (got.has_value() != want.has_value() || error != ref_error || (got && !(*got == *want)))
    __builtin_trap();
}

void output_input(std::string_view bytes) {
  for (const std::string_view text : {bytes, bytes.substr(bytes.empty() ? 0 : 1)}) {
    same_readback(text, &readback::parse_plan_file, &readback::parse_plan_file_reference);
    same_readback(text, &readback::parse_rank_file, &readback::parse_rank_file_reference);
    same_readback(text, &readback::parse_manifest_file, &readback::parse_manifest_file_reference);
  }
  if (bytes.empty()) return;
  // The first byte picks the file the rest replaces in a compiled OUTDIR.
  static constexpr const char* kTargets[] = {"ranks/rank-1.json", "plan.json", "manifest.json"};
  const std::string rel = kTargets[static_cast<unsigned char>(bytes[0]) % 3];
  test::FakeFileSystem fs;
  fs.files = compiled().files;
  fs.dirs = compiled().dirs;
  fs.files["out/" + rel] = std::string(bytes.substr(1));
  if (rel != "manifest.json") resign(fs, rel);
  VerifyOptions o;
  o.out_dir = "out";
  std::ostringstream out;
  std::ostringstream err;
  (void)run_verify(o, fs, out, err);
}

void model_input(std::string_view bytes) {
  const std::string path = "fuzz.model";
  DiagnosticSink sink;
  std::optional<Model> model = parse_model(SourceFile{path, std::string(bytes)}, sink);
  if (model) plan(*model, fixed<Recipe>(kRecipe, &parse_recipe), sink);
  render(sink, path, bytes);
  // Differential: the params shortcut (canonical inventory entries read
  // without Nodes) must give the tree path's model and diagnostics.
  {
    DiagnosticSink fast_sink;
    DiagnosticSink tree_sink;
    const std::optional<Model> fast = parse_model(SourceFile{path, std::string(bytes)}, fast_sink);
    const std::optional<Model> tree =
        fe::parse_model_tree(SourceFile{path, std::string(bytes)}, tree_sink);
    if (!test::same_model(fast, tree) ||
        render_diagnostics_json(fast_sink) != render_diagnostics_json(tree_sink)) {
      __builtin_trap();
    }
  }
  // Differential: the simdjson reader must agree with the nlohmann reference.
  const SourceFile file{path, std::string(bytes)};
  DiagnosticSink json_sink;
  DiagnosticSink ref_sink;
  std::optional<fe::Document> doc =
      fe::load_json(file, shardc::DiagCode::EModel, json_sink, fe::DocLimits{});
  std::optional<fe::Document> ref =
      fe::load_json_tracking(file, shardc::DiagCode::EModel, ref_sink, fe::DocLimits{});
  if (doc.has_value() != ref.has_value() ||
      render_diagnostics_json(json_sink) != render_diagnostics_json(ref_sink) ||
      (doc && !same_tree(doc->root, ref->root))) {
    __builtin_trap();
  }
  render(json_sink, path, bytes);
}

void recipe_input(std::string_view bytes) {
  const std::string path = "fuzz.recipe";
  DiagnosticSink sink;
  std::optional<Recipe> recipe = parse_recipe(SourceFile{path, std::string(bytes)}, sink);
  if (recipe) plan(fixed<Model>(kModel, &parse_model), *recipe, sink);
  render(sink, path, bytes);
}

void safetensors_input(std::string_view bytes) {
  DiagnosticSink sink;
  const auto size = static_cast<std::int64_t>(bytes.size());
  if (const auto n = safetensors_header_length(bytes, size, "fuzz.safetensors", sink)) {
    if (auto h = parse_safetensors_header(bytes.substr(8, static_cast<std::size_t>(*n)), size,
                                          "fuzz.safetensors", sink)) {
      std::vector<Param> params;
      for (auto& t : h->tensors) params.push_back(Param{t.name, t.shape, t.dtype, true, {}});
      CheckpointConfig config;
      config.model_type = "deepseek_v3";
      std::vector<Param> copy = params;
      (void)order_params(copy, config);
      (void)order_params(params, CheckpointConfig{});
      ImportedModel im;
      im.model.params = std::move(params);
      (void)render_model_yaml(im);
      (void)render_model_json(im);
    }
  }
  (void)parse_hf_config(bytes, "config.json", sink);
  (void)render_diagnostics_json(sink);
  (void)render_diagnostics_text(sink, {});
}

namespace {

// A JSON string literal of arbitrary bytes (each byte as a code point: the reader sees
// whatever UTF-8 the bytes form after escaping; \u00XX for control bytes).
std::string json_bytes(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u == '"' || u == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;  // bytes >= 0x80 pass through: valid or invalid UTF-8 alike
    }
  }
  return out + "\"";
}

}  // namespace

void import_input(std::string_view bytes) {
  if (const auto size = parse_byte_size(bytes)) {
    if (*size > limits::kMaxByteSize) __builtin_trap();
    // byte_size_text is exact ("80 GiB") for a whole binary unit and below 1 KiB, else it
    // rounds to two decimals of the largest binary unit ("74.51 GiB"): the round trip is
    // exact in the first case and within half a hundredth of that unit in the second.
    const std::string text = byte_size_text(*size);
    const auto back = parse_byte_size(text);
    if (!back) __builtin_trap();
    if (text.find('.') == std::string::npos) {
      if (*back != *size) __builtin_trap();
    } else {
      double unit = 1.0;  // the unit binary_bytes_text picks: the largest up to PiB
      for (int k = 0; k < 5 && static_cast<double>(*size) >= unit * 1024.0; ++k) unit *= 1024.0;
      if (std::abs(static_cast<double>(*back - *size)) > 0.006 * unit) __builtin_trap();
    }
  }
  // Names: chunks of (first byte % 48) bytes; the last chunk is the config's name text.
  std::vector<std::string> names;
  std::size_t i = 0;
  while (i < bytes.size() && names.size() < 16) {
    const std::size_t len = static_cast<unsigned char>(bytes[i]) % 48;
    names.emplace_back(bytes.substr(i + 1, len));
    i += 1 + len;
  }
  if (names.empty()) return;
  const std::string config_name = names.back();
  names.pop_back();
  std::string header = "{";
  std::int64_t offset = 0;
  for (std::size_t k = 0; k < names.size(); ++k) {
    header += (k ? "," : "") + json_bytes(names[k]) + ":{\"dtype\":\"BF16\",\"shape\":[" +
              std::to_string(k + 1) + ",2],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + static_cast<std::int64_t>(k + 1) * 4) + "]}";
    offset += static_cast<std::int64_t>(k + 1) * 4;
  }
  header += "}";
  std::string file(8, '\0');
  for (int b = 0; b < 8; ++b)
    file[static_cast<std::size_t>(b)] = static_cast<char>((header.size() >> (8 * b)) & 0xff);
  file += header;
  file += std::string(static_cast<std::size_t>(offset), '\0');
  test::FakeFileSystem fs;
  fs.dirs.insert("ck");
  fs.files["ck/model.safetensors"] = file;
  fs.files["ck/config.json"] = "{\"_name_or_path\":" + json_bytes(config_name) +
                               ",\"architectures\":[" + json_bytes(config_name) +
                               "],\"num_attention_heads\":4,\"tie_word_embeddings\":false}";
  DiagnosticSink sink;
  const auto imported = import_checkpoint(fs, "ck", sink);
  render(sink, "ck/model.safetensors", {});
  if (!imported) return;
  const std::string yaml = render_model_yaml(*imported);
  DiagnosticSink back_sink;
  const auto back = parse_model(SourceFile{"m.yaml", yaml}, back_sink);
  if (!back) __builtin_trap();  // import wrote a model the front end refuses
  const Model& a = imported->model;
  if (back->name != a.name || back->params.size() != a.params.size() ||
      back->tied.size() != a.tied.size() ||
      back->attributes.num_attention_heads != a.attributes.num_attention_heads ||
      back->attributes.tie_word_embeddings != a.attributes.tie_word_embeddings)
    __builtin_trap();
  for (std::size_t k = 0; k < a.params.size(); ++k) {
    const Param& x = a.params[k];
    const Param& y = back->params[k];
    if (x.name != y.name || x.shape != y.shape || x.dtype != y.dtype ||
        x.requires_grad != y.requires_grad || x.fused.has_value() != y.fused.has_value())
      __builtin_trap();
  }
  for (std::size_t k = 0; k < a.tied.size(); ++k)
    if (back->tied[k].source != a.tied[k].source || back->tied[k].alias != a.tied[k].alias)
      __builtin_trap();
}

}  // namespace shardc::fuzz
