// Reads plan.json and rank files back into typed structs (for `verify`).
// Every access goes through `Node`, which knows its JSON path, so a
// malformed file is reported as e.g. "buffers[0].groups[2].batches: missing".
#include "shardc/readback.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

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
    if (!j_.is_number_integer()) fail("not an integer");
    return j_.get<std::int64_t>();
  }
  [[nodiscard]] int i32() const { return static_cast<int>(i64()); }
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
  p.shards = n.at("shards").map([](const Node& s) {
    return PlanShard{s.at("ranks").str(), s.at("local_shape").ints(), s.at("global_offset").ints(),
                     s.at("padded_shape").ints()};
  });
  return p;
}

RankParam rank_param(const Node& n) {
  return {n.at("name").str(), n.at("local_shape").ints(), n.at("global_offset").ints(),
          n.at("padded_shape").ints(), !n.at("alias_of").is_null()};
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
    f.world_size = n.at("world_size").i64();
    if (f.world_size < 1) n.at("world_size").fail("must be >= 1");
    f.params = n.at("params").map(plan_param);
    const auto axes = [](const Node& a) {
      return PlanMeshAxis{a.at("name").str(), a.at("size").i64()};
    };
    f.dense = n.at("meshes").at("dense").map(axes);
    if (!n.at("meshes").at("expert").is_null()) f.expert = n.at("meshes").at("expert").map(axes);
    return f;
  });
}

std::optional<RankFile> parse_rank_file(std::string_view text, std::string& error) {
  return parse_with<RankFile>(text, error, [](const Node& n) {
    RankFile f;
    f.rank = n.at("rank").i64();
    f.stage = n.at("stage").i32();
    f.params = n.at("params").map(rank_param);
    f.buffers = n.at("buffers").map(buffer);
    return f;
  });
}

}  // namespace shardc::readback
