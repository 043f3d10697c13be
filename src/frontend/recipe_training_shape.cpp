// Recipe `training:` keys of the training shape (src/core/recipe.hpp
// TrainingShape): sequence length, batch, recompute, sequence/context
// parallelism, pipeline schedule, attention implementation, activation dtype,
// MoE routing, offload and ranks per node. Type errors are E-RECIPE (as every
// recipe key); values out of range are E-TRAINING (exit 2), at the value.
#include <string>

#include "frontend/recipe_internal.hpp"
#include "support/limits.hpp"

namespace shardc::fe {
namespace {

// An integer in [1, max], else E-TRAINING naming the bound.
std::optional<std::int64_t> bounded_count(const Node& node, Reader& reader, std::string_view what,
                                          std::int64_t max, std::string_view hint) {
  std::optional<std::int64_t> count = reader.get_int(node, what);
  if (!count) return std::nullopt;
  if (*count < 1 || *count > max) {
    reader.error(DiagCode::ETraining, reader.loc(node),
                 std::string(what) + " must lie in [1, " + std::to_string(max) + "], got " +
                     std::to_string(*count),
                 std::string(hint));
    return std::nullopt;
  }
  return count;
}

std::optional<Recompute> recompute_mode(const Node& node, Reader& reader, std::string_view what) {
  if (node.is_scalar() && !node.quoted) {
    for (Recompute mode : {Recompute::None, Recompute::Selective, Recompute::Full})
      if (node.text() == recompute_name(mode)) return mode;
  }
  reader.error(node, std::string(what) + " must be none, selective or full, got " + describe(node),
               "selective recomputes the attention core (Korthikanti et al. 2022, Sec. 5), full "
               "the whole layer from its input (Sec. 4)");
  return std::nullopt;
}

// `recompute: full` or `recompute: [{layers: [0, 16], mode: full}, ...]`
// (layers no entry names: none).
void parse_recompute(const Node& node, Reader& reader, TrainingShape& shape) {
  shape.recompute_loc = reader.loc(node);
  if (!node.is_seq()) {
    shape.recompute =
        recompute_mode(node, reader, "`training.recompute`").value_or(shape.recompute);
    return;
  }
  for (const Node& entry : node.items()) {
    if (!reader.expect_map(entry, "a `training.recompute` entry")) continue;
    reader.check_keys(entry, {"layers", "mode"}, "a `training.recompute` entry");
    const Node* layers = entry.find("layers");
    const Node* mode = entry.find("mode");
    if (layers == nullptr || mode == nullptr) {
      reader.error(
          entry, "a `training.recompute` entry needs `layers: [first, end]` and `mode`",
          "e.g. `recompute: [{layers: [0, 16], mode: full}]` (layer blocks, end excluded)");
      continue;
    }
    RecomputeRange range;
    range.loc = reader.loc(entry);
    const std::optional<Recompute> parsed_mode =
        recompute_mode(*mode, reader, "`recompute` entry `mode`");
    if (!parsed_mode) continue;
    range.mode = *parsed_mode;
    if (!layers->is_seq() || layers->items().size() != 2) {
      reader.error(*layers, "`layers` must be [first, end], got " + describe(*layers),
                   "layer blocks first..end-1 (0-based, end excluded), e.g. [0, 16]");
      continue;
    }
    const std::optional<std::int64_t> first = reader.get_int(layers->items()[0], "`layers` first");
    const std::optional<std::int64_t> end = reader.get_int(layers->items()[1], "`layers` end");
    if (!first || !end) continue;
    if (*first < 0 || *end <= *first) {
      reader.error(DiagCode::ETraining, reader.loc(*layers),
                   "`layers: [" + std::to_string(*first) + ", " + std::to_string(*end) +
                       "]` is no range: it needs 0 <= first < end",
                   "layer blocks first..end-1 (0-based, end excluded), e.g. [0, 16]");
      continue;
    }
    for (const RecomputeRange& other : shape.recompute_ranges) {
      if (*first < other.end_layer && other.first_layer < *end) {
        reader.error(DiagCode::ETraining, reader.loc(*layers),
                     "`layers: [" + std::to_string(*first) + ", " + std::to_string(*end) +
                         "]` overlaps the entry at line " + std::to_string(other.loc.line),
                     "give every layer block one mode");
      }
    }
    range.first_layer = *first;
    range.end_layer = *end;
    shape.recompute_ranges.push_back(range);
  }
}

void parse_schedule(const Node& node, Reader& reader, PipelineSchedule& schedule) {
  schedule.loc = reader.loc(node);
  if (!reader.expect_map(node, "`training.pipeline_schedule`")) return;
  reader.check_keys(node, {"kind", "microbatches"}, "`training.pipeline_schedule`");
  if (const Node* kind = node.find("kind")) {
    bool known = false;
    for (PipelineScheduleKind candidate : kPipelineScheduleKinds) {
      if (kind->is_scalar() && !kind->quoted && kind->text() == pipeline_schedule_name(candidate)) {
        schedule.kind = candidate;
        schedule.written = true;
        known = true;
      }
    }
    if (!known) {
      reader.error(*kind,
                   "`training.pipeline_schedule.kind` must be 1f1b, interleaved, gpipe, "
                   "zero_bubble, zbv or dualpipev, got " +
                       describe(*kind),
                   "interleaved takes its virtual stages from `pipeline.virtual_stages`; zbv and "
                   "dualpipev take exactly 2");
    }
  }
  if (const Node* microbatches = node.find("microbatches")) {
    schedule.microbatches =
        bounded_count(*microbatches, reader, "`training.pipeline_schedule.microbatches`",
                      limits::kMaxBatch, "micro-batches per optimizer step");
    schedule.microbatches_loc = reader.loc(*microbatches);
  }
}

void parse_attention(const Node& node, Reader& reader, AttentionImpl& attention) {
  if (node.is_scalar() && !node.quoted) {
    for (AttentionImpl candidate :
         {AttentionImpl::Flash, AttentionImpl::Sdpa, AttentionImpl::Eager}) {
      if (node.text() == attention_impl_name(candidate)) {
        attention = candidate;
        return;
      }
    }
  }
  reader.error(node, "`training.attention` must be flash, sdpa or eager, got " + describe(node),
               "eager stores the s x s attention scores per head; flash and sdpa do not");
}

// `training.kernels: eager | fused` (src/core/recipe.hpp ActivationKernels); fused
// kernels run flash attention, so `attention: eager` beside them is refused.
void parse_kernels(const Node& node, Reader& reader, TrainingShape& shape) {
  shape.kernels_loc = reader.loc(node);
  if (node.is_scalar() && !node.quoted) {
    for (ActivationKernels candidate : {ActivationKernels::Eager, ActivationKernels::Fused}) {
      if (node.text() == activation_kernels_name(candidate)) {
        shape.kernels = candidate;
        return;
      }
    }
  }
  reader.error(node, "`training.kernels` must be eager or fused, got " + describe(node),
               "eager: Hugging Face transformers' modules (the default); fused: Megatron-Core "
               "with Transformer Engine's fused norm-linear, SwiGLU, RoPE and cross entropy");
}

void parse_activation_dtype(const Node& node, Reader& reader, TrainingShape& shape) {
  shape.activation_dtype_loc = reader.loc(node);
  std::optional<std::string> text = reader.get_string(node, "`training.activation_dtype`");
  if (!text) return;
  std::optional<DType> dtype = parse_dtype(*text);
  if (!dtype ||
      (*dtype != DType::Float32 && *dtype != DType::BFloat16 && *dtype != DType::Float16)) {
    reader.error(
        node,
        "`training.activation_dtype` must be bfloat16, float16 or float32, got " + describe(node),
        "the dtype the layers compute in (torch.autocast's dtype, or the params' dtype)");
    return;
  }
  shape.activation_dtype = dtype;
}

void parse_moe(const Node& node, Reader& reader, MoeRouting& moe) {
  moe.loc = reader.loc(node);
  if (!reader.expect_map(node, "`training.moe`")) return;
  reader.check_keys(node, {"capacity_factor", "dropless"}, "`training.moe`");
  const Node* cf = node.find("capacity_factor");
  const Node* dropless = node.find("dropless");
  if (cf != nullptr && dropless != nullptr) {
    reader.error(*dropless, "`training.moe` has both `capacity_factor` and `dropless`",
                 "dropless routing has no capacity; write one of them");
    return;
  }
  if (dropless != nullptr) {
    if (std::optional<bool> on = reader.get_bool(*dropless, "`training.moe.dropless`");
        on && !*on) {
      reader.error(*dropless, "`dropless: false` needs a `capacity_factor` instead",
                   "e.g. `moe: {capacity_factor: 1.25}`");
    }
    return;
  }
  if (cf == nullptr) return;
  double value = 0;
  const std::string text(cf->text());
  std::size_t used = 0;
  bool ok = cf->is_scalar() && !cf->quoted && !text.empty();
  if (ok) {
    try {
      value = std::stod(text, &used);
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || used != text.size() || !(value > 0.0) || value > 1024.0) {
    reader.error(
        DiagCode::ETraining, reader.loc(*cf),
        "`training.moe.capacity_factor` must be a number in (0, 1024], got " + describe(*cf),
        "tokens an expert may take, as a multiple of tokens x top_k / experts (e.g. 1.25)");
    return;
  }
  moe.capacity_factor = value;
}

void parse_offload(const Node& node, Reader& reader, OffloadSpec& offload) {
  offload.loc = reader.loc(node);
  if (!reader.expect_map(node, "`training.offload`")) return;
  reader.check_keys(node, {"optimizer", "params", "grads"}, "`training.offload`");
  if (const Node* optimizer = node.find("optimizer"))
    offload.optimizer = reader.get_bool(*optimizer, "`training.offload.optimizer`").value_or(false);
  if (const Node* params = node.find("params"))
    offload.params = reader.get_bool(*params, "`training.offload.params`").value_or(false);
  if (const Node* grads = node.find("grads"))
    offload.grads = reader.get_bool(*grads, "`training.offload.grads`").value_or(false);
}

}  // namespace

void parse_training_shape(const Node& node, Reader& reader, TrainingShape& shape) {
  if (const Node* seq_len = node.find("seq_len")) {
    shape.seq_len = bounded_count(*seq_len, reader, "`training.seq_len`", limits::kMaxSeqLen,
                                  "tokens per sequence (e.g. 8192)");
    shape.seq_len_loc = reader.loc(*seq_len);
  }
  if (const Node* micro_batch = node.find("micro_batch_size")) {
    shape.micro_batch_size =
        bounded_count(*micro_batch, reader, "`training.micro_batch_size`", limits::kMaxBatch,
                      "sequences per micro-batch per data-parallel rank")
            .value_or(shape.micro_batch_size);
    shape.micro_batch_size_loc = reader.loc(*micro_batch);
  }
  const Node* gbs = node.find("global_batch_size");
  const Node* gas = node.find("gradient_accumulation_steps");
  if (gbs != nullptr && gas != nullptr) {
    reader.error(*gas,
                 "`training.gradient_accumulation_steps` repeats what `global_batch_size` says",
                 "write one: global_batch_size = micro_batch_size x accumulation steps x "
                 "data-parallel ranks");
  } else if (gbs != nullptr) {
    shape.global_batch_size = bounded_count(*gbs, reader, "`training.global_batch_size`",
                                            limits::kMaxBatch, "sequences per optimizer step");
    shape.global_batch_size_loc = reader.loc(*gbs);
    if (shape.global_batch_size && *shape.global_batch_size < shape.micro_batch_size) {
      reader.error(DiagCode::ETraining, reader.loc(*gbs),
                   "`training.global_batch_size` " + std::to_string(*shape.global_batch_size) +
                       " is smaller than one micro-batch (`micro_batch_size` " +
                       std::to_string(shape.micro_batch_size) + ")",
                   "the global batch holds micro_batch_size x accumulation steps x data-parallel "
                   "ranks sequences");
    }
  } else if (gas != nullptr) {
    shape.gradient_accumulation_steps =
        bounded_count(*gas, reader, "`training.gradient_accumulation_steps`", limits::kMaxBatch,
                      "micro-batches per optimizer step per data-parallel rank");
    shape.gradient_accumulation_steps_loc = reader.loc(*gas);
  }
  if (const Node* recompute = node.find("recompute")) parse_recompute(*recompute, reader, shape);
  if (const Node* sequence_parallel = node.find("sequence_parallel")) {
    shape.sequence_parallel =
        reader.get_bool(*sequence_parallel, "`training.sequence_parallel`").value_or(false);
    shape.sequence_parallel_loc = reader.loc(*sequence_parallel);
  }
  if (const Node* context_parallel = node.find("context_parallel")) {
    shape.context_parallel = reader.get_string(*context_parallel, "`training.context_parallel`");
    shape.context_parallel_loc = reader.loc(*context_parallel);
  }
  if (const Node* schedule = node.find("pipeline_schedule"))
    parse_schedule(*schedule, reader, shape.pipeline_schedule);
  if (const Node* attention = node.find("attention")) {
    parse_attention(*attention, reader, shape.attention);
    shape.attention_loc = reader.loc(*attention);
  }
  if (const Node* kernels = node.find("kernels")) {
    parse_kernels(*kernels, reader, shape);
    const Node* attention = node.find("attention");
    if (shape.kernels == ActivationKernels::Fused && attention != nullptr &&
        shape.attention == AttentionImpl::Eager) {
      reader.error(DiagCode::ETraining, reader.loc(*attention),
                   "`training.attention: eager` beside `kernels: fused`: the fused kernels run "
                   "flash attention (Transformer Engine's DotProductAttention)",
                   "drop `attention` or set it to flash");
    }
  }
  if (const Node* activation_dtype = node.find("activation_dtype"))
    parse_activation_dtype(*activation_dtype, reader, shape);
  if (const Node* moe = node.find("moe")) parse_moe(*moe, reader, shape.moe);
  if (const Node* offload = node.find("offload")) parse_offload(*offload, reader, shape.offload);
  if (const Node* ranks_per_node = node.find("ranks_per_node")) {
    shape.ranks_per_node = bounded_count(*ranks_per_node, reader, "`training.ranks_per_node`",
                                         limits::kMaxBatch, "GPUs per node (e.g. 8)");
    shape.ranks_per_node_loc = reader.loc(*ranks_per_node);
  }
}

}  // namespace shardc::fe
