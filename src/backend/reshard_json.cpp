// The reshard listing (`shardc reshard ... -o FILE` / `--format json`,
// schemas/reshard.schema.json), streamed: per-rank reads are expanded one
// rank at a time and written straight into the output string.
#include <algorithm>
#include <string>

#include "backend/backend.hpp"
#include "backend/json_writer.hpp"

namespace shardc {
namespace {

using json::Writer;
using namespace reshard;

void write_stats(Writer& w, std::string_view key, std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  w.key(key).begin_object();
  if (v.empty()) {
    w.member("min", 0).member("median", 0).member("max", 0);
  } else {
    w.member("min", v.front()).member("median", v[(v.size() - 1) / 2]).member("max", v.back());
  }
  w.end_object();
}

void write_header(Writer& w, const Layout& a, const Layout& b, const Result& r,
                  const Options& opt) {
  w.line_break().member("format", "shardc.reshard/v1");
  w.line_break().key("generator").begin_object();
  w.member("name", "shardc").member("version", SHARDC_VERSION).end_object();
  w.line_break().key("from").begin_object();
  w.member("plan", a.label).member("world_size", a.world_size).end_object();
  w.line_break().key("to").begin_object();
  w.member("plan", b.label).member("world_size", b.world_size).end_object();
  w.line_break().key("ranks_per_node");
  if (opt.ranks_per_node) {
    w.value(*opt.ranks_per_node);
  } else {
    w.null();
  }
  const Totals& t = r.totals;
  w.line_break().key("totals").begin_object();
  w.member("dest_bytes", t.dest_bytes).member("moved_bytes", t.moved_bytes);
  w.member("in_place_bytes", t.in_place_bytes).member("params", t.params);
  w.member("shared_aliases", t.shared_aliases).member("pieces", t.pieces).end_object();
  w.line_break().key("per_rank").begin_object();
  write_stats(w, "dest_bytes", r.dest_bytes);
  write_stats(w, "moved_bytes", r.moved_bytes);
  write_stats(w, "in_place_bytes", r.in_place_bytes);
  w.end_object();
}

void write_param(Writer& w, const Layout& b, const RankParamReads& rp) {
  const LayoutParam& p = b.params[rp.b_param];
  const Box& box = p.classes[rp.dst_class].box;
  w.line_break().begin_object();
  w.member("name", p.name).member("dtype", dtype_name(p.dtype));
  w.member_ints("global_shape", p.global_shape);
  w.member_ints("local_shape", box.shape).member_ints("global_offset", box.offset);
  w.key("shares_storage_with");
  if (rp.shares_storage) {
    w.value(*p.alias_of);
  } else {
    w.null();
  }
  w.key("reads").begin_array();
  for (const Read& rd : rp.reads) {
    w.begin_object().member("src", rd.src);
    w.member_ints("global_offset", rd.box.offset).member_ints("shape", rd.box.shape);
    w.member_ints("dst_offset", rd.dst_offset).member_ints("src_offset", rd.src_offset);
    w.member("bytes", rd.bytes).end_object();
  }
  w.end_array().end_object();
}

}  // namespace

std::string render_reshard_json(const Layout& a, const Layout& b, const Result& r,
                                const Options& opt, const std::vector<std::int64_t>& ranks) {
  std::string out;
  Writer w(out);
  w.begin_object();
  write_header(w, a, b, r, opt);
  w.line_break().key("ranks").begin_array();
  for_each_rank_reads(a, b, r, ranks, opt,
                      [&](std::int64_t rank, const std::vector<RankParamReads>& list) {
                        const auto u = static_cast<std::size_t>(rank);
                        w.line_break().begin_object().member("rank", rank);
                        w.member("dest_bytes", r.dest_bytes[u]);
                        w.member("moved_bytes", r.moved_bytes[u]);
                        w.member("in_place_bytes", r.in_place_bytes[u]);
                        w.key("params").begin_array();
                        for (const auto& rp : list) write_param(w, b, rp);
                        w.end_array().end_object();
                      });
  w.line_break().end_array();
  w.line_break().end_object();
  out += "\n";
  return out;
}

}  // namespace shardc
