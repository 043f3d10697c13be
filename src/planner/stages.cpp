// Pipeline stages (contract §5.6, §5.8): `auto` splits the layer blocks as
// evenly as possible (extra blocks to earlier stages; non-layer params
// before the first layer on stage 0, all others on the last), or explicit
// glob lists, one per stage.
#include <string>
#include <string_view>
#include <unordered_map>

#include "passes.hpp"

namespace shardc::passes {
namespace {

bool is_number(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The block key: the FQN prefix through the first numeric segment after
// the first `layers` segment; empty when the FQN has none.
std::string block_key(std::string_view fqn) {
  std::size_t pos = 0;
  bool after_layers = false;
  while (pos <= fqn.size()) {
    std::size_t dot = fqn.find('.', pos);
    if (dot == std::string_view::npos) dot = fqn.size();
    std::string_view seg = fqn.substr(pos, dot - pos);
    if (after_layers && is_number(seg)) return std::string(fqn.substr(0, dot));
    if (!after_layers && seg == "layers") after_layers = true;
    pos = dot + 1;
  }
  return {};
}

void auto_stages(std::vector<PlannedParam>& params, int stages, const PipelineSpec& spec,
                 DiagnosticSink& sink) {
  std::unordered_map<std::string, std::int64_t> block_index;
  std::vector<std::int64_t> block_of(params.size(), -1);
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::string key = block_key(params[i].name);
    if (key.empty()) continue;
    auto [it, fresh] =
        block_index.try_emplace(std::move(key), static_cast<std::int64_t>(block_index.size()));
    block_of[i] = it->second;
  }
  const auto blocks = static_cast<std::int64_t>(block_index.size());
  if (blocks < stages) {
    sink.error(DiagCode::EPipeline, spec.loc,
               "stages: auto found " + std::to_string(blocks) + " layer blocks for " +
                   std::to_string(stages) + " pipeline stages",
               "use fewer stages, or list the stages explicitly");
    return;
  }
  // Stage s gets q + (s < r) blocks.
  const std::int64_t q = blocks / stages;
  const std::int64_t r = blocks % stages;
  auto stage_of_block = [&](std::int64_t b) {
    const std::int64_t big = r * (q + 1);
    return static_cast<int>(b < big ? b / (q + 1) : r + (b - big) / q);
  };
  bool seen_layer = false;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (block_of[i] >= 0) {
      seen_layer = true;
      params[i].stage = stage_of_block(block_of[i]);
    } else {
      params[i].stage = seen_layer ? stages - 1 : 0;
    }
  }
}

void explicit_stages(std::vector<PlannedParam>& params, int stages, const PipelineSpec& spec,
                     DiagnosticSink& sink) {
  if (static_cast<int>(spec.stages.size()) != stages) {
    sink.error(DiagCode::EPipeline, spec.loc,
               "pipeline lists " + std::to_string(spec.stages.size()) + " stages but axis '" +
                   spec.axis + "' has size " + std::to_string(stages),
               "list one glob list per stage, or use stages: auto");
    return;
  }
  GroupedReporter rep;
  for (PlannedParam& p : params) {
    if (p.scale_of) continue;  // an FP8 scale takes its weight's stage (fp8_scales.cpp)
    std::vector<int> hits;
    for (int s = 0; s < stages; ++s) {
      for (const Pattern& pat : spec.stages[static_cast<std::size_t>(s)]) {
        if (!pat.match(p.name)) continue;
        hits.push_back(s);
        break;
      }
    }
    if (hits.size() == 1) {
      p.stage = hits.front();
      continue;
    }
    std::string list;
    for (int s : hits) list += (list.empty() ? "" : ", ") + std::to_string(s);
    Diagnostic d;
    d.code = DiagCode::EPipeline;
    d.loc = spec.loc;
    d.param = p.name;
    d.message = hits.empty() ? p.name + " is in no pipeline stage"
                             : p.name + " is in pipeline stages " + list;
    d.hint = "every parameter must match the globs of exactly one of the " +
             std::to_string(stages) + " stage lists under pipeline.stages";
    rep.add(std::move(d), hits.empty() ? "none" : "many");
  }
  rep.flush(sink);
}

// The expert mesh must partition ranks into the same stages as the dense mesh.
void check_expert_pp(Plan& plan, const PipelineSpec& spec, DiagnosticSink& sink) {
  if (!plan.expert) return;
  const int e = plan.expert->find(spec.axis);
  auto stride = [](const Mesh& m, int a) {
    std::int64_t s = 1;
    for (std::size_t i = static_cast<std::size_t>(a) + 1; i < m.axes.size(); ++i)
      s *= m.axes[i].size;
    return s;
  };
  const Mesh& dense = plan.dense;
  const int d = plan.pipeline_axis;
  if (e < 0 ||
      plan.expert->axes[static_cast<std::size_t>(e)].size !=
          dense.axes[static_cast<std::size_t>(d)].size ||
      stride(*plan.expert, e) != stride(dense, d)) {
    sink.error(DiagCode::EPipeline, plan.expert->loc,
               "expert_mesh must have the pipeline axis '" + spec.axis +
                   "' with the same size and position as the dense mesh",
               "put " + spec.axis + " first in both meshes, with the same size");
    return;
  }
  plan.expert_pipeline_axis = e;
}

}  // namespace

void assign_stages(std::vector<PlannedParam>& params, Plan& plan, const Recipe& recipe,
                   DiagnosticSink& sink) {
  if (!recipe.pipeline) return;
  const PipelineSpec& spec = *recipe.pipeline;
  const int axis = plan.dense.find(spec.axis);
  if (axis < 0) {
    std::string axes;
    for (const MeshAxis& a : plan.dense.axes) axes += (axes.empty() ? "" : ", ") + a.name;
    sink.error(DiagCode::EAxis, spec.axis_loc.line > 0 ? spec.axis_loc : spec.loc,
               "pipeline axis '" + spec.axis + "' is not an axis of the mesh",
               "axes of the mesh: " + axes + " (the pipeline axis is a mesh axis, usually pp)");
    return;
  }
  plan.pipeline_axis = axis;
  plan.num_stages = static_cast<int>(plan.dense.axes[static_cast<std::size_t>(axis)].size);
  check_expert_pp(plan, spec, sink);
  if (spec.auto_stages)
    auto_stages(params, plan.num_stages, spec, sink);
  else
    explicit_stages(params, plan.num_stages, spec, sink);
}

}  // namespace shardc::passes
