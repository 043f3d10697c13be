// Recipe `training:` section: the optimizer and dtypes the per-rank memory
// report assumes, and the memory budget (src/memory/memory.hpp).
#include <string>

#include "frontend/recipe_internal.hpp"
#include "support/byte_size.hpp"

namespace shardc::fe {
namespace {

std::optional<Optimizer> parse_optimizer(const Node& n, Reader& r) {
  if (n.is_scalar()) {
    for (Optimizer o :
         {Optimizer::AdamW, Optimizer::Adam, Optimizer::Sgd, Optimizer::Muon, Optimizer::None}) {
      if (n.text() == optimizer_name(o)) return o;
    }
  }
  r.error(n, "`optimizer` must be adamw, adam, sgd, muon or none, got " + describe(n),
          "valid values: adamw, adam, sgd (with momentum), muon, none");
  return std::nullopt;
}

std::optional<DType> parse_float_dtype(const Node& n, Reader& r, std::string_view what) {
  std::optional<std::string> text = r.get_string(n, what);
  if (!text) return std::nullopt;
  std::optional<DType> t = parse_dtype(*text);
  if (!t || (*t != DType::Float64 && *t != DType::Float32 && *t != DType::BFloat16 &&
             *t != DType::Float16)) {
    r.error(n, std::string(what) + " must be a float dtype, got " + describe(n),
            "valid values: float32, bfloat16, float16, float64");
    return std::nullopt;
  }
  return t;
}

std::optional<DType> parse_master(const Node& n, Reader& r) {
  if (n.is_scalar() && !n.quoted && n.text() == "none") return std::nullopt;
  std::optional<std::string> text = r.get_string(n, "`master_weights`");
  if (text) {
    std::optional<DType> t = parse_dtype(*text);
    if (t == DType::Float32) return t;
  }
  r.error(n, "`master_weights` must be float32 or none, got " + describe(n),
          "float32 keeps an fp32 copy of every low-precision param the optimizer updates");
  return std::nullopt;
}

std::optional<std::int64_t> parse_budget(const Node& n, Reader& r) {
  if (n.is_scalar()) {
    if (std::optional<std::int64_t> v = parse_byte_size(n.text()); v && *v > 0) return v;
  }
  r.error(n, "`budget` must be a positive byte size, got " + describe(n),
          "e.g. `budget: 80GiB` (units B, KB, MB, GB, TB = powers of 1000; KiB, MiB, GiB, TiB = "
          "powers of 1024)");
  return std::nullopt;
}

// `shard` / `expert_shard` of a `zero` or `zero_optimization` mapping.
void parse_zero_axes(const Node& n, Reader& r, ZeroSpec& z, std::string_view where) {
  if (const Node* shard = n.find("shard")) {
    z.shard = parse_axes(*shard, r, std::string(where) + ".shard").value_or(z.shard);
    z.shard_locs = axis_locs(*shard, r);
  }
  if (const Node* es = n.find("expert_shard")) {
    z.expert_shard =
        parse_axes(*es, r, std::string(where) + ".expert_shard").value_or(z.expert_shard);
    z.expert_shard_locs = axis_locs(*es, r);
  }
}

std::optional<int> parse_zero_stage(const Node& n, Reader& r, std::string_view what) {
  if (n.is_scalar() && !n.quoted) {
    for (const char* text : {"0", "1", "2", "3"}) {
      if (n.text() == text) return text[0] - '0';
    }
  }
  r.error(n, std::string(what) + " must be 0, 1, 2 or 3, got " + describe(n),
          "ZeRO stages: 1 shards optimizer state and fp32 master weights over the DP ranks "
          "(Megatron's distributed optimizer), 2 also the grads, 3 also the params (`fsdp`)");
  return std::nullopt;
}

// `zero: 1` or `zero: {stage: 1, shard: [...], expert_shard: [...]}`.
void parse_zero(const Node& n, Reader& r, ZeroSpec& z) {
  z.spelling = "zero";
  z.loc = r.loc(n);
  if (n.is_map()) {
    r.check_keys(n, {"stage", "shard", "expert_shard"}, "`training.zero`");
    if (const Node* st = n.find("stage")) {
      z.stage = parse_zero_stage(*st, r, "`training.zero.stage`").value_or(0);
    } else {
      r.error(n, "`training.zero` needs `stage`", "e.g. `zero: {stage: 1, shard: [dp]}`");
    }
    parse_zero_axes(n, r, z, "`training.zero`");
    return;
  }
  z.stage = parse_zero_stage(n, r, "`training.zero`").value_or(0);
}

// DeepSpeed's spelling: `zero_optimization: {stage: 2}` (ds_config.json).
void parse_zero_optimization(const Node& n, Reader& r, ZeroSpec& z) {
  z.spelling = "zero_optimization.stage";
  z.loc = r.loc(n);
  if (!r.expect_map(n, "`training.zero_optimization`")) return;
  r.check_keys(n, {"stage", "shard", "expert_shard"}, "`training.zero_optimization`");
  if (const Node* st = n.find("stage")) {
    z.stage = parse_zero_stage(*st, r, "`training.zero_optimization.stage`").value_or(0);
    z.loc = r.loc(*st);
  } else {
    r.error(n, "`training.zero_optimization` needs `stage`",
            "DeepSpeed's ds_config spelling: `zero_optimization: {stage: 2}`");
  }
  parse_zero_axes(n, r, z, "`training.zero_optimization`");
}

// Megatron's `distributed_optimizer: true` (--use-distributed-optimizer): ZeRO-1.
void parse_distributed_optimizer(const Node& n, Reader& r, ZeroSpec& z) {
  z.spelling = "distributed_optimizer";
  z.loc = r.loc(n);
  if (std::optional<bool> on = r.get_bool(n, "`training.distributed_optimizer`")) {
    z.stage = *on ? 1 : 0;
  }
}

void parse_zero_spellings(const Node& n, Reader& r, TrainingSpec& t) {
  const Node* first = nullptr;
  for (const char* key : {"zero", "distributed_optimizer", "zero_optimization"}) {
    const Node* v = n.find(key);
    if (v == nullptr) continue;
    if (first != nullptr) {
      r.error(*v,
              std::string("`training.") + key + "` repeats what `training." + t.zero.spelling +
                  "` already says",
              "write one of `zero`, `distributed_optimizer` (Megatron) or "
              "`zero_optimization.stage` (DeepSpeed)");
      continue;
    }
    first = v;
    if (std::string_view(key) == "zero") parse_zero(*v, r, t.zero);
    if (std::string_view(key) == "distributed_optimizer") {
      parse_distributed_optimizer(*v, r, t.zero);
    }
    if (std::string_view(key) == "zero_optimization") parse_zero_optimization(*v, r, t.zero);
  }
}

}  // namespace

TrainingSpec parse_training(const Node& n, Reader& r) {
  TrainingSpec t;
  t.loc = r.loc(n);
  if (n.is_null()) return t;
  if (!r.expect_map(n, "`training`")) return t;
  r.check_keys(n,
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
                "activation_dtype",
                "moe",
                "offload",
                "ranks_per_node"},
               "`training`");
  parse_zero_spellings(n, r, t);
  parse_training_shape(n, r, t.shape);
  if (const Node* o = n.find("optimizer"))
    t.optimizer = parse_optimizer(*o, r).value_or(t.optimizer);
  if (const Node* m = n.find("master_weights")) t.master_weights = parse_master(*m, r);
  if (const Node* g = n.find("grad_dtype")) t.grad_dtype = parse_float_dtype(*g, r, "`grad_dtype`");
  if (const Node* s = n.find("state_dtype")) {
    t.state_dtype = parse_float_dtype(*s, r, "`state_dtype`");
  }
  if (const Node* b = n.find("budget")) {
    t.budget_bytes = parse_budget(*b, r);
    t.budget_loc = r.loc(*b);
  }
  return t;
}

}  // namespace shardc::fe
