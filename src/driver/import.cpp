// `shardc import PATH [-o FILE] [--format yaml|json]`: a checkpoint (or a
// model file / inventory) as the compact model YAML or the plain inventory.
#include <ostream>

#include "driver/session.hpp"
#include "shardc/frontend.hpp"
#include "shardc/import.hpp"

namespace shardc {
namespace {

std::optional<ImportedModel> load(const ImportOptions& opt, FileSystem& fs, driver::Session& s) {
  if (is_checkpoint_path(fs, opt.path)) return import_checkpoint(fs, opt.path, s.sink);
  std::string error;
  std::optional<std::string> text = fs.read(opt.path, driver::kMaxInputBytes, error);
  if (!text) {
    s.sink.error(DiagCode::EModel, SourceLoc{opt.path, 0, 0},
                 "cannot read model file '" + opt.path + "': " + error,
                 "give a checkpoint directory, a .safetensors file or a model file "
                 "(inputs are limited to 256 MiB)");
    return std::nullopt;
  }
  std::optional<ImportedModel> im = import_model_file(opt.path, *text, s.sink);
  s.sources[opt.path] = std::move(*text);
  return im;
}

}  // namespace

ExitCode run_import(const ImportOptions& opt, FileSystem& fs, std::ostream& out,
                    std::ostream& err) {
  driver::Session s;
  CommonOptions common;
  common.diag_format = opt.diag_format;
  const std::optional<ImportedModel> im = load(opt, fs, s);
  driver::print_diagnostics(common, s, opt.diag_format == DiagFormat::Text ? err : out);
  if (!im || s.sink.has_errors()) return driver::diagnostics_exit_code(common, s.sink);
  const std::string text =
      opt.format == ImportFormat::Json ? render_model_json(*im) : render_model_yaml(*im);
  if (opt.output.empty()) {
    out << text;
    return ExitCode::Ok;
  }
  std::string error;
  if (!fs.write_atomic(opt.output, text, error)) {
    driver::print_error(err, "cannot write '" + opt.output + "': " + error +
                                 " (omit -o to print to standard output)");
    return ExitCode::Usage;
  }
  return ExitCode::Ok;
}

}  // namespace shardc
