// RankSet: compact rank sets (`0-7,16,3-99:8`), see src/support/rank_set.hpp.
#include "support/rank_set.hpp"

#include "support/limits.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

namespace shardc {
namespace {

constexpr std::int64_t kMaxParsedItems = limits::kMaxRankSetItems;

// Greedy canonical runs over a sorted, duplicate-free list: a run of three or
// more equally spaced ranks becomes one progression, anything else a single.
std::vector<Progression> canonical_runs(const std::vector<std::int64_t>& ranks) {
  std::vector<Progression> runs;
  std::size_t i = 0;
  while (i < ranks.size()) {
    if (i + 2 < ranks.size() && ranks[i + 1] - ranks[i] == ranks[i + 2] - ranks[i + 1]) {
      const std::int64_t stride = ranks[i + 1] - ranks[i];
      std::size_t j = i + 2;
      while (j + 1 < ranks.size() && ranks[j + 1] - ranks[j] == stride) ++j;
      runs.push_back({ranks[i], stride, static_cast<std::int64_t>(j - i + 1)});
      i = j + 1;
    } else {
      runs.push_back({ranks[i], 1, 1});
      ++i;
    }
  }
  return runs;
}

// Appends the ranks of `run` to `ranks`, in its order.
void append_ranks(const Progression& run, std::vector<std::int64_t>& ranks) {
  for (std::int64_t k = 0; k < run.count; ++k) ranks.push_back(run.start + k * run.stride);
}

// `runs` (sorted by start) with every run that continues the one before it, at the same
// stride, merged into it.
std::vector<Progression> merge_continuing(const std::vector<Progression>& runs) {
  std::vector<Progression> out;
  for (const Progression& run : runs) {
    if (!out.empty() && out.back().stride == run.stride &&
        out.back().last() + out.back().stride == run.start) {
      out.back().count += run.count;
    } else {
      out.push_back(run);
    }
  }
  return out;
}

bool parse_int(std::string_view text, std::int64_t& out) {
  if (text.empty()) return false;
  const auto* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && p == end && out >= 0;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Parses one item: `a`, `a-b` or `a-b:s`.
bool parse_item(std::string_view item, Progression& out, std::string& error) {
  std::int64_t stride = 1;
  if (auto colon = item.find(':'); colon != std::string_view::npos) {
    if (!parse_int(trim(item.substr(colon + 1)), stride) || stride < 1) {
      error = "bad step in '" + std::string(item) + "' (expected a positive integer)";
      return false;
    }
    item = item.substr(0, colon);
  }
  std::int64_t first = 0;
  std::int64_t last = 0;
  if (auto dash = item.find('-'); dash != std::string_view::npos) {
    if (!parse_int(trim(item.substr(0, dash)), first) ||
        !parse_int(trim(item.substr(dash + 1)), last)) {
      error = "bad range '" + std::string(item) + "' (expected A-B with non-negative integers)";
      return false;
    }
  } else {
    if (!parse_int(trim(item), first)) {
      error = "bad rank '" + std::string(item) + "' (expected a non-negative integer)";
      return false;
    }
    last = first;
  }
  if (last < first) {
    error = "reversed range '" + std::string(item) + "'";
    return false;
  }
  // Every world size is at most kMaxWorld (2^31 - 1), so a larger rank is never valid; bounding
  // it here keeps `(b - a) / stride + 1` and every later rank sum far from int64 overflow.
  if (last >= limits::kMaxWorld) {
    error = "rank " + std::to_string(last) + " in '" + std::string(item) +
            "' is out of range (ranks are below 2^31 - 1, the largest world size)";
    return false;
  }
  if ((last - first) % stride != 0) {
    error = "range '" + std::string(item) + "' does not end on a step";
    return false;
  }
  out = {first, stride, (last - first) / stride + 1};
  return true;
}

}  // namespace

RankSet RankSet::from_sorted(const std::vector<std::int64_t>& ranks) {
  RankSet set;
  set.runs_ = canonical_runs(ranks);
  return set;
}

RankSet RankSet::from_progressions(std::vector<Progression> runs) {
  // Runs from one shard class share stride and count and never continue each
  // other's stride across a gap, so when every run has count >= 3 the greedy
  // canonical form keeps them as they are (after merging runs that continue
  // one another). Anything else is canonicalized through the sorted list.
  bool uniform = !runs.empty();
  for (const Progression& run : runs)
    uniform = uniform && run.count >= 3 && run.stride == runs.front().stride;
  if (!uniform) {
    std::vector<std::int64_t> all;
    for (const Progression& run : runs) append_ranks(run, all);
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    return from_sorted(all);
  }
  RankSet set;
  set.runs_ = merge_continuing(runs);  // one stride: runs merge where they continue
  return set;
}

RankSet RankSet::from_disjoint(std::vector<Progression> runs) {
  std::sort(runs.begin(), runs.end(), [](const Progression& left, const Progression& right) {
    return left.start < right.start;
  });
  std::int64_t total = 0;
  for (const Progression& run : runs) total += run.count;
  if (total <= (std::int64_t{1} << 22)) {
    std::vector<std::int64_t> all;
    all.reserve(static_cast<std::size_t>(total));
    for (const Progression& run : runs) append_ranks(run, all);
    std::sort(all.begin(), all.end());
    return from_sorted(all);
  }
  RankSet set;
  set.runs_ = merge_continuing(runs);
  return set;
}

std::optional<RankSet> RankSet::parse(std::string_view text, std::int64_t world_size,
                                      std::string& error) {
  std::vector<Progression> items;
  std::int64_t total = 0;
  std::size_t pos = 0;
  if (trim(text).empty()) {
    error = "empty rank set";
    return std::nullopt;
  }
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    Progression run;
    if (!parse_item(trim(text.substr(pos, comma - pos)), run, error)) return std::nullopt;
    if (world_size > 0 && run.last() >= world_size) {
      error = "rank " + std::to_string(run.last()) + " is out of range (world size " +
              std::to_string(world_size) + ")";
      return std::nullopt;
    }
    total += run.count;
    if (total > kMaxParsedItems) {
      error = "rank set too large";
      return std::nullopt;
    }
    items.push_back(run);
    pos = comma + 1;
  }
  std::vector<std::int64_t> all;
  all.reserve(static_cast<std::size_t>(total));
  for (const Progression& run : items) append_ranks(run, all);
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return from_sorted(all);
}

std::string RankSet::to_string() const {
  std::string text;
  for (const Progression& run : runs_) {
    if (!text.empty()) text += ',';
    text += std::to_string(run.start);
    if (run.count == 1) continue;
    if (run.count == 2 && run.stride != 1) {
      text += ',' + std::to_string(run.last());
      continue;
    }
    text += '-' + std::to_string(run.last());
    if (run.stride != 1) text += ':' + std::to_string(run.stride);
  }
  return text;
}

std::int64_t RankSet::size() const {
  std::int64_t count = 0;
  for (const Progression& run : runs_) count += run.count;
  return count;
}

bool RankSet::contains(std::int64_t rank) const {
  // Runs are sorted by start and do not interleave: binary search the last run
  // starting at or before `rank`.
  auto it = std::upper_bound(
      runs_.begin(), runs_.end(), rank,
      [](std::int64_t target, const Progression& run) { return target < run.start; });
  if (it == runs_.begin()) return false;
  const Progression& run = *std::prev(it);
  return rank <= run.last() && (rank - run.start) % run.stride == 0;
}

std::vector<std::int64_t> RankSet::expand() const {
  std::vector<std::int64_t> all;
  all.reserve(static_cast<std::size_t>(size()));
  for (const Progression& run : runs_) append_ranks(run, all);
  return all;
}

RankSet RankSet::unite(const RankSet& other) const {
  std::vector<std::int64_t> mine = expand();
  std::vector<std::int64_t> theirs = other.expand();
  std::vector<std::int64_t> both;
  both.reserve(mine.size() + theirs.size());
  std::set_union(mine.begin(), mine.end(), theirs.begin(), theirs.end(), std::back_inserter(both));
  return from_sorted(both);
}

std::vector<std::int64_t> group_closure(std::int64_t rank,
                                        const std::vector<std::vector<std::int64_t>>& stages) {
  std::vector<std::int64_t> out{rank};
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const auto& members = stages[s];
    // A stage listed again (another batch of the same group) spans nothing new.
    if (std::find(stages.begin(), stages.begin() + static_cast<std::ptrdiff_t>(s), members) !=
        stages.begin() + static_cast<std::ptrdiff_t>(s))
      continue;
    std::vector<std::int64_t> next;
    next.reserve(out.size() * members.size());
    for (const std::int64_t reached : out)
      for (const std::int64_t member : members) next.push_back(reached + (member - rank));
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    out = std::move(next);
  }
  return out;
}

std::string rank_list_text(const std::vector<std::int64_t>& ranks) {
  std::string out;
  std::size_t i = 0;
  while (i < ranks.size()) {
    if (!out.empty()) out += ',';
    const std::int64_t step = i + 1 < ranks.size() ? ranks[i + 1] - ranks[i] : 0;
    std::size_t j = i;
    if (step > 0 && i + 2 < ranks.size() && ranks[i + 2] - ranks[i + 1] == step) {
      j = i + 2;
      while (j + 1 < ranks.size() && ranks[j + 1] - ranks[j] == step) ++j;
    }
    out += std::to_string(ranks[i]);
    if (j > i) {
      out += '-' + std::to_string(ranks[j]);
      if (step != 1) out += ':' + std::to_string(step);
    }
    i = j + 1;
  }
  return out;
}

std::optional<std::vector<std::int64_t>> parse_rank_list(std::string_view text,
                                                         std::string& error) {
  std::vector<std::int64_t> out;
  if (trim(text).empty()) return out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    Progression run;
    if (!parse_item(trim(text.substr(pos, comma - pos)), run, error)) return std::nullopt;
    if (static_cast<std::int64_t>(out.size()) + run.count > kMaxParsedItems) {
      error = "more than 2^24 ranks";
      return std::nullopt;
    }
    append_ranks(run, out);
    pos = comma + 1;
  }
  return out;
}

}  // namespace shardc
