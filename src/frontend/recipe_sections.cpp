// Recipe `tied`, `pipeline`, `fsdp` and `buffers` sections (contract §4, §5.5-§5.8, §6.3).
#include <limits>
#include <string>

#include "frontend/recipe_internal.hpp"
#include "support/limits.hpp"

namespace shardc::fe {
namespace {

std::optional<std::vector<Pattern>> parse_stage(const Node& n, Reader& r) {
  std::optional<std::vector<std::string>> texts = r.get_string_list(n, "a pipeline stage");
  if (!texts) return std::nullopt;
  std::vector<Pattern> out;
  bool ok = true;
  std::span<const Node> nodes = n.is_seq() ? n.items() : std::span<const Node>(&n, 1);
  for (const Node& item : nodes) {
    std::optional<Pattern> p = parse_pattern(item, r);
    ok = p.has_value() && ok;
    if (p) out.push_back(std::move(*p));
  }
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace

std::optional<std::vector<std::string>> parse_axes(const Node& n, Reader& r,
                                                   std::string_view what) {
  std::optional<std::vector<std::string>> axes = r.get_string_list(n, what);
  if (!axes) return std::nullopt;
  for (std::size_t i = 0; i < axes->size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if ((*axes)[i] == (*axes)[j]) {
        r.error(n, std::string(what) + " lists axis `" + (*axes)[i] + "` twice",
                "list each axis once");
        return std::nullopt;
      }
    }
  }
  return axes;
}

// Where each axis of a one-or-list axis field is written.
std::vector<SourceLoc> axis_locs(const Node& n, Reader& r) {
  std::vector<SourceLoc> out;
  std::span<const Node> nodes = n.is_seq() ? n.items() : std::span<const Node>(&n, 1);
  for (const Node& item : nodes) out.push_back(r.loc(item));
  return out;
}

namespace {

std::optional<ExpertDim> parse_expert_dim(const Node& n, Reader& r) {
  if (n.is_scalar() && !n.quoted) {
    if (n.text() == "0") return ExpertDim::Zero;
    if (n.text() == "1") return ExpertDim::One;
    if (n.text() == "auto") return ExpertDim::Auto;
  }
  r.error(n, "`expert_dim` must be 0, 1 or auto, got " + describe(n),
          "valid values: 0, 1, auto (1 when FSDP and EP ranks outnumber the experts)");
  return std::nullopt;
}

std::optional<FrozenParams> parse_frozen(const Node& n, Reader& r) {
  if (n.is_scalar() && !n.quoted) {
    if (n.text() == "ignore") return FrozenParams::Ignore;
    if (n.text() == "shard") return FrozenParams::Shard;
  }
  r.error(n, "`frozen` must be ignore or shard, got " + describe(n),
          "ignore (default): requires_grad false params stay out of FSDP (FSDP2's "
          "ignored_params); shard: FSDP2's default, they are sharded like the others");
  return std::nullopt;
}

std::optional<int> parse_fsdp_dim(const Node& n, Reader& r) {
  std::optional<std::int64_t> v = r.get_int(n, "`dim`");
  if (!v) return std::nullopt;
  if (*v < -limits::kMaxFsdpDim || *v > limits::kMaxFsdpDim) {
    r.error(n, "`dim` " + std::to_string(*v) + " is out of range", "a tensor dim, usually 0");
    return std::nullopt;
  }
  return static_cast<int>(*v);
}

void parse_fsdp_fields(const Node& n, Reader& r, FsdpSpec& f) {
  if (const Node* shard = n.find("shard")) {
    f.shard = parse_axes(*shard, r, "`fsdp.shard`").value_or(std::vector<std::string>{});
    f.shard_locs = axis_locs(*shard, r);
  } else {
    r.error(n, "`fsdp` needs `shard` (the axis or axes FSDP shards over)",
            "e.g. `fsdp: {shard: dp_shard}`");
  }
  if (const Node* rep = n.find("replicate")) {
    f.replicate = r.get_string(*rep, "`fsdp.replicate`");
    f.replicate_loc = r.loc(*rep);
  }
  if (const Node* es = n.find("expert_shard")) {
    f.expert_shard = parse_axes(*es, r, "`fsdp.expert_shard`").value_or(std::vector<std::string>{});
    f.expert_shard_locs = axis_locs(*es, r);
  }
  if (const Node* dim = n.find("dim")) f.dim = parse_fsdp_dim(*dim, r).value_or(0);
  if (const Node* ed = n.find("expert_dim")) {
    f.expert_dim = parse_expert_dim(*ed, r).value_or(ExpertDim::Auto);
  }
  if (const Node* frozen = n.find("frozen")) {
    f.frozen = parse_frozen(*frozen, r).value_or(FrozenParams::Ignore);
  }
}

std::optional<std::int64_t> positive_int(const Node& n, Reader& r, std::string_view what) {
  std::optional<std::int64_t> v = r.get_int(n, what);
  if (v && *v <= 0) {
    r.error(n, std::string(what) + " must be positive, got " + std::to_string(*v),
            "use a positive integer, or omit the key for the default");
    return std::nullopt;
  }
  return v;
}

std::optional<BufferSpec> parse_muon(const Node& n, Reader& r, BufferSpec b) {
  bool ok =
      r.check_keys(n, {"kind", "alignment_bytes", "max_batch_numel"}, "a muon_allgather buffer");
  if (const Node* a = n.find("alignment_bytes")) {
    std::optional<std::int64_t> v = positive_int(*a, r, "`alignment_bytes`");
    if (v && *v > limits::kMaxAlignmentBytes) {
      r.error(*a, "`alignment_bytes` must be at most 2^40, got " + std::to_string(*v),
              "use the collective's alignment in bytes: 16 to 512 (NCCL), 512 by default");
      v.reset();
    }
    ok = v.has_value() && ok;
    b.alignment_bytes = v.value_or(b.alignment_bytes);
  }
  if (const Node* m = n.find("max_batch_numel")) {
    std::optional<std::int64_t> v = positive_int(*m, r, "`max_batch_numel`");
    ok = v.has_value() && ok;
    b.max_batch_numel = v.value_or(b.max_batch_numel);
  }
  if (!ok) return std::nullopt;
  return b;
}

std::optional<BufferSpec> parse_fsdp2(const Node& n, Reader& r, BufferSpec b) {
  bool ok = r.check_keys(n, {"kind", "units"}, "a fsdp2_allgather buffer");
  const Node* units = n.find("units");
  if (units == nullptr) {
    r.error(n, "a fsdp2_allgather buffer needs `units` (patterns naming the FSDP units)",
            "e.g. `units: [\"model.layers.{i}\", \"**\"]`");
    return std::nullopt;
  }
  std::optional<std::vector<Pattern>> patterns = parse_stage(*units, r);
  if (!ok || !patterns) return std::nullopt;
  b.units = std::move(*patterns);
  return b;
}

// megatron_distopt: `bucket_size: auto | none | N` (elements) and
// `pad_for_high_nccl_busbw: bool` (DistributedDataParallelConfig's fields);
// deepspeed_zero takes no options (its layout follows training.zero's stage).
std::optional<BufferSpec> parse_flat(const Node& n, Reader& r, BufferSpec b) {
  if (b.kind == BufferKind::DeepSpeedZero) {
    if (!r.check_keys(n, {"kind"}, "a deepspeed_zero buffer")) return std::nullopt;
    return b;
  }
  bool ok = r.check_keys(n, {"kind", "bucket_size", "pad_for_high_nccl_busbw"},
                         "a megatron_distopt buffer");
  if (const Node* bs = n.find("bucket_size")) {
    if (bs->is_scalar() && (bs->text() == "auto" || bs->text() == "none")) {
      b.bucket_size = bs->text() == "auto" ? 0 : -1;
    } else {
      std::optional<std::int64_t> v = positive_int(*bs, r, "`bucket_size`");
      ok = v.has_value() && ok;
      b.bucket_size = v.value_or(0);
    }
  }
  if (const Node* pad = n.find("pad_for_high_nccl_busbw")) {
    std::optional<bool> v = r.get_bool(*pad, "`pad_for_high_nccl_busbw`");
    ok = v.has_value() && ok;
    b.pad_for_high_nccl_busbw = v.value_or(false);
  }
  if (!ok) return std::nullopt;
  return b;
}

std::optional<BufferSpec> parse_buffer(const Node& n, Reader& r) {
  if (!r.expect_map(n, "a buffer")) return std::nullopt;
  BufferSpec b;
  b.loc = r.loc(n);
  const Node* kind = n.find("kind");
  if (kind != nullptr && kind->is_scalar() && kind->text() == "muon_allgather") {
    b.kind = BufferKind::MuonAllGather;
    return parse_muon(n, r, std::move(b));
  }
  if (kind != nullptr && kind->is_scalar() && kind->text() == "fsdp2_allgather") {
    b.kind = BufferKind::Fsdp2AllGather;
    return parse_fsdp2(n, r, std::move(b));
  }
  if (kind != nullptr && kind->is_scalar() &&
      (kind->text() == "megatron_distopt" || kind->text() == "deepspeed_zero")) {
    b.kind = kind->text() == "megatron_distopt" ? BufferKind::MegatronDistOpt
                                                : BufferKind::DeepSpeedZero;
    return parse_flat(n, r, std::move(b));
  }
  r.error(kind != nullptr ? *kind : n,
          kind != nullptr ? "unknown buffer kind " + describe(*kind) : "a buffer needs `kind`",
          "valid kinds: muon_allgather, fsdp2_allgather, megatron_distopt, deepspeed_zero");
  return std::nullopt;
}

}  // namespace

TiedSpec parse_tied_spec(const Node& n, Reader& r) {
  TiedSpec t;
  t.loc = r.loc(n);
  if (n.is_null() || (n.is_scalar() && n.text() == "auto")) return t;
  if (n.is_scalar() && n.text() == "none") {
    t.mode = TiedMode::None;
    return t;
  }
  if (!n.is_seq()) {
    r.error(n, "`tied` must be auto, none or a list of [source, alias] pairs, got " + describe(n),
            "valid values: auto, none, [[source_fqn, alias_fqn], ...]");
    return t;
  }
  t.mode = TiedMode::Explicit;
  for (const Node& pair : n.items()) {
    if (!pair.is_seq() || pair.items().size() != 2) {
      r.error(pair, "a `tied` entry must be [source, alias], got " + describe(pair),
              "e.g. [model.embed_tokens.weight, lm_head.weight]");
      continue;
    }
    std::optional<std::string> a = r.get_string(pair.items()[0], "a tied name");
    std::optional<std::string> b = r.get_string(pair.items()[1], "a tied name");
    if (a && b && *a == *b) {
      r.error(pair, "`" + *a + "` is tied to itself", "a tie names two different parameters");
    }
    if (a && b) t.pairs.emplace_back(std::move(*a), std::move(*b));
  }
  return t;
}

std::optional<PipelineSpec> parse_pipeline(const Node& n, Reader& r) {
  if (!r.expect_map(n, "`pipeline`")) return std::nullopt;
  r.check_keys(n, {"axis", "stages", "virtual_stages"}, "`pipeline`");
  PipelineSpec p;
  p.loc = r.loc(n);
  p.axis = "pp";
  p.axis_loc = p.loc;
  if (const Node* axis = n.find("axis")) {
    p.axis = r.get_string(*axis, "`pipeline.axis`").value_or("pp");
    p.axis_loc = r.loc(*axis);
  }
  if (const Node* v = n.find("virtual_stages")) {
    p.virtual_stages =
        parse_bounded(*v, r, "`pipeline.virtual_stages`", 1, limits::kMaxVirtualStages).value_or(1);
    p.virtual_stages_loc = r.loc(*v);
  }
  const Node* stages = n.find("stages");
  if (stages == nullptr || stages->is_null() || (stages->is_scalar() && stages->text() == "auto")) {
    return p;
  }
  if (!stages->is_seq() || stages->items().empty()) {
    r.error(*stages,
            "`stages` must be auto or a non-empty list of pattern lists, got " + describe(*stages),
            "e.g. `stages: [[\"model.embed_tokens.*\", \"model.layers.[0-3].**\"], [\"**\"]]`");
    return std::nullopt;
  }
  p.auto_stages = false;
  for (const Node& stage : stages->items()) {
    std::optional<std::vector<Pattern>> globs = parse_stage(stage, r);
    if (globs) p.stages.push_back(std::move(*globs));
  }
  return p;
}

std::optional<FsdpSpec> parse_fsdp(const Node& n, Reader& r) {
  if (!r.expect_map(n, "`fsdp`")) return std::nullopt;
  r.check_keys(n, {"shard", "replicate", "expert_shard", "dim", "expert_dim", "frozen"}, "`fsdp`");
  FsdpSpec f;
  f.loc = r.loc(n);
  parse_fsdp_fields(n, r, f);
  return f;
}

std::vector<BufferSpec> parse_buffers(const Node& n, Reader& r) {
  std::vector<BufferSpec> out;
  if (n.is_null() || !r.expect_seq(n, "`buffers`")) return out;
  for (const Node& item : n.items()) {
    if (std::optional<BufferSpec> b = parse_buffer(item, r)) out.push_back(std::move(*b));
  }
  return out;
}

}  // namespace shardc::fe
