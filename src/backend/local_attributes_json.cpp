// The rank file's `local_attributes` section (contract §6.7,
// schemas/rank.schema.json): one line per attention module, layer of experts
// and vocab tensor the rank's stage holds, in model order.
#include "backend/local_attributes_json.hpp"

#include "backend/backend.hpp"

namespace shardc::backend {
namespace {

void write_range(json::Writer& writer, std::string_view key, const IdRange& range) {
  const std::int64_t pair[] = {range.start, range.end};
  writer.member_ints(key, pair);
}

// One section, `"name":{...}`: a line per entry the rank holds (`held[i]`), whose key and
// value `write_entry(i)` writes, and the closing brace on a line of its own after any.
template <typename WriteEntry>
void write_section(json::Writer& writer, std::string_view name, std::size_t count,
                   const std::vector<bool>& held, WriteEntry write_entry) {
  writer.line_break().key(name).begin_object();
  bool any = false;
  for (std::size_t i = 0; i < count; ++i) {
    if (!held[i]) continue;
    any = true;
    writer.line_break();
    write_entry(i);
  }
  if (any) writer.line_break();
  writer.end_object();
}

}  // namespace

void write_local_attributes(json::Writer& writer, const Plan& plan, const LocalAttributes& values) {
  const LocalAttributeSpec& spec = plan.local_attributes;
  writer.begin_object();
  write_section(writer, "attention", spec.attention.size(), values.attention_held,
                [&](std::size_t i) {
                  writer.key(spec.attention[i].module);
                  const auto& heads = values.attention[i];
                  if (!heads) {
                    writer.null();
                    return;
                  }
                  writer.begin_object().member("q_heads", heads->query.size());
                  write_range(writer, "q_head_range", heads->query);
                  writer.member("kv_heads", heads->key_value.size());
                  write_range(writer, "kv_head_range", heads->key_value);
                  write_range(writer, "kv_head_range_used", heads->kv_used);
                  writer.end_object();
                });
  write_section(writer, "experts", spec.experts.size(), values.experts_held, [&](std::size_t i) {
    writer.key(spec.experts[i].module);
    const auto& experts = values.experts[i];
    if (!experts) {
      writer.null();
      return;
    }
    writer.begin_object().member("num_experts", spec.experts[i].num_experts);
    writer.member("local_experts", experts->size());
    write_range(writer, "expert_range", *experts);
    writer.end_object();
  });
  write_section(writer, "vocab", spec.vocab.size(), values.vocab_held, [&](std::size_t i) {
    const VocabLocal& vocab = values.vocab[i];
    writer.key(plan.params.at(spec.vocab[i].param).name).begin_object();
    writer.member("vocab_size", spec.vocab[i].vocab_size);
    write_range(writer, "token_range", vocab.ids);
    writer.member("padding_rows", vocab.padding_rows);
    writer.end_object();
  });
  writer.line_break().end_object();
}

}  // namespace shardc::backend

namespace shardc {

std::string render_local_attributes_json(const Plan& plan, std::int64_t rank) {
  std::string out;
  json::Writer writer(out);
  backend::write_local_attributes(writer, plan, local_attributes_at(plan, rank));
  return out;
}

}  // namespace shardc
