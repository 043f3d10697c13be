// Reads plan.json and rank files back into typed structs (for `verify`).
// Every access goes through `Node`, which knows its JSON path, so a
// malformed file is reported as e.g. "buffers[0].groups[2].batches: missing".
#include "shardc/readback.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include "shardc/backend.hpp"
#include "shardc/rank_set.hpp"

namespace shardc::readback {
namespace {

using nlohmann::json;

struct ReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Node {
 public:
  Node(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  [[nodiscard]] Node at(const char* key) const {
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
  [[nodiscard]] Node operator[](std::size_t i) const {
    return {j_.at(i), path_ + "[" + std::to_string(i) + "]"};
  }
  [[nodiscard]] std::int64_t i64() const {
    if (j_.is_number_unsigned() && j_.get<std::uint64_t>() > INT64_MAX) fail("above 2^63 - 1");
    if (!j_.is_number_integer()) fail("not an integer");
    return j_.get<std::int64_t>();
  }
  [[nodiscard]] int i32() const {
    const std::int64_t v = i64();
    if (v < INT32_MIN || v > INT32_MAX) fail(std::to_string(v) + " out of 32-bit range");
    return static_cast<int>(v);
  }
  /// An integer in [lo, hi].
  [[nodiscard]] std::int64_t in_range(std::int64_t lo, std::int64_t hi) const {
    const std::int64_t v = i64();
    if (v < lo || v > hi)
      fail(std::to_string(v) + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }
  /// Members of an object with integer values, sorted by key.
  [[nodiscard]] std::vector<std::pair<std::string, std::int64_t>> int_members() const {
    if (!j_.is_object()) fail("not an object");
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (const auto& [k, v] : j_.items()) out.emplace_back(k, Node(v, join(k.c_str())).i64());
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
  [[nodiscard]] DType dtype() const {
    const auto t = parse_dtype(str());
    if (!t) fail("unknown dtype");
    return *t;
  }
  [[nodiscard]] std::vector<std::int64_t> ints() const {
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < size(); ++i) out.push_back((*this)[i].i64());
    return out;
  }
  [[nodiscard]] std::vector<std::string> strs() const {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < size(); ++i) out.push_back((*this)[i].str());
    return out;
  }
  template <typename F>
  auto map(F f) const {
    std::vector<decltype(f(std::declval<Node>()))> out;
    for (std::size_t i = 0; i < size(); ++i) out.push_back(f((*this)[i]));
    return out;
  }
  [[noreturn]] void fail(const std::string& what) const { throw ReadError(path_ + ": " + what); }

 private:
  [[nodiscard]] std::string join(const char* key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  const json& j_;
  std::string path_;
};

PlanParam plan_param(const Node& n) {
  PlanParam p;
  p.name = n.at("name").str();
  p.dtype = n.at("dtype").dtype();
  p.global_shape = n.at("global_shape").ints();
  p.mesh = n.at("mesh").str();
  p.stage = n.at("stage").i32();
  if (!n.at("alias_of").is_null()) p.alias_of = n.at("alias_of").str();
  p.uneven = n.at("uneven").str();
  p.packed = n.has("packed");
  p.shards = n.at("shards").map([](const Node& s) {
    return PlanShard{s.at("ranks").str(), s.at("local_shape").ints(), s.at("global_offset").ints(),
                     s.at("padded_shape").ints()};
  });
  return p;
}

RankParam rank_param(const Node& n) {
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
  return p;
}

PlanRankStat rank_stat(const Node& n) {
  return {n.at("min").i64(), n.at("max").i64(), n.at("min_ranks").str(), n.at("max_ranks").str()};
}

MuonStageParam muon_stage_param(const Node& n) {
  MuonStageParam p;
  p.name = n.at("name").str();
  p.tensor_dim = n.at("tensor_dim").i32();
  p.split_sizes = n.at("split_sizes").ints();
  p.rank_shapes = n.at("rank_shapes").map([](const Node& s) { return s.ints(); });
  p.pad_shape = n.at("pad_shape").ints();
  p.offset = n.at("offset").i64();
  p.actual_numel = n.at("actual_numel").i64();
  p.padded_numel = n.at("padded_numel").i64();
  return p;
}

MuonStage muon_stage(const Node& n) {
  MuonStage s;
  s.axes = n.at("axes").strs();
  s.ranks = n.at("ranks").ints();
  s.index = n.at("index").i64();
  s.total_numel = n.at("total_numel").i64();
  s.gathered_numel = n.at("gathered_numel").i64();
  s.params = n.at("params").map(muon_stage_param);
  return s;
}

MuonGroup muon_group(const Node& n) {
  MuonGroup g;
  g.key = n.at("key").str();
  g.mesh = n.at("mesh").str();
  g.replicate_axes = n.at("replicate_axes").strs();
  g.replicate_coord = n.at("replicate_coord").ints();
  g.params = n.at("params").strs();
  g.owners = n.at("owners").map([](const Node& o) {
    return MuonOwner{o.at("param").str(), o.at("owner").ints(), o.at("is_owner").boolean()};
  });
  g.batches = n.at("batches").map([](const Node& b) {
    return MuonBatch{b.at("dtype").dtype(), b.at("stages").map(muon_stage)};
  });
  g.slice_back = n.at("slice_back").map([](const Node& s) {
    return MuonSliceBack{
        s.at("param").str(), s.at("steps").map([](const Node& st) {
          return SliceStep{st.at("dim").i32(), st.at("start").i64(), st.at("length").i64()};
        })};
  });
  return g;
}

Fsdp2Unit fsdp2_unit(const Node& n) {
  Fsdp2Unit u;
  u.name = n.at("name").str();
  u.mesh = n.at("mesh").str();
  const std::string units = n.at("units").str();
  if (units != "elements" && units != "bytes") n.at("units").fail("not 'elements' or 'bytes'");
  u.byte_units = units == "bytes";
  u.ranks = n.at("ranks").ints();
  u.index = n.at("index").i64();
  u.total = n.at("total").i64();
  u.total_bytes = n.at("total_bytes").i64();
  u.output_shape = n.at("output_shape").ints();
  u.params = n.at("params").map([](const Node& p) {
    return Fsdp2Param{p.at("name").str(),
                      p.at("shard_dim").i32(),
                      p.at("offset").i64(),
                      p.at("padded_numel").i64(),
                      p.at("padded_shape").ints(),
                      p.at("local_shape").ints(),
                      p.at("unsharded_shape").ints()};
  });
  return u;
}

Buffer buffer(const Node& n) {
  Buffer b;
  const std::string kind = n.at("kind").str();
  if (kind == "muon_allgather") {
    b.kind = BufferKind::MuonAllGather;
    b.alignment_bytes = n.at("alignment_bytes").i64();
    b.max_batch_numel = n.at("max_batch_numel").i64();
    b.groups = n.at("groups").map(muon_group);
  } else if (kind == "fsdp2_allgather") {
    b.kind = BufferKind::Fsdp2AllGather;
    b.units = n.at("units").map(fsdp2_unit);
  } else {
    n.at("kind").fail("unknown buffer kind '" + kind + "'");
  }
  b.not_communicated = n.at("not_communicated").strs();
  return b;
}

bool is_hex_digest(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

ManifestEntry manifest_entry(const Node& n, bool rank_file) {
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
void check_rank_files(const Node& files, const ManifestFile& m, std::int64_t count,
                      const Node& ranks) {
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

template <typename T, typename F>
std::optional<T> parse_with(std::string_view text, std::string& error, F read) {
  try {
    const json j = json::parse(text);
    return read(Node(j, ""));
  } catch (const json::exception& e) {
    error = e.what();
  } catch (const ReadError& e) {
    error = e.what();
  }
  return std::nullopt;
}

}  // namespace

std::optional<PlanFile> parse_plan_file(std::string_view text, std::string& error) {
  return parse_with<PlanFile>(text, error, [](const Node& n) {
    PlanFile f;
    f.world_size = n.at("world_size").in_range(1, kMaxWorldSize);
    f.model_sha256 = n.at("inputs").at("model").at("sha256").str();
    f.recipe_sha256 = n.at("inputs").at("recipe").at("sha256").str();
    f.params = n.at("params").map(plan_param);
    const auto axes = [](const Node& a) {
      return PlanMeshAxis{a.at("name").str(), a.at("size").in_range(1, kMaxWorldSize)};
    };
    f.dense = n.at("meshes").at("dense").map(axes);
    if (!n.at("meshes").at("expert").is_null()) f.expert = n.at("meshes").at("expert").map(axes);
    if (const Node pp = n.at("pipeline"); !pp.is_null()) {
      f.pipeline_axis = pp.at("axis").str();
      f.num_stages = pp.at("num_stages").in_range(1, kMaxWorldSize);
    }
    const Node sum = n.at("summary");
    f.summary_num_params = sum.at("num_params").i64();
    f.per_rank_param_bytes = rank_stat(sum.at("per_rank_param_bytes"));
    f.per_rank_padded_param_bytes = rank_stat(sum.at("per_rank_padded_param_bytes"));
    return f;
  });
}

std::optional<RankFile> parse_rank_file(std::string_view text, std::string& error) {
  return parse_with<RankFile>(text, error, [](const Node& n) {
    RankFile f;
    f.rank = n.at("rank").i64();
    f.world_size = n.at("world_size").i64();
    f.stage = n.at("stage").i32();
    f.dense = n.at("coords").at("dense").int_members();
    if (!n.at("coords").at("expert").is_null())
      f.expert = n.at("coords").at("expert").int_members();
    f.params = n.at("params").map(rank_param);
    f.buffers = n.at("buffers").map(buffer);
    const Node t = n.at("totals");
    f.totals = {t.at("param_bytes").i64(), t.at("padded_param_bytes").i64(),
                t.at("num_params").i64()};
    return f;
  });
}

std::optional<ManifestFile> parse_manifest_file(std::string_view text, std::string& error) {
  return parse_with<ManifestFile>(text, error, [](const Node& n) {
    if (n.at("format").str() != "shardc.manifest/v1") n.at("format").fail("not shardc.manifest/v1");
    ManifestFile m;
    m.world_size = n.at("world_size").in_range(1, kMaxWorldSize);
    m.model_sha256 = n.at("inputs").at("model").at("sha256").str();
    m.recipe_sha256 = n.at("inputs").at("recipe").at("sha256").str();
    m.plan = manifest_entry(n.at("plan"), false);
    if (m.plan.path != "plan.json") n.at("plan").at("path").fail("not 'plan.json'");
    const Node rf = n.at("rank_files");
    m.ranks = rf.at("ranks").str();
    const std::int64_t count = rf.at("count").i64();
    m.rank_files = rf.at("files").map([](const Node& f) { return manifest_entry(f, true); });
    check_rank_files(rf.at("files"), m, count, rf.at("ranks"));
    return m;
  });
}

}  // namespace shardc::readback
