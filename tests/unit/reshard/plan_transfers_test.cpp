#include <doctest/doctest.h>

#include <map>

#include "reshard/reshard.hpp"

using namespace shardc;
using namespace shardc::reshard;

namespace {

RankSet ranks(std::vector<std::int64_t> sorted) { return RankSet::from_sorted(sorted); }

// A [rows, cols] float32 param split on dim `dim` into `parts` (chunk), part
// k held by `holders[k]`.
LayoutParam split(const std::string& name, Shape shape, int dim,
                  const std::vector<std::vector<std::int64_t>>& holders) {
  LayoutParam param;
  param.name = name;
  param.dtype = DType::Float32;
  param.global_shape = shape;
  const auto parts = static_cast<std::int64_t>(holders.size());
  const std::int64_t len = shape[static_cast<std::size_t>(dim)];
  const std::int64_t chunk = (len + parts - 1) / parts;
  for (std::int64_t k = 0; k < parts; ++k) {
    Box box{Shape(shape.size(), 0), shape};
    const std::int64_t start = std::min(len, k * chunk);
    box.offset[static_cast<std::size_t>(dim)] = start;
    box.shape[static_cast<std::size_t>(dim)] = std::min(len, start + chunk) - start;
    param.classes.push_back({box, ranks(holders[static_cast<std::size_t>(k)]), {}});
  }
  return param;
}

Layout layout(std::int64_t world, std::vector<LayoutParam> params) {
  Layout out;
  out.label = "plan";
  out.world_size = world;
  out.params = std::move(params);
  return out;
}

// Every listed rank's reads, by (rank, param name).
std::map<std::pair<std::int64_t, std::string>, RankParamReads> listing(const Layout& layout_a,
                                                                       const Layout& layout_b,
                                                                       const Result& result,
                                                                       const Options& opt) {
  std::vector<std::int64_t> all;
  for (std::int64_t i = 0; i < layout_b.world_size; ++i) all.push_back(i);
  std::map<std::pair<std::int64_t, std::string>, RankParamReads> out;
  for_each_rank_reads(layout_a, layout_b, result, all, opt,
                      [&](std::int64_t rank, const auto& list) {
                        for (const auto& rp : list)
                          out[{rank, layout_b.params[rp.b_param].name}] = rp;
                      });
  return out;
}

}  // namespace

TEST_CASE("row split on 2 ranks to column split on 4 ranks: pieces, bytes, in place") {
  // A: w[8, 6] rows 0-3 on rank 0, rows 4-7 on rank 1 (world 2).
  // B: columns in 4 chunks of 2, 2, 2, 0 on ranks 0-3 (world 4): rank 3 empty.
  const Layout layout_a = layout(2, {split("w", {8, 6}, 0, {{0}, {1}})});
  const Layout layout_b = layout(4, {split("w", {8, 6}, 1, {{0}, {1}, {2}, {3}})});
  DiagnosticSink sink;
  const Result result = plan_reshard(layout_a, layout_b, {}, sink);
  REQUIRE_FALSE(sink.has_errors());
  CHECK(result.totals.pieces == 6);  // 3 non-empty B classes x 2 A classes
  CHECK(result.dest_bytes == std::vector<std::int64_t>{64, 64, 64, 0});
  // Rank 0 already holds rows 0-3 of its columns 0-1; rank 1 rows 4-7 of columns 2-3.
  CHECK(result.in_place_bytes == std::vector<std::int64_t>{32, 32, 0, 0});
  CHECK(result.moved_bytes == std::vector<std::int64_t>{32, 32, 64, 0});
  CHECK(result.totals.moved_bytes == 128);
  const auto reads = listing(layout_a, layout_b, result, {});
  const auto& r2 = reads.at({2, "w"}).reads;
  REQUIRE(r2.size() == 2);
  CHECK(r2[0].src == 0);
  CHECK(r2[0].box == Box{{0, 4}, {4, 2}});
  CHECK(r2[0].dst_offset == Shape{0, 0});
  CHECK(r2[0].src_offset == Shape{0, 4});
  CHECK(r2[1].src == 1);
  CHECK(r2[1].dst_offset == Shape{4, 0});
  CHECK(r2[1].src_offset == Shape{0, 4});
  CHECK(reads.at({3, "w"}).reads.empty());  // empty shard: held, nothing to read
}

TEST_CASE("replicas: each box is read once, from self, the same node or the lowest rank") {
  // A: replicated on ranks 4-7 (world 8). B: 2-way row split, each half on 4 ranks.
  const Layout layout_a = layout(8, {split("w", {4, 4}, 0, {{4, 5, 6, 7}})});
  const Layout layout_b = layout(8, {split("w", {4, 4}, 0, {{0, 2, 4, 6}, {1, 3, 5, 7}})});
  DiagnosticSink sink;
  const Result result = plan_reshard(layout_a, layout_b, {}, sink);
  REQUIRE_FALSE(sink.has_errors());
  CHECK(result.in_place_bytes == std::vector<std::int64_t>{0, 0, 0, 0, 32, 32, 32, 32});
  const auto lowest = listing(layout_a, layout_b, result, {});
  CHECK(lowest.at({2, "w"}).reads.at(0).src == 4);
  CHECK(lowest.at({6, "w"}).reads.at(0).src == 6);
  const auto nodes =
      listing(layout_a, layout_b, result, Options{2});  // nodes {0,1} {2,3} {4,5} {6,7}
  CHECK(nodes.at({2, "w"}).reads.at(0).src == 4);       // no holder on node 1
  CHECK(nodes.at({5, "w"}).reads.at(0).src == 5);
  for (const auto& [key, rp] : nodes) {
    std::int64_t bytes = 0;
    for (const auto& rd : rp.reads) bytes += rd.bytes;
    CHECK(bytes == result.dest_bytes[static_cast<std::size_t>(key.first)]);
  }
}

TEST_CASE("a smaller target world: ranks beyond it only send") {
  const Layout layout_a = layout(4, {split("w", {8}, 0, {{0}, {1}, {2}, {3}})});
  const Layout layout_b = layout(2, {split("w", {8}, 0, {{0}, {1}})});
  DiagnosticSink sink;
  const Result result = plan_reshard(layout_a, layout_b, {}, sink);
  REQUIRE_FALSE(sink.has_errors());
  CHECK(result.dest_bytes == std::vector<std::int64_t>{16, 16});
  CHECK(result.in_place_bytes == std::vector<std::int64_t>{8, 0});
  const auto reads = listing(layout_a, layout_b, result, {});
  REQUIRE(reads.at({1, "w"}).reads.size() == 2);
  CHECK(reads.at({1, "w"}).reads[0].src == 2);
  CHECK(reads.at({1, "w"}).reads[1].src == 3);
}

TEST_CASE("shape or dtype differences and missing params are errors at plan B's param") {
  const Layout layout_a =
      layout(2, {split("w", {8, 6}, 0, {{0}, {1}}), split("v", {4}, 0, {{0, 1}})});
  Layout layout_b = layout(2, {split("w", {8, 7}, 0, {{0}, {1}}), split("v", {4}, 0, {{0, 1}}),
                               split("u", {4}, 0, {{0, 1}})});
  layout_b.params[1].dtype = DType::BFloat16;
  layout_b.params[0].loc = {"b.json", 12, 5};
  DiagnosticSink sink;
  const Result result = plan_reshard(layout_a, layout_b, {}, sink);
  CHECK(sink.error_count() == 3);
  REQUIRE(sink.items().size() == 3);
  CHECK(sink.items()[0].code == shardc::DiagCode::EReshardMismatch);
  CHECK(sink.items()[0].loc.line == 12);
  CHECK(sink.items()[0].message.find("[8, 6] float32") != std::string::npos);
  CHECK(sink.items()[1].code == shardc::DiagCode::EReshardMismatch);
  CHECK(sink.items()[2].code == shardc::DiagCode::EReshardMissing);
  CHECK_FALSE(sink.items()[2].hint.empty());
  CHECK(result.params[0].pieces.empty());
}

TEST_CASE("A shards that do not tile B's box are a coverage error") {
  Layout layout_a = layout(2, {split("w", {8}, 0, {{0}, {1}})});
  layout_a.params[0].classes.pop_back();  // rows 4-7 held by nobody
  const Layout layout_b = layout(2, {split("w", {8}, 0, {{0, 1}})});
  DiagnosticSink sink;
  plan_reshard(layout_a, layout_b, {}, sink);
  REQUIRE(sink.has_errors());
  CHECK(sink.items()[0].code == shardc::DiagCode::EReshardCoverage);
}

TEST_CASE("a tied alias on its source's stage shares storage: not transferred") {
  Layout layout_a =
      layout(2, {split("emb", {4, 2}, 0, {{0}, {1}}), split("head", {4, 2}, 0, {{0}, {1}})});
  layout_a.params[1].alias_of = "emb";
  layout_a.params[1].shares_storage = true;
  Layout layout_b =
      layout(2, {split("emb", {4, 2}, 1, {{0}, {1}}), split("head", {4, 2}, 1, {{0}, {1}})});
  layout_b.params[1].alias_of = "emb";
  layout_b.params[1].shares_storage = true;
  DiagnosticSink sink;
  const Result result = plan_reshard(layout_a, layout_b, {}, sink);
  REQUIRE_FALSE(sink.has_errors());
  CHECK(result.totals.shared_aliases == 1);
  CHECK(result.totals.params == 1);
  CHECK(result.dest_bytes == std::vector<std::int64_t>{16, 16});  // emb only
  const auto reads = listing(layout_a, layout_b, result, {});
  CHECK(reads.at({0, "head"}).shares_storage);
  CHECK(reads.at({0, "head"}).reads.empty());
  CHECK(reads.at({0, "emb"}).reads.size() == 2);
}

TEST_CASE("untied -> tied drops plan A's values (E-RESHARD-MISMATCH), tied -> untied copies") {
  const Layout untied =
      layout(2, {split("emb", {4, 2}, 0, {{0}, {1}}), split("head", {4, 2}, 0, {{0}, {1}})});
  Layout tied = untied;
  tied.params[1].alias_of = "emb";
  tied.params[1].shares_storage = true;
  DiagnosticSink sink;
  plan_reshard(untied, tied, {}, sink);
  REQUIRE(sink.error_count() == 1);
  CHECK(sink.items()[0].code == shardc::DiagCode::EReshardMismatch);
  CHECK(sink.items()[0].message.find("a param of its own in plan A") != std::string::npos);
  DiagnosticSink back;
  const Result result = plan_reshard(tied, untied, {}, back);
  CHECK_FALSE(back.has_errors());
  CHECK(result.totals.params == 2);  // head read from the embedding's holders
}

namespace {

// w [6, 2] packed as q|k|v (2 rows each) and split over tp 2 per part: rank t
// holds rows t, 2 + t, 4 + t, concatenated in its local tensor.
LayoutParam packed_qkv() {
  LayoutParam param;
  param.name = "qkv";
  param.dtype = DType::Float32;
  param.global_shape = {6, 2};
  for (std::int64_t t = 0; t < 2; ++t) {
    ShardClassBox shard_class{Box{{t, 0}, {3, 2}}, ranks({t}), {}};
    for (std::int64_t part = 0; part < 3; ++part)
      shard_class.parts.push_back({Box{{2 * part + t, 0}, {1, 2}}, Shape{part, 0}});
    param.classes.push_back(std::move(shard_class));
  }
  return param;
}

}  // namespace

TEST_CASE("packed pieces: reads land at each part's local offset") {
  const Layout layout_a = layout(2, {split("qkv", {6, 2}, 0, {{0}, {1}})});  // rows 0-2 | 3-5
  const Layout layout_b = layout(2, {packed_qkv()});
  DiagnosticSink sink;
  const Result result = plan_reshard(layout_a, layout_b, {}, sink);
  REQUIRE_FALSE(sink.has_errors());
  CHECK(result.dest_bytes == std::vector<std::int64_t>{24, 24});
  CHECK(result.in_place_bytes == std::vector<std::int64_t>{16, 16});  // rows 0, 2 | 3, 5
  const auto reads = listing(layout_a, layout_b, result, {});
  const auto& r1 = reads.at({1, "qkv"}).reads;  // global rows 1, 3, 5
  REQUIRE(r1.size() == 3);
  CHECK(r1[0].src == 0);
  CHECK(r1[0].dst_offset == Shape{0, 0});
  CHECK(r1[0].src_offset == Shape{1, 0});
  CHECK(r1[1].src == 1);
  CHECK(r1[1].dst_offset == Shape{1, 0});
  CHECK(r1[1].src_offset == Shape{0, 0});
  CHECK(r1[2].dst_offset == Shape{2, 0});
  CHECK(r1[2].src_offset == Shape{2, 0});

  // And back: packed sources are sliced at their parts' local offsets.
  DiagnosticSink sink2;
  const Result back = plan_reshard(layout_b, layout_a, {}, sink2);
  REQUIRE_FALSE(sink2.has_errors());
  const auto lb = listing(layout_b, layout_a, back, {});
  const auto& r0 = lb.at({0, "qkv"}).reads;  // global rows 0, 1, 2
  REQUIRE(r0.size() == 3);
  std::map<std::int64_t, const Read*> by_row;
  for (const auto& rd : r0) by_row[rd.box.offset[0]] = &rd;
  CHECK(by_row.at(0)->src == 0);
  CHECK(by_row.at(0)->src_offset == Shape{0, 0});
  CHECK(by_row.at(1)->src == 1);
  CHECK(by_row.at(1)->src_offset == Shape{0, 0});
  CHECK(by_row.at(1)->dst_offset == Shape{1, 0});
  CHECK(by_row.at(2)->src == 0);
  CHECK(by_row.at(2)->src_offset == Shape{1, 0});
}

namespace {

// qkv [4, 2] as q (2 rows) | k (1) | v (1) over tp 2 with k and v replicated (replicas 2,
// vLLM's num_kv_head_replicas): rank t holds q row t, then k row 2 and v row 3 -- the same k
// and v boxes in both shard classes.
LayoutParam replicated_kv() {
  LayoutParam param;
  param.name = "qkv";
  param.dtype = DType::Float32;
  param.global_shape = {4, 2};
  for (std::int64_t t = 0; t < 2; ++t) {
    ShardClassBox shard_class{Box{{t, 0}, {3, 2}}, ranks({t}), {}};
    shard_class.parts.push_back({Box{{t, 0}, {1, 2}}, Shape{0, 0}});
    shard_class.parts.push_back({Box{{2, 0}, {1, 2}}, Shape{1, 0}});
    shard_class.parts.push_back({Box{{3, 0}, {1, 2}}, Shape{2, 0}});
    param.classes.push_back(std::move(shard_class));
  }
  return param;
}

}  // namespace

TEST_CASE("a replicated part's box held by several classes is read once, from the best holder") {
  // A: the replicated layout on ranks 0-1. B: rows 0-1 on rank 2, rows 2-3 on rank 3 (world 4).
  const Layout layout_a = layout(4, {replicated_kv()});
  const Layout layout_b = layout(4, {split("qkv", {4, 2}, 0, {{2}, {3}})});
  DiagnosticSink sink;
  const Result result = plan_reshard(layout_a, layout_b, {}, sink);
  REQUIRE_FALSE(sink.has_errors());  // k and v are not counted twice
  CHECK(result.dest_bytes == std::vector<std::int64_t>{0, 0, 16, 16});
  CHECK(result.totals.pieces == 4);  // q0, q1 for rank 2; k, v (one box each) for rank 3
  const auto reads = listing(layout_a, layout_b, result, {});
  const auto& r3 = reads.at({3, "qkv"}).reads;
  REQUIRE(r3.size() == 2);
  CHECK(r3[0].src == 0);  // the lowest of the holders 0 and 1
  CHECK(r3[0].src_offset == Shape{1, 0});
  // With nodes of 2 ranks, rank 3's node holds no copy: still the lowest holder.
  const auto ln = listing(layout_a, layout_b, result, Options{2});
  CHECK(ln.at({3, "qkv"}).reads[0].src == 0);

  // Into the replicated layout: each rank reads its own q row and the k, v rows; rank 1 holds
  // k and v in place when A gives it rows 2-3.
  const Layout a2 = layout(2, {split("qkv", {4, 2}, 0, {{0}, {1}})});
  const Layout b2 = layout(2, {replicated_kv()});
  DiagnosticSink sink2;
  const Result r2 = plan_reshard(a2, b2, {}, sink2);
  REQUIRE_FALSE(sink2.has_errors());
  CHECK(r2.dest_bytes == std::vector<std::int64_t>{24, 24});
  CHECK(r2.in_place_bytes == std::vector<std::int64_t>{8, 16});  // rank 0: q0; rank 1: k, v
  const auto l2 = listing(a2, b2, r2, {});
  const auto& r0 = l2.at({0, "qkv"}).reads;
  REQUIRE(r0.size() == 3);
  CHECK(r0[1].src == 1);
  CHECK(r0[1].dst_offset == Shape{1, 0});
  CHECK(r0[1].src_offset == Shape{0, 0});

  // Replicated to replicated: in place where the holder is the destination, any class.
  DiagnosticSink sink3;
  const Result r3r = plan_reshard(b2, b2, {}, sink3);
  REQUIRE_FALSE(sink3.has_errors());
  CHECK(r3r.totals.moved_bytes == 0);
  const auto l3 = listing(b2, b2, r3r, {});
  for (const auto& rd : l3.at({1, "qkv"}).reads) CHECK(rd.src == 1);
}

TEST_CASE(
    "coverage errors are one diagnostic for all params, and the hint knows who built plan A") {
  std::vector<LayoutParam> params;
  for (const char* name : {"w0", "w1", "w2", "w3", "w4"})
    params.push_back(split(name, {8}, 0, {{0}, {1}}));
  Layout layout_a = layout(2, params);
  for (auto& param : layout_a.params)
    param.classes.pop_back();  // rows 4-7 of every param held by nobody
  const Layout layout_b = layout(2, params);
  DiagnosticSink sink;
  plan_reshard(layout_a, layout_b, {}, sink);
  REQUIRE(sink.items().size() == 1);
  const Diagnostic& d = sink.items()[0];
  CHECK(d.code == shardc::DiagCode::EReshardCoverage);
  CHECK(d.param == "w0");
  CHECK(d.message.find("so for 4 more params ('w1', 'w2', 'w3', ...)") != std::string::npos);
  CHECK(d.hint.find("was edited") != std::string::npos);
  // A plan shardc built in memory (MODEL RECIPE) is never the user's edit.
  layout_a.in_memory = true;
  DiagnosticSink sink2;
  plan_reshard(layout_a, layout_b, {}, sink2);
  REQUIRE(sink2.items().size() == 1);
  CHECK(sink2.items()[0].hint.find("edited") == std::string::npos);
  CHECK(sink2.items()[0].hint.find("shardc bug") != std::string::npos);
}
