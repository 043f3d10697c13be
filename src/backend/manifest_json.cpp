// manifest.json: the commit marker of a compiled OUTDIR (written last).
#include "backend/backend.hpp"
#include "backend/json_writer.hpp"

namespace shardc {
namespace {

using json::Writer;

void write_file(Writer& writer, const FileDigest& file) {
  writer.begin_object().member("path", file.path);
  if (file.rank >= 0) writer.member("rank", file.rank);
  writer.member("bytes", file.bytes).member("sha256", file.sha256).end_object();
}

}  // namespace

std::string render_manifest_json(const Plan& plan, const FileDigest& plan_file,
                                 const std::string& ranks_text,
                                 const std::vector<FileDigest>& rank_files) {
  std::string out;
  Writer writer(out);
  writer.begin_object();
  writer.line_break().member("format", "shardc.manifest/v1");
  writer.line_break().key("generator").begin_object();
  writer.member("name", "shardc").member("version", SHARDC_VERSION).end_object();
  writer.line_break().key("inputs").begin_object();
  writer.key("model").begin_object();
  writer.member("name", plan.model_name).member("sha256", plan.model_sha256).end_object();
  writer.key("recipe").begin_object().member("sha256", plan.recipe_sha256).end_object();
  writer.end_object();
  writer.line_break().member("world_size", plan.world_size);
  writer.line_break().key("plan");
  write_file(writer, plan_file);
  writer.line_break().key("rank_files").begin_object();
  writer.member("ranks", ranks_text).member("count", static_cast<std::int64_t>(rank_files.size()));
  writer.key("files").begin_array();
  for (const auto& file : rank_files) {
    writer.line_break();
    write_file(writer, file);
  }
  writer.line_break().end_array().end_object();
  writer.line_break().end_object();
  out += "\n";
  return out;
}

}  // namespace shardc
