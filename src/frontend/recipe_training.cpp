// Recipe `training:` section: the optimizer and dtypes the per-rank memory
// report assumes, and the memory budget (src/memory/memory.hpp).
#include <string>

#include "frontend/recipe_internal.hpp"
#include "support/byte_size.hpp"

namespace shardc::fe {
namespace {

std::optional<Optimizer> parse_optimizer(const Node& node, Reader& reader) {
  if (node.is_scalar()) {
    for (Optimizer optimizer :
         {Optimizer::AdamW, Optimizer::Adam, Optimizer::Sgd, Optimizer::Muon, Optimizer::None}) {
      if (node.text() == optimizer_name(optimizer)) return optimizer;
    }
  }
  reader.error(node, "`optimizer` must be adamw, adam, sgd, muon or none, got " + describe(node),
               "valid values: adamw, adam, sgd (with momentum), muon, none");
  return std::nullopt;
}

std::optional<DType> parse_float_dtype(const Node& node, Reader& reader, std::string_view what) {
  std::optional<std::string> text = reader.get_string(node, what);
  if (!text) return std::nullopt;
  std::optional<DType> dtype = parse_dtype(*text);
  if (!dtype || (*dtype != DType::Float64 && *dtype != DType::Float32 &&
                 *dtype != DType::BFloat16 && *dtype != DType::Float16)) {
    reader.error(node, std::string(what) + " must be a float dtype, got " + describe(node),
                 "valid values: float32, bfloat16, float16, float64");
    return std::nullopt;
  }
  return dtype;
}

std::optional<DType> parse_master(const Node& node, Reader& reader) {
  if (node.is_scalar() && !node.quoted && node.text() == "none") return std::nullopt;
  std::optional<std::string> text = reader.get_string(node, "`master_weights`");
  if (text) {
    std::optional<DType> dtype = parse_dtype(*text);
    if (dtype == DType::Float32) return dtype;
  }
  reader.error(node, "`master_weights` must be float32 or none, got " + describe(node),
               "float32 keeps an fp32 copy of every low-precision param the optimizer updates");
  return std::nullopt;
}

std::optional<std::int64_t> parse_budget(const Node& node, Reader& reader) {
  if (node.is_scalar()) {
    const std::string text(node.text());
    std::optional<std::int64_t> bytes = parse_byte_size(text);
    // `budget: 80` would be 80 bytes: a bare number below 1 MiB is a forgotten unit.
    if (bytes && *bytes > 0 && *bytes < (std::int64_t{1} << 20) &&
        text.find_first_not_of("0123456789") == std::string::npos) {
      reader.error(node, "`budget: " + text + "` is " + text + " bytes",
                   "write the unit: `budget: " + text +
                       "GiB` (powers of 1024) or `budget: " + text + "GB` (powers of 1000)");
      return std::nullopt;
    }
    if (bytes && *bytes > 0) return bytes;
  }
  reader.error(
      node, "`budget` must be a positive byte size, got " + describe(node),
      "e.g. `budget: 80GiB` (units B, KB, MB, GB, TB = powers of 1000; KiB, MiB, GiB, TiB = "
      "powers of 1024)");
  return std::nullopt;
}

// `shard` / `expert_shard` of a `zero` or `zero_optimization` mapping.
void parse_zero_axes(const Node& node, Reader& reader, ZeroSpec& zero, std::string_view where) {
  if (const Node* shard = node.find("shard")) {
    zero.shard = parse_axes(*shard, reader, std::string(where) + ".shard").value_or(zero.shard);
    zero.shard_locs = axis_locs(*shard, reader);
  }
  if (const Node* es = node.find("expert_shard")) {
    zero.expert_shard =
        parse_axes(*es, reader, std::string(where) + ".expert_shard").value_or(zero.expert_shard);
    zero.expert_shard_locs = axis_locs(*es, reader);
  }
}

std::optional<int> parse_zero_stage(const Node& node, Reader& reader, std::string_view what) {
  if (node.is_scalar() && !node.quoted) {
    for (const char* text : {"0", "1", "2", "3"}) {
      if (node.text() == text) return text[0] - '0';
    }
  }
  reader.error(node, std::string(what) + " must be 0, 1, 2 or 3, got " + describe(node),
               "ZeRO stages: 1 shards optimizer state and fp32 master weights over the DP ranks "
               "(Megatron's distributed optimizer), 2 also the grads, 3 also the params (`fsdp`)");
  return std::nullopt;
}

// `zero: 1` or `zero: {stage: 1, shard: [...], expert_shard: [...]}`.
void parse_zero(const Node& node, Reader& reader, ZeroSpec& zero) {
  zero.spelling = "zero";
  zero.loc = reader.loc(node);
  if (node.is_map()) {
    reader.check_keys(node, {"stage", "shard", "expert_shard"}, "`training.zero`");
    if (const Node* st = node.find("stage")) {
      zero.stage = parse_zero_stage(*st, reader, "`training.zero.stage`").value_or(0);
    } else {
      reader.error(node, "`training.zero` needs `stage`", "e.g. `zero: {stage: 1, shard: [dp]}`");
    }
    parse_zero_axes(node, reader, zero, "`training.zero`");
    return;
  }
  zero.stage = parse_zero_stage(node, reader, "`training.zero`").value_or(0);
}

// DeepSpeed's spelling: `zero_optimization: {stage: 2}` (ds_config.json).
void parse_zero_optimization(const Node& node, Reader& reader, ZeroSpec& zero) {
  zero.spelling = "zero_optimization.stage";
  zero.loc = reader.loc(node);
  if (!reader.expect_map(node, "`training.zero_optimization`")) return;
  reader.check_keys(node, {"stage", "shard", "expert_shard"}, "`training.zero_optimization`");
  if (const Node* st = node.find("stage")) {
    zero.stage = parse_zero_stage(*st, reader, "`training.zero_optimization.stage`").value_or(0);
    zero.loc = reader.loc(*st);
  } else {
    reader.error(node, "`training.zero_optimization` needs `stage`",
                 "DeepSpeed's ds_config spelling: `zero_optimization: {stage: 2}`");
  }
  parse_zero_axes(node, reader, zero, "`training.zero_optimization`");
}

// Megatron's `distributed_optimizer: true` (--use-distributed-optimizer): ZeRO-1.
void parse_distributed_optimizer(const Node& node, Reader& reader, ZeroSpec& zero) {
  zero.spelling = "distributed_optimizer";
  zero.loc = reader.loc(node);
  if (std::optional<bool> on = reader.get_bool(node, "`training.distributed_optimizer`")) {
    zero.stage = *on ? 1 : 0;
  }
}

void parse_zero_spellings(const Node& node, Reader& reader, TrainingSpec& training) {
  const Node* first = nullptr;
  for (const char* key : {"zero", "distributed_optimizer", "zero_optimization"}) {
    const Node* spelling = node.find(key);
    if (spelling == nullptr) continue;
    if (first != nullptr) {
      reader.error(*spelling,
                   std::string("`training.") + key + "` and `training." + training.zero.spelling +
                       "` both set the ZeRO stage",
                   "write one of `zero`, `distributed_optimizer` (Megatron) or "
                   "`zero_optimization.stage` (DeepSpeed)");
      continue;
    }
    first = spelling;
    if (std::string_view(key) == "zero") parse_zero(*spelling, reader, training.zero);
    if (std::string_view(key) == "distributed_optimizer") {
      parse_distributed_optimizer(*spelling, reader, training.zero);
    }
    if (std::string_view(key) == "zero_optimization")
      parse_zero_optimization(*spelling, reader, training.zero);
  }
}

}  // namespace

TrainingSpec parse_training(const Node& node, Reader& reader) {
  TrainingSpec training;
  training.loc = reader.loc(node);
  if (node.is_null()) return training;
  if (!reader.expect_map(node, "`training`")) return training;
  reader.check_keys(node,
                    {"optimizer",
                     "master_weights",
                     "grad_dtype",
                     "state_dtype",
                     "budget",
                     "zero",
                     "distributed_optimizer",
                     "zero_optimization",
                     "seq_len",
                     "micro_batch_size",
                     "global_batch_size",
                     "gradient_accumulation_steps",
                     "recompute",
                     "sequence_parallel",
                     "context_parallel",
                     "pipeline_schedule",
                     "attention",
                     "kernels",
                     "activation_dtype",
                     "moe",
                     "offload",
                     "ranks_per_node"},
                    "`training`");
  parse_zero_spellings(node, reader, training);
  parse_training_shape(node, reader, training.shape);
  if (const Node* optimizer = node.find("optimizer"))
    training.optimizer = parse_optimizer(*optimizer, reader).value_or(training.optimizer);
  if (const Node* master = node.find("master_weights")) {
    training.master_weights = parse_master(*master, reader);
    training.master_weights_loc = reader.loc(*master);
  }
  if (const Node* grad = node.find("grad_dtype"))
    training.grad_dtype = parse_float_dtype(*grad, reader, "`grad_dtype`");
  if (const Node* state = node.find("state_dtype")) {
    training.state_dtype = parse_float_dtype(*state, reader, "`state_dtype`");
  }
  if (const Node* budget = node.find("budget")) {
    training.budget_bytes = parse_budget(*budget, reader);
    training.budget_loc = reader.loc(*budget);
  }
  return training;
}

}  // namespace shardc::fe
