// `shardc recipe --from-hf-tp-plan PLAN MODEL --tp N [-o FILE]`: transformers'
// tensor-parallel plan of an architecture as a shardc recipe for MODEL.
#include <ostream>

#include "driver/session.hpp"
#include "frontend/frontend.hpp"
#include "import/import.hpp"

namespace shardc {
namespace {

std::optional<Model> load_model(const RecipeOptions& opt, FileSystem& fs,
                                driver::Session& session) {
  if (is_checkpoint_path(fs, opt.model_path)) {
    std::optional<ImportedModel> im = import_checkpoint(fs, opt.model_path, session.sink);
    if (!im) return std::nullopt;
    return std::move(im->model);
  }
  std::optional<SourceFile> file = driver::read_input(
      fs, opt.model_path, "model", DiagCode::EModel,
      "give a checkpoint directory, a .safetensors file or a model file", session);
  if (!file) return std::nullopt;
  std::optional<Model> model = parse_model(*file, session.sink);
  session.sources[file->path] = std::move(file->text);
  return model;
}

}  // namespace

ExitCode run_recipe(const RecipeOptions& opt, FileSystem& fs, std::ostream& out,
                    std::ostream& err) {
  driver::Session session;
  CommonOptions common;
  common.diag_format = opt.diag_format;
  std::optional<std::string> recipe;
  std::string error;
  std::optional<std::string> plan_text =
      fs.read(opt.hf_tp_plan_path, driver::kMaxInputBytes, error);
  if (!plan_text) {
    session.sink.error(DiagCode::EHfTpPlan, SourceLoc{opt.hf_tp_plan_path, 0, 0},
                       "cannot read '" + opt.hf_tp_plan_path + "': " + error,
                       "write it with `tools/hf_tp_plan.py CHECKPOINT -o plan.json`");
  } else if (std::optional<HfTpPlan> plan =
                 parse_hf_tp_plan(*plan_text, opt.hf_tp_plan_path, session.sink)) {
    if (std::optional<Model> model = load_model(opt, fs, session)) {
      recipe = hf_tp_plan_recipe(*plan, *model, {opt.tp_size, opt.ep_size}, opt.hf_tp_plan_path,
                                 session.sink);
    }
  }
  driver::print_diagnostics(common, session, opt.diag_format == DiagFormat::Text ? err : out);
  if (!recipe || session.sink.has_errors())
    return driver::diagnostics_exit_code(common, session.sink);
  return driver::print_or_write(*recipe, opt.output, fs, out, err);
}

}  // namespace shardc
