// Recipe `tied`, `pipeline`, `fsdp` and `buffers` sections (contract §4, §5.5-§5.8, §6.3).
#include <limits>
#include <string>

#include "frontend/recipe_internal.hpp"
#include "support/limits.hpp"

namespace shardc::fe {
namespace {

std::optional<std::vector<Pattern>> parse_stage(const Node& node, Reader& reader) {
  std::optional<std::vector<std::string>> texts = reader.get_string_list(node, "a pipeline stage");
  if (!texts) return std::nullopt;
  std::vector<Pattern> out;
  bool ok = true;
  std::span<const Node> nodes = node.is_seq() ? node.items() : std::span<const Node>(&node, 1);
  for (const Node& item : nodes) {
    std::optional<Pattern> pattern = parse_pattern(item, reader);
    ok = pattern.has_value() && ok;
    if (pattern) out.push_back(std::move(*pattern));
  }
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace

std::optional<std::vector<std::string>> parse_axes(const Node& node, Reader& reader,
                                                   std::string_view what) {
  std::optional<std::vector<std::string>> axes = reader.get_string_list(node, what);
  if (!axes) return std::nullopt;
  for (std::size_t i = 0; i < axes->size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if ((*axes)[i] == (*axes)[j]) {
        reader.error(node, std::string(what) + " lists axis `" + (*axes)[i] + "` twice",
                     "list each axis once");
        return std::nullopt;
      }
    }
  }
  return axes;
}

// Where each axis of a one-or-list axis field is written.
std::vector<SourceLoc> axis_locs(const Node& node, Reader& reader) {
  std::vector<SourceLoc> out;
  std::span<const Node> nodes = node.is_seq() ? node.items() : std::span<const Node>(&node, 1);
  for (const Node& item : nodes) out.push_back(reader.loc(item));
  return out;
}

namespace {

std::optional<ExpertDim> parse_expert_dim(const Node& node, Reader& reader) {
  if (node.is_scalar() && !node.quoted) {
    if (node.text() == "0") return ExpertDim::Zero;
    if (node.text() == "1") return ExpertDim::One;
    if (node.text() == "auto") return ExpertDim::Auto;
  }
  reader.error(node, "`expert_dim` must be 0, 1 or auto, got " + describe(node),
               "valid values: 0, 1, auto (1 when FSDP and EP ranks outnumber the experts)");
  return std::nullopt;
}

std::optional<FrozenParams> parse_frozen(const Node& node, Reader& reader) {
  if (node.is_scalar() && !node.quoted) {
    if (node.text() == "ignore") return FrozenParams::Ignore;
    if (node.text() == "shard") return FrozenParams::Shard;
  }
  reader.error(node, "`frozen` must be ignore or shard, got " + describe(node),
               "ignore (default): requires_grad false params stay out of FSDP (FSDP2's "
               "ignored_params); shard: FSDP2's default, they are sharded like the others");
  return std::nullopt;
}

std::optional<int> parse_fsdp_dim(const Node& node, Reader& reader) {
  std::optional<std::int64_t> dim = reader.get_int(node, "`dim`");
  if (!dim) return std::nullopt;
  if (*dim < -limits::kMaxFsdpDim || *dim > limits::kMaxFsdpDim) {
    reader.error(node, "`dim` " + std::to_string(*dim) + " is out of range",
                 "a tensor dim, usually 0");
    return std::nullopt;
  }
  return static_cast<int>(*dim);
}

void parse_fsdp_fields(const Node& node, Reader& reader, FsdpSpec& fsdp) {
  if (const Node* shard = node.find("shard")) {
    fsdp.shard = parse_axes(*shard, reader, "`fsdp.shard`").value_or(std::vector<std::string>{});
    fsdp.shard_locs = axis_locs(*shard, reader);
  } else {
    reader.error(node, "`fsdp` needs `shard` (the axis or axes FSDP shards over)",
                 "e.g. `fsdp: {shard: dp_shard}`");
  }
  if (const Node* rep = node.find("replicate")) {
    fsdp.replicate = reader.get_string(*rep, "`fsdp.replicate`");
    fsdp.replicate_loc = reader.loc(*rep);
  }
  if (const Node* es = node.find("expert_shard")) {
    fsdp.expert_shard =
        parse_axes(*es, reader, "`fsdp.expert_shard`").value_or(std::vector<std::string>{});
    fsdp.expert_shard_locs = axis_locs(*es, reader);
  }
  if (const Node* dim = node.find("dim")) fsdp.dim = parse_fsdp_dim(*dim, reader).value_or(0);
  if (const Node* ed = node.find("expert_dim")) {
    fsdp.expert_dim = parse_expert_dim(*ed, reader).value_or(ExpertDim::Auto);
  }
  if (const Node* frozen = node.find("frozen")) {
    fsdp.frozen = parse_frozen(*frozen, reader).value_or(FrozenParams::Ignore);
  }
  if (const Node* reshard = node.find("reshard_after_forward")) {
    fsdp.reshard_after_forward = reader.get_bool(*reshard, "`fsdp.reshard_after_forward`");
  }
}

std::optional<std::int64_t> positive_int(const Node& node, Reader& reader, std::string_view what) {
  std::optional<std::int64_t> value = reader.get_int(node, what);
  if (value && *value <= 0) {
    reader.error(node, std::string(what) + " must be positive, got " + std::to_string(*value),
                 "use a positive integer, or omit the key for the default");
    return std::nullopt;
  }
  return value;
}

std::optional<BufferSpec> parse_muon(const Node& node, Reader& reader, BufferSpec buffer) {
  bool ok = reader.check_keys(node, {"kind", "alignment_bytes", "max_batch_numel"},
                              "a muon_allgather buffer");
  if (const Node* alignment = node.find("alignment_bytes")) {
    std::optional<std::int64_t> bytes = positive_int(*alignment, reader, "`alignment_bytes`");
    if (bytes && *bytes > limits::kMaxAlignmentBytes) {
      reader.error(*alignment,
                   "`alignment_bytes` must be at most 2^40, got " + std::to_string(*bytes),
                   "use the collective's alignment in bytes: 16 to 512 (NCCL), 512 by default");
      bytes.reset();
    }
    ok = bytes.has_value() && ok;
    buffer.alignment_bytes = bytes.value_or(buffer.alignment_bytes);
  }
  if (const Node* max_numel = node.find("max_batch_numel")) {
    std::optional<std::int64_t> numel = positive_int(*max_numel, reader, "`max_batch_numel`");
    ok = numel.has_value() && ok;
    buffer.max_batch_numel = numel.value_or(buffer.max_batch_numel);
  }
  if (!ok) return std::nullopt;
  return buffer;
}

std::optional<BufferSpec> parse_fsdp2(const Node& node, Reader& reader, BufferSpec buffer) {
  bool ok = reader.check_keys(node, {"kind", "units"}, "a fsdp2_allgather buffer");
  const Node* units = node.find("units");
  if (units == nullptr) {
    reader.error(node, "a fsdp2_allgather buffer needs `units` (patterns naming the FSDP units)",
                 "e.g. `units: [\"model.layers.{i}\", \"**\"]`");
    return std::nullopt;
  }
  std::optional<std::vector<Pattern>> patterns = parse_stage(*units, reader);
  if (!ok || !patterns) return std::nullopt;
  buffer.units = std::move(*patterns);
  return buffer;
}

// megatron_distopt: `bucket_size: auto | none | N` (elements) and
// `pad_for_high_nccl_busbw: bool` (DistributedDataParallelConfig's fields);
// deepspeed_zero takes no options (its layout follows training.zero's stage).
std::optional<BufferSpec> parse_flat(const Node& node, Reader& reader, BufferSpec buffer) {
  if (buffer.kind == BufferKind::DeepSpeedZero) {
    if (!reader.check_keys(node, {"kind"}, "a deepspeed_zero buffer")) return std::nullopt;
    return buffer;
  }
  bool ok = reader.check_keys(node, {"kind", "bucket_size", "pad_for_high_nccl_busbw"},
                              "a megatron_distopt buffer");
  if (const Node* bs = node.find("bucket_size")) {
    if (bs->is_scalar() && (bs->text() == "auto" || bs->text() == "none")) {
      buffer.bucket_size = bs->text() == "auto" ? 0 : -1;
    } else {
      std::optional<std::int64_t> size = positive_int(*bs, reader, "`bucket_size`");
      ok = size.has_value() && ok;
      buffer.bucket_size = size.value_or(0);
    }
  }
  if (const Node* pad = node.find("pad_for_high_nccl_busbw")) {
    std::optional<bool> pad_flag = reader.get_bool(*pad, "`pad_for_high_nccl_busbw`");
    ok = pad_flag.has_value() && ok;
    buffer.pad_for_high_nccl_busbw = pad_flag.value_or(false);
  }
  if (!ok) return std::nullopt;
  return buffer;
}

std::optional<BufferSpec> parse_buffer(const Node& node, Reader& reader) {
  if (!reader.expect_map(node, "a buffer")) return std::nullopt;
  BufferSpec buffer;
  buffer.loc = reader.loc(node);
  const Node* kind = node.find("kind");
  if (kind != nullptr && kind->is_scalar() && kind->text() == "muon_allgather") {
    buffer.kind = BufferKind::MuonAllGather;
    return parse_muon(node, reader, std::move(buffer));
  }
  if (kind != nullptr && kind->is_scalar() && kind->text() == "fsdp2_allgather") {
    buffer.kind = BufferKind::Fsdp2AllGather;
    return parse_fsdp2(node, reader, std::move(buffer));
  }
  if (kind != nullptr && kind->is_scalar() &&
      (kind->text() == "megatron_distopt" || kind->text() == "deepspeed_zero")) {
    buffer.kind = kind->text() == "megatron_distopt" ? BufferKind::MegatronDistOpt
                                                     : BufferKind::DeepSpeedZero;
    return parse_flat(node, reader, std::move(buffer));
  }
  reader.error(kind != nullptr ? *kind : node,
               kind != nullptr ? "unknown buffer kind " + describe(*kind) : "a buffer needs `kind`",
               "valid kinds: muon_allgather, fsdp2_allgather, megatron_distopt, deepspeed_zero");
  return std::nullopt;
}

}  // namespace

TiedSpec parse_tied_spec(const Node& node, Reader& reader) {
  TiedSpec tied;
  tied.loc = reader.loc(node);
  if (node.is_null() || (node.is_scalar() && node.text() == "auto")) return tied;
  if (node.is_scalar() && node.text() == "none") {
    tied.mode = TiedMode::None;
    return tied;
  }
  if (!node.is_seq()) {
    reader.error(
        node, "`tied` must be auto, none or a list of [source, alias] pairs, got " + describe(node),
        "valid values: auto, none, [[source_fqn, alias_fqn], ...]");
    return tied;
  }
  tied.mode = TiedMode::Explicit;
  for (const Node& pair : node.items()) {
    auto names = parse_tied_pair(pair, "e.g. [model.embed_tokens.weight, lm_head.weight]", reader);
    if (!names) continue;
    if (names->first == names->second) {
      reader.error(pair, "`" + names->first + "` is tied to itself",
                   "a tie names two different parameters");
    }
    tied.pairs.emplace_back(std::move(names->first), std::move(names->second));
  }
  return tied;
}

std::optional<PipelineSpec> parse_pipeline(const Node& node, Reader& reader) {
  if (!reader.expect_map(node, "`pipeline`")) return std::nullopt;
  reader.check_keys(
      node,
      {"axis", "stages", "virtual_stages", "first_stage_less_layers", "last_stage_less_layers"},
      "`pipeline`");
  PipelineSpec pipeline;
  pipeline.loc = reader.loc(node);
  pipeline.axis = "pp";
  pipeline.axis_loc = pipeline.loc;
  if (const Node* axis = node.find("axis")) {
    pipeline.axis = reader.get_string(*axis, "`pipeline.axis`").value_or("pp");
    pipeline.axis_loc = reader.loc(*axis);
  }
  if (const Node* virtual_stages = node.find("virtual_stages")) {
    pipeline.virtual_stages = parse_bounded(*virtual_stages, reader, "`pipeline.virtual_stages`", 1,
                                            limits::kMaxVirtualStages)
                                  .value_or(1);
    pipeline.virtual_stages_loc = reader.loc(*virtual_stages);
  }
  const Node* first_less = nullptr;
  for (const char* key : {"first_stage_less_layers", "last_stage_less_layers"}) {
    const Node* less = node.find(key);
    if (less == nullptr) continue;
    if (first_less == nullptr) first_less = less;
    const std::int64_t value = parse_bounded(*less, reader, std::string("`pipeline.") + key + "`",
                                             0, limits::kMaxVirtualStages)
                                   .value_or(0);
    (std::string_view(key) == "first_stage_less_layers" ? pipeline.first_stage_less_layers
                                                        : pipeline.last_stage_less_layers) = value;
    if (pipeline.less_layers_loc.line == 0) pipeline.less_layers_loc = reader.loc(*less);
  }
  const Node* stages = node.find("stages");
  if (stages == nullptr || stages->is_null() || (stages->is_scalar() && stages->text() == "auto")) {
    return pipeline;
  }
  if (first_less != nullptr) {
    reader.error(*first_less,
                 "`first_stage_less_layers` / `last_stage_less_layers` weight the cut of "
                 "`stages: auto`; explicit stages say which blocks each stage holds",
                 "drop them, or write `stages: auto`");
    return std::nullopt;
  }
  if (!stages->is_seq() || stages->items().empty()) {
    reader.error(
        *stages,
        "`stages` must be auto or a non-empty list of pattern lists, got " + describe(*stages),
        "e.g. `stages: [[\"model.embed_tokens.*\", \"model.layers.[0-3].**\"], [\"**\"]]`");
    return std::nullopt;
  }
  pipeline.auto_stages = false;
  for (const Node& stage : stages->items()) {
    std::optional<std::vector<Pattern>> globs = parse_stage(stage, reader);
    if (globs) pipeline.stages.push_back(std::move(*globs));
  }
  return pipeline;
}

std::optional<FsdpSpec> parse_fsdp(const Node& node, Reader& reader) {
  if (!reader.expect_map(node, "`fsdp`")) return std::nullopt;
  reader.check_keys(node,
                    {"shard", "replicate", "expert_shard", "dim", "expert_dim", "frozen",
                     "reshard_after_forward"},
                    "`fsdp`");
  FsdpSpec fsdp;
  fsdp.loc = reader.loc(node);
  parse_fsdp_fields(node, reader, fsdp);
  return fsdp;
}

std::vector<BufferSpec> parse_buffers(const Node& node, Reader& reader) {
  return parse_list<BufferSpec>(node, reader, "`buffers`", parse_buffer);
}

}  // namespace shardc::fe
