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
    const std::int64_t v = self().i64();
    if (v < INT32_MIN || v > INT32_MAX) self().fail(std::to_string(v) + " out of 32-bit range");
    return static_cast<int>(v);
  }
  /// An integer in [lo, hi].
  [[nodiscard]] std::int64_t in_range(std::int64_t lo, std::int64_t hi) const {
    const std::int64_t v = self().i64();
    if (v < lo || v > hi)
      self().fail(std::to_string(v) + " outside [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
    return v;
  }
  [[nodiscard]] DType dtype() const {
    const auto t = parse_dtype(self().str());
    if (!t) self().fail("unknown dtype");
    return *t;
  }
  [[nodiscard]] std::vector<std::int64_t> ints() const {
    std::vector<std::int64_t> out;
    out.reserve(self().size());
    self().each([&](const N& i) { out.push_back(i.i64()); });
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
    self().each([&](const N& i) { out.push_back(i.str()); });
    return out;
  }
  template <typename F>
  auto map(F f) const {
    std::vector<decltype(f(std::declval<N>()))> out;
    out.reserve(self().size());
    self().each([&](const N& i) { out.push_back(f(i)); });
    return out;
  }

 private:
  const N& self() const { return static_cast<const N&>(*this); }
};

// The reference reader's node: nlohmann's DOM, with the JSON path of the
// value for error messages.
class RefNode : public NodeOps<RefNode> {
 public:
  RefNode(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

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
  void each(F f) const {
    for (std::size_t i = 0; i < size(); ++i) f((*this)[i]);
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
  explicit FastNode(simdjson::dom::element e) : e_(e) {}

  [[nodiscard]] FastNode at(const char* key) const {
    simdjson::dom::object o;
    if (e_.get_object().get(o) != simdjson::SUCCESS) throw Fallback{};
    const std::string_view k(key);
    simdjson::dom::element found;
    bool seen = false;
    for (const auto field : o) {
      if (field.key != k) continue;
      if (seen) throw Fallback{};
      seen = true;
      found = field.value;
    }
    if (!seen) throw Fallback{};
    return FastNode(found);
  }
  [[nodiscard]] bool has(const char* key) const {
    simdjson::dom::object o;
    if (e_.get_object().get(o) != simdjson::SUCCESS) return false;
    const std::string_view k(key);
    return std::any_of(o.begin(), o.end(), [&](const auto& field) { return field.key == k; });
  }
  [[nodiscard]] bool is_null() const { return e_.is_null(); }
  [[nodiscard]] std::size_t size() const { return array().size(); }
  [[nodiscard]] FastNode operator[](std::size_t i) const {
    simdjson::dom::element e;
    if (array().at(i).get(e) != simdjson::SUCCESS) throw Fallback{};
    return FastNode(e);
  }
  template <typename F>
  void each(F f) const {
    for (const simdjson::dom::element e : array()) f(FastNode(e));
  }
  [[nodiscard]] std::int64_t i64() const {
    std::int64_t v = 0;
    if (e_.get_int64().get(v) != simdjson::SUCCESS) throw Fallback{};
    return v;
  }
  [[nodiscard]] std::vector<std::pair<std::string, std::int64_t>> int_members() const {
    simdjson::dom::object o;
    if (e_.get_object().get(o) != simdjson::SUCCESS) throw Fallback{};
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (const auto field : o) out.emplace_back(field.key, FastNode(field.value).i64());
    std::sort(out.begin(), out.end());
    for (std::size_t i = 1; i < out.size(); ++i)
      if (out[i].first == out[i - 1].first) throw Fallback{};
    return out;
  }
  [[nodiscard]] bool boolean() const {
    bool v = false;
    if (e_.get_bool().get(v) != simdjson::SUCCESS) throw Fallback{};
    return v;
  }
  [[nodiscard]] std::string str() const {
    std::string_view v;
    if (e_.get_string().get(v) != simdjson::SUCCESS) throw Fallback{};
    return std::string(v);
  }
  [[noreturn]] void fail(const std::string& /*what*/) const { throw Fallback{}; }

 private:
  // The array, whose size simdjson knows exactly below 2^24 elements.
  [[nodiscard]] simdjson::dom::array array() const {
    simdjson::dom::array a;
    if (e_.get_array().get(a) != simdjson::SUCCESS || a.size() >= 0xFFFFFF) throw Fallback{};
    return a;
  }
  simdjson::dom::element e_;
};

template <typename N>
PlanParam plan_param(const N& n) {
  PlanParam p;
  p.name = n.at("name").str();
  p.dtype = n.at("dtype").dtype();
  p.global_shape = n.at("global_shape").ints();
  p.mesh = n.at("mesh").str();
  p.placements = n.at("placements").strs();
  p.stage = n.at("stage").i32();
  if (!n.at("alias_of").is_null()) p.alias_of = n.at("alias_of").str();
  if (n.has("stacked_from") && !n.at("stacked_from").is_null()) {
    const N s = n.at("stacked_from");
    p.stacked_from = PlanParam::Stacked{s.at("count").i64(), s.at("first").str(),
                                        s.at("last").str(), s.at("sources").strs()};
  }
  p.uneven = n.at("uneven").str();
  if (n.has("rule") && !n.at("rule").is_null()) p.rule = n.at("rule").at("match").str();
  p.packed = n.has("packed") || n.has("strided_boxes");
  if (n.has("vocab_padding")) {
    p.vocab_rows = n.at("vocab_padding").at("rows").i64();
    p.vocab_multiple = n.at("vocab_padding").at("multiple").i64();
  }
  p.shards = n.at("shards").map([](const N& s) {
    PlanShard shard{s.at("ranks").str(),
                    s.at("local_shape").ints(),
                    s.at("global_offset").ints(),
                    s.at("padded_shape").ints(),
                    {}};
    if (s.has("boxes"))
      shard.boxes = s.at("boxes").map([](const N& b) {
        return PlanBox{b.at("global_offset").ints(), b.at("local_offset").ints(),
                       b.at("shape").ints()};
      });
    return shard;
  });
  return p;
}

template <typename N>
RankParam rank_param(const N& n) {
  RankParam p;
  p.name = n.at("name").str();
  p.dtype = n.at("dtype").dtype();
  p.stage = n.at("stage").i32();
  p.global_shape = n.at("global_shape").ints();
  p.local_shape = n.at("local_shape").ints();
  p.global_offset = n.at("global_offset").ints();
  p.padded_shape = n.at("padded_shape").ints();
  p.numel = n.at("numel").i64();
  p.bytes = n.at("bytes").i64();
  p.alias = !n.at("alias_of").is_null();
  if (p.alias) {
    p.alias_of = n.at("alias_of").str();
  } else if (n.has("tied_copy_of")) {
    p.alias_of = n.at("tied_copy_of").str();
  }
  return p;
}

template <typename N>
PlanRankStat rank_stat(const N& n) {
  return {n.at("min").i64(), n.at("max").i64(), n.at("min_ranks").str(), n.at("max_ranks").str(),
          n.has("median") ? n.at("median").i64() : 0};
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
PlanMemory plan_memory(const N& n) {
  PlanMemory m;
  m.not_counted = n.at("not_counted").str();
  for (const char* key : kMemoryKindKeys) m.kinds.emplace_back(key, rank_stat(n.at(key)));
  for (const char* key : kStepKindKeys) {
    if (n.has(key)) m.kinds.emplace_back(key, rank_stat(n.at(key)));
  }
  m.kinds.emplace_back("total", rank_stat(n.at("total")));
  if (n.has("stage_activations")) {
    m.activations = n.at("stage_activations").map([](const N& a) {
      return PlanStageActivations{a.at("stage").i32(), a.at("layers").i64(),
                                  a.at("in_flight").i64(), a.at("per_microbatch_bytes").i64(),
                                  a.at("bytes").i64()};
    });
  }
  return m;
}

template <typename N>
PlanDiagnostic plan_diagnostic(const N& n) {
  return {n.at("code").str(), n.at("severity").str(), n.at("message").str(), n.at("hint").str(),
          n.at("file").str(), n.at("line").i64(),     n.at("column").i64()};
}

// The rank file's params, for resolving the buffers' param indices.
using Held = std::vector<RankParam>;

template <typename N>
const RankParam& held_at(const N& n, const Held& held) {
  const std::int64_t i = n.i64();
  if (i < 0 || i >= static_cast<std::int64_t>(held.size()))
    n.fail("param index " + std::to_string(i) + " is not in this file's params");
  return held[static_cast<std::size_t>(i)];
}

template <typename N>
std::vector<std::string> names_at(const N& n, const Held& held) {
  return n.map([&](const N& i) { return held_at(i, held).name; });
}

template <typename N>
std::vector<std::int64_t> rank_list(const N& n) {
  std::string error;
  auto out = parse_rank_list(n.str(), error);
  if (!out) n.fail(error);
  return *out;
}

// Largest split size read (2^40 elements on one dim) and most members of a stage (2^24).
// Their sum can still pass 2^63, and a gathered shape's numel much more: muon_group checks
// every stage's gathered shape (gathered_shapes_fit) before any arithmetic on it.
constexpr std::int64_t kMaxExtent = std::int64_t{1} << 40;

// [[size, count], ...] -> the expanded list.
template <typename N>
std::vector<std::int64_t> runs(const N& n) {
  std::vector<std::int64_t> out;
  n.each([&](const N& item) {
    const auto run = item.ints();
    if (run.size() != 2 || run[0] < 0 || run[0] > kMaxExtent || run[1] < 1 ||
        run[1] > (std::int64_t{1} << 24) - static_cast<std::int64_t>(out.size()))
      item.fail(
          "not a [size, count] run with 0 <= size <= 2^40, 1 <= count, at most 2^24 "
          "members in all");
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
MuonStageParam derive_stage_param(const std::string& name, const StageGeometry& g,
                                  const std::vector<std::int64_t>& split, const Shape& input,
                                  std::int64_t align) {
  MuonStageParam p;
  p.name = name;
  p.tensor_dim = g.tensor_dim;
  p.split_sizes = split;
  const auto d = static_cast<std::size_t>(g.tensor_dim);
  if (g.tensor_dim < 0 || d >= input.size()) return p;  // verify reports tensor_dim
  for (std::int64_t size : split) {
    Shape shape = input;
    shape[d] = size;
    p.rank_shapes.push_back(std::move(shape));
  }
  MuonStageSizes sizes = muon_stage_sizes(input, g.tensor_dim, split, g.index, align);
  p.pad_shape = std::move(sizes.pad_shape);
  p.actual_numel = sizes.actual_numel;
  p.padded_numel = sizes.padded_numel;
  return p;
}

// The stage input shape of `lp` at stage `s`: its local shape with the
// tensor dims of the earlier stages gathered (sum of their split sizes).
// Precondition: gathered_shapes_fit(lp, stages).
Shape input_shape(const LeanParam& lp, const std::vector<StageGeometry>& stages, std::size_t s) {
  Shape shape = lp.held->local_shape;
  for (std::size_t t = 0; t < s; ++t) {
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
                       const std::vector<StageGeometry>& stages, std::size_t s,
                       std::int64_t alignment_bytes, DType dtype) {
  const StageGeometry& g = stages[s];
  MuonStage st;
  st.axes = g.axes;
  st.ranks = g.ranks;
  st.index = g.index;
  const auto totals = batch.at("total_numel").ints();
  if (totals.size() != stages.size())
    batch.at("total_numel")
        .fail("needs one entry per stage (" + std::to_string(stages.size()) + ")");
  st.total_numel = totals[s];
  const std::int64_t align = muon_align_elements(alignment_bytes, dtype);
  if (__builtin_mul_overflow(st.total_numel, static_cast<std::int64_t>(g.ranks.size()),
                             &st.gathered_numel))
    batch.at("total_numel").fail("times the stage's ranks passes 2^63 elements");
  std::int64_t offset = 0;
  for (const LeanParam* lp : members) {
    MuonStageParam p = derive_stage_param(lp->held->name, g, lp->split_sizes[s],
                                          input_shape(*lp, stages, s), align);
    p.offset = offset;
    if (__builtin_add_overflow(offset, p.padded_numel, &offset))
      batch.at("params").fail("the members' padded sizes pass 2^63 elements in all");
    st.params.push_back(std::move(p));
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
MuonGroup muon_group(const N& n, const Held& held, std::int64_t alignment_bytes) {
  MuonGroup g;
  g.key = n.at("key").str();
  g.mesh = n.at("mesh").str();
  g.replicate_axes = n.at("replicate_axes").strs();
  g.replicate_coord = n.at("replicate_coord").ints();
  const auto stages = n.at("stages").map([](const N& st) {
    return StageGeometry{st.at("axes").strs(), st.at("tensor_dim").i32(), rank_list(st.at("ranks")),
                         st.at("index").i64()};
  });
  // Keyed by the names in `held`, which outlives this call.
  std::unordered_map<std::string_view, LeanParam> by_name;
  const N params = n.at("params");
  params.each([&](const N& e) {
    const RankParam& h = held_at(e.at("param"), held);
    LeanParam lp{&h, e.at("owner").ints(),
                 e.at("split_sizes").map([](const N& r) { return runs(r); })};
    if (lp.split_sizes.size() != stages.size())
      e.at("split_sizes")
          .fail("needs one run list per stage (" + std::to_string(stages.size()) + ")");
    if (!gathered_shapes_fit(lp, stages))
      e.at("split_sizes")
          .fail("gathers " + h.name + " to a shape of 2^62 elements or more (local_shape " +
                shape_text(h.local_shape) + ")");
    g.params.push_back(h.name);
    g.owners.push_back({h.name, lp.owner, lp.owner == g.replicate_coord});
    g.slice_back.push_back({h.name, slice_back(lp, stages)});
    if (!by_name.emplace(h.name, std::move(lp)).second) e.at("param").fail("listed twice");
  });
  g.batches = n.at("batches").map([&](const N& b) {
    MuonBatch batch{b.at("dtype").dtype(), {}};
    std::vector<const LeanParam*> members;
    for (const std::string& name : names_at(b.at("params"), held)) {
      const auto it = by_name.find(name);
      if (it == by_name.end()) b.at("params").fail(name + " is not in the group's params");
      members.push_back(&it->second);
    }
    for (std::size_t s = 0; s < stages.size(); ++s)
      batch.stages.push_back(derive_stage(b, members, stages, s, alignment_bytes, batch.dtype));
    return batch;
  });
  return g;
}

template <typename N>
Fsdp2Unit fsdp2_unit(const N& n, const Held& held) {
  Fsdp2Unit u;
  u.name = n.at("name").str();
  u.mesh = n.at("mesh").str();
  const std::string units = n.at("units").str();
  if (units != "elements" && units != "bytes") n.at("units").fail("not 'elements' or 'bytes'");
  u.byte_units = units == "bytes";
  u.ranks = rank_list(n.at("ranks"));
  u.index = n.at("index").i64();
  u.total = n.at("total").i64();
  u.total_bytes = n.at("total_bytes").i64();
  u.output_shape = n.at("output_shape").shape();
  u.params = n.at("params").map([&](const N& p) {
    const RankParam& h = held_at(p.at("param"), held);
    return Fsdp2Param{h.name,
                      p.at("shard_dim").i32(),
                      p.at("offset").i64(),
                      p.at("padded_numel").i64(),
                      h.padded_shape,
                      h.local_shape,
                      p.at("unsharded_shape").shape()};
  });
  return u;
}

template <typename N>
FlatBuffer flat_buffer(const N& n, const Held& held) {
  FlatBuffer f;
  f.mesh = n.at("mesh").str();
  f.expert = n.at("expert").boolean();
  f.model_chunk = n.at("model_chunk").i32();
  f.param_dtype = n.at("param_dtype").dtype();
  f.grad_dtype = n.at("grad_dtype").dtype();
  f.ranks = rank_list(n.at("ranks"));
  f.index = n.at("index").i64();
  f.bucket_size = n.at("bucket_size").is_null() ? -1 : n.at("bucket_size").i64();
  f.numel = n.at("numel").i64();
  f.shard_numel = n.at("shard_numel").i64();
  f.owned_numel = n.at("owned_numel").i64();
  f.buckets = n.at("buckets").map([&](const N& b) {
    const auto v = b.ints();
    if (v.size() != 3) b.fail("a bucket is [start, end, numel_unpadded]");
    return std::array<std::int64_t, 3>{v[0], v[1], v[2]};
  });
  f.entries = n.at("params").map([&](const N& e) {
    const auto v = e.ints();
    if (v.size() != 5) e.fail("a flat param is [param, param_offset, numel, start, bucket]");
    if (v[0] < 0 || v[0] >= static_cast<std::int64_t>(held.size()))
      e.fail("param index " + std::to_string(v[0]) + " is not in this file's params");
    return FlatEntry{held[static_cast<std::size_t>(v[0])].name, v[1], v[2], v[3], v[4]};
  });
  f.owned = n.at("owned").map([&](const N& o) {
    const auto v = o.ints();
    if (v.size() != 4) o.fail("an owned range is [entry, param_offset, numel, buffer_start]");
    return FlatOwned{v[0], v[1], v[2], v[3]};
  });
  return f;
}

template <typename N>
Buffer buffer(const N& n, const Held& held) {
  Buffer b;
  const std::string kind = n.at("kind").str();
  if (kind == "muon_allgather") {
    b.kind = BufferKind::MuonAllGather;
    b.alignment_bytes = n.at("alignment_bytes").i64();
    b.max_batch_numel = n.at("max_batch_numel").i64();
    if (b.alignment_bytes < 1 || b.alignment_bytes > limits::kMaxAlignmentBytes)
      n.at("alignment_bytes").fail("must be in [1, 2^40]");
    b.groups =
        n.at("groups").map([&](const N& g) { return muon_group(g, held, b.alignment_bytes); });
  } else if (kind == "fsdp2_allgather") {
    b.kind = BufferKind::Fsdp2AllGather;
    b.units = n.at("units").map([&](const N& u) { return fsdp2_unit(u, held); });
  } else if (kind == "megatron_distopt" || kind == "deepspeed_zero") {
    b.kind = kind == "megatron_distopt" ? BufferKind::MegatronDistOpt : BufferKind::DeepSpeedZero;
    b.zero_stage = n.at("zero_stage").i32();
    if (b.kind == BufferKind::MegatronDistOpt)
      b.pad_for_high_nccl_busbw = n.at("pad_for_high_nccl_busbw").boolean();
    b.flat = n.at("flat").map([&](const N& f) { return flat_buffer(f, held); });
  } else {
    n.at("kind").fail("unknown buffer kind '" + kind + "'");
  }
  b.not_communicated = names_at(n.at("not_communicated"), held);
  return b;
}

bool is_hex_digest(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

template <typename N>
ManifestEntry manifest_entry(const N& n, bool rank_file) {
  ManifestEntry e;
  e.path = n.at("path").str();
  if (rank_file) e.rank = n.at("rank").i64();
  e.bytes = n.at("bytes").i64();
  if (e.bytes < 0) n.at("bytes").fail("negative");
  e.sha256 = n.at("sha256").str();
  if (!is_hex_digest(e.sha256)) n.at("sha256").fail("not 64 lowercase hex digits");
  return e;
}

// The files agree with world_size, their names, count and the rank set.
template <typename N>
void check_rank_files(const N& files, const ManifestFile& m, std::int64_t count, const N& ranks) {
  if (count != static_cast<std::int64_t>(m.rank_files.size()))
    files.fail("lists " + std::to_string(m.rank_files.size()) + " files but count says " +
               std::to_string(count));
  for (std::size_t i = 0; i < m.rank_files.size(); ++i) {
    const ManifestEntry& e = m.rank_files[i];
    if (e.rank < 0 || e.rank >= m.world_size)
      files[i].at("rank").fail("rank " + std::to_string(e.rank) + " outside world size " +
                               std::to_string(m.world_size));
    if (i > 0 && e.rank <= m.rank_files[i - 1].rank)
      files[i].at("rank").fail("ranks not strictly ascending");
    if (e.path != "ranks/" + rank_file_name(e.rank, m.world_size))
      files[i].at("path").fail("'" + e.path + "' is not the file name of rank " +
                               std::to_string(e.rank));
  }
  if (m.ranks.empty() && m.rank_files.empty()) return;
  std::string error;
  const auto set = RankSet::parse(m.ranks, m.world_size, error);
  if (!set) ranks.fail(error);
  bool same = set->size() == count;
  for (std::size_t i = 0; same && i < m.rank_files.size(); ++i)
    same = set->contains(m.rank_files[i].rank);
  if (!same) ranks.fail("'" + m.ranks + "' is not the set of the listed files' ranks");
}

// True when the text has no escapes, no non-ASCII byte and no control
// character but JSON whitespace: simdjson then reads its strings and keys
// exactly as nlohmann does (no unescaping, no UTF-8 or surrogate rules).
bool plain_text(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u >= 0x20 && u < 0x80 && c != '\\') || c == '\n' || c == '\r' || c == '\t';
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
    const json j = json::parse(text);
    return read(RefNode(j, ""));
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
PlanFile read_plan(const N& n) {
  PlanFile f;
  f.world_size = n.at("world_size").in_range(1, kMaxWorldSize);
  f.model_sha256 = n.at("inputs").at("model").at("sha256").str();
  f.recipe_sha256 = n.at("inputs").at("recipe").at("sha256").str();
  f.params = n.at("params").map([](const N& p) { return plan_param(p); });
  const auto axes = [](const N& a) {
    return PlanMeshAxis{a.at("name").str(), a.at("size").in_range(1, kMaxWorldSize)};
  };
  f.dense = n.at("meshes").at("dense").map(axes);
  if (!n.at("meshes").at("expert").is_null()) f.expert = n.at("meshes").at("expert").map(axes);
  if (const N pp = n.at("pipeline"); !pp.is_null()) {
    f.pipeline_axis = pp.at("axis").str();
    f.num_stages = pp.at("num_stages").in_range(1, kMaxWorldSize);
  }
  const N sum = n.at("summary");
  f.summary_num_params = sum.at("num_params").i64();
  f.per_rank_param_bytes = rank_stat(sum.at("per_rank_param_bytes"));
  f.per_rank_padded_param_bytes = rank_stat(sum.at("per_rank_padded_param_bytes"));
  if (n.at("inputs").at("model").has("name"))
    f.model_name = n.at("inputs").at("model").at("name").str();
  if (const N pp = n.at("pipeline"); !pp.is_null() && pp.has("virtual_stages"))
    f.virtual_stages = static_cast<int>(pp.at("virtual_stages").in_range(1, INT32_MAX));
  if (n.has("diagnostics"))
    f.diagnostics = n.at("diagnostics").map([](const N& d) { return plan_diagnostic(d); });
  if (sum.has("per_rank_memory")) f.per_rank_memory = plan_memory(sum.at("per_rank_memory"));
  return f;
}

template <typename N>
RankFile read_rank(const N& n) {
  RankFile f;
  f.rank = n.at("rank").i64();
  f.world_size = n.at("world_size").i64();
  f.stage = n.at("stage").i32();
  f.dense = n.at("coords").at("dense").int_members();
  if (!n.at("coords").at("expert").is_null()) f.expert = n.at("coords").at("expert").int_members();
  f.params = n.at("params").map([](const N& p) { return rank_param(p); });
  f.buffers = n.at("buffers").map([&](const N& b) { return buffer(b, f.params); });
  const N t = n.at("totals");
  f.totals = {t.at("param_bytes").i64(), t.at("padded_param_bytes").i64(),
              t.at("num_params").i64()};
  return f;
}

template <typename N>
RankMemoryFile read_rank_memory(const N& n) {
  RankMemoryFile f;
  f.world_size = n.at("world_size").in_range(1, kMaxWorldSize);
  f.rank = n.at("rank").in_range(0, f.world_size - 1);
  f.stage = static_cast<int>(n.at("stage").in_range(0, INT32_MAX));
  const N m = n.at("memory");
  for (std::size_t k = 0; k < kMemoryKindKeys.size(); ++k)
    f.bytes[k] = m.at(kMemoryKindKeys[k]).in_range(0, INT64_MAX);
  f.step = m.has("activations");
  for (std::size_t k = 0; f.step && k < kStepKindKeys.size(); ++k)
    f.step_bytes[k] = m.at(kStepKindKeys[k]).in_range(0, INT64_MAX);
  f.total = m.at("total").in_range(0, INT64_MAX);
  return f;
}

template <typename N>
ManifestFile read_manifest(const N& n) {
  if (n.at("format").str() != "shardc.manifest/v1") n.at("format").fail("not shardc.manifest/v1");
  ManifestFile m;
  m.world_size = n.at("world_size").in_range(1, kMaxWorldSize);
  m.model_sha256 = n.at("inputs").at("model").at("sha256").str();
  m.recipe_sha256 = n.at("inputs").at("recipe").at("sha256").str();
  m.plan = manifest_entry(n.at("plan"), false);
  if (m.plan.path != "plan.json") n.at("plan").at("path").fail("not 'plan.json'");
  const N rf = n.at("rank_files");
  m.ranks = rf.at("ranks").str();
  const std::int64_t count = rf.at("count").i64();
  m.rank_files = rf.at("files").map([](const N& f) { return manifest_entry(f, true); });
  check_rank_files(rf.at("files"), m, count, rf.at("ranks"));
  return m;
}

const auto kReadPlan = [](const auto& n) { return read_plan(n); };
const auto kReadRank = [](const auto& n) { return read_rank(n); };
const auto kReadManifest = [](const auto& n) { return read_manifest(n); };
const auto kReadRankMemory = [](const auto& n) { return read_rank_memory(n); };

}  // namespace

bool MuonSliceBack::operator==(const MuonSliceBack& o) const {
  return param == o.param && steps.size() == o.steps.size() &&
         std::equal(steps.begin(), steps.end(), o.steps.begin(), [](const auto& a, const auto& b) {
           return a.dim == b.dim && a.start == b.start && a.length == b.length;
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

}  // namespace shardc::readback
