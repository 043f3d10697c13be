// build_plan: runs the passes in order (see passes.hpp).
#include "planner/planner.hpp"

#include "planner/check_plan.hpp"
#include "planner/passes.hpp"

namespace shardc {
namespace {

// `owned`: &model.params when build_plan(Model&&) gave them up, else null.
std::optional<Plan> plan_model(const Model& model, const Recipe& recipe, DiagnosticSink& sink,
                               std::vector<Param>* owned) {
  const std::size_t errors_before = sink.error_count();
  const std::size_t warnings_before = sink.items().size();
  auto world = passes::check_meshes(recipe, sink);
  if (!world) return std::nullopt;
  Plan plan;
  plan.model_name = model.name;
  plan.model_sha256 = model.sha256;
  plan.recipe_sha256 = recipe.sha256;
  plan.world_size = *world;
  plan.dense = recipe.mesh;
  plan.expert = recipe.expert_mesh;
  plan.buffers = recipe.buffers;
  plan.training = recipe.training;
  if (recipe.fsdp) plan.fsdp_reshard_after_forward = recipe.fsdp->reshard_after_forward;

  std::vector<PlannedParam> params = passes::stack_experts(model, recipe, sink, owned);
  passes::pair_fp8_scales(params, model, recipe, sink);
  passes::resolve_rules(params, recipe, sink);
  passes::assign_stages(params, plan, recipe, sink);
  passes::resolve_placements(params, plan, recipe, sink);
  passes::order_shards(params, plan, recipe, sink);
  passes::follow_fp8_weights(params, model, recipe, sink);
  passes::apply_fsdp(params, plan, recipe, sink);
  passes::check_shard_order(params, plan, sink);
  passes::resolve_ties(params, plan, model, recipe, sink);
  passes::check_fused(params, plan, model, recipe, sink);
  passes::resolve_zero(params, plan, recipe, sink);
  passes::resolve_training(params, plan, model, recipe, sink);
  passes::run_checks(params, plan, model, recipe, sink);
  passes::check_fp8_blocks(params, plan, model, recipe, sink);
  // Warnings are reported even when an error exists, so one pass shows the
  // user everything to fix (the lints skip params whose placements failed).
  passes::check_strided(params, plan, sink);
  passes::run_lints(params, plan, model, recipe, sink);
  if (sink.error_count() == errors_before) passes::check_fsdp2_units(params, plan, sink);
  if (sink.error_count() > errors_before) return std::nullopt;
  plan.local_attributes = passes::find_local_attributes(params, model);
  plan.params = std::move(params);
  passes::check_balance(plan, sink);
  for (std::size_t i = warnings_before; i < sink.items().size(); ++i)
    if (sink.items()[i].severity == Severity::Warning) plan.diagnostics.push_back(sink.items()[i]);
  if (invariants_checked_always()) assert_plan_invariants(plan);
  return plan;
}

}  // namespace

std::optional<Plan> build_plan(const Model& model, const Recipe& recipe, DiagnosticSink& sink) {
  return plan_model(model, recipe, sink, nullptr);
}

std::optional<Plan> build_plan(Model&& model, const Recipe& recipe, DiagnosticSink& sink) {
  std::optional<Plan> plan = plan_model(model, recipe, sink, &model.params);
  model.params.clear();  // moved from
  return plan;
}

}  // namespace shardc
