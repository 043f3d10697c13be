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
  Shape strides(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

std::int64_t flat(const Shape& strides, const Shape& idx) {
  std::int64_t index = 0;
  for (std::size_t d = 0; d < idx.size(); ++d) index += idx[d] * strides[d];
  return index;
}

Shape unflat(std::int64_t flat_index, const Shape& shape) {
  Shape idx(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) continue;
    idx[d] = flat_index % shape[d];
    flat_index /= shape[d];
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

Shape without_dim(const Shape& shape, int d) {
  Shape out = shape;
  out.erase(out.begin() + d);
  return out;
}

bool inside(const Box& box, const Shape& global) {
  for (std::size_t d = 0; d < global.size(); ++d)
    if (box.offset[d] < 0 || box.offset[d] + box.shape[d] > global[d]) return false;
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
  for_each_index(moved, [&](const Shape& moved_index) {
    for (std::size_t e = 0; e < idx.size(); ++e) idx[e] = moved_index[e];
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
  Box unpacked{Shape(global.size(), 0), shape};
  if (numel(shape) == 0) return unpacked;
  std::size_t first = 0;
  while (first < rows.size() && counts[first] == 0) ++first;
  if (first == rows.size() || rows[first][0] < 0) {
    why = "the first unpacked element is padding";
    return std::nullopt;
  }
  unpacked.offset = unflat(rows[first][0], global);
  if (!inside(unpacked, global)) {
    why = "unpacked piece " + box_text(unpacked) + " leaves the global shape " + shape_text(global);
    return std::nullopt;
  }
  const Shape gs = strides_of(global);
  const Shape rest = without_dim(shape, d);
  std::vector<std::int64_t> rest_flat;
  for_each_index(rest, [&](const Shape& rest_index) {
    Shape idx = rest_index;
    idx.insert(idx.begin() + d, 0);
    rest_flat.push_back(flat(gs, idx));
  });
  const std::int64_t base = flat(gs, unpacked.offset);
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
  return unpacked;
}

bool check_reads(const std::vector<MuonMember>& members, const MuonMember& own, std::int64_t rest_n,
                 std::string& why) {
  const auto& split = own.entry->split_sizes;
  if (split.size() != members.size()) {
    why = "split_sizes has " + std::to_string(split.size()) + " entries for " +
          std::to_string(members.size()) + " members";
    return false;
  }
  for (std::size_t k = 0; k < members.size(); ++k) {
    const std::int64_t reads = split[k] * rest_n;
    if (reads > own.entry->padded_numel) {
      why = "reads " + std::to_string(reads) + " elements of member " + std::to_string(k) +
            ", past padded_numel " + std::to_string(own.entry->padded_numel);
      return false;
    }
    if (reads != numel(members[k].box.shape)) {
      why = "reads " + std::to_string(reads) + " elements of member " + std::to_string(k) +
            ", which holds " + std::to_string(numel(members[k].box.shape));
      return false;
    }
  }
  return true;
}

std::optional<Box> muon_elements(const Shape& global, const std::vector<MuonMember>& members,
                                 std::size_t receiver, std::string& why) {
  const MuonMember& own = members[receiver];
  const int d = own.entry->tensor_dim;
  const std::int64_t width = own.entry->padded_numel;
  const std::int64_t rest_n = numel(without_dim(own.box.shape, d));
  if (!check_reads(members, own, rest_n, why)) return std::nullopt;
  // Pack every member's piece at the start of its row, gather rank-major.
  Values gathered(static_cast<std::size_t>(width) * members.size(), kPad);
  for (std::size_t k = 0; k < members.size(); ++k) {
    const Values values = moved_values(global, members[k].box, members[k].entry->tensor_dim);
    if (static_cast<std::int64_t>(values.size()) > width) {
      why = "member " + std::to_string(k) + " packs " + std::to_string(values.size()) +
            " elements into padded_numel " + std::to_string(width);
      return std::nullopt;
    }
    std::copy(values.begin(), values.end(),
              gathered.begin() + static_cast<std::ptrdiff_t>(k) * width);
  }
  std::vector<const std::int32_t*> rows;
  std::vector<std::int64_t> counts;
  Shape shape = own.box.shape;
  shape[static_cast<std::size_t>(d)] = 0;
  for (std::size_t k = 0; k < members.size(); ++k) {
    rows.push_back(gathered.data() + static_cast<std::ptrdiff_t>(k) * width);
    counts.push_back(own.entry->split_sizes[k] * rest_n);
    shape[static_cast<std::size_t>(d)] += own.entry->split_sizes[k];
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
  std::int64_t product = 1;
  for (const std::int64_t extent : shape) product *= extent;
  return product;
}

std::optional<Box> fsdp2_rebuild(const Shape& global, const std::vector<Fsdp2Member>& members,
                                 std::size_t receiver, std::string& why) {
  const Fsdp2Member& own = members[receiver];
  const auto d = static_cast<std::size_t>(own.entry->shard_dim);
  const Shape& pad = own.entry->padded_shape;
  const Shape& un = own.entry->unsharded_shape;
  const auto world = static_cast<std::int64_t>(members.size());
  // The operations themselves: one padded chunk shape for all (the
  // all-gather's equal inputs), each piece copied into it, the view and the
  // narrow along the shard dim only.
  for (const Fsdp2Member& member : members) {
    bool fits = member.entry->padded_shape == pad && member.box.shape.size() == pad.size();
    for (std::size_t e = 0; fits && e < pad.size(); ++e) fits = member.box.shape[e] <= pad[e];
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
  for_each_index(un, [&](const Shape& element) {
    local = element;
    local[d] = element[d] % pad[d];
    const std::int32_t got =
        gathered[static_cast<std::size_t>(element[d] / pad[d] * width + flat(pad_strides, local))];
    if (got >= 0) read.emplace_back(element, got);
  });
  Shape extent(un.size(), 0);
  for (const auto& [element, got] : read)
    for (std::size_t e = 0; e < element.size(); ++e)
      extent[e] = std::max(extent[e], element[e] + 1);
  Box out{Shape(global.size(), 0), read.empty() ? Shape(global.size(), 0) : extent};
  if (static_cast<std::int64_t>(read.size()) != held ||
      (!read.empty() && numel_of(extent) != held)) {
    why = "the elements read are not every member's, as one box";
    return std::nullopt;
  }
  if (read.empty()) return out;
  out.offset = unflat(read.front().second, global);  // element 0 comes first (row-major)
  if (read.front().first != Shape(un.size(), 0) || !inside(out, global)) {
    why = "the rebuilt box does not start at the origin or leaves the global tensor";
    return std::nullopt;
  }
  Shape at(global.size());
  for (const auto& [element, got] : read) {
    for (std::size_t e = 0; e < at.size(); ++e) at[e] = out.offset[e] + element[e];
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
  Shape global(nd);
  for (auto& extent : global) extent = pick(rng, 1, 6);
  if (pick(rng, 0, 3) == 0) global[0] = std::int64_t{1} << (nd == 1 ? 33 : 22);
  if (nd > 1 && global[0] > 6) global[nd - 1] = std::int64_t{1} << 11;
  return global;
}

// A box inside `global` of at most a few elements per dim, near its end
// when the global is big.
Box random_piece(Rng& rng, const Shape& global) {
  Box piece{Shape(global.size()), Shape(global.size())};
  for (std::size_t e = 0; e < global.size(); ++e) {
    piece.shape[e] = pick(rng, 0, std::min<std::int64_t>(global[e], 5));
    const std::int64_t room = global[e] - piece.shape[e];
    piece.offset[e] = global[e] > 6 && pick(rng, 0, 1)
                          ? room - pick(rng, 0, std::min<std::int64_t>(room, 3))
                          : pick(rng, 0, std::min<std::int64_t>(room, 3));
  }
  return piece;
}

void perturb(Rng& rng, std::vector<Box>& boxes, const Shape& global) {
  const auto k =
      static_cast<std::size_t>(pick(rng, 0, static_cast<std::int64_t>(boxes.size()) - 1));
  const auto dim =
      static_cast<std::size_t>(pick(rng, 0, static_cast<std::int64_t>(global.size()) - 1));
  switch (pick(rng, 0, 5)) {
    case 0:
      std::swap(boxes[k], boxes[static_cast<std::size_t>(
                              pick(rng, 0, static_cast<std::int64_t>(boxes.size()) - 1))]);
      break;
    case 1:
      boxes[k].offset[dim] += pick(rng, -1, 1);
      break;
    case 2:
      boxes[k].shape[dim] = std::max<std::int64_t>(0, boxes[k].shape[dim] + pick(rng, -1, 1));
      break;
    case 3:
      boxes[k].offset[dim] = global[dim] - pick(rng, 0, 2);
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
    const auto count = static_cast<std::size_t>(pick(rng, 1, 4));
    // Split the piece along d into n parts (some empty).
    std::vector<std::int64_t> split(count, 0);
    for (std::int64_t row = 0; row < piece.shape[du]; ++row)
      ++split[static_cast<std::size_t>(pick(rng, 0, static_cast<std::int64_t>(count) - 1))];
    std::vector<Box> boxes;
    std::int64_t at = piece.offset[du];
    for (std::size_t k = 0; k < count; ++k) {
      Box part = piece;
      part.offset[du] = at;
      part.shape[du] = split[k];
      at += split[k];
      boxes.push_back(part);
    }
    if (pick(rng, 0, 2) > 0) perturb(rng, boxes, global);
    std::vector<readback::MuonStageParam> entries(count);
    Shape pad = piece.shape;
    pad[du] = *std::max_element(split.begin(), split.end());
    for (auto& entry : entries) {
      entry.tensor_dim = d;
      entry.split_sizes = split;
      entry.padded_numel = numel(pad) + pick(rng, 0, 2);
    }
    if (pick(rng, 0, 5) == 0) entries[0].padded_numel = pick(rng, 0, numel(pad));
    if (pick(rng, 0, 5) == 0) entries.back().split_sizes[0] += pick(rng, -1, 1);
    if (nd > 1 && pick(rng, 0, 5) == 0) entries.back().tensor_dim = (d + 1) % static_cast<int>(nd);
    std::vector<MuonMember> members;
    for (std::size_t k = 0; k < count; ++k) members.push_back({boxes[k], &entries[k]});
    for (std::size_t r = 0; r < count; ++r) {
      // The reference reads each receiver's own shape: skip layouts it cannot read
      // (a member dim the receiver does not have).
      CAPTURE(iter);
      CAPTURE(r);
      std::string why;
      std::string want_why;
      const auto got = muon_unpack_elements(global, members, r, why);
      const auto want = ref::muon_elements(global, members, r, want_why);
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
  const std::int64_t extent = unsharded.shape[d];
  const std::int64_t chunk = (extent + world - 1) / world;
  Box chunk_box = unsharded;
  chunk_box.offset[d] = unsharded.offset[d] + std::min(k * chunk, extent);
  chunk_box.shape[d] = std::clamp<std::int64_t>(extent - k * chunk, 0, chunk);
  return chunk_box;
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
    const auto count = static_cast<std::size_t>(pick(rng, 1, 4));
    const std::int64_t chunk = (piece.shape[du] + static_cast<std::int64_t>(count) - 1) /
                                   static_cast<std::int64_t>(count) +
                               pick(rng, 0, 1);
    Shape pad = piece.shape;
    pad[du] = chunk;
    // `uneven: pad` on another dim: allocated rows past the real ones.
    for (std::size_t e = 0; e < nd; ++e)
      if (e != du && pick(rng, 0, 3) == 0) pad[e] += pick(rng, 1, 2);
    std::vector<Box> boxes;
    for (std::size_t k = 0; k < count; ++k) {
      const auto kk = static_cast<std::int64_t>(k);
      Box part = piece;
      part.offset[du] = piece.offset[du] + std::min(kk * chunk, piece.shape[du]);
      part.shape[du] = std::clamp<std::int64_t>(piece.shape[du] - kk * chunk, 0, chunk);
      boxes.push_back(part);
    }
    if (pick(rng, 0, 2) > 0) perturb(rng, boxes, global);
    Shape un = pad;
    un[du] = chunk * static_cast<std::int64_t>(count) -
             pick(rng, 0, 1) * std::min<std::int64_t>(chunk, 1);
    std::vector<readback::Fsdp2Param> entries(count);
    for (auto& entry : entries) {
      entry.shard_dim = d;
      entry.padded_shape = pad;
      entry.unsharded_shape = un;
    }
    if (pick(rng, 0, 5) == 0) entries.back().unsharded_shape[du] = piece.shape[du];
    if (pick(rng, 0, 7) == 0) entries.front().padded_shape[du] += 1;
    if (nd > 1 && pick(rng, 0, 7) == 0) entries.back().unsharded_shape[(du + 1) % nd] += 1;
    std::vector<Fsdp2Member> members;
    for (std::size_t k = 0; k < count; ++k) members.push_back({boxes[k], &entries[k]});
    for (std::size_t r = 0; r < count; ++r) {
      CAPTURE(iter);
      CAPTURE(r);
      std::string why;
      std::string want_why;
      const auto got = fsdp2_unpack_elements(global, members, r, why);
      const auto want = ref::fsdp2_rebuild(global, members, r, want_why);
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
    for (auto& extent : global) extent = pick(rng, 1, 9);
    const auto d = static_cast<std::size_t>(pick(rng, 0, static_cast<std::int64_t>(nd) - 1));
    const std::int64_t world = pick(rng, 1, 9);
    Box unsharded = random_piece(rng, global);
    if (pick(rng, 0, 3) == 0) unsharded = Box{Shape(nd, 0), global};
    const std::int64_t chunk = (unsharded.shape[d] + world - 1) / world;
    Shape pad = unsharded.shape;
    pad[d] = chunk;
    readback::Fsdp2Param entry;
    entry.shard_dim = static_cast<int>(d);
    entry.padded_shape = pad;
    entry.unsharded_shape = unsharded.shape;
    std::vector<Fsdp2Member> members;
    for (std::int64_t k = 0; k < world; ++k)
      members.push_back({chunk_of(unsharded, d, world, k), &entry});
    const Box expected = numel(unsharded.shape) == 0 ? Box{Shape(nd, 0), Shape(nd, 0)} : unsharded;
    for (std::size_t r = 0; r < members.size(); ++r) {
      CAPTURE(iter);
      CAPTURE(r);
      std::string why;
      const auto elements = fsdp2_unpack_elements(global, members, r, why);
      const auto boxes = fsdp2_unpack_boxes(global, members, r, why);
      const auto want = ref::fsdp2_rebuild(global, members, r, why);
      REQUIRE(want);
      CHECK(*want == expected);
      CHECK(elements == want);
      CHECK(boxes == want);
    }
    // Move or resize one non-empty chunk by a row along d.
    std::vector<std::size_t> held;
    for (std::size_t k = 0; k < members.size(); ++k)
      if (!is_empty(members[k].box)) held.push_back(k);
    if (held.empty()) continue;
    const std::size_t k =
        held[static_cast<std::size_t>(pick(rng, 0, static_cast<std::int64_t>(held.size()) - 1))];
    if (pick(rng, 0, 1) == 0)
      members[k].box.offset[d] += pick(rng, 0, 1) * 2 - 1;
    else
      members[k].box.shape[d] -= 1;
    if (!ref::inside(members[k].box, global)) continue;  // not a piece of the tensor any more
    for (std::size_t r = 0; r < members.size(); ++r) {
      CAPTURE(iter);
      CAPTURE(r);
      std::string why;
      const auto want = ref::fsdp2_rebuild(global, members, r, why);
      CHECK(want != std::optional<Box>(expected));
      CHECK(fsdp2_unpack_elements(global, members, r, why) == want);
      CHECK(fsdp2_unpack_boxes(global, members, r, why) == want);
    }
    ++moved_checked;
  }
  CHECK(moved_checked > 1000);
}
