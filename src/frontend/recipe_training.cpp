// Recipe `training:` section: the optimizer and dtypes the per-rank memory
// report assumes, and the memory budget (include/shardc/memory.hpp).
#include <string>

#include "frontend/recipe_internal.hpp"
#include "shardc/byte_size.hpp"

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

}  // namespace

TrainingSpec parse_training(const Node& n, Reader& r) {
  TrainingSpec t;
  t.loc = r.loc(n);
  if (n.is_null()) return t;
  if (!r.expect_map(n, "`training`")) return t;
  r.check_keys(n, {"optimizer", "master_weights", "grad_dtype", "state_dtype", "budget"},
               "`training`");
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
