// The rank file's `local_attributes` section (contract §6.7,
// schemas/rank.schema.json): one line per attention module, layer of experts
// and vocab tensor the rank's stage holds, in model order.
#include "backend/local_attributes_json.hpp"

#include "backend/backend.hpp"

namespace shardc::backend {
namespace {

void write_range(json::Writer& w, std::string_view key, const IdRange& r) {
  const std::int64_t pair[] = {r.start, r.end};
  w.member_ints(key, pair);
}

}  // namespace

void write_local_attributes(json::Writer& w, const Plan& plan, const LocalAttributes& values) {
  const LocalAttributeSpec& spec = plan.local_attributes;
  w.begin_object();
  w.line_break().key("attention").begin_object();
  bool any = false;
  for (std::size_t i = 0; i < spec.attention.size(); ++i) {
    if (!values.attention_held[i]) continue;
    any = true;
    w.line_break().key(spec.attention[i].module);
    const auto& a = values.attention[i];
    if (!a) {
      w.null();
      continue;
    }
    w.begin_object().member("q_heads", a->query.size());
    write_range(w, "q_head_range", a->query);
    w.member("kv_heads", a->key_value.size());
    write_range(w, "kv_head_range", a->key_value);
    write_range(w, "kv_head_range_used", a->kv_used);
    w.end_object();
  }
  if (any) w.line_break();
  w.end_object();
  w.line_break().key("experts").begin_object();
  any = false;
  for (std::size_t i = 0; i < spec.experts.size(); ++i) {
    if (!values.experts_held[i]) continue;
    any = true;
    w.line_break().key(spec.experts[i].module);
    const auto& e = values.experts[i];
    if (!e) {
      w.null();
      continue;
    }
    w.begin_object().member("num_experts", spec.experts[i].num_experts);
    w.member("local_experts", e->size());
    write_range(w, "expert_range", *e);
    w.end_object();
  }
  if (any) w.line_break();
  w.end_object();
  w.line_break().key("vocab").begin_object();
  any = false;
  for (std::size_t i = 0; i < spec.vocab.size(); ++i) {
    if (!values.vocab_held[i]) continue;
    any = true;
    const VocabLocal& v = values.vocab[i];
    w.line_break().key(plan.params.at(spec.vocab[i].param).name).begin_object();
    w.member("vocab_size", spec.vocab[i].vocab_size);
    write_range(w, "token_range", v.ids);
    w.member("padding_rows", v.padding_rows);
    w.end_object();
  }
  if (any) w.line_break();
  w.end_object();
  w.line_break().end_object();
}

}  // namespace shardc::backend

namespace shardc {

std::string render_local_attributes_json(const Plan& plan, std::int64_t rank) {
  std::string out;
  json::Writer w(out);
  backend::write_local_attributes(w, plan, local_attributes_at(plan, rank));
  return out;
}

}  // namespace shardc
