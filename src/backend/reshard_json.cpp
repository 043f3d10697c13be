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

void write_stats(Writer& writer, std::string_view key, std::vector<std::int64_t> per_rank) {
  std::sort(per_rank.begin(), per_rank.end());
  writer.key(key).begin_object();
  if (per_rank.empty()) {
    writer.member("min", 0).member("median", 0).member("max", 0);
  } else {
    writer.member("min", per_rank.front())
        .member("median", per_rank[(per_rank.size() - 1) / 2])
        .member("max", per_rank.back());
  }
  writer.end_object();
}

void write_header(Writer& writer, const Layout& from, const Layout& to, const Result& result,
                  const Options& opt) {
  writer.line_break().member("format", "shardc.reshard/v1");
  writer.line_break().key("generator").begin_object();
  writer.member("name", "shardc").member("version", SHARDC_VERSION).end_object();
  writer.line_break().key("from").begin_object();
  writer.member("plan", from.label).member("world_size", from.world_size).end_object();
  writer.line_break().key("to").begin_object();
  writer.member("plan", to.label).member("world_size", to.world_size).end_object();
  writer.line_break().key("ranks_per_node");
  if (opt.ranks_per_node) {
    writer.value(*opt.ranks_per_node);
  } else {
    writer.null();
  }
  const Totals& totals = result.totals;
  writer.line_break().key("totals").begin_object();
  writer.member("dest_bytes", totals.dest_bytes).member("moved_bytes", totals.moved_bytes);
  writer.member("in_place_bytes", totals.in_place_bytes).member("params", totals.params);
  writer.member("shared_aliases", totals.shared_aliases)
      .member("pieces", totals.pieces)
      .end_object();
  writer.line_break().key("per_rank").begin_object();
  write_stats(writer, "dest_bytes", result.dest_bytes);
  write_stats(writer, "moved_bytes", result.moved_bytes);
  write_stats(writer, "in_place_bytes", result.in_place_bytes);
  writer.end_object();
}

void write_param(Writer& writer, const Layout& to, const RankParamReads& rp) {
  const LayoutParam& param = to.params[rp.b_param];
  const Box& box = param.classes[rp.dst_class].box;
  writer.line_break().begin_object();
  writer.member("name", param.name).member("dtype", dtype_name(param.dtype));
  writer.member_ints("global_shape", param.global_shape);
  writer.member_ints("local_shape", box.shape).member_ints("global_offset", box.offset);
  writer.key("shares_storage_with");
  if (rp.shares_storage) {
    writer.value(*param.alias_of);
  } else {
    writer.null();
  }
  writer.key("reads").begin_array();
  for (const Read& rd : rp.reads) {
    writer.begin_object().member("src", rd.src);
    writer.member_ints("global_offset", rd.box.offset).member_ints("shape", rd.box.shape);
    writer.member_ints("dst_offset", rd.dst_offset).member_ints("src_offset", rd.src_offset);
    writer.member("bytes", rd.bytes).end_object();
  }
  writer.end_array().end_object();
}

}  // namespace

std::string render_reshard_json(const Layout& from, const Layout& to, const Result& result,
                                const Options& opt, const std::vector<std::int64_t>& ranks) {
  std::string out;
  Writer writer(out);
  writer.begin_object();
  write_header(writer, from, to, result, opt);
  writer.line_break().key("ranks").begin_array();
  for_each_rank_reads(from, to, result, ranks, opt,
                      [&](std::int64_t rank, const std::vector<RankParamReads>& list) {
                        const auto rank_index = static_cast<std::size_t>(rank);
                        writer.line_break().begin_object().member("rank", rank);
                        writer.member("dest_bytes", result.dest_bytes[rank_index]);
                        writer.member("moved_bytes", result.moved_bytes[rank_index]);
                        writer.member("in_place_bytes", result.in_place_bytes[rank_index]);
                        writer.key("params").begin_array();
                        for (const auto& rp : list) write_param(writer, to, rp);
                        writer.end_array().end_object();
                      });
  writer.line_break().end_array();
  writer.line_break().end_object();
  out += "\n";
  return out;
}

}  // namespace shardc
