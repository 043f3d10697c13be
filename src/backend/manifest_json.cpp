// manifest.json: the commit marker of a compiled OUTDIR (written last).
#include "backend/backend.hpp"
#include "backend/json_writer.hpp"

namespace shardc {
namespace {

using json::Writer;

void write_file(Writer& w, const FileDigest& f) {
  w.begin_object().member("path", f.path);
  if (f.rank >= 0) w.member("rank", f.rank);
  w.member("bytes", f.bytes).member("sha256", f.sha256).end_object();
}

}  // namespace

std::string render_manifest_json(const Plan& plan, const FileDigest& plan_file,
                                 const std::string& ranks_text,
                                 const std::vector<FileDigest>& rank_files) {
  std::string out;
  Writer w(out);
  w.begin_object();
  w.line_break().member("format", "shardc.manifest/v1");
  w.line_break().key("generator").begin_object();
  w.member("name", "shardc").member("version", SHARDC_VERSION).end_object();
  w.line_break().key("inputs").begin_object();
  w.key("model").begin_object();
  w.member("name", plan.model_name).member("sha256", plan.model_sha256).end_object();
  w.key("recipe").begin_object().member("sha256", plan.recipe_sha256).end_object();
  w.end_object();
  w.line_break().member("world_size", plan.world_size);
  w.line_break().key("plan");
  write_file(w, plan_file);
  w.line_break().key("rank_files").begin_object();
  w.member("ranks", ranks_text).member("count", static_cast<std::int64_t>(rank_files.size()));
  w.key("files").begin_array();
  for (const auto& f : rank_files) {
    w.line_break();
    write_file(w, f);
  }
  w.line_break().end_array().end_object();
  w.line_break().end_object();
  out += "\n";
  return out;
}

}  // namespace shardc
