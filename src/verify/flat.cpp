// `shardc verify` for megatron_distopt and deepspeed_zero buffers (the flat
// optimizer buffers of src/planner/buffers.hpp): per DP group, every
// member's rank file states the same buffer (pieces, buckets, padding); each
// bucket cut into `degree` equal contiguous shards gives member k exactly the
// ranges its file says it owns; over the group every element of every param
// is owned exactly once, and the padding is what the shards hold beyond the
// owned elements. Megatron's and DeepSpeed's padding rules are checked on
// the numbers (64-element param starts, bucket ends on lcm(dp, 128[, 2^16]);
// 2 x dp for a ZeRO-1/2 flat group; dp for a ZeRO-3 partition).
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "planner/buffers.hpp"
#include "verify/engine.hpp"

namespace shardc::verify {
namespace {

using readback::FlatBuffer;

std::string where(const FlatBuffer& fb, std::int64_t rank) {
  return std::string("flat buffer (") + fb.mesh + (fb.expert ? ", expert" : "") + ", chunk " +
         std::to_string(fb.model_chunk) + ", " + std::string(dtype_name(fb.param_dtype)) + "/" +
         std::string(dtype_name(fb.grad_dtype)) + ") rank " + std::to_string(rank);
}

bool same_buffer(const FlatBuffer& left, const FlatBuffer& right) {
  return left.mesh == right.mesh && left.expert == right.expert &&
         left.model_chunk == right.model_chunk && left.param_dtype == right.param_dtype &&
         left.grad_dtype == right.grad_dtype && left.ranks == right.ranks;
}

const FlatBuffer* find_buffer(const RankFile& rank_file, std::size_t buffer_index,
                              const FlatBuffer& like) {
  if (buffer_index >= rank_file.buffers.size()) return nullptr;
  for (const FlatBuffer& fb : rank_file.buffers[buffer_index].flat)
    if (same_buffer(fb, like)) return &fb;
  return nullptr;
}

// Buckets tile [0, numel), entries lie in order inside their bucket, the
// framework's padding rule holds; "" when right.
std::string structure_error(const readback::Buffer& buf, const FlatBuffer& fb) {
  const auto dp = static_cast<std::int64_t>(fb.ranks.size());  // >= 1: load_members
  std::int64_t at = 0;
  for (std::size_t j = 0; j < fb.buckets.size(); ++j) {
    const auto& [start, end, unpadded] = fb.buckets[j];
    if (start != at || end < start || (end - start) % dp != 0)
      return "bucket " + std::to_string(j) + " [" + std::to_string(start) + ", " +
             std::to_string(end) + ") does not follow at " + std::to_string(at) +
             " with a size divisible by " + std::to_string(dp);
    at = end;
  }
  if (fb.numel != at)
    return "numel " + std::to_string(fb.numel) + " != last bucket end " + std::to_string(at);
  std::int64_t prev_end = 0;
  std::vector<std::int64_t> last_end(fb.buckets.size(), -1);
  for (std::size_t k = 0; k < fb.entries.size(); ++k) {
    const readback::FlatEntry& entry = fb.entries[k];
    if (entry.bucket < 0 || entry.bucket >= static_cast<std::int64_t>(fb.buckets.size()))
      return entry.name + ": bucket " + std::to_string(entry.bucket) + " out of range";
    const auto& bk = fb.buckets[static_cast<std::size_t>(entry.bucket)];
    if (entry.numel < 0 || entry.start < prev_end || entry.start < bk[0] ||
        entry.start + entry.numel > bk[1])
      return entry.name + ": piece [" + std::to_string(entry.start) + ", " +
             std::to_string(entry.start + entry.numel) +
             ") overlaps the previous one or leaves bucket " + std::to_string(entry.bucket);
    prev_end = entry.start + entry.numel;
    last_end[static_cast<std::size_t>(entry.bucket)] = prev_end;
    if (buf.kind == BufferKind::MegatronDistOpt && entry.start % 64 != 0)
      return entry.name + ": starts at " + std::to_string(entry.start) +
             ", not on 64 elements (Megatron's pad_param_start)";
  }
  for (std::size_t j = 0; j < fb.buckets.size(); ++j) {
    const auto& [start, end, unpadded] = fb.buckets[j];
    // Megatron closes a bucket before a shared_embedding param at that param's
    // 64-aligned start: its numel_unpadded then counts the alignment gap.
    const std::int64_t aligned = (last_end[j] + 63) / 64 * 64;
    const bool megatron = buf.kind == BufferKind::MegatronDistOpt;
    if (last_end[j] < 0 ||
        (unpadded != last_end[j] - start && !(megatron && unpadded == aligned - start)))
      return "bucket " + std::to_string(j) + ": numel_unpadded " + std::to_string(unpadded) +
             " is not its last piece's end - start";
    std::int64_t want = 0;
    if (buf.kind == BufferKind::MegatronDistOpt) {
      want = (last_end[j] + megatron_bucket_end_divisor(dp, buf.pad_for_high_nccl_busbw) - 1) /
             megatron_bucket_end_divisor(dp, buf.pad_for_high_nccl_busbw) *
             megatron_bucket_end_divisor(dp, buf.pad_for_high_nccl_busbw);
    } else {
      const std::int64_t align = buf.zero_stage == 3 ? dp : 2 * dp;
      want = start + (unpadded + align - 1) / align * align;
    }
    if (end != want)
      return "bucket " + std::to_string(j) + " ends at " + std::to_string(end) +
             ", padding gives " + std::to_string(want);
  }
  return "";
}

// How member k's buffer `mb` (nullptr: it has none like `fb`) differs from
// `fb`, the buffer of rank `rank`; "" when it does not.
std::string member_difference(const FlatBuffer* mb, const FlatBuffer& fb, std::size_t k,
                              std::int64_t rank) {
  const std::string theirs = ", rank " + std::to_string(rank) + "'s ";
  if (!mb) return "no such buffer in the member's file";
  if (mb->index != static_cast<std::int64_t>(k))
    return "index " + std::to_string(mb->index) + ", its position in ranks " +
           shape_text(fb.ranks) + " is " + std::to_string(k);
  if (mb->numel != fb.numel)
    return "numel " + std::to_string(mb->numel) + theirs + std::to_string(fb.numel);
  if (mb->bucket_size != fb.bucket_size)
    return "bucket_size " + std::to_string(mb->bucket_size) + theirs +
           std::to_string(fb.bucket_size);
  if (mb->buckets != fb.buckets) {
    std::size_t j = 0;
    while (j < mb->buckets.size() && j < fb.buckets.size() && mb->buckets[j] == fb.buckets[j]) ++j;
    const auto text = [&](const FlatBuffer& buffer) {
      return j < buffer.buckets.size() ? shape_text(std::vector<std::int64_t>(
                                             buffer.buckets[j].begin(), buffer.buckets[j].end()))
                                       : std::string("none");
    };
    return "bucket " + std::to_string(j) + " " + text(*mb) + theirs + text(fb);
  }
  return "";
}

struct Members {
  std::vector<const RankFile*> files;
  std::vector<const FlatBuffer*> buffers;
};

bool load_members(Context& cx, std::size_t buffer_index, const FlatBuffer& fb, std::int64_t rank,
                  Members& members) {
  if (fb.index < 0 || fb.index >= static_cast<std::int64_t>(fb.ranks.size()) ||
      fb.ranks[static_cast<std::size_t>(fb.index)] != rank) {
    cx.report.mismatch(where(fb, rank) + ": index " + std::to_string(fb.index) + " is not rank " +
                       std::to_string(rank) + " in " + shape_text(fb.ranks));
    return false;
  }
  for (std::size_t k = 0; k < fb.ranks.size(); ++k) {
    const RankFile* rank_file = cx.store.get(fb.ranks[k]);
    if (!rank_file) {
      if (cx.store.fatal.empty())
        cx.report.not_verifiable(where(fb, rank) + ": needs member rank " +
                                 std::to_string(fb.ranks[k]) + ", whose rank file is absent");
      return false;
    }
    const FlatBuffer* mb = find_buffer(*rank_file, buffer_index, fb);
    if (mb && mb->entries != fb.entries) {
      std::size_t i = 0;
      while (i < mb->entries.size() && i < fb.entries.size() && mb->entries[i] == fb.entries[i])
        ++i;
      const readback::FlatEntry& member_entry =
          i < mb->entries.size() ? mb->entries[i] : fb.entries[i];
      const readback::FlatEntry* own_entry = i < fb.entries.size() ? &fb.entries[i] : nullptr;
      cx.report.mismatch(
          where(fb, fb.ranks[k]) + " param " + member_entry.name + ": piece " + std::to_string(i) +
          " at " + std::to_string(member_entry.start) + " (" + std::to_string(member_entry.numel) +
          " elements), rank " + std::to_string(rank) + " has " +
          (own_entry ? own_entry->name + " at " + std::to_string(own_entry->start) : "none"));
      return false;
    }
    if (const std::string difference = member_difference(mb, fb, k, rank); !difference.empty()) {
      cx.report.mismatch(where(fb, fb.ranks[k]) + ": " + difference);
      return false;
    }
    members.files.push_back(rank_file);
    members.buffers.push_back(mb);
  }
  return true;
}

// The param's elements the buffer must hold: its local numel (ZeRO-1/2), or
// under ZeRO-3 the sum of the group's FSDP shards (the TP-local tensor). -1
// when a member does not hold it.
std::int64_t expected_numel(Context& cx, const readback::Buffer& buf, const Members& members,
                            const std::string& name) {
  if (buf.zero_stage != 3) {
    const readback::RankParam* held = cx.held(*members.files[0], name);
    return held ? numel(held->local_shape) : -1;
  }
  // A param FSDP leaves whole (0-d) is held whole by every member.
  std::int64_t sum = 0;
  std::set<Shape> offsets;
  for (const RankFile* rank_file : members.files) {
    const readback::RankParam* held = cx.held(*rank_file, name);
    if (!held) return -1;
    sum += numel(held->local_shape);
    offsets.insert(held->global_offset);
  }
  if (offsets.size() == 1) return numel(cx.held(*members.files[0], name)->local_shape);
  return sum;
}

void verify_group(Context& cx, const readback::Buffer& buf, const Members& members) {
  const FlatBuffer& fb = *members.buffers[0];
  const auto dp = static_cast<std::int64_t>(fb.ranks.size());
  if (const std::string error = structure_error(buf, fb); !error.empty())
    return cx.report.mismatch(where(fb, fb.ranks[0]) + ": " + error);
  // Shard k of bucket j is [start + k x size, start + (k + 1) x size): what
  // member k owns there is the pieces' intersection with it.
  std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> owned_by_param;
  for (std::size_t k = 0; k < members.buffers.size(); ++k) {
    const FlatBuffer& mb = *members.buffers[k];
    std::vector<readback::FlatOwned> want;
    std::int64_t shard_numel = 0;
    for (std::size_t j = 0; j < fb.buckets.size(); ++j) {
      const auto& [start, end, unpadded] = fb.buckets[j];
      const std::int64_t size = (end - start) / dp;
      shard_numel += size;
      const std::int64_t lo = start + static_cast<std::int64_t>(k) * size;
      const std::int64_t hi = lo + size;
      for (std::size_t i = 0; i < fb.entries.size(); ++i) {
        const readback::FlatEntry& entry = fb.entries[i];
        if (entry.bucket != static_cast<std::int64_t>(j)) continue;
        const std::int64_t from = std::max(lo, entry.start);
        const std::int64_t to = std::min(hi, entry.start + entry.numel);
        if (to > from)
          want.push_back({static_cast<std::int64_t>(i), entry.param_offset + (from - entry.start),
                          to - from, from});
      }
    }
    if (mb.owned != want || mb.shard_numel != shard_numel) {
      std::size_t i = 0;
      while (i < mb.owned.size() && i < want.size() && mb.owned[i] == want[i]) ++i;
      const readback::FlatOwned& owned_range = i < mb.owned.size() ? mb.owned[i] : want[i];
      const bool known = owned_range.entry >= 0 &&
                         owned_range.entry < static_cast<std::int64_t>(fb.entries.size());
      const std::string name =
          known ? fb.entries[static_cast<std::size_t>(owned_range.entry)].name : "?";
      cx.report.mismatch(
          where(mb, fb.ranks[k]) + " param " + name + ": owned range " + std::to_string(i) + " (" +
          std::to_string(owned_range.numel) + " elements from " +
          std::to_string(owned_range.param_offset) + "), its shard of each bucket gives " +
          (i < want.size()
               ? std::to_string(want[i].numel) + " from " + std::to_string(want[i].param_offset)
               : std::string("none")) +
          " (shard_numel " + std::to_string(mb.shard_numel) + ", expected " +
          std::to_string(shard_numel) + ")");
      return;
    }
    std::int64_t owned = 0;
    for (const readback::FlatOwned& range : mb.owned) {
      owned += range.numel;
      owned_by_param[fb.entries[static_cast<std::size_t>(range.entry)].name].push_back(
          {range.param_offset, range.numel});
    }
    if (mb.owned_numel != owned)
      return cx.report.mismatch(where(mb, fb.ranks[k]) + ": owned_numel " +
                                std::to_string(mb.owned_numel) + " != the sum of its ranges " +
                                std::to_string(owned));
  }
  // Every element of every param owned exactly once over the group. (Every
  // element of every piece is owned once already: the pieces lie apart inside
  // their buckets and the members' shards tile each bucket.)
  for (auto& [name, ranges] : owned_by_param) {
    std::sort(ranges.begin(), ranges.end());
    std::int64_t at = 0;
    for (const auto& [offset, length] : ranges) {
      if (offset != at)
        return cx.report.mismatch(where(fb, fb.ranks[0]) + " param " + name + ": elements " +
                                  std::to_string(std::min(offset, at)) + ".." +
                                  std::to_string(std::max(offset, at)) +
                                  (offset > at ? " owned by no rank" : " owned twice"));
      at += length;
    }
    const std::int64_t want = expected_numel(cx, buf, members, name);
    if (at != want)
      return cx.report.mismatch(where(fb, fb.ranks[0]) + " param " + name + ": the group owns " +
                                std::to_string(at) + " elements, the param has " +
                                std::to_string(want));
  }
  ++cx.report.groups;
  cx.report.element_params += static_cast<std::int64_t>(owned_by_param.size());
}

}  // namespace

void verify_flat(Context& cx, std::size_t buffer_index, const std::vector<std::int64_t>& sample) {
  std::set<std::tuple<std::string, bool, int, std::int64_t>> done;
  for (const std::int64_t rank : sample) {
    const RankFile& rank_file = *cx.store.get(rank);
    check_coverage(cx, rank_file, buffer_index);
    // Each held trainable param is in one buffer of its rank.
    std::map<std::string, int> buffers_of;
    for (const FlatBuffer& fb : rank_file.buffers[buffer_index].flat) {
      std::set<std::string> names;
      for (const readback::FlatEntry& entry : fb.entries) names.insert(entry.name);
      for (const std::string& name : names) ++buffers_of[name];
    }
    for (const auto& [name, count] : buffers_of)
      if (count != 1)
        cx.report.mismatch("rank " + std::to_string(rank) + " param " + name + ": in " +
                           std::to_string(count) + " flat buffers");
    for (const FlatBuffer& fb : rank_file.buffers[buffer_index].flat) {
      const auto key = std::make_tuple(fb.mesh + "/" + std::string(dtype_name(fb.param_dtype)) +
                                           "/" + std::string(dtype_name(fb.grad_dtype)),
                                       fb.expert, fb.model_chunk, rank);
      if (done.contains(key)) continue;
      for (std::int64_t member : fb.ranks)
        done.insert({std::get<0>(key), fb.expert, fb.model_chunk, member});
      Members members;
      if (!load_members(cx, buffer_index, fb, rank, members)) {
        if (!cx.store.fatal.empty()) return;
        continue;
      }
      verify_group(cx, rank_file.buffers[buffer_index], members);
    }
  }
}

}  // namespace shardc::verify
