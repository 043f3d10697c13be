// The element simulator (verify_sim.cpp walks the pieces arithmetically)
// against the materializing one it replaced, kept here as the reference:
// every gathered row filled with int32 values, read back element by element.
// Random layouts, valid and broken (swapped, shifted, resized pieces; other
// split sizes or dims; indices past 2^31 that wrap), must give the same
// result or the same message.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "verify/engine.hpp"

namespace shardc::verify {
namespace ref {
namespace {

// ---- the simulator before it walked the pieces (verbatim) ----

using Values = std::vector<std::int32_t>;
constexpr std::int32_t kPad = -1;

Shape strides_of(const Shape& shape) {
  Shape s(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

std::int64_t flat(const Shape& strides, const Shape& idx) {
  std::int64_t f = 0;
  for (std::size_t d = 0; d < idx.size(); ++d) f += idx[d] * strides[d];
  return f;
}

Shape unflat(std::int64_t f, const Shape& shape) {
  Shape idx(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) continue;
    idx[d] = f % shape[d];
    f /= shape[d];
  }
  return idx;
}

// Calls fn(idx) for every index of `shape`, row-major.
template <typename F>
void for_each_index(const Shape& shape, F fn) {
  if (numel(shape) == 0) return;
  Shape idx(shape.size(), 0);
  for (;;) {
    fn(idx);
    std::size_t d = shape.size();
    while (d > 0 && ++idx[d - 1] == shape[d - 1]) idx[--d] = 0;
    if (d == 0) return;
  }
}

Shape without_dim(const Shape& s, int d) {
  Shape out = s;
  out.erase(out.begin() + d);
  return out;
}

bool inside(const Box& b, const Shape& global) {
  for (std::size_t d = 0; d < global.size(); ++d)
    if (b.offset[d] < 0 || b.offset[d] + b.shape[d] > global[d]) return false;
  return true;
}

// `box` moved so that dim `d` comes first, flattened: its global flat indices.
Values moved_values(const Shape& global, const Box& box, int d) {
  const Shape gs = strides_of(global);
  Shape moved = box.shape;
  std::rotate(moved.begin(), moved.begin() + d, moved.begin() + d + 1);
  Values out;
  out.reserve(static_cast<std::size_t>(numel(box.shape)));
  Shape idx(global.size());
  for_each_index(moved, [&](const Shape& m) {
    for (std::size_t e = 0; e < idx.size(); ++e) idx[e] = m[e];
    std::rotate(idx.begin(), idx.begin() + 1, idx.begin() + d + 1);
    for (std::size_t e = 0; e < idx.size(); ++e) idx[e] += box.offset[e];
    out.push_back(static_cast<std::int32_t>(flat(gs, idx)));
  });
  return out;
}

// Reads `values` (laid out as `shape` moved along `d`, in moved order) as a
// box of the global tensor; nullopt and `why` when they are not one.
std::optional<Box> read_box(const Shape& global, const Shape& shape, int d,
                            const std::vector<const std::int32_t*>& rows,
                            const std::vector<std::int64_t>& counts, std::string& why) {
  Box b{Shape(global.size(), 0), shape};
  if (numel(shape) == 0) return b;
  std::size_t first = 0;
  while (first < rows.size() && counts[first] == 0) ++first;
  if (first == rows.size() || rows[first][0] < 0) {
    why = "the first unpacked element is padding";
    return std::nullopt;
  }
  b.offset = unflat(rows[first][0], global);
  if (!inside(b, global)) {
    why = "unpacked piece " + box_text(b) + " leaves the global shape " + shape_text(global);
    return std::nullopt;
  }
  const Shape gs = strides_of(global);
  const Shape rest = without_dim(shape, d);
  std::vector<std::int64_t> rest_flat;
  for_each_index(rest, [&](const Shape& r) {
    Shape idx = r;
    idx.insert(idx.begin() + d, 0);
    rest_flat.push_back(flat(gs, idx));
  });
  const std::int64_t base = flat(gs, b.offset);
  const auto rest_n = static_cast<std::int64_t>(rest_flat.size());
  std::int64_t row0 = 0;  // position along d of the current member's first row
  for (std::size_t k = 0; k < rows.size(); ++k) {
    for (std::int64_t j = 0; j < counts[k]; ++j) {
      const std::int64_t want = base + (row0 + j / rest_n) * gs[static_cast<std::size_t>(d)] +
                                rest_flat[static_cast<std::size_t>(j % rest_n)];
      const std::int32_t got = rows[k][j];
      if (got != want) {
        why = "member " + std::to_string(k) + " element " + std::to_string(j) + ": expected " +
              std::to_string(want) + ", got " + (got < 0 ? "padding" : std::to_string(got));
        return std::nullopt;
      }
    }
    row0 += counts[k] / rest_n;
  }
  return b;
}

bool check_reads(const std::vector<MuonMember>& m, const MuonMember& r, std::int64_t rest_n,
                 std::string& why) {
  const auto& split = r.entry->split_sizes;
  if (split.size() != m.size()) {
    why = "split_sizes has " + std::to_string(split.size()) + " entries for " +
          std::to_string(m.size()) + " members";
    return false;
  }
  for (std::size_t k = 0; k < m.size(); ++k) {
    const std::int64_t n = split[k] * rest_n;
    if (n > r.entry->padded_numel) {
      why = "reads " + std::to_string(n) + " elements of member " + std::to_string(k) +
            ", past padded_numel " + std::to_string(r.entry->padded_numel);
      return false;
    }
    if (n != numel(m[k].box.shape)) {
      why = "reads " + std::to_string(n) + " elements of member " + std::to_string(k) +
            ", which holds " + std::to_string(numel(m[k].box.shape));
      return false;
    }
  }
  return true;
}

std::optional<Box> muon_elements(const Shape& global, const std::vector<MuonMember>& m,
                                 std::size_t receiver, std::string& why) {
  const MuonMember& r = m[receiver];
  const int d = r.entry->tensor_dim;
  const std::int64_t width = r.entry->padded_numel;
  const std::int64_t rest_n = numel(without_dim(r.box.shape, d));
  if (!check_reads(m, r, rest_n, why)) return std::nullopt;
  // Pack every member's piece at the start of its row, gather rank-major.
  Values gathered(static_cast<std::size_t>(width) * m.size(), kPad);
  for (std::size_t k = 0; k < m.size(); ++k) {
    const Values v = moved_values(global, m[k].box, m[k].entry->tensor_dim);
    if (static_cast<std::int64_t>(v.size()) > width) {
      why = "member " + std::to_string(k) + " packs " + std::to_string(v.size()) +
            " elements into padded_numel " + std::to_string(width);
      return std::nullopt;
    }
    std::copy(v.begin(), v.end(), gathered.begin() + static_cast<std::ptrdiff_t>(k) * width);
  }
  std::vector<const std::int32_t*> rows;
  std::vector<std::int64_t> counts;
  Shape shape = r.box.shape;
  shape[static_cast<std::size_t>(d)] = 0;
  for (std::size_t k = 0; k < m.size(); ++k) {
    rows.push_back(gathered.data() + static_cast<std::ptrdiff_t>(k) * width);
    counts.push_back(r.entry->split_sizes[k] * rest_n);
    shape[static_cast<std::size_t>(d)] += r.entry->split_sizes[k];
  }
  return read_box(global, shape, d, rows, counts, why);
}

// The real (logical) part of the unsharded tensor: a prefix box on every
// dim (padded dims keep pad rows at the end): on the FSDP dim the members'
// real rows summed, elsewhere any non-empty member's extent.
Shape real_unsharded(const std::vector<Fsdp2Member>& m, int d) {
  Shape real(m.front().box.shape.size(), 0);
  for (const Fsdp2Member& k : m) {
    if (is_empty(k.box)) continue;
    for (std::size_t e = 0; e < real.size(); ++e)
      real[e] = static_cast<int>(e) == d ? real[e] + k.box.shape[e] : k.box.shape[e];
  }
  if (numel(real) == 0) real.assign(real.size(), 0);
  return real;
}

bool fsdp2_shapes_ok(const std::vector<Fsdp2Member>& m, const Fsdp2Member& r, std::string& why) {
  const int d = r.entry->shard_dim;
  const Shape& pad = r.entry->padded_shape;
  const Shape& un = r.entry->unsharded_shape;
  if (un.size() != pad.size() || without_dim(un, d) != without_dim(pad, d) ||
      un[static_cast<std::size_t>(d)] >
          pad[static_cast<std::size_t>(d)] * static_cast<std::int64_t>(m.size())) {
    why = "unsharded_shape " + shape_text(un) + " is not " + std::to_string(m.size()) +
          " padded shards " + shape_text(pad) + " along dim " + std::to_string(d);
    return false;
  }
  std::int64_t held = 0;
  const Shape real = real_unsharded(m, d);
  for (std::size_t k = 0; k < m.size(); ++k) {
    const Shape& ls = m[k].box.shape;
    held += numel(ls);
    bool fits = m[k].entry->padded_shape == pad && ls.size() == pad.size();
    // Off the FSDP dim a member's real extent is the tensor's (pad rows of an
    // `uneven: pad` dim are allocated, not held).
    for (std::size_t e = 0; fits && e < ls.size(); ++e)
      fits = ls[e] <= pad[e] && (static_cast<int>(e) == d || ls[e] == real[e] || numel(ls) == 0);
    if (!fits) {
      why = "member " + std::to_string(k) + " local shape " + shape_text(ls) + " does not pad to " +
            shape_text(pad);
      return false;
    }
  }
  bool inside_un = real.size() == un.size();
  for (std::size_t e = 0; inside_un && e < real.size(); ++e) inside_un = real[e] <= un[e];
  if (held != numel(real) || !inside_un) {
    why = "members hold " + std::to_string(held) + " elements, the unsharded tensor " +
          shape_text(un) + " has " + std::to_string(numel(real)) + " real ones (" +
          shape_text(real) + ")";
    return false;
  }
  return true;
}

std::optional<Box> fsdp2_elements(const Shape& global, const std::vector<Fsdp2Member>& m,
                                  std::size_t receiver, std::string& why) {
  const Fsdp2Member& r = m[receiver];
  if (!fsdp2_shapes_ok(m, r, why)) return std::nullopt;
  const Shape& pad = r.entry->padded_shape;
  const std::int64_t width = numel(pad);
  const Shape ps = strides_of(pad);
  const Shape gs = strides_of(global);
  // Pack: each member's piece in its zero-padded shard, flattened; gather.
  Values gathered(static_cast<std::size_t>(width) * m.size(), kPad);
  for (std::size_t k = 0; k < m.size(); ++k) {
    Shape g(global.size());
    for_each_index(m[k].box.shape, [&](const Shape& idx) {
      for (std::size_t e = 0; e < g.size(); ++e) g[e] = m[k].box.offset[e] + idx[e];
      gathered[static_cast<std::size_t>(static_cast<std::int64_t>(k) * width + flat(ps, idx))] =
          static_cast<std::int32_t>(flat(gs, g));
    });
  }
  // Unpack: rows viewed as padded shards, concatenated along d, truncated.
  const auto d = static_cast<std::size_t>(r.entry->shard_dim);
  const Shape& un = r.entry->unsharded_shape;
  // Real rows are a prefix box of the unsharded tensor; the rest is padding.
  const Shape real = real_unsharded(m, r.entry->shard_dim);
  Box out{Shape(global.size(), 0), real};
  bool first = true;
  std::optional<std::string> bad;
  Shape local(un.size());
  for_each_index(un, [&](const Shape& u) {
    if (bad) return;
    const std::int64_t k = u[d] / pad[d];
    local = u;
    local[d] = u[d] % pad[d];
    const std::int32_t got = gathered[static_cast<std::size_t>(k * width + flat(ps, local))];
    bool is_real = true;
    for (std::size_t e = 0; e < u.size(); ++e) is_real = is_real && u[e] < real[e];
    if (!is_real) {
      if (got >= 0)
        bad = "element " + shape_text(u) + " should be padding, got " + std::to_string(got);
      return;
    }
    if (first) {
      first = false;
      if (got < 0) {
        bad = "the first unsharded element is padding";
        return;
      }
      out.offset = unflat(got, global);
    }
    Shape g = u;
    for (std::size_t e = 0; e < g.size(); ++e) g[e] += out.offset[e];
    if (got != flat(gs, g))
      bad = "element " + shape_text(u) + ": expected " + std::to_string(flat(gs, g)) + ", got " +
            (got < 0 ? "padding" : std::to_string(got));
  });
  if (bad) {
    why = *bad;
    return std::nullopt;
  }
  if (!is_empty(out) && !inside(out, global)) {
    why = "unsharded piece " + box_text(out) + " leaves the global shape";
    return std::nullopt;
  }
  return out;
}

}  // namespace
}  // namespace ref
}  // namespace shardc::verify

using namespace shardc;
using namespace shardc::verify;

namespace {

using Rng = std::mt19937_64;

std::int64_t pick(Rng& rng, std::int64_t lo, std::int64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

// A global shape: small, or (one in four) past 2^31 elements so that flat
// indices wrap as int32.
Shape random_global(Rng& rng, std::size_t nd) {
  Shape g(nd);
  for (auto& e : g) e = pick(rng, 1, 6);
  if (pick(rng, 0, 3) == 0) g[0] = std::int64_t{1} << (nd == 1 ? 33 : 22);
  if (nd > 1 && g[0] > 6) g[nd - 1] = std::int64_t{1} << 11;
  return g;
}

// A box inside `global` of at most a few elements per dim, near its end
// when the global is big.
Box random_piece(Rng& rng, const Shape& global) {
  Box b{Shape(global.size()), Shape(global.size())};
  for (std::size_t e = 0; e < global.size(); ++e) {
    b.shape[e] = pick(rng, 0, std::min<std::int64_t>(global[e], 5));
    const std::int64_t room = global[e] - b.shape[e];
    b.offset[e] = global[e] > 6 && pick(rng, 0, 1)
                      ? room - pick(rng, 0, std::min<std::int64_t>(room, 3))
                      : pick(rng, 0, std::min<std::int64_t>(room, 3));
  }
  return b;
}

void perturb(Rng& rng, std::vector<Box>& boxes, const Shape& global) {
  const auto k =
      static_cast<std::size_t>(pick(rng, 0, static_cast<std::int64_t>(boxes.size()) - 1));
  const auto e =
      static_cast<std::size_t>(pick(rng, 0, static_cast<std::int64_t>(global.size()) - 1));
  switch (pick(rng, 0, 5)) {
    case 0:
      std::swap(boxes[k], boxes[static_cast<std::size_t>(
                              pick(rng, 0, static_cast<std::int64_t>(boxes.size()) - 1))]);
      break;
    case 1:
      boxes[k].offset[e] += pick(rng, -1, 1);
      break;
    case 2:
      boxes[k].shape[e] = std::max<std::int64_t>(0, boxes[k].shape[e] + pick(rng, -1, 1));
      break;
    case 3:
      boxes[k].offset[e] = global[e] - pick(rng, 0, 2);
      break;
    default:
      break;  // unchanged
  }
}

void same(const std::optional<Box>& got, const std::string& why, const std::optional<Box>& want,
          const std::string& want_why) {
  CHECK(got.has_value() == want.has_value());
  if (got && want) CHECK(*got == *want);
  if (!got && !want) CHECK(why == want_why);
}

}  // namespace

TEST_CASE("muon element simulation agrees with the materializing reference") {
  Rng rng(20261201);
  int ok = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    const auto nd = static_cast<std::size_t>(pick(rng, 1, 3));
    const Shape global = random_global(rng, nd);
    const int d = static_cast<int>(pick(rng, 0, static_cast<std::int64_t>(nd) - 1));
    const auto du = static_cast<std::size_t>(d);
    const Box piece = random_piece(rng, global);
    const auto n = static_cast<std::size_t>(pick(rng, 1, 4));
    // Split the piece along d into n parts (some empty).
    std::vector<std::int64_t> split(n, 0);
    for (std::int64_t row = 0; row < piece.shape[du]; ++row)
      ++split[static_cast<std::size_t>(pick(rng, 0, static_cast<std::int64_t>(n) - 1))];
    std::vector<Box> boxes;
    std::int64_t at = piece.offset[du];
    for (std::size_t k = 0; k < n; ++k) {
      Box b = piece;
      b.offset[du] = at;
      b.shape[du] = split[k];
      at += split[k];
      boxes.push_back(b);
    }
    if (pick(rng, 0, 2) > 0) perturb(rng, boxes, global);
    std::vector<readback::MuonStageParam> entries(n);
    Shape pad = piece.shape;
    pad[du] = *std::max_element(split.begin(), split.end());
    for (auto& e : entries) {
      e.tensor_dim = d;
      e.split_sizes = split;
      e.padded_numel = numel(pad) + pick(rng, 0, 2);
    }
    if (pick(rng, 0, 5) == 0) entries[0].padded_numel = pick(rng, 0, numel(pad));
    if (pick(rng, 0, 5) == 0) entries.back().split_sizes[0] += pick(rng, -1, 1);
    if (nd > 1 && pick(rng, 0, 5) == 0) entries.back().tensor_dim = (d + 1) % static_cast<int>(nd);
    std::vector<MuonMember> m;
    for (std::size_t k = 0; k < n; ++k) m.push_back({boxes[k], &entries[k]});
    for (std::size_t r = 0; r < n; ++r) {
      // The reference reads each receiver's own shape: skip layouts it cannot read
      // (a member dim the receiver does not have).
      CAPTURE(iter);
      CAPTURE(r);
      std::string why;
      std::string want_why;
      const auto got = muon_unpack_elements(global, m, r, why);
      const auto want = ref::muon_elements(global, m, r, want_why);
      same(got, why, want, want_why);
      ok += got.has_value();
    }
  }
  CHECK(ok > 1000);
}

TEST_CASE("fsdp2 element simulation agrees with the materializing reference") {
  Rng rng(1201);
  int ok = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    const auto nd = static_cast<std::size_t>(pick(rng, 1, 3));
    const Shape global = random_global(rng, nd);
    const int d = static_cast<int>(pick(rng, 0, static_cast<std::int64_t>(nd) - 1));
    const auto du = static_cast<std::size_t>(d);
    const Box piece = random_piece(rng, global);  // the unsharded tensor's real part
    const auto n = static_cast<std::size_t>(pick(rng, 1, 4));
    const std::int64_t c =
        (piece.shape[du] + static_cast<std::int64_t>(n) - 1) / static_cast<std::int64_t>(n) +
        pick(rng, 0, 1);
    Shape pad = piece.shape;
    pad[du] = c;
    // `uneven: pad` on another dim: allocated rows past the real ones.
    for (std::size_t e = 0; e < nd; ++e)
      if (e != du && pick(rng, 0, 3) == 0) pad[e] += pick(rng, 1, 2);
    std::vector<Box> boxes;
    for (std::size_t k = 0; k < n; ++k) {
      const auto kk = static_cast<std::int64_t>(k);
      Box b = piece;
      b.offset[du] = piece.offset[du] + std::min(kk * c, piece.shape[du]);
      b.shape[du] = std::clamp<std::int64_t>(piece.shape[du] - kk * c, 0, c);
      boxes.push_back(b);
    }
    if (pick(rng, 0, 2) > 0) perturb(rng, boxes, global);
    Shape un = pad;
    un[du] = c * static_cast<std::int64_t>(n) - pick(rng, 0, 1) * std::min<std::int64_t>(c, 1);
    std::vector<readback::Fsdp2Param> entries(n);
    for (auto& e : entries) {
      e.shard_dim = d;
      e.padded_shape = pad;
      e.unsharded_shape = un;
    }
    if (pick(rng, 0, 5) == 0) entries.back().unsharded_shape[du] = piece.shape[du];
    std::vector<Fsdp2Member> m;
    for (std::size_t k = 0; k < n; ++k) m.push_back({boxes[k], &entries[k]});
    for (std::size_t r = 0; r < n; ++r) {
      CAPTURE(iter);
      CAPTURE(r);
      std::string why;
      std::string want_why;
      const auto got = fsdp2_unpack_elements(global, m, r, why);
      const auto want = ref::fsdp2_elements(global, m, r, want_why);
      same(got, why, want, want_why);
      ok += got.has_value();
    }
  }
  CHECK(ok > 1000);
}
