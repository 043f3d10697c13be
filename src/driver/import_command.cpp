// `shardc import PATH [-o FILE] [--format yaml|json]`: a checkpoint (or a
// model file / inventory) as the compact model YAML or the plain inventory.
#include <ostream>

#include "driver/session.hpp"
#include "frontend/frontend.hpp"
#include "import/import.hpp"

namespace shardc {
namespace {

std::optional<ImportedModel> load(const ImportOptions& opt, FileSystem& fs,
                                  driver::Session& session) {
  if (is_checkpoint_path(fs, opt.path)) {
    return import_checkpoint(
        fs, opt.path, session.sink,
        opt.transformers_major == 5 ? TransformersOrder::V5 : TransformersOrder::V4);
  }
  std::optional<SourceFile> file =
      driver::read_input(fs, opt.path, "model", DiagCode::EModel,
                         "give a checkpoint directory, a .safetensors file or a model file "
                         "(inputs are limited to 256 MiB)",
                         session);
  if (!file) return std::nullopt;
  std::optional<ImportedModel> im = import_model_file(file->path, file->text, session.sink);
  session.sources[file->path] = std::move(file->text);
  return im;
}

}  // namespace

ExitCode run_import(const ImportOptions& opt, FileSystem& fs, std::ostream& out,
                    std::ostream& err) {
  driver::Session session;
  CommonOptions common;
  common.diag_format = opt.diag_format;
  const std::optional<ImportedModel> im = load(opt, fs, session);
  driver::print_diagnostics(common, session, opt.diag_format == DiagFormat::Text ? err : out);
  if (!im || session.sink.has_errors()) return driver::diagnostics_exit_code(common, session.sink);
  const std::string text =
      opt.format == ImportFormat::Json ? render_model_json(*im) : render_model_yaml(*im);
  return driver::print_or_write(text, opt.output, fs, out, err);
}

}  // namespace shardc
