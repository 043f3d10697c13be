// Reads plan.json, rank files and manifest.json back into typed structs (for
// `verify` and `reshard`). One reading code, templated on the node type, runs
// on two readers: FastNode walks simdjson's DOM (the fast path, taken for
// texts without escapes or non-ASCII bytes) and throws Fallback on anything
// unexpected; RefNode walks nlohmann's DOM and knows each value's JSON path,
// so a malformed file is reported as e.g. "buffers[0].groups[2].batches:
// missing". Every error comes from the reference reader, which re-reads the
// text after a Fallback: messages do not depend on the fast path.
#include "outputs/readback.hpp"

#include <simdjson.h>
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include "outputs/output_dir.hpp"
#include "support/limits.hpp"
#include "support/rank_set.hpp"
#include "support/shape.hpp"
#include "support/utf8.hpp"

namespace shardc::readback {
namespace {

using nlohmann::json;

struct ReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown by FastNode on anything but the expected: the text is then read
// again by the reference reader, which reports the error (or, on a document
// simdjson rejects but nlohmann accepts, reads it).
struct Fallback {};

// The operations both readers share, on top of each node's primitives
// (i64, str, size, each, fail).
template <typename N>
class NodeOps {
 public:
  [[nodiscard]] int i32() const {
    const std::int64_t value = self().i64();
    if (value < INT32_MIN || value > INT32_MAX)
      self().fail(std::to_string(value) + " out of 32-bit range");
    return static_cast<int>(value);
  }
  /// An integer in [lo, hi].
  [[nodiscard]] std::int64_t in_range(std::int64_t lo, std::int64_t hi) const {
    const std::int64_t value = self().i64();
    if (value < lo || value > hi)
      self().fail(std::to_string(value) + " outside [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
    return value;
  }
  [[nodiscard]] DType dtype() const {
    const auto parsed = parse_dtype(self().str());
    if (!parsed) self().fail("unknown dtype");
    return *parsed;
  }
  [[nodiscard]] std::vector<std::int64_t> ints() const {
    std::vector<std::int64_t> out;
    out.reserve(self().size());
    self().each([&](const N& element) { out.push_back(element.i64()); });
    return out;
  }
  /// A tensor shape: at most kMaxTensorRank extents in [0, 2^62] whose product (numel) is at most
  /// 2^62, the model front end's limits (docs/limits.md), so no later product wraps.
  [[nodiscard]] std::vector<std::int64_t> shape() const {
    std::vector<std::int64_t> out = ints();
    if (out.size() > limits::kMaxTensorRank)
      self().fail(std::to_string(out.size()) + " dims, above the limit of " +
                  std::to_string(limits::kMaxTensorRank));
    std::int64_t numel = 1;
    for (const std::int64_t extent : out) {
      if (extent < 0) self().fail("negative extent " + std::to_string(extent));
      if (extent > 0 && numel > limits::kMaxNumel / extent) self().fail("more than 2^62 elements");
      numel *= extent;
    }
    return out;
  }
  [[nodiscard]] std::vector<std::string> strs() const {
    std::vector<std::string> out;
    out.reserve(self().size());
    self().each([&](const N& element) { out.push_back(element.str()); });
    return out;
  }
  template <typename F>
  auto map(F convert) const {
    std::vector<decltype(convert(std::declval<N>()))> out;
    out.reserve(self().size());
    self().each([&](const N& element) { out.push_back(convert(element)); });
    return out;
  }

 private:
  const N& self() const { return static_cast<const N&>(*this); }
};

// The reference reader's node: nlohmann's DOM, with the JSON path of the
// value for error messages.
class RefNode : public NodeOps<RefNode> {
 public:
  RefNode(const json& value, std::string path) : j_(value), path_(std::move(path)) {}

  [[nodiscard]] RefNode at(const char* key) const {
    if (!j_.is_object()) fail("not an object");
    const auto it = j_.find(key);
    if (it == j_.end()) throw ReadError(join(key) + ": missing");
    return {*it, join(key)};
  }
  [[nodiscard]] bool has(const char* key) const { return j_.is_object() && j_.contains(key); }
  [[nodiscard]] bool is_null() const { return j_.is_null(); }
  [[nodiscard]] std::size_t size() const {
    if (!j_.is_array()) fail("not an array");
    return j_.size();
  }
  [[nodiscard]] RefNode operator[](std::size_t i) const {
    return {j_.at(i), path_ + "[" + std::to_string(i) + "]"};
  }
  template <typename F>
  void each(F visit) const {
    for (std::size_t i = 0; i < size(); ++i) visit((*this)[i]);
  }
  [[nodiscard]] std::int64_t i64() const {
    if (j_.is_number_unsigned() && j_.get<std::uint64_t>() > INT64_MAX) fail("above 2^63 - 1");
    if (!j_.is_number_integer()) fail("not an integer");
    return j_.get<std::int64_t>();
  }
  /// Members of an object with integer values, sorted by key.
  [[nodiscard]] std::vector<std::pair<std::string, std::int64_t>> int_members() const {
    if (!j_.is_object()) fail("not an object");
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (const auto& [k, v] : j_.items()) out.emplace_back(k, RefNode(v, join(k.c_str())).i64());
    return out;
  }
  [[nodiscard]] bool boolean() const {
    if (!j_.is_boolean()) fail("not a boolean");
    return j_.get<bool>();
  }
  [[nodiscard]] std::string str() const {
    if (!j_.is_string()) fail("not a string");
    return j_.get<std::string>();
  }
  [[noreturn]] void fail(const std::string& what) const { throw ReadError(path_ + ": " + what); }

 private:
  [[nodiscard]] std::string join(const char* key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  const json& j_;
  std::string path_;
};

// The fast reader's node: a value of simdjson's DOM, no path. Anything the
// reference reader would reject (a wrong type, a missing key, a failed
// check) throws Fallback, and so does a key listed twice (nlohmann keeps the
// last, simdjson would find the first). Only texts without escapes and
// non-ASCII bytes get here (plain_text), so strings and keys read the same.
class FastNode : public NodeOps<FastNode> {
 public:
  explicit FastNode(simdjson::dom::element element) : e_(element) {}

  [[nodiscard]] FastNode at(const char* key) const {
    simdjson::dom::object object;
    if (e_.get_object().get(object) != simdjson::SUCCESS) throw Fallback{};
    const std::string_view wanted(key);
    simdjson::dom::element found;
    bool seen = false;
    for (const auto field : object) {
      if (field.key != wanted) continue;
      if (seen) throw Fallback{};
      seen = true;
      found = field.value;
    }
    if (!seen) throw Fallback{};
    return FastNode(found);
  }
  [[nodiscard]] bool has(const char* key) const {
    simdjson::dom::object object;
    if (e_.get_object().get(object) != simdjson::SUCCESS) return false;
    const std::string_view wanted(key);
    return std::any_of(object.begin(), object.end(),
                       [&](const auto& field) { return field.key == wanted; });
  }
  [[nodiscard]] bool is_null() const { return e_.is_null(); }
  [[nodiscard]] std::size_t size() const { return array().size(); }
  [[nodiscard]] FastNode operator[](std::size_t i) const {
    simdjson::dom::element element;
    if (array().at(i).get(element) != simdjson::SUCCESS) throw Fallback{};
    return FastNode(element);
  }
  template <typename F>
  void each(F visit) const {
    for (const simdjson::dom::element element : array()) visit(FastNode(element));
  }
  [[nodiscard]] std::int64_t i64() const {
    std::int64_t value = 0;
    if (e_.get_int64().get(value) != simdjson::SUCCESS) throw Fallback{};
    return value;
  }
  [[nodiscard]] std::vector<std::pair<std::string, std::int64_t>> int_members() const {
    simdjson::dom::object object;
    if (e_.get_object().get(object) != simdjson::SUCCESS) throw Fallback{};
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (const auto field : object) out.emplace_back(field.key, FastNode(field.value).i64());
    std::sort(out.begin(), out.end());
    for (std::size_t i = 1; i < out.size(); ++i)
      if (out[i].first == out[i - 1].first) throw Fallback{};
    return out;
  }
  [[nodiscard]] bool boolean() const {
    bool value = false;
    if (e_.get_bool().get(value) != simdjson::SUCCESS) throw Fallback{};
    return value;
  }
  [[nodiscard]] std::string str() const {
    std::string_view value;
    if (e_.get_string().get(value) != simdjson::SUCCESS) throw Fallback{};
    return std::string(value);
  }
  [[noreturn]] void fail(const std::string& /*what*/) const { throw Fallback{}; }

 private:
  // The array, whose size simdjson knows exactly below 2^24 elements.
  [[nodiscard]] simdjson::dom::array array() const {
    simdjson::dom::array elements;
    if (e_.get_array().get(elements) != simdjson::SUCCESS || elements.size() >= 0xFFFFFF)
      throw Fallback{};
    return elements;
  }
  simdjson::dom::element e_;
};

template <typename N>
PlanParam plan_param(const N& node) {
  PlanParam param;
  param.name = node.at("name").str();
  param.dtype = node.at("dtype").dtype();
  param.global_shape = node.at("global_shape").ints();
  param.mesh = node.at("mesh").str();
  param.placements = node.at("placements").strs();
  param.stage = node.at("stage").i32();
  if (!node.at("alias_of").is_null()) param.alias_of = node.at("alias_of").str();
  if (node.has("stacked_from") && !node.at("stacked_from").is_null()) {
    const N stacked = node.at("stacked_from");
    param.stacked_from = PlanParam::Stacked{stacked.at("count").i64(), stacked.at("first").str(),
                                            stacked.at("last").str(), stacked.at("sources").strs()};
  }
  param.uneven = node.at("uneven").str();
  if (node.has("rule") && !node.at("rule").is_null())
    param.rule = node.at("rule").at("match").str();
  param.packed = node.has("packed") || node.has("strided_boxes");
  if (node.has("vocab_padding")) {
    param.vocab_rows = node.at("vocab_padding").at("rows").i64();
    param.vocab_multiple = node.at("vocab_padding").at("multiple").i64();
  }
  param.shards = node.at("shards").map([](const N& entry) {
    PlanShard shard{entry.at("ranks").str(),
                    entry.at("local_shape").ints(),
                    entry.at("global_offset").ints(),
                    entry.at("padded_shape").ints(),
                    {}};
    if (entry.has("boxes"))
      shard.boxes = entry.at("boxes").map([](const N& box) {
        return PlanBox{box.at("global_offset").ints(), box.at("local_offset").ints(),
                       box.at("shape").ints()};
      });
    return shard;
  });
  return param;
}

template <typename N>
RankParam rank_param(const N& node) {
  RankParam param;
  param.name = node.at("name").str();
  param.dtype = node.at("dtype").dtype();
  param.stage = node.at("stage").i32();
  param.global_shape = node.at("global_shape").ints();
  param.local_shape = node.at("local_shape").ints();
  param.global_offset = node.at("global_offset").ints();
  param.padded_shape = node.at("padded_shape").ints();
  param.numel = node.at("numel").i64();
  param.bytes = node.at("bytes").i64();
  param.alias = !node.at("alias_of").is_null();
  if (param.alias) {
    param.alias_of = node.at("alias_of").str();
  } else if (node.has("tied_copy_of")) {
    param.alias_of = node.at("tied_copy_of").str();
  }
  return param;
}

template <typename N>
PlanRankStat rank_stat(const N& node) {
  return {node.at("min").i64(), node.at("max").i64(), node.at("min_ranks").str(),
          node.at("max_ranks").str(), node.has("median") ? node.at("median").i64() : 0};
}

// Byte kinds of `summary.per_rank_memory` and of a rank file's `memory`, in the writers'
// order (src/memory/memory.hpp memory_kind_name, kStepKindNames).
constexpr std::array<const char*, 6> kMemoryKindKeys = {
    "params", "grads", "master_weights", "optimizer_state", "fsdp2_allgather", "muon_allgather"};
constexpr std::array<const char*, 4> kStepKindKeys = {"activations", "fsdp2_reduce_scatter",
                                                      "muon_grad_copy", "host"};

// `summary.per_rank_memory`: every byte kind's statistics (the step kinds when counted),
// then the activations per stage (`stage_activations`) when counted.
template <typename N>
PlanMemory plan_memory(const N& node) {
  PlanMemory memory;
  memory.not_counted = node.at("not_counted").str();
  for (const char* key : kMemoryKindKeys) memory.kinds.emplace_back(key, rank_stat(node.at(key)));
  for (const char* key : kStepKindKeys) {
    if (node.has(key)) memory.kinds.emplace_back(key, rank_stat(node.at(key)));
  }
  memory.kinds.emplace_back("total", rank_stat(node.at("total")));
  if (node.has("stage_activations")) {
    memory.activations = node.at("stage_activations").map([](const N& entry) {
      return PlanStageActivations{entry.at("stage").i32(), entry.at("layers").i64(),
                                  entry.at("in_flight").i64(),
                                  entry.at("per_microbatch_bytes").i64(), entry.at("bytes").i64()};
    });
  }
  return memory;
}

template <typename N>
PlanDiagnostic plan_diagnostic(const N& node) {
  return {node.at("code").str(),  node.at("severity").str(), node.at("message").str(),
          node.at("hint").str(),  node.at("file").str(),     node.at("line").i64(),
          node.at("column").i64()};
}

// The rank file's params, for resolving the buffers' param indices.
using Held = std::vector<RankParam>;

template <typename N>
const RankParam& held_at(const N& node, const Held& held) {
  const std::int64_t i = node.i64();
  if (i < 0 || i >= static_cast<std::int64_t>(held.size()))
    node.fail("param index " + std::to_string(i) + " is not in this file's params");
  return held[static_cast<std::size_t>(i)];
}

template <typename N>
std::vector<std::string> names_at(const N& indices, const Held& held) {
  return indices.map([&](const N& index) { return held_at(index, held).name; });
}

template <typename N>
std::vector<std::int64_t> rank_list(const N& node) {
  std::string error;
  auto out = parse_rank_list(node.str(), error);
  if (!out) node.fail(error);
  return *out;
}

// Largest split size read (2^40 elements on one dim) and most members of a stage (2^24).
// A stage's split sizes are the pieces of one tensor dim, so they sum to at most 2^62
// elements (limits::kMaxNumel), checked as they are read: every later sum of them (a gathered
// extent, a slice-back start) fits int64 whatever the stage's tensor_dim says. A gathered
// shape's numel can still pass 2^63: muon_group checks every stage's gathered shape
// (gathered_shapes_fit) before any arithmetic on it.
constexpr std::int64_t kMaxExtent = std::int64_t{1} << 40;

// [[size, count], ...] -> the expanded list.
template <typename N>
std::vector<std::int64_t> runs(const N& run_list) {
  std::vector<std::int64_t> out;
  std::int64_t sum = 0;
  run_list.each([&](const N& item) {
    const auto run = item.ints();
    if (run.size() != 2 || run[0] < 0 || run[0] > kMaxExtent || run[1] < 1 ||
        run[1] > (std::int64_t{1} << 24) - static_cast<std::int64_t>(out.size()))
      item.fail(
          "not a [size, count] run with 0 <= size <= 2^40, 1 <= count, at most 2^24 "
          "members in all");
    // size x count can reach 2^64: compared as a quotient (count >= 1).
    if (run[0] > (limits::kMaxNumel - sum) / run[1])
      item.fail("the split sizes sum to more than 2^62 elements");
    sum += run[0] * run[1];
    out.insert(out.end(), static_cast<std::size_t>(run[1]), run[0]);
  });
  return out;
}

struct StageGeometry {
  std::vector<std::string> axes;
  int tensor_dim = 0;
  std::vector<std::int64_t> ranks;
  std::int64_t index = 0;
};

struct LeanParam {
  const RankParam* held = nullptr;  // name and local shape
  std::vector<std::int64_t> owner;
  std::vector<std::vector<std::int64_t>> split_sizes;  // per stage
};

// One param's entry at one stage, derived from its stage input shape (the
// rank's own shape after the earlier stages) by the planner's arithmetic
// (muon_stage_sizes); member k's shape is the input with tensor_dim set to
// split_sizes[k].
MuonStageParam derive_stage_param(const std::string& name, const StageGeometry& geometry,
                                  const std::vector<std::int64_t>& split, const Shape& input,
                                  std::int64_t align) {
  MuonStageParam param;
  param.name = name;
  param.tensor_dim = geometry.tensor_dim;
  param.split_sizes = split;
  const auto d = static_cast<std::size_t>(geometry.tensor_dim);
  if (geometry.tensor_dim < 0 || d >= input.size()) return param;  // verify reports tensor_dim
  for (std::int64_t size : split) {
    Shape shape = input;
    shape[d] = size;
    param.rank_shapes.push_back(std::move(shape));
  }
  MuonStageSizes sizes = muon_stage_sizes(input, geometry.tensor_dim, split, geometry.index, align);
  param.pad_shape = std::move(sizes.pad_shape);
  param.actual_numel = sizes.actual_numel;
  param.padded_numel = sizes.padded_numel;
  return param;
}

// The stage input shape of `lp` at stage `s`: its local shape with the
// tensor dims of the earlier stages gathered (sum of their split sizes).
// Precondition: gathered_shapes_fit(lp, stages).
Shape input_shape(const LeanParam& lp, const std::vector<StageGeometry>& stages,
                  std::size_t stage) {
  Shape shape = lp.held->local_shape;
  for (std::size_t t = 0; t < stage; ++t) {
    const auto d = static_cast<std::size_t>(stages[t].tensor_dim);
    if (stages[t].tensor_dim < 0 || d >= shape.size()) continue;
    shape[d] = std::accumulate(lp.split_sizes[t].begin(), lp.split_sizes[t].end(), std::int64_t{0});
  }
  return shape;
}

// Whether every stage's input shape and the fully gathered shape of `lp` have fewer than
// 2^62 elements (limits::kMaxNumel), each split-size sum computed without wrapping. Every
// pad shape (the largest split in the gathered dim) is no larger, so the reader's numel,
// round_up and offset arithmetic on them cannot wrap either.
bool gathered_shapes_fit(const LeanParam& lp, const std::vector<StageGeometry>& stages) {
  Shape shape = lp.held->local_shape;
  for (std::size_t t = 0; t < stages.size(); ++t) {
    const auto d = static_cast<std::size_t>(stages[t].tensor_dim);
    if (stages[t].tensor_dim < 0 || d >= shape.size()) continue;
    std::int64_t sum = 0;
    for (const std::int64_t size : lp.split_sizes[t])
      if (__builtin_add_overflow(sum, size, &sum)) return false;
    shape[d] = sum;
    if (!checked_numel(shape)) return false;
  }
  return true;
}

template <typename N>
MuonStage derive_stage(const N& batch, const std::vector<const LeanParam*>& members,
                       const std::vector<StageGeometry>& stages, std::size_t stage,
                       std::int64_t alignment_bytes, DType dtype) {
  const StageGeometry& geometry = stages[stage];
  MuonStage st;
  st.axes = geometry.axes;
  st.ranks = geometry.ranks;
  st.index = geometry.index;
  const auto totals = batch.at("total_numel").ints();
  if (totals.size() != stages.size())
    batch.at("total_numel")
        .fail("needs one entry per stage (" + std::to_string(stages.size()) + ")");
  st.total_numel = totals[stage];
  const std::int64_t align = muon_align_elements(alignment_bytes, dtype);
  if (__builtin_mul_overflow(st.total_numel, static_cast<std::int64_t>(geometry.ranks.size()),
                             &st.gathered_numel))
    batch.at("total_numel").fail("times the stage's ranks passes 2^63 elements");
  std::int64_t offset = 0;
  for (const LeanParam* lp : members) {
    MuonStageParam param = derive_stage_param(lp->held->name, geometry, lp->split_sizes[stage],
                                              input_shape(*lp, stages, stage), align);
    param.offset = offset;
    if (__builtin_add_overflow(offset, param.padded_numel, &offset))
      batch.at("params").fail("the members' padded sizes pass 2^63 elements in all");
    st.params.push_back(std::move(param));
  }
  return st;
}

// Per param, the narrows (last stage first) that cut this rank's piece out
// of the global update: start = sum of the split sizes before the rank.
std::vector<SliceStep> slice_back(const LeanParam& lp, const std::vector<StageGeometry>& stages) {
  std::vector<SliceStep> out;
  for (std::size_t s = stages.size(); s-- > 0;)
    out.push_back(muon_slice_step(stages[s].tensor_dim, lp.split_sizes[s], stages[s].index));
  return out;
}

template <typename N>
MuonGroup muon_group(const N& node, const Held& held, std::int64_t alignment_bytes) {
  MuonGroup group;
  group.key = node.at("key").str();
  group.mesh = node.at("mesh").str();
  group.replicate_axes = node.at("replicate_axes").strs();
  group.replicate_coord = node.at("replicate_coord").ints();
  const auto stages = node.at("stages").map([](const N& st) {
    return StageGeometry{st.at("axes").strs(), st.at("tensor_dim").i32(), rank_list(st.at("ranks")),
                         st.at("index").i64()};
  });
  // Keyed by the names in `held`, which outlives this call.
  std::unordered_map<std::string_view, LeanParam> by_name;
  const N params = node.at("params");
  params.each([&](const N& entry) {
    const RankParam& param = held_at(entry.at("param"), held);
    LeanParam lp{&param, entry.at("owner").ints(),
                 entry.at("split_sizes").map([](const N& run_list) { return runs(run_list); })};
    if (lp.split_sizes.size() != stages.size())
      entry.at("split_sizes")
          .fail("needs one run list per stage (" + std::to_string(stages.size()) + ")");
    if (!gathered_shapes_fit(lp, stages))
      entry.at("split_sizes")
          .fail("gathers " + param.name + " to a shape of 2^62 elements or more (local_shape " +
                shape_text(param.local_shape) + ")");
    group.params.push_back(param.name);
    group.owners.push_back({param.name, lp.owner, lp.owner == group.replicate_coord});
    group.slice_back.push_back({param.name, slice_back(lp, stages)});
    if (!by_name.emplace(param.name, std::move(lp)).second) entry.at("param").fail("listed twice");
  });
  group.batches = node.at("batches").map([&](const N& batch_node) {
    MuonBatch batch{batch_node.at("dtype").dtype(), {}};
    std::vector<const LeanParam*> members;
    for (const std::string& name : names_at(batch_node.at("params"), held)) {
      const auto it = by_name.find(name);
      if (it == by_name.end()) batch_node.at("params").fail(name + " is not in the group's params");
      members.push_back(&it->second);
    }
    for (std::size_t s = 0; s < stages.size(); ++s)
      batch.stages.push_back(
          derive_stage(batch_node, members, stages, s, alignment_bytes, batch.dtype));
    return batch;
  });
  return group;
}

// The widest element (float64, int64): a unit's padded members are bounded in bytes at it,
// so verify's per-unit sums, in elements or in bytes of any dtype, fit int64.
constexpr std::int64_t kMaxElementBytes = 8;

// An FSDP2 member's local and padded shapes (the held param's, which verify multiplies out):
// each of fewer than 2^62 elements, and the unit's padded members at most 2^62 bytes at
// kMaxElementBytes an element (`unit_bytes`, the members so far).
template <typename N>
void check_fsdp2_member(const N& param_node, const RankParam& param, std::int64_t& unit_bytes) {
  const std::optional<std::int64_t> local = checked_numel(param.local_shape);
  const std::optional<std::int64_t> padded = checked_numel(param.padded_shape);
  if (!local || !padded)
    param_node.fail(param.name + ": local_shape " + shape_text(param.local_shape) +
                    " or padded_shape " + shape_text(param.padded_shape) +
                    " has a negative extent or 2^62 or more elements");
  if (*padded > (limits::kMaxNumel - unit_bytes) / kMaxElementBytes)
    param_node.fail(param.name + ": the unit's padded members pass 2^62 bytes");
  unit_bytes += *padded * kMaxElementBytes;
}

template <typename N>
Fsdp2Unit fsdp2_unit(const N& node, const Held& held) {
  Fsdp2Unit unit;
  unit.name = node.at("name").str();
  unit.mesh = node.at("mesh").str();
  const std::string units = node.at("units").str();
  if (units != "elements" && units != "bytes") node.at("units").fail("not 'elements' or 'bytes'");
  unit.byte_units = units == "bytes";
  unit.ranks = rank_list(node.at("ranks"));
  unit.index = node.at("index").i64();
  unit.total = node.at("total").i64();
  unit.total_bytes = node.at("total_bytes").i64();
  unit.output_shape = node.at("output_shape").shape();
  std::int64_t unit_bytes = 0;
  unit.params = node.at("params").map([&](const N& entry) {
    const RankParam& param = held_at(entry.at("param"), held);
    check_fsdp2_member(entry.at("param"), param, unit_bytes);
    return Fsdp2Param{param.name,
                      entry.at("shard_dim").i32(),
                      entry.at("offset").i64(),
                      entry.at("padded_numel").i64(),
                      param.padded_shape,
                      param.local_shape,
                      entry.at("unsharded_shape").shape()};
  });
  return unit;
}

template <typename N>
FlatBuffer flat_buffer(const N& node, const Held& held) {
  FlatBuffer flat;
  flat.mesh = node.at("mesh").str();
  flat.expert = node.at("expert").boolean();
  flat.model_chunk = node.at("model_chunk").i32();
  flat.param_dtype = node.at("param_dtype").dtype();
  flat.grad_dtype = node.at("grad_dtype").dtype();
  flat.ranks = rank_list(node.at("ranks"));
  flat.index = node.at("index").i64();
  flat.bucket_size = node.at("bucket_size").is_null() ? -1 : node.at("bucket_size").i64();
  flat.numel = node.at("numel").i64();
  flat.shard_numel = node.at("shard_numel").i64();
  flat.owned_numel = node.at("owned_numel").i64();
  flat.buckets = node.at("buckets").map([&](const N& bucket) {
    const auto values = bucket.ints();
    if (values.size() != 3) bucket.fail("a bucket is [start, end, numel_unpadded]");
    return std::array<std::int64_t, 3>{values[0], values[1], values[2]};
  });
  flat.entries = node.at("params").map([&](const N& entry) {
    const auto values = entry.ints();
    if (values.size() != 5)
      entry.fail("a flat param is [param, param_offset, numel, start, bucket]");
    if (values[0] < 0 || values[0] >= static_cast<std::int64_t>(held.size()))
      entry.fail("param index " + std::to_string(values[0]) + " is not in this file's params");
    return FlatEntry{held[static_cast<std::size_t>(values[0])].name, values[1], values[2],
                     values[3], values[4]};
  });
  flat.owned = node.at("owned").map([&](const N& range) {
    const auto values = range.ints();
    if (values.size() != 4)
      range.fail("an owned range is [entry, param_offset, numel, buffer_start]");
    return FlatOwned{values[0], values[1], values[2], values[3]};
  });
  return flat;
}

template <typename N>
Buffer buffer(const N& node, const Held& held) {
  Buffer out;
  const std::string kind = node.at("kind").str();
  if (kind == "muon_allgather") {
    out.kind = BufferKind::MuonAllGather;
    out.alignment_bytes = node.at("alignment_bytes").i64();
    out.max_batch_numel = node.at("max_batch_numel").i64();
    if (out.alignment_bytes < 1 || out.alignment_bytes > limits::kMaxAlignmentBytes)
      node.at("alignment_bytes").fail("must be in [1, 2^40]");
    out.groups = node.at("groups").map(
        [&](const N& group) { return muon_group(group, held, out.alignment_bytes); });
  } else if (kind == "fsdp2_allgather") {
    out.kind = BufferKind::Fsdp2AllGather;
    out.units = node.at("units").map([&](const N& unit) { return fsdp2_unit(unit, held); });
  } else if (kind == "megatron_distopt" || kind == "deepspeed_zero") {
    out.kind = kind == "megatron_distopt" ? BufferKind::MegatronDistOpt : BufferKind::DeepSpeedZero;
    out.zero_stage = node.at("zero_stage").i32();
    if (out.kind == BufferKind::MegatronDistOpt)
      out.pad_for_high_nccl_busbw = node.at("pad_for_high_nccl_busbw").boolean();
    out.flat = node.at("flat").map([&](const N& flat) { return flat_buffer(flat, held); });
  } else {
    node.at("kind").fail("unknown buffer kind '" + kind + "'");
  }
  out.not_communicated = names_at(node.at("not_communicated"), held);
  return out;
}

bool is_hex_digest(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char digit) {
           return (digit >= '0' && digit <= '9') || (digit >= 'a' && digit <= 'f');
         });
}

template <typename N>
ManifestEntry manifest_entry(const N& node, bool rank_file) {
  ManifestEntry entry;
  entry.path = node.at("path").str();
  if (rank_file) entry.rank = node.at("rank").i64();
  entry.bytes = node.at("bytes").i64();
  if (entry.bytes < 0) node.at("bytes").fail("negative");
  entry.sha256 = node.at("sha256").str();
  if (!is_hex_digest(entry.sha256)) node.at("sha256").fail("not 64 lowercase hex digits");
  return entry;
}

// The files agree with world_size, their names, count and the rank set.
template <typename N>
void check_rank_files(const N& files, const ManifestFile& manifest, std::int64_t count,
                      const N& ranks) {
  if (count != static_cast<std::int64_t>(manifest.rank_files.size()))
    files.fail("lists " + std::to_string(manifest.rank_files.size()) + " files but count says " +
               std::to_string(count));
  for (std::size_t i = 0; i < manifest.rank_files.size(); ++i) {
    const ManifestEntry& entry = manifest.rank_files[i];
    if (entry.rank < 0 || entry.rank >= manifest.world_size)
      files[i].at("rank").fail("rank " + std::to_string(entry.rank) + " outside world size " +
                               std::to_string(manifest.world_size));
    if (i > 0 && entry.rank <= manifest.rank_files[i - 1].rank)
      files[i].at("rank").fail("ranks not strictly ascending");
    if (entry.path != "ranks/" + rank_file_name(entry.rank, manifest.world_size))
      files[i].at("path").fail("'" + entry.path + "' is not the file name of rank " +
                               std::to_string(entry.rank));
  }
  if (manifest.ranks.empty() && manifest.rank_files.empty()) return;
  std::string error;
  const auto set = RankSet::parse(manifest.ranks, manifest.world_size, error);
  if (!set) ranks.fail(error);
  bool same = set->size() == count;
  for (std::size_t i = 0; same && i < manifest.rank_files.size(); ++i)
    same = set->contains(manifest.rank_files[i].rank);
  if (!same) ranks.fail("'" + manifest.ranks + "' is not the set of the listed files' ranks");
}

// True when the text has no escapes, no non-ASCII byte and no control
// character but JSON whitespace: simdjson then reads its strings and keys
// exactly as nlohmann does (no unescaping, no UTF-8 or surrogate rules).
bool plain_text(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char byte) {
    const auto code = static_cast<unsigned char>(byte);
    return (code >= 0x20 && code < 0x80 && byte != '\\') || byte == '\n' || byte == '\r' ||
           byte == '\t';
  });
}

// Reads `text` with `read` (a generic lambda over the node type): through
// simdjson's DOM when `parser` is given and the text is plain, and with the
// reference reader (nlohmann, JSON paths in errors) when that is not possible
// or anything fails, so every error message is the reference reader's.
template <typename T, typename F>
std::optional<T> parse_with(simdjson::dom::parser* parser, std::string_view text,
                            std::string& error, F read) {
  if (parser != nullptr && plain_text(text)) {
    const simdjson::padded_string padded(text);
    simdjson::dom::element root;
    if (parser->parse(padded).get(root) == simdjson::SUCCESS) {
      try {
        return read(FastNode(root));
      } catch (const Fallback&) {
        // read again below, for the reference reader's message
      }
    }
  }
  try {
    const json doc = json::parse(text);
    return read(RefNode(doc, ""));
  } catch (const json::exception& e) {
    error = e.what();
  } catch (const ReadError& e) {
    error = e.what();
  }
  return std::nullopt;
}

// The DOM parser of rank files and manifests, reused (its buffers grow to
// the largest file read); plan.json gets its own, freed after.
simdjson::dom::parser& shared_parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

template <typename N>
PlanFile read_plan(const N& node) {
  PlanFile plan;
  plan.world_size = node.at("world_size").in_range(1, kMaxWorldSize);
  plan.model_sha256 = node.at("inputs").at("model").at("sha256").str();
  plan.recipe_sha256 = node.at("inputs").at("recipe").at("sha256").str();
  plan.params = node.at("params").map([](const N& param) { return plan_param(param); });
  const auto axes = [](const N& axis) {
    return PlanMeshAxis{axis.at("name").str(), axis.at("size").in_range(1, kMaxWorldSize)};
  };
  plan.dense = node.at("meshes").at("dense").map(axes);
  if (!node.at("meshes").at("expert").is_null())
    plan.expert = node.at("meshes").at("expert").map(axes);
  if (const N pp = node.at("pipeline"); !pp.is_null()) {
    plan.pipeline_axis = pp.at("axis").str();
    plan.num_stages = pp.at("num_stages").in_range(1, kMaxWorldSize);
  }
  const N sum = node.at("summary");
  plan.summary_num_params = sum.at("num_params").i64();
  plan.per_rank_param_bytes = rank_stat(sum.at("per_rank_param_bytes"));
  plan.per_rank_padded_param_bytes = rank_stat(sum.at("per_rank_padded_param_bytes"));
  if (node.at("inputs").at("model").has("name"))
    plan.model_name = node.at("inputs").at("model").at("name").str();
  if (const N pp = node.at("pipeline"); !pp.is_null() && pp.has("virtual_stages"))
    plan.virtual_stages = static_cast<int>(pp.at("virtual_stages").in_range(1, INT32_MAX));
  if (node.has("diagnostics"))
    plan.diagnostics =
        node.at("diagnostics").map([](const N& entry) { return plan_diagnostic(entry); });
  if (sum.has("per_rank_memory")) plan.per_rank_memory = plan_memory(sum.at("per_rank_memory"));
  return plan;
}

template <typename N>
RankFile read_rank(const N& node) {
  RankFile file;
  file.rank = node.at("rank").i64();
  file.world_size = node.at("world_size").i64();
  file.stage = node.at("stage").i32();
  file.dense = node.at("coords").at("dense").int_members();
  if (!node.at("coords").at("expert").is_null())
    file.expert = node.at("coords").at("expert").int_members();
  file.params = node.at("params").map([](const N& param) { return rank_param(param); });
  file.buffers = node.at("buffers").map([&](const N& entry) { return buffer(entry, file.params); });
  const N totals = node.at("totals");
  file.totals = {totals.at("param_bytes").i64(), totals.at("padded_param_bytes").i64(),
                 totals.at("num_params").i64()};
  return file;
}

template <typename N>
RankMemoryFile read_rank_memory(const N& node) {
  RankMemoryFile file;
  file.world_size = node.at("world_size").in_range(1, kMaxWorldSize);
  file.rank = node.at("rank").in_range(0, file.world_size - 1);
  file.stage = static_cast<int>(node.at("stage").in_range(0, INT32_MAX));
  const N memory = node.at("memory");
  for (std::size_t k = 0; k < kMemoryKindKeys.size(); ++k)
    file.bytes[k] = memory.at(kMemoryKindKeys[k]).in_range(0, INT64_MAX);
  file.step = memory.has("activations");
  for (std::size_t k = 0; file.step && k < kStepKindKeys.size(); ++k)
    file.step_bytes[k] = memory.at(kStepKindKeys[k]).in_range(0, INT64_MAX);
  file.total = memory.at("total").in_range(0, INT64_MAX);
  return file;
}

template <typename N>
ManifestFile read_manifest(const N& node) {
  if (node.at("format").str() != "shardc.manifest/v1")
    node.at("format").fail("not shardc.manifest/v1");
  ManifestFile manifest;
  manifest.world_size = node.at("world_size").in_range(1, kMaxWorldSize);
  manifest.model_sha256 = node.at("inputs").at("model").at("sha256").str();
  manifest.recipe_sha256 = node.at("inputs").at("recipe").at("sha256").str();
  manifest.plan = manifest_entry(node.at("plan"), false);
  if (manifest.plan.path != "plan.json") node.at("plan").at("path").fail("not 'plan.json'");
  const N rf = node.at("rank_files");
  manifest.ranks = rf.at("ranks").str();
  const std::int64_t count = rf.at("count").i64();
  manifest.rank_files =
      rf.at("files").map([](const N& entry) { return manifest_entry(entry, true); });
  check_rank_files(rf.at("files"), manifest, count, rf.at("ranks"));
  return manifest;
}

const auto kReadPlan = [](const auto& node) { return read_plan(node); };
const auto kReadRank = [](const auto& node) { return read_rank(node); };
const auto kReadManifest = [](const auto& node) { return read_manifest(node); };
const auto kReadRankMemory = [](const auto& node) { return read_rank_memory(node); };

}  // namespace

bool MuonSliceBack::operator==(const MuonSliceBack& other) const {
  return param == other.param && steps.size() == other.steps.size() &&
         std::equal(steps.begin(), steps.end(), other.steps.begin(),
                    [](const auto& left, const auto& right) {
                      return left.dim == right.dim && left.start == right.start &&
                             left.length == right.length;
                    });
}

std::optional<PlanFile> parse_plan_file(std::string_view text, std::string& error) {
  simdjson::dom::parser parser;
  return parse_with<PlanFile>(&parser, text, error, kReadPlan);
}

std::optional<RankFile> parse_rank_file(std::string_view text, std::string& error) {
  return parse_with<RankFile>(&shared_parser(), text, error, kReadRank);
}

std::optional<ManifestFile> parse_manifest_file(std::string_view text, std::string& error) {
  return parse_with<ManifestFile>(&shared_parser(), text, error, kReadManifest);
}

std::optional<RankMemoryFile> parse_rank_memory_file(std::string_view text, std::string& error) {
  return parse_with<RankMemoryFile>(&shared_parser(), text, error, kReadRankMemory);
}

std::optional<RankMemoryFile> parse_rank_memory_file_reference(std::string_view text,
                                                               std::string& error) {
  return parse_with<RankMemoryFile>(nullptr, text, error, kReadRankMemory);
}

std::optional<PlanFile> parse_plan_file_reference(std::string_view text, std::string& error) {
  return parse_with<PlanFile>(nullptr, text, error, kReadPlan);
}

std::optional<RankFile> parse_rank_file_reference(std::string_view text, std::string& error) {
  return parse_with<RankFile>(nullptr, text, error, kReadRank);
}

std::optional<ManifestFile> parse_manifest_file_reference(std::string_view text,
                                                          std::string& error) {
  return parse_with<ManifestFile>(nullptr, text, error, kReadManifest);
}

std::optional<FieldDifference> param_field_difference(std::string_view first_text,
                                                      std::string_view second_text) {
  const nlohmann::json first_doc = nlohmann::json::parse(first_text, nullptr, false);
  const nlohmann::json second_doc = nlohmann::json::parse(second_text, nullptr, false);
  const auto params = [](const nlohmann::json& doc) -> const nlohmann::json* {
    if (!doc.is_object() || !doc.contains("params") || !doc["params"].is_array()) return nullptr;
    return &doc["params"];
  };
  const nlohmann::json* firsts = params(first_doc);
  const nlohmann::json* seconds = params(second_doc);
  if (firsts == nullptr || seconds == nullptr || firsts->size() != seconds->size())
    return std::nullopt;
  const auto shown = [](const nlohmann::json* value) {
    if (value == nullptr) return std::string("(absent)");
    std::string dumped = value->dump();
    if (dumped.size() > 100) dumped = dumped.substr(0, 97) + "...";
    return printable(dumped);
  };
  for (std::size_t i = 0; i < firsts->size(); ++i) {
    const nlohmann::json& first = (*firsts)[i];
    const nlohmann::json& second = (*seconds)[i];
    if (!first.is_object() || !second.is_object()) return std::nullopt;
    const std::string name = second.value("name", std::string());
    if (first.value("name", std::string()) != name) return std::nullopt;
    if (first == second) continue;
    for (const auto& [key, value] : second.items()) {
      const nlohmann::json* mine = first.contains(key) ? &first[key] : nullptr;
      if (mine == nullptr || *mine != value)
        return FieldDifference{printable(name), key, shown(mine), shown(&value)};
    }
    for (const auto& [key, value] : first.items())
      if (!second.contains(key))
        return FieldDifference{printable(name), key, shown(&value), shown(nullptr)};
  }
  return std::nullopt;
}

}  // namespace shardc::readback
