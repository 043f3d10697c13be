// verify: the commit marker. An OUTDIR without manifest.json is an
// interrupted (or foreign) compile and is refused; every file verify reads
// is checked against the size and sha256 the manifest recorded.
#include <ostream>

#include "backend/backend.hpp"
#include "core/diagnostics.hpp"
#include "outputs/output_dir.hpp"
#include "support/limits.hpp"
#include "support/print_error.hpp"
#include "support/sha256.hpp"
#include "verify/engine.hpp"

namespace shardc::verify {
namespace {

// Largest manifest.json read: ~130 bytes per rank file, 2^23 rank files.
using limits::kMaxManifestBytes;

std::string short_digest(const std::string& hex) { return hex.substr(0, 12); }

// "incomplete compile: N of M rank files; rerun compile", M from plan.json
// when it can be read.
std::string incomplete_message(const std::string& out_dir, FileSystem& fs) {
  std::int64_t present = 0;
  if (const auto names = fs.list_dir(path_join(out_dir, "ranks")))
    for (const auto& name : *names) present += is_rank_file_name(name) ? 1 : 0;
  std::string of = "?";
  std::string error;
  const std::string plan_path = path_join(out_dir, "plan.json");
  if (const auto text = fs.read_regular(plan_path, std::int64_t{1} << 32, error))
    if (const auto plan = readback::parse_plan_file(*text, error))
      of = std::to_string(plan->world_size);
  return "'" + out_dir + "': incomplete compile: " + std::to_string(present) + " of " + of +
         " rank files; rerun compile (no " + kManifestName +
         ": the compile was interrupted or the directory was not written by shardc)";
}

}  // namespace

std::optional<readback::ManifestFile> load_commit(const std::string& out_dir, FileSystem& fs,
                                                  std::ostream& err) {
  if (!fs.list_dir(out_dir)) {
    // A file there is "not a directory"; otherwise say why (e.g. it does not exist).
    std::string why;
    std::int64_t size = 0;
    if (fs.read_range(out_dir, 0, 0, size, why)) why = "not a directory";
    print_error(
        err, DiagCode::EPlanFile,
        "cannot read '" + out_dir + "': " + why + " (verify reads the OUTDIR of a compile)");
    return std::nullopt;
  }
  const std::string path = path_join(out_dir, kManifestName);
  std::string error;
  const auto text = fs.read_regular(path, kMaxManifestBytes, error);
  if (!text) {
    const auto names = fs.list_dir(out_dir);
    const bool absent = std::find(names->begin(), names->end(), kManifestName) == names->end();
    print_error(err, DiagCode::EPlanFile,
                absent ? incomplete_message(out_dir, fs) : "cannot read '" + path + "': " + error);
    return std::nullopt;
  }
  auto manifest = readback::parse_manifest_file(*text, error);
  if (!manifest)
    print_error(err, DiagCode::EPlanFile, "'" + path + "' is not a shardc manifest: " + error);
  return manifest;
}

std::string digest_change(const readback::ManifestEntry& entry, std::string_view bytes) {
  const auto size = static_cast<std::int64_t>(bytes.size());
  if (size == entry.bytes) {
    const std::string sha = sha256_hex(bytes);
    if (sha == entry.sha256) return {};
    return entry.path + " changed after the compile: sha256 " + short_digest(sha) + "…, " +
           kManifestName + " says " + short_digest(entry.sha256) + "…";
  }
  return entry.path + " changed after the compile: " + std::to_string(size) + " bytes, " +
         kManifestName + " says " + std::to_string(entry.bytes);
}

}  // namespace shardc::verify
