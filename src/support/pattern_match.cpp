// Pattern matching against one FQN (contract §4 "Patterns"). Runs params × rules
// times, so it works on byte positions and never allocates unless captures
// are requested or a pattern with several `**` meets a very long name.
#include <array>
#include <cstdint>
#include <cstring>

#include "support/pattern.hpp"
#include "support/pattern_glob.hpp"

namespace shardc {
namespace {

constexpr std::size_t kStackMemo = 2048;

struct Matcher {
  const std::vector<Pattern::Segment>& segs;
  std::string_view fqn;
  std::array<std::string_view, 16> bound{};
  std::uint8_t* memo = nullptr;  ///< failure flags, segs × (name segments + 1)
  std::size_t memo_stride = 0;

  static constexpr std::size_t kEnd = static_cast<std::size_t>(-1);

  [[nodiscard]] std::size_t segment_end(std::size_t pos) const {
    std::size_t dot = fqn.find('.', pos);
    return dot == std::string_view::npos ? fqn.size() : dot;
  }
  [[nodiscard]] std::size_t next_start(std::size_t end) const {
    return end == fqn.size() ? kEnd : end + 1;
  }

  bool run(std::size_t si, std::size_t pos, std::size_t k) {
    if (si == segs.size()) return pos == kEnd;
    const Pattern::Segment& seg = segs[si];
    if (seg.kind == Pattern::Segment::Kind::DoubleStar) return double_star(si, pos, k);
    if (pos == kEnd) return false;
    std::size_t end = segment_end(pos);
    std::string_view text = fqn.substr(pos, end - pos);
    if (seg.kind == Pattern::Segment::Kind::Capture) {
      auto slot = static_cast<std::size_t>(seg.slot);
      if (!seg.prefix.empty()) {
        if (text.size() <= seg.prefix.size() || !text.starts_with(seg.prefix)) return false;
        text.remove_prefix(seg.prefix.size());
      }
      if (seg.bound_before) {
        if (bound[slot] != text) return false;
      } else {
        bound[slot] = text;
      }
    } else if (seg.literal ? text != seg.text : !glob_match(seg.text, text)) {
      return false;
    }
    return run(si + 1, next_start(end), k + 1);
  }

  bool double_star(std::size_t si, std::size_t pos, std::size_t k) {
    if (si + 1 == segs.size()) return true;
    std::uint8_t* failed = nullptr;
    if (memo != nullptr && segs[si].memo_ok) {
      failed = memo + si * memo_stride + k;
      if (*failed != 0) return false;
    }
    while (true) {
      if (run(si + 1, pos, k)) return true;
      if (pos == kEnd) break;
      pos = next_start(segment_end(pos));
      ++k;
    }
    if (failed != nullptr) *failed = 1;
    return false;
  }
};

std::size_t count_segments(std::string_view fqn) {
  std::size_t count = 1;
  for (char ch : fqn) count += ch == '.' ? 1 : 0;
  return count;
}

}  // namespace

bool Pattern::match(std::string_view fqn, Captures* captures) const {
  Matcher matcher{segments_, fqn};
  std::array<std::uint8_t, kStackMemo> stack_memo;
  std::vector<std::uint8_t> heap_memo;
  if (double_stars_ >= 2) {
    matcher.memo_stride = count_segments(fqn) + 2;
    std::size_t size = segments_.size() * matcher.memo_stride;
    if (size <= kStackMemo) {
      std::memset(stack_memo.data(), 0, size);
      matcher.memo = stack_memo.data();
    } else {
      heap_memo.assign(size, 0);
      matcher.memo = heap_memo.data();
    }
  }
  if (!matcher.run(0, 0, 0)) return false;
  if (captures != nullptr) {
    captures->clear();
    for (std::size_t i = 0; i < names_.size(); ++i) {
      captures->emplace_back(names_[i], std::string(matcher.bound[i]));
    }
  }
  return true;
}

}  // namespace shardc
