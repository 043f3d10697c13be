// The pack -> all-gather -> unpack primitives of `shardc verify`, in element
// mode (values = global flat index, padding = -1) and in box mode.
#include <algorithm>
#include <numeric>

#include "driver/verify.hpp"

namespace shardc::driver::verify {
namespace {

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
    if (b.origin[d] < 0 || b.origin[d] + b.shape[d] > global[d]) return false;
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
    for (std::size_t e = 0; e < idx.size(); ++e) idx[e] += box.origin[e];
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
  b.origin = unflat(rows[first][0], global);
  if (!inside(b, global)) {
    why = "unpacked piece " + box_text(b) + " leaves the global shape " + ints_text(global);
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
  const std::int64_t base = flat(gs, b.origin);
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

}  // namespace

bool is_empty(const Box& b) { return numel(b.shape) == 0; }

std::string ints_text(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string box_text(const Box& b) { return ints_text(b.origin) + " + " + ints_text(b.shape); }

std::optional<Box> muon_unpack_elements(const Shape& global, const std::vector<MuonMember>& m,
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

std::optional<Box> muon_unpack_boxes(const Shape& global, const std::vector<MuonMember>& m,
                                     std::size_t receiver, std::string& why) {
  const MuonMember& r = m[receiver];
  const int d = r.entry->tensor_dim;
  const auto du = static_cast<std::size_t>(d);
  const Shape rest = without_dim(r.box.shape, d);
  if (!check_reads(m, r, numel(rest), why)) return std::nullopt;
  Box out{Shape(global.size(), 0), r.box.shape};
  out.shape[du] =
      std::accumulate(r.entry->split_sizes.begin(), r.entry->split_sizes.end(), std::int64_t{0});
  if (is_empty(out)) return out;
  std::optional<Box> prev;
  for (std::size_t k = 0; k < m.size(); ++k) {
    const Box& b = m[k].box;
    if (is_empty(b)) continue;
    if (m[k].entry->tensor_dim != d || without_dim(b.shape, d) != rest) {
      why = "member " + std::to_string(k) + " piece " + box_text(b) + " is not laid out as " +
            ints_text(r.box.shape) + " along dim " + std::to_string(d);
      return std::nullopt;
    }
    Box next_expected = prev ? *prev : b;
    if (prev) next_expected.origin[du] += prev->shape[du];
    if (prev && b.origin != next_expected.origin) {
      why = "member " + std::to_string(k) + " piece " + box_text(b) + " does not continue " +
            box_text(*prev) + " along dim " + std::to_string(d);
      return std::nullopt;
    }
    if (!prev) out.origin = b.origin;
    prev = b;
  }
  if (!inside(out, global)) {
    why = "unpacked piece " + box_text(out) + " leaves the global shape";
    return std::nullopt;
  }
  return out;
}

namespace {

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
    why = "unsharded_shape " + ints_text(un) + " is not " + std::to_string(m.size()) +
          " padded shards " + ints_text(pad) + " along dim " + std::to_string(d);
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
      why = "member " + std::to_string(k) + " local shape " + ints_text(ls) + " does not pad to " +
            ints_text(pad);
      return false;
    }
  }
  bool inside_un = real.size() == un.size();
  for (std::size_t e = 0; inside_un && e < real.size(); ++e) inside_un = real[e] <= un[e];
  if (held != numel(real) || !inside_un) {
    why = "members hold " + std::to_string(held) + " elements, the unsharded tensor " +
          ints_text(un) + " has " + std::to_string(numel(real)) + " real ones (" + ints_text(real) +
          ")";
    return false;
  }
  return true;
}

}  // namespace

std::optional<Box> fsdp2_unpack_elements(const Shape& global, const std::vector<Fsdp2Member>& m,
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
      for (std::size_t e = 0; e < g.size(); ++e) g[e] = m[k].box.origin[e] + idx[e];
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
        bad = "element " + ints_text(u) + " should be padding, got " + std::to_string(got);
      return;
    }
    if (first) {
      first = false;
      if (got < 0) {
        bad = "the first unsharded element is padding";
        return;
      }
      out.origin = unflat(got, global);
    }
    Shape g = u;
    for (std::size_t e = 0; e < g.size(); ++e) g[e] += out.origin[e];
    if (got != flat(gs, g))
      bad = "element " + ints_text(u) + ": expected " + std::to_string(flat(gs, g)) + ", got " +
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

std::optional<Box> fsdp2_unpack_boxes(const Shape& global, const std::vector<Fsdp2Member>& m,
                                      std::size_t receiver, std::string& why) {
  const Fsdp2Member& r = m[receiver];
  if (!fsdp2_shapes_ok(m, r, why)) return std::nullopt;
  const auto d = static_cast<std::size_t>(r.entry->shard_dim);
  const std::int64_t c = r.entry->padded_shape[d];
  const Shape real = real_unsharded(m, r.entry->shard_dim);
  Box out{Shape(global.size(), 0), real};
  if (is_empty(out)) return out;
  // Real rows of member k must be exactly rows [k c, min((k+1) c, R)) of
  // the real prefix R (pad rows of a padded dim follow it).
  for (std::size_t k = 0; k < m.size(); ++k) {
    const auto kk = static_cast<std::int64_t>(k);
    const std::int64_t want = std::clamp<std::int64_t>(real[d] - kk * c, 0, c);
    const Box& b = m[k].box;
    if (b.shape[d] != want && !(want == 0 && is_empty(b))) {
      why = "member " + std::to_string(k) + " holds " + std::to_string(b.shape[d]) +
            " rows on dim " + std::to_string(d) + ", its slot of the unsharded tensor has " +
            std::to_string(want);
      return std::nullopt;
    }
    if (want == 0) continue;
    Box at = b;
    at.origin[d] -= kk * c;
    if (k == 0) out.origin = at.origin;
    if (at.origin != out.origin) {
      why = "member " + std::to_string(k) + " piece " + box_text(b) +
            " is not at its slot after member 0's " + box_text(m[0].box);
      return std::nullopt;
    }
  }
  if (!inside(out, global)) {
    why = "unsharded piece " + box_text(out) + " leaves the global shape";
    return std::nullopt;
  }
  return out;
}

}  // namespace shardc::driver::verify
