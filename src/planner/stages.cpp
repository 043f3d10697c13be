// Pipeline stages (contract §5.6, §5.8): `auto` splits the layer blocks as
// evenly as possible (extra blocks to earlier stages; non-layer params
// before the first layer on stage 0, all others on the last), or explicit
// glob lists, one per stage. With `virtual_stages: v` (Megatron's
// interleaved schedule) the unit is the model chunk: stages x v of them in
// model order, chunk k on stage k % stages as its virtual stage k / stages
// (megatron/core/transformer/transformer_layer.py
// get_transformer_layer_offset: offset = vp_stage x L / vp + pp_rank x
// L / (pp x vp)), or in a V under the zbv and dualpipev schedules (rank r
// runs chunks r and 2 pp - 1 - r: torch generate_stage_to_rank_mapping
// style "v"); W-PIPELINE-SPLIT when the chunks are unequal and the
// model is Megatron-Core's (decoder.layers.N), which would refuse them.
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/layer_blocks.hpp"
#include "core/pipeline_chunks.hpp"
#include "core/recipe.hpp"
#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

// The block key: the block's stack and index ("transformer.h.3"), core/layer_blocks.hpp's
// rule (a `layers` / `h` / `layer` / `blocks` segment and the number after it: GPT-2's
// `transformer.h.N` too, as the activation model and the search read it); empty outside
// every block.
std::string block_key(std::string_view fqn) {
  const std::optional<LayerBlock> block = layer_block(fqn);
  if (!block) return {};
  return std::string(block->stack) + "." + std::to_string(block->index);
}

// "14/14/13/13/13/13": layer blocks per model chunk; past 16 chunks by runs,
// "chunks 0-28: 2 blocks, chunks 29-31: 1 block", so the sizes that differ show.
std::string chunk_sizes_text(std::int64_t blocks, std::int64_t chunks) {
  const std::int64_t small = blocks / chunks;
  const std::int64_t larger = blocks % chunks;  // chunks [0, larger) hold small + 1
  std::string text;
  if (chunks <= 16) {
    for (std::int64_t k = 0; k < chunks; ++k)
      text += (k > 0 ? "/" : "") + std::to_string(small + (k < larger ? 1 : 0));
    return text;
  }
  const auto run = [](std::int64_t first, std::int64_t end, std::int64_t size) {
    return (end - first == 1 ? "chunk " + std::to_string(first)
                             : "chunks " + std::to_string(first) + "-" + std::to_string(end - 1)) +
           ": " + std::to_string(size) + (size == 1 ? " block" : " blocks");
  };
  if (larger > 0) text = run(0, larger, small + 1) + ", ";
  return text + run(larger, chunks, small);
}

// True when the model uses Megatron-Core's names (GPTModel's decoder.layers.N).
bool megatron_names(const std::vector<PlannedParam>& params) {
  for (const PlannedParam& param : params)
    if (param.name.rfind("decoder.layers.", 0) == 0) return true;
  return false;
}

// W-PIPELINE-SPLIT: Megatron-Core cuts num_layers into pp x vp equal chunks
// and refuses a remainder unless told where it goes (transformer_config.py
// __post_init__: num_layers_in_first/last_pipeline_stage,
// account_for_embedding/loss_in_pipeline_split, pipeline_model_parallel_layout).
void warn_uneven_chunks(std::int64_t blocks, int stages, std::int64_t virtual_stages,
                        const PipelineSpec& spec, DiagnosticSink& sink) {
  const std::int64_t chunks = stages * virtual_stages;
  Diagnostic diag;
  diag.code = DiagCode::WPipelineSplit;
  diag.severity = Severity::Warning;
  diag.loc =
      virtual_stages > 1 && spec.virtual_stages_loc.line > 0 ? spec.virtual_stages_loc : spec.loc;
  diag.message = "stages: auto cuts " + std::to_string(blocks) + " layer blocks into " +
                 std::to_string(chunks) + " model chunks (" + std::to_string(stages) + " stages" +
                 (virtual_stages > 1 ? " x " + std::to_string(virtual_stages) + " virtual stages"
                                     : std::string()) +
                 ") of unequal sizes: " + chunk_sizes_text(blocks, chunks) +
                 "; Megatron-Core needs num_layers divisible by pp" +
                 (virtual_stages > 1 ? " x vp" : "") + " unless told where the rest goes";
  std::string sizes;
  for (std::int64_t k = 1; k <= blocks && k <= 1024; ++k) {
    if (blocks % (k * virtual_stages) == 0)
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(k);
  }
  diag.hint = "pp sizes that divide " + std::to_string(blocks) + " layers" +
              (virtual_stages > 1 ? " with vp " + std::to_string(virtual_stages) : std::string()) +
              ": " + (sizes.empty() ? "none" : sizes) +
              "; or Megatron's num_layers_in_first_pipeline_stage / "
              "num_layers_in_last_pipeline_stage, account_for_embedding_in_pipeline_split / "
              "account_for_loss_in_pipeline_split, or pipeline_model_parallel_layout (write its "
              "layout as explicit `stages`)";
  sink.report(std::move(diag));
}

// Chunk k (model order) runs on stage k % stages as virtual stage k / stages, or in a V
// under the zbv and dualpipev schedules (core/pipeline_chunks.hpp chunk_place).
void set_chunk(PlannedParam& param, std::int64_t chunk, const Plan& plan) {
  const ChunkPlace place = chunk_place(chunk, plan.num_stages, plan.v_shape);
  param.stage = place.stage;
  param.virtual_stage = place.virtual_stage;
}

ModelChunk model_chunk(std::int64_t chunk, const Plan& plan) {
  const ChunkPlace place = chunk_place(chunk, plan.num_stages, plan.v_shape);
  ModelChunk mc;
  mc.stage = place.stage;
  mc.virtual_stage = place.virtual_stage;
  return mc;
}

void auto_stages(std::vector<PlannedParam>& params, Plan& plan, const PipelineSpec& spec,
                 DiagnosticSink& sink) {
  const int stages = plan.num_stages;
  const std::int64_t chunks = stages * spec.virtual_stages;
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
  if (blocks < chunks) {
    const std::string what = spec.virtual_stages > 1
                                 ? std::to_string(chunks) + " model chunks (" +
                                       std::to_string(stages) + " stages x " +
                                       std::to_string(spec.virtual_stages) + " virtual stages)"
                                 : std::to_string(stages) + " pipeline stages";
    sink.error(DiagCode::EPipeline, spec.loc,
               "stages: auto found " + std::to_string(blocks) + " layer blocks for " + what,
               "use fewer stages, or list the stages explicitly");
    return;
  }
  const std::int64_t first_less = spec.first_stage_less_layers;
  const std::int64_t last_less = spec.last_stage_less_layers;
  if (const std::string why = weighted_cut_error(blocks, chunks, first_less, last_less);
      !why.empty()) {
    sink.error(DiagCode::EPipeline, spec.less_layers_loc,
               "stages: auto cannot weight the cut: " + why,
               "lower first_stage_less_layers / last_stage_less_layers or the stages "
               "(torchtitan's generate_llm_fqn_per_model_part refuses the same)");
    return;
  }
  // Megatron-Core refuses unequal chunks; torchtitan (and the layout search's
  // recipes, its FSDP2 style) cuts unequal stages and interleaved chunks as
  // `stages: auto` does (pipeline_module_split), so only Megatron's names warn.
  if (blocks % chunks != 0 && first_less == 0 && last_less == 0 && megatron_names(params)) {
    warn_uneven_chunks(blocks, stages, spec.virtual_stages, spec, sink);
  }
  // Chunk c gets blocks / chunks + (c < blocks % chunks) blocks, less the weights of the
  // first and last chunk (core/pipeline_chunks.hpp, the rule the layout search cuts its
  // recompute ranges by).
  const std::vector<ChunkBlocks> cut = auto_chunk_blocks(blocks, chunks, first_less, last_less);
  const std::vector<std::int64_t> chunk_of_block = chunk_of_each_block(cut, blocks);
  if (spec.virtual_stages > 1) {
    for (std::int64_t c = 0; c < chunks; ++c) {
      ModelChunk mc = model_chunk(c, plan);
      mc.first_block = cut[static_cast<std::size_t>(c)].first;
      mc.end_block = cut[static_cast<std::size_t>(c)].end;
      plan.model_chunks.push_back(mc);
    }
  }
  bool seen_layer = false;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (block_of[i] >= 0) {
      seen_layer = true;
      set_chunk(params[i], chunk_of_block[static_cast<std::size_t>(block_of[i])], plan);
    } else {
      set_chunk(params[i], seen_layer ? chunks - 1 : 0, plan);
    }
  }
}

void explicit_stages(std::vector<PlannedParam>& params, Plan& plan, const PipelineSpec& spec,
                     DiagnosticSink& sink) {
  const int stages = plan.num_stages;
  const std::int64_t chunks = stages * spec.virtual_stages;
  if (static_cast<std::int64_t>(spec.stages.size()) != chunks) {
    sink.error(DiagCode::EPipeline, spec.loc,
               "pipeline lists " + std::to_string(spec.stages.size()) + " stages but axis '" +
                   spec.axis + "' has size " + std::to_string(stages) +
                   (spec.virtual_stages > 1
                        ? " and virtual_stages is " + std::to_string(spec.virtual_stages) + " (" +
                              std::to_string(chunks) + " model chunks)"
                        : std::string()),
               spec.virtual_stages > 1
                   ? "with virtual_stages list one glob list per model chunk, in model order "
                     "(chunk k runs on stage k % pp, or in a V under zbv and dualpipev), or "
                     "use stages: auto"
                   : "list one glob list per stage, or use stages: auto");
    return;
  }
  if (spec.virtual_stages > 1) {
    for (std::int64_t c = 0; c < chunks; ++c) plan.model_chunks.push_back(model_chunk(c, plan));
  }
  GroupedReporter rep;
  for (PlannedParam& param : params) {
    if (param.scale_of) continue;  // an FP8 scale takes its weight's stage (fp8_scales.cpp)
    std::vector<std::int64_t> hits;
    for (std::int64_t s = 0; s < chunks; ++s) {
      for (const Pattern& pat : spec.stages[static_cast<std::size_t>(s)]) {
        if (!pat.match(param.name)) continue;
        hits.push_back(s);
        break;
      }
    }
    if (hits.size() == 1) {
      set_chunk(param, hits.front(), plan);
      continue;
    }
    std::string list;
    for (std::int64_t hit : hits) list += (list.empty() ? "" : ", ") + std::to_string(hit);
    Diagnostic diag;
    diag.code = DiagCode::EPipeline;
    diag.loc = spec.loc;
    diag.param = param.name;
    diag.message = hits.empty() ? param.name + " is in no pipeline stage"
                                : param.name + " is in pipeline stages " + list;
    diag.hint = "every parameter must match the globs of exactly one of the " +
                std::to_string(chunks) + " stage lists under pipeline.stages";
    rep.add(std::move(diag), hits.empty() ? "none" : "many");
  }
  rep.flush(sink);
}

// The expert mesh must partition ranks into the same stages as the dense mesh.
void check_expert_pp(Plan& plan, const PipelineSpec& spec, DiagnosticSink& sink) {
  if (!plan.expert) return;
  const int expert_axis = plan.expert->find(spec.axis);
  auto stride = [](const Mesh& mesh, int axis) {
    std::int64_t inner = 1;
    for (std::size_t i = static_cast<std::size_t>(axis) + 1; i < mesh.axes.size(); ++i)
      inner *= mesh.axes[i].size;
    return inner;
  };
  const Mesh& dense = plan.dense;
  const int d = plan.pipeline_axis;
  if (expert_axis < 0 ||
      plan.expert->axes[static_cast<std::size_t>(expert_axis)].size !=
          dense.axes[static_cast<std::size_t>(d)].size ||
      stride(*plan.expert, expert_axis) != stride(dense, d)) {
    sink.error(DiagCode::EPipeline, plan.expert->loc,
               "expert_mesh must have the pipeline axis '" + spec.axis +
                   "' with the same size and position as the dense mesh",
               "put " + spec.axis + " first in both meshes, with the same size");
    return;
  }
  plan.expert_pipeline_axis = expert_axis;
}

}  // namespace

void assign_stages(std::vector<PlannedParam>& params, Plan& plan, const Recipe& recipe,
                   DiagnosticSink& sink) {
  if (!recipe.pipeline) return;
  const PipelineSpec& spec = *recipe.pipeline;
  const int axis = plan.dense.find(spec.axis);
  if (axis < 0) {
    std::string axes;
    for (const MeshAxis& mesh_axis : plan.dense.axes)
      axes += (axes.empty() ? "" : ", ") + mesh_axis.name;
    sink.error(DiagCode::EAxis, spec.axis_loc.line > 0 ? spec.axis_loc : spec.loc,
               "pipeline axis '" + spec.axis + "' is not an axis of the mesh",
               "axes of the mesh: " + axes + " (the pipeline axis is a mesh axis, usually pp)");
    return;
  }
  plan.pipeline_axis = axis;
  plan.num_stages = static_cast<int>(plan.dense.axes[static_cast<std::size_t>(axis)].size);
  plan.virtual_stages = static_cast<int>(spec.virtual_stages);
  plan.v_shape = v_shaped(recipe.training.shape.pipeline_schedule.kind);
  check_expert_pp(plan, spec, sink);
  if (spec.auto_stages)
    auto_stages(params, plan, spec, sink);
  else
    explicit_stages(params, plan, spec, sink);
}

}  // namespace shardc::passes
