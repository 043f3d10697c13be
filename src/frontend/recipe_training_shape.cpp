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
std::optional<std::int64_t> bounded_count(const Node& n, Reader& r, std::string_view what,
                                          std::int64_t max, std::string_view hint) {
  std::optional<std::int64_t> v = r.get_int(n, what);
  if (!v) return std::nullopt;
  if (*v < 1 || *v > max) {
    r.error(DiagCode::ETraining, r.loc(n),
            std::string(what) + " must lie in [1, " + std::to_string(max) + "], got " +
                std::to_string(*v),
            std::string(hint));
    return std::nullopt;
  }
  return v;
}

std::optional<Recompute> recompute_mode(const Node& n, Reader& r, std::string_view what) {
  if (n.is_scalar() && !n.quoted) {
    for (Recompute m : {Recompute::None, Recompute::Selective, Recompute::Full})
      if (n.text() == recompute_name(m)) return m;
  }
  r.error(n, std::string(what) + " must be none, selective or full, got " + describe(n),
          "selective recomputes the attention core (Korthikanti et al. 2022, Sec. 5), full "
          "the whole layer from its input (Sec. 4)");
  return std::nullopt;
}

// `recompute: full` or `recompute: [{layers: [0, 16], mode: full}, ...]`
// (layers no entry names: none).
void parse_recompute(const Node& n, Reader& r, TrainingShape& t) {
  t.recompute_loc = r.loc(n);
  if (!n.is_seq()) {
    t.recompute = recompute_mode(n, r, "`training.recompute`").value_or(t.recompute);
    return;
  }
  for (const Node& e : n.items()) {
    if (!r.expect_map(e, "a `training.recompute` entry")) continue;
    r.check_keys(e, {"layers", "mode"}, "a `training.recompute` entry");
    const Node* layers = e.find("layers");
    const Node* mode = e.find("mode");
    if (layers == nullptr || mode == nullptr) {
      r.error(e, "a `training.recompute` entry needs `layers: [first, end]` and `mode`",
              "e.g. `recompute: [{layers: [0, 16], mode: full}]` (layer blocks, end excluded)");
      continue;
    }
    RecomputeRange range;
    range.loc = r.loc(e);
    const std::optional<Recompute> m = recompute_mode(*mode, r, "`recompute` entry `mode`");
    if (!m) continue;
    range.mode = *m;
    if (!layers->is_seq() || layers->items().size() != 2) {
      r.error(*layers, "`layers` must be [first, end], got " + describe(*layers),
              "layer blocks first..end-1 (0-based, end excluded), e.g. [0, 16]");
      continue;
    }
    const std::optional<std::int64_t> first = r.get_int(layers->items()[0], "`layers` first");
    const std::optional<std::int64_t> end = r.get_int(layers->items()[1], "`layers` end");
    if (!first || !end) continue;
    if (*first < 0 || *end <= *first) {
      r.error(DiagCode::ETraining, r.loc(*layers),
              "`layers: [" + std::to_string(*first) + ", " + std::to_string(*end) +
                  "]` is no range: it needs 0 <= first < end",
              "layer blocks first..end-1 (0-based, end excluded), e.g. [0, 16]");
      continue;
    }
    for (const RecomputeRange& other : t.recompute_ranges) {
      if (*first < other.end_layer && other.first_layer < *end) {
        r.error(DiagCode::ETraining, r.loc(*layers),
                "`layers: [" + std::to_string(*first) + ", " + std::to_string(*end) +
                    "]` overlaps the entry at line " + std::to_string(other.loc.line),
                "give every layer block one mode");
      }
    }
    range.first_layer = *first;
    range.end_layer = *end;
    t.recompute_ranges.push_back(range);
  }
}

void parse_schedule(const Node& n, Reader& r, PipelineSchedule& s) {
  s.loc = r.loc(n);
  if (!r.expect_map(n, "`training.pipeline_schedule`")) return;
  r.check_keys(n, {"kind", "microbatches"}, "`training.pipeline_schedule`");
  if (const Node* kind = n.find("kind")) {
    bool known = false;
    for (PipelineScheduleKind k :
         {PipelineScheduleKind::OneFOneB, PipelineScheduleKind::Interleaved,
          PipelineScheduleKind::GPipe, PipelineScheduleKind::ZeroBubble}) {
      if (kind->is_scalar() && !kind->quoted && kind->text() == pipeline_schedule_name(k)) {
        s.kind = k;
        s.written = true;
        known = true;
      }
    }
    if (!known) {
      r.error(*kind,
              "`training.pipeline_schedule.kind` must be 1f1b, interleaved, gpipe or "
              "zero_bubble, got " +
                  describe(*kind),
              "interleaved takes its virtual stages from `pipeline.virtual_stages`");
    }
  }
  if (const Node* m = n.find("microbatches")) {
    s.microbatches = bounded_count(*m, r, "`training.pipeline_schedule.microbatches`",
                                   limits::kMaxBatch, "micro-batches per optimizer step");
    s.microbatches_loc = r.loc(*m);
  }
}

void parse_attention(const Node& n, Reader& r, AttentionImpl& a) {
  if (n.is_scalar() && !n.quoted) {
    for (AttentionImpl k : {AttentionImpl::Flash, AttentionImpl::Sdpa, AttentionImpl::Eager}) {
      if (n.text() == attention_impl_name(k)) {
        a = k;
        return;
      }
    }
  }
  r.error(n, "`training.attention` must be flash, sdpa or eager, got " + describe(n),
          "eager stores the s x s attention scores per head; flash and sdpa do not");
}

void parse_activation_dtype(const Node& n, Reader& r, TrainingShape& t) {
  t.activation_dtype_loc = r.loc(n);
  std::optional<std::string> text = r.get_string(n, "`training.activation_dtype`");
  if (!text) return;
  std::optional<DType> d = parse_dtype(*text);
  if (!d || (*d != DType::Float32 && *d != DType::BFloat16 && *d != DType::Float16)) {
    r.error(n,
            "`training.activation_dtype` must be bfloat16, float16 or float32, got " + describe(n),
            "the dtype the layers compute in (torch.autocast's dtype, or the params' dtype)");
    return;
  }
  t.activation_dtype = d;
}

void parse_moe(const Node& n, Reader& r, MoeRouting& m) {
  m.loc = r.loc(n);
  if (!r.expect_map(n, "`training.moe`")) return;
  r.check_keys(n, {"capacity_factor", "dropless"}, "`training.moe`");
  const Node* cf = n.find("capacity_factor");
  const Node* dropless = n.find("dropless");
  if (cf != nullptr && dropless != nullptr) {
    r.error(*dropless, "`training.moe` has both `capacity_factor` and `dropless`",
            "dropless routing has no capacity; write one of them");
    return;
  }
  if (dropless != nullptr) {
    if (std::optional<bool> on = r.get_bool(*dropless, "`training.moe.dropless`"); on && !*on) {
      r.error(*dropless, "`dropless: false` needs a `capacity_factor` instead",
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
    r.error(DiagCode::ETraining, r.loc(*cf),
            "`training.moe.capacity_factor` must be a number in (0, 1024], got " + describe(*cf),
            "tokens an expert may take, as a multiple of tokens x top_k / experts (e.g. 1.25)");
    return;
  }
  m.capacity_factor = value;
}

void parse_offload(const Node& n, Reader& r, OffloadSpec& o) {
  o.loc = r.loc(n);
  if (!r.expect_map(n, "`training.offload`")) return;
  r.check_keys(n, {"optimizer", "params", "grads"}, "`training.offload`");
  if (const Node* v = n.find("optimizer"))
    o.optimizer = r.get_bool(*v, "`training.offload.optimizer`").value_or(false);
  if (const Node* v = n.find("params"))
    o.params = r.get_bool(*v, "`training.offload.params`").value_or(false);
  if (const Node* v = n.find("grads"))
    o.grads = r.get_bool(*v, "`training.offload.grads`").value_or(false);
}

}  // namespace

void parse_training_shape(const Node& n, Reader& r, TrainingShape& t) {
  if (const Node* v = n.find("seq_len")) {
    t.seq_len = bounded_count(*v, r, "`training.seq_len`", limits::kMaxSeqLen,
                              "tokens per sequence (e.g. 8192)");
    t.seq_len_loc = r.loc(*v);
  }
  if (const Node* v = n.find("micro_batch_size")) {
    t.micro_batch_size = bounded_count(*v, r, "`training.micro_batch_size`", limits::kMaxBatch,
                                       "sequences per micro-batch per data-parallel rank")
                             .value_or(t.micro_batch_size);
    t.micro_batch_size_loc = r.loc(*v);
  }
  const Node* gbs = n.find("global_batch_size");
  const Node* gas = n.find("gradient_accumulation_steps");
  if (gbs != nullptr && gas != nullptr) {
    r.error(*gas, "`training.gradient_accumulation_steps` repeats what `global_batch_size` says",
            "write one: global_batch_size = micro_batch_size x accumulation steps x "
            "data-parallel ranks");
  } else if (gbs != nullptr) {
    t.global_batch_size = bounded_count(*gbs, r, "`training.global_batch_size`", limits::kMaxBatch,
                                        "sequences per optimizer step");
    t.global_batch_size_loc = r.loc(*gbs);
    if (t.global_batch_size && *t.global_batch_size < t.micro_batch_size) {
      r.error(DiagCode::ETraining, r.loc(*gbs),
              "`training.global_batch_size` " + std::to_string(*t.global_batch_size) +
                  " is smaller than one micro-batch (`micro_batch_size` " +
                  std::to_string(t.micro_batch_size) + ")",
              "the global batch holds micro_batch_size x accumulation steps x data-parallel "
              "ranks sequences");
    }
  } else if (gas != nullptr) {
    t.gradient_accumulation_steps =
        bounded_count(*gas, r, "`training.gradient_accumulation_steps`", limits::kMaxBatch,
                      "micro-batches per optimizer step per data-parallel rank");
    t.gradient_accumulation_steps_loc = r.loc(*gas);
  }
  if (const Node* v = n.find("recompute")) parse_recompute(*v, r, t);
  if (const Node* v = n.find("sequence_parallel"))
    t.sequence_parallel = r.get_bool(*v, "`training.sequence_parallel`").value_or(false);
  if (const Node* v = n.find("context_parallel")) {
    t.context_parallel = r.get_string(*v, "`training.context_parallel`");
    t.context_parallel_loc = r.loc(*v);
  }
  if (const Node* v = n.find("pipeline_schedule")) parse_schedule(*v, r, t.pipeline_schedule);
  if (const Node* v = n.find("attention")) parse_attention(*v, r, t.attention);
  if (const Node* v = n.find("activation_dtype")) parse_activation_dtype(*v, r, t);
  if (const Node* v = n.find("moe")) parse_moe(*v, r, t.moe);
  if (const Node* v = n.find("offload")) parse_offload(*v, r, t.offload);
  if (const Node* v = n.find("ranks_per_node")) {
    t.ranks_per_node = bounded_count(*v, r, "`training.ranks_per_node`", limits::kMaxBatch,
                                     "GPUs per node (e.g. 8)");
    t.ranks_per_node_loc = r.loc(*v);
  }
}

}  // namespace shardc::fe
