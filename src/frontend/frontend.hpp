// Front end: turns model and recipe files into typed values (contract §3, §4).
//
// The only code that includes yaml-cpp or parses input text. Every
// diagnostic it reports carries file:line:col of the offending node.
// Limits against hostile input are documented in docs/limits.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/diagnostics.hpp"
#include "core/model.hpp"
#include "core/recipe.hpp"
#include "support/sha256.hpp"

namespace shardc {

/// An input file already read into memory. `path` is only used for
/// locations and messages.
struct SourceFile {
  std::string path;
  std::string text;
};

/// Parses a model description: shardc.model/v1 YAML or JSON (with `repeat`
/// groups), or a plain inventory JSON (`shared/models/*.params.json`).
/// JSON text (first non-blank byte `{`) is parsed with nlohmann/json, all
/// else with yaml-cpp. Reports E-MODEL (with file:line:col) for malformed
/// text, wrong types, unknown keys inside a param entry, duplicate FQNs,
/// negative or non-integer extents, numel >= 2^62, unknown dtypes, bad
/// repeat ranges, unbound or unused repeat variables. nullopt on any error.
/// Model::sha256 is the text's digest.
std::optional<Model> parse_model(const SourceFile& file, DiagnosticSink& sink);
/// As above; Model::sha256 stays empty unless `with_digest` (for callers
/// that never print it: hashing 5 MB costs a few ms of CPU).
std::optional<Model> parse_model(const SourceFile& file, DiagnosticSink& sink, bool with_digest);

/// Parses a shardc.recipe/v1 YAML recipe. Reports E-RECIPE (malformed,
/// unknown key, bad pattern, bad enum value), E-PLACEMENT (unparseable
/// placement), E-MESH (axis size < 1, duplicate axis name). Meaning-level
/// checks (axes exist, dims in range) are the planner's. nullopt on any error.
/// Recipe::sha256 is the text's digest.
std::optional<Recipe> parse_recipe(const SourceFile& file, DiagnosticSink& sink);
/// As above; Recipe::sha256 stays empty unless `with_digest` (the first
/// digest of a run also initializes OpenSSL: about 1 ms).
std::optional<Recipe> parse_recipe(const SourceFile& file, DiagnosticSink& sink, bool with_digest);

/// Parses torch spellings (`Shard(0)`, `Shard(-1)`, `Replicate()`,
/// `Partial()`, `Partial(sum)`) and hyper-parallel DSL spellings (`shard(0)`,
/// `replicate`, `partial`). nullopt on anything else (placement.cpp).
std::optional<Placement> parse_placement(std::string_view text);

}  // namespace shardc
