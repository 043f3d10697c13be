// The element simulators (verify/sim.cpp walks the pieces arithmetically)
// against materializing references: every gathered row filled with int32
// values, read back element by element. Muon: the simulator sim.cpp
// replaced (its messages too). FSDP2: torch's all-gather and chunk view
// written from first principles, sharing no code with verify (its verdict
// and box, not its wording). Random layouts, valid and broken (swapped,
// shifted, resized pieces; other split sizes or dims; indices past 2^31 that
// wrap), must give the same result.
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

// ---- FSDP2 from first principles (torch semantics, not verify's code) ----
//
// FSDP2 (torch.distributed.fsdp.fully_shard) chunks the unsharded tensor
// along the shard dim like torch.chunk: chunk size ceil(n / W), the last
// chunks short or empty; every rank copies its chunk into a zero buffer of
// the one padded chunk shape, the buffers are all-gathered rank-major, and
// each rank views the output as its W padded chunks concatenated along the
// shard dim, narrowed to the unsharded extent. Here every slot holds its
// element's global flat index as an int32 (as a tensor of that dtype would),
// padding -1; the receiver rebuilds a box of the global tensor when the
// slots it reads hold exactly every member's elements, once each, as a
// prefix box at the origin of the unsharded tensor in row-major order.

std::int64_t numel_of(const Shape& shape) {
  std::int64_t n = 1;
  for (const std::int64_t extent : shape) n *= extent;
  return n;
}

std::optional<Box> fsdp2_rebuild(const Shape& global, const std::vector<Fsdp2Member>& members,
                                 std::size_t receiver, std::string& why) {
  const Fsdp2Member& r = members[receiver];
  const auto d = static_cast<std::size_t>(r.entry->shard_dim);
  const Shape& pad = r.entry->padded_shape;
  const Shape& un = r.entry->unsharded_shape;
  const auto world = static_cast<std::int64_t>(members.size());
  // The operations themselves: one padded chunk shape for all (the
  // all-gather's equal inputs), each piece copied into it, the view and the
  // narrow along the shard dim only.
  for (const Fsdp2Member& m : members) {
    bool fits = m.entry->padded_shape == pad && m.box.shape.size() == pad.size();
    for (std::size_t e = 0; fits && e < pad.size(); ++e) fits = m.box.shape[e] <= pad[e];
    if (!fits) {
      why = "a piece does not fit the padded chunk";
      return std::nullopt;
    }
  }
  bool viewable = un.size() == pad.size() && d < un.size() && un[d] <= world * pad[d];
  for (std::size_t e = 0; viewable && e < un.size(); ++e) viewable = e == d || un[e] == pad[e];
  if (!viewable) {
    why = "the gathered chunks cannot be viewed as the unsharded shape";
    return std::nullopt;
  }
  // Pack and gather: rank-major rows of numel(pad) int32 slots.
  const std::int64_t width = numel_of(pad);
  const Shape pad_strides = strides_of(pad);
  const Shape global_strides = strides_of(global);
  Values gathered(static_cast<std::size_t>(width * world), kPad);
  std::int64_t held = 0;
  for (std::size_t k = 0; k < members.size(); ++k) {
    const Box& piece = members[k].box;
    held += numel_of(piece.shape);
    Shape at(global.size());
    for_each_index(piece.shape, [&](const Shape& idx) {
      for (std::size_t e = 0; e < at.size(); ++e) at[e] = piece.offset[e] + idx[e];
      gathered[static_cast<std::size_t>(static_cast<std::int64_t>(k) * width +
                                        flat(pad_strides, idx))] =
          static_cast<std::int32_t>(flat(global_strides, at));
    });
  }
  // Unpack: element u of the unsharded tensor is slot u[d] % pad[d] of
  // chunk u[d] / pad[d]; collect what each position reads.
  std::vector<std::pair<Shape, std::int32_t>> read;
  Shape local(un.size());
  for_each_index(un, [&](const Shape& u) {
    local = u;
    local[d] = u[d] % pad[d];
    const std::int32_t got =
        gathered[static_cast<std::size_t>(u[d] / pad[d] * width + flat(pad_strides, local))];
    if (got >= 0) read.emplace_back(u, got);
  });
  Shape extent(un.size(), 0);
  for (const auto& [u, got] : read)
    for (std::size_t e = 0; e < u.size(); ++e) extent[e] = std::max(extent[e], u[e] + 1);
  Box out{Shape(global.size(), 0), read.empty() ? Shape(global.size(), 0) : extent};
  if (static_cast<std::int64_t>(read.size()) != held ||
      (!read.empty() && numel_of(extent) != held)) {
    why = "the elements read are not every member's, as one box";
    return std::nullopt;
  }
  if (read.empty()) return out;
  out.offset = unflat(read.front().second, global);  // u = 0 comes first (row-major)
  if (read.front().first != Shape(un.size(), 0) || !inside(out, global)) {
    why = "the rebuilt box does not start at the origin or leaves the global tensor";
    return std::nullopt;
  }
  Shape at(global.size());
  for (const auto& [u, got] : read) {
    for (std::size_t e = 0; e < at.size(); ++e) at[e] = out.offset[e] + u[e];
    if (got != flat(global_strides, at)) {
      why = "an element is not at its place";
      return std::nullopt;
    }
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

// The verdict and the box (FSDP2's reference states no message of verify's).
void same_verdict(const std::optional<Box>& got, const std::optional<Box>& want) {
  CHECK(got.has_value() == want.has_value());
  if (got && want) CHECK(*got == *want);
}

// Member k's chunk of `unsharded` (a box of the global tensor) along d,
// torch.chunk's: rows [k c, min((k + 1) c, n)) with c = ceil(n / W), empty
// past the end (its offset then the end of the dim, as shard_at gives).
Box chunk_of(const Box& unsharded, std::size_t d, std::int64_t world, std::int64_t k) {
  const std::int64_t n = unsharded.shape[d];
  const std::int64_t c = (n + world - 1) / world;
  Box b = unsharded;
  b.offset[d] = unsharded.offset[d] + std::min(k * c, n);
  b.shape[d] = std::clamp<std::int64_t>(n - k * c, 0, c);
  return b;
}

TEST_CASE("fsdp2 element simulation agrees with the first-principles reference") {
  Rng rng(1201);
  int ok = 0;
  int failed = 0;
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
    if (pick(rng, 0, 7) == 0) entries.front().padded_shape[du] += 1;
    if (nd > 1 && pick(rng, 0, 7) == 0) entries.back().unsharded_shape[(du + 1) % nd] += 1;
    std::vector<Fsdp2Member> m;
    for (std::size_t k = 0; k < n; ++k) m.push_back({boxes[k], &entries[k]});
    for (std::size_t r = 0; r < n; ++r) {
      CAPTURE(iter);
      CAPTURE(r);
      std::string why;
      std::string want_why;
      const auto got = fsdp2_unpack_elements(global, m, r, why);
      const auto want = ref::fsdp2_rebuild(global, m, r, want_why);
      same_verdict(got, want);
      ok += got.has_value();
      failed += !got.has_value();
    }
  }
  CHECK(ok > 1000);
  CHECK(failed > 1000);
}

// Every layout torch.chunk gives, over many shapes and world sizes: each
// member rebuilds exactly the unsharded box, in element and in box mode, as
// the reference does. One member's chunk moved by a row or one row short:
// the three agree, and none rebuilds the unsharded box (a short last chunk
// is still a box, one row smaller; a lone chunk moved is one row off).
TEST_CASE("fsdp2 round-trips every torch.chunk layout and no moved chunk") {
  Rng rng(20261202);
  int moved_checked = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const auto nd = static_cast<std::size_t>(pick(rng, 1, 3));
    Shape global(nd);
    for (auto& e : global) e = pick(rng, 1, 9);
    const auto d = static_cast<std::size_t>(pick(rng, 0, static_cast<std::int64_t>(nd) - 1));
    const std::int64_t world = pick(rng, 1, 9);
    Box unsharded = random_piece(rng, global);
    if (pick(rng, 0, 3) == 0) unsharded = Box{Shape(nd, 0), global};
    const std::int64_t c = (unsharded.shape[d] + world - 1) / world;
    Shape pad = unsharded.shape;
    pad[d] = c;
    readback::Fsdp2Param entry;
    entry.shard_dim = static_cast<int>(d);
    entry.padded_shape = pad;
    entry.unsharded_shape = unsharded.shape;
    std::vector<Fsdp2Member> m;
    for (std::int64_t k = 0; k < world; ++k)
      m.push_back({chunk_of(unsharded, d, world, k), &entry});
    const Box expected = numel(unsharded.shape) == 0 ? Box{Shape(nd, 0), Shape(nd, 0)} : unsharded;
    for (std::size_t r = 0; r < m.size(); ++r) {
      CAPTURE(iter);
      CAPTURE(r);
      std::string why;
      const auto elements = fsdp2_unpack_elements(global, m, r, why);
      const auto boxes = fsdp2_unpack_boxes(global, m, r, why);
      const auto want = ref::fsdp2_rebuild(global, m, r, why);
      REQUIRE(want);
      CHECK(*want == expected);
      CHECK(elements == want);
      CHECK(boxes == want);
    }
    // Move or resize one non-empty chunk by a row along d.
    std::vector<std::size_t> held;
    for (std::size_t k = 0; k < m.size(); ++k)
      if (!is_empty(m[k].box)) held.push_back(k);
    if (held.empty()) continue;
    const std::size_t k =
        held[static_cast<std::size_t>(pick(rng, 0, static_cast<std::int64_t>(held.size()) - 1))];
    if (pick(rng, 0, 1) == 0)
      m[k].box.offset[d] += pick(rng, 0, 1) * 2 - 1;
    else
      m[k].box.shape[d] -= 1;
    if (!ref::inside(m[k].box, global)) continue;  // not a piece of the tensor any more
    for (std::size_t r = 0; r < m.size(); ++r) {
      CAPTURE(iter);
      CAPTURE(r);
      std::string why;
      const auto want = ref::fsdp2_rebuild(global, m, r, why);
      CHECK(want != std::optional<Box>(expected));
      CHECK(fsdp2_unpack_elements(global, m, r, why) == want);
      CHECK(fsdp2_unpack_boxes(global, m, r, why) == want);
    }
    ++moved_checked;
  }
  CHECK(moved_checked > 1000);
}
