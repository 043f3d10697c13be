// The pack -> all-gather -> unpack primitives of `shardc verify`, in element
// mode (values = global flat index, padding = -1) and in box mode.
#include <algorithm>
#include <numeric>

#include "support/shape.hpp"
#include "verify/engine.hpp"

namespace shardc::verify {
namespace {

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
  if (box.offset.size() < global.size() || box.shape.size() < global.size()) return false;
  for (std::size_t d = 0; d < global.size(); ++d)
    if (box.offset[d] < 0 || box.offset[d] + box.shape[d] > global[d]) return false;
  return true;
}

// Walks the elements of a box in row-major order of `ext` (dims already in
// walk order) and tracks sum idx[e] * stride[e]: the element's offset. No
// allocation per element; the innermost dim is walked in runs.
class Walk {
 public:
  Walk(Shape ext, Shape stride) : ext_(std::move(ext)), stride_(std::move(stride)) {
    stride_.resize(ext_.size(), 0);  // (callers pass equal sizes)
    if (ext_.empty()) {              // a scalar: one element
      ext_.assign(1, 1);
      stride_.assign(1, 0);
    }
    idx_.assign(ext_.size(), 0);
  }
  [[nodiscard]] std::int64_t offset() const { return off_; }
  /// Elements left in the current innermost run.
  [[nodiscard]] std::int64_t run() const { return ext_.back() - idx_.back(); }
  [[nodiscard]] std::int64_t step() const { return stride_.back(); }
  /// Moves on by count <= run() elements, carrying into the outer dims.
  void advance(std::int64_t count) {
    idx_.back() += count;
    off_ += count * stride_.back();
    for (std::size_t e = ext_.size(); e-- > 0 && idx_[e] == ext_[e];) {
      off_ -= idx_[e] * stride_[e];
      idx_[e] = 0;
      if (e == 0) return;
      ++idx_[e - 1];
      off_ += stride_[e - 1];
    }
  }

 private:
  Shape ext_;
  Shape stride_;
  Shape idx_;
  std::int64_t off_ = 0;
};

// `shape` with dim `d` moved first.
Shape moved(const Shape& shape, std::size_t d) {
  Shape out = shape;
  std::rotate(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(d),
              out.begin() + static_cast<std::ptrdiff_t>(d) + 1);
  return out;
}

// True when the flat indices of every member's box origin and corner (offset, and offset +
// shape, dim by dim, times the global strides) fit int64, else `why` names the first that does not.
// The unpackers multiply offsets by strides: a tampered rank file's offset far past the tensor
// would overflow them (a box merely past the extent is theirs to report, with its reason).
template <typename Member>
bool members_addressable(const Shape& global, const std::vector<Member>& members,
                         std::string& why) {
  const Shape strides = strides_of(global);
  for (std::size_t k = 0; k < members.size(); ++k) {
    const Box& box = members[k].box;
    std::int64_t flat = 0;
    bool fits = true;
    for (std::size_t d = 0; d < box.offset.size() && d < box.shape.size() && fits; ++d) {
      const std::int64_t stride = d < strides.size() ? strides[d] : 0;
      std::int64_t corner = 0;
      std::int64_t term = 0;
      std::int64_t origin = 0;
      fits = !__builtin_mul_overflow(box.offset[d], stride, &origin) &&
             !__builtin_add_overflow(box.offset[d], box.shape[d], &corner) &&
             !__builtin_mul_overflow(corner, stride, &term) &&
             !__builtin_add_overflow(flat, term, &flat);
    }
    if (fits) continue;
    why = "member " + std::to_string(k) + "'s box " + shape_text(box.offset) + " + " +
          shape_text(box.shape) + " lies outside any tensor of shape " + shape_text(global);
    return false;
  }
  return true;
}

// Global flat index of `origin` (dims it lacks read as 0).
std::int64_t flat_origin(const Shape& gs, const Shape& origin) {
  std::int64_t index = 0;
  for (std::size_t d = 0; d < gs.size() && d < origin.size(); ++d) index += origin[d] * gs[d];
  return index;
}

// What a packed element carries: its global flat index as an int32 (the
// simulator's value type; it wraps above 2^31 - 1 as a stored int32 would).
std::int32_t value(std::int64_t flat_index) { return static_cast<std::int32_t>(flat_index); }

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

}  // namespace

// Element mode without materializing the gathered rows: member k packs its
// piece moved along its tensor_dim at the start of row k, and the receiver
// reads split_sizes[k] x rest elements of row k (check_reads: exactly the
// member's piece, so never padding) as the next rows of its unpacked piece.
// The value at position j of row k is member k's j-th element's global flat
// index (a walk over its moved box); the receiver expects the j-th element
// of its own rows (a walk over its moved shape from row0). Both walks are
// compared run by run: a run that starts equal with equal steps, and does
// not leave int32, is equal throughout.
std::optional<Box> muon_unpack_elements(const Shape& global, const std::vector<MuonMember>& members,
                                        std::size_t receiver, std::string& why) {
  if (!members_addressable(global, members, why)) return std::nullopt;
  const MuonMember& own = members[receiver];
  const int d = own.entry->tensor_dim;
  const auto du = static_cast<std::size_t>(d);
  const std::int64_t rest_n = numel(without_dim(own.box.shape, d));
  if (!check_reads(members, own, rest_n, why)) return std::nullopt;
  Shape shape = own.box.shape;
  shape[du] = 0;
  for (std::size_t k = 0; k < members.size(); ++k) shape[du] += own.entry->split_sizes[k];
  Box unpacked{Shape(global.size(), 0), shape};
  if (numel(shape) == 0) return unpacked;
  const Shape gs = strides_of(global);
  // The first element read decides the origin: member `first`'s own origin.
  std::size_t first = 0;
  while (first < members.size() && own.entry->split_sizes[first] * rest_n == 0) ++first;
  if (first == members.size() || value(flat_origin(gs, members[first].box.offset)) < 0) {
    why = "the first unpacked element is padding";
    return std::nullopt;
  }
  unpacked.offset = unflat(value(flat_origin(gs, members[first].box.offset)), global);
  if (!inside(unpacked, global)) {
    why = "unpacked piece " + box_text(unpacked) + " leaves the global shape " + shape_text(global);
    return std::nullopt;
  }
  const std::int64_t base = flat(gs, unpacked.offset);
  const Shape want_stride = moved(gs, du);
  std::int64_t row0 = 0;  // position along d of the current member's first row
  for (std::size_t k = 0; k < members.size(); ++k) {
    const std::int64_t count = own.entry->split_sizes[k] * rest_n;
    const auto dk = static_cast<std::size_t>(members[k].entry->tensor_dim);
    Walk got(moved(members[k].box.shape, dk), moved(gs, dk));
    Shape want_ext = moved(shape, du);
    want_ext[0] = own.entry->split_sizes[k];
    Walk want(want_ext, want_stride);
    const std::int64_t got0 = flat_origin(gs, members[k].box.offset);
    const std::int64_t want0 = base + row0 * gs[du];
    for (std::int64_t j = 0; j < count;) {
      const std::int64_t span = std::min({got.run(), want.run(), count - j});
      const std::int64_t got_at = got0 + got.offset();
      const std::int64_t want_at = want0 + want.offset();
      const std::int64_t last = got_at + (span - 1) * got.step();
      if (got_at != want_at || got.step() != want.step() || got_at < 0 || last > INT32_MAX) {
        for (std::int64_t t = 0; t < span; ++t) {
          const std::int32_t got_value = value(got_at + t * got.step());
          const std::int64_t expect = want_at + t * want.step();
          if (got_value != expect) {
            why = "member " + std::to_string(k) + " element " + std::to_string(j + t) +
                  ": expected " + std::to_string(expect) + ", got " +
                  (got_value < 0 ? "padding" : std::to_string(got_value));
            return std::nullopt;
          }
        }
      }
      got.advance(span);
      want.advance(span);
      j += span;
    }
    row0 += count / rest_n;
  }
  return unpacked;
}

std::optional<Box> muon_unpack_boxes(const Shape& global, const std::vector<MuonMember>& members,
                                     std::size_t receiver, std::string& why) {
  if (!members_addressable(global, members, why)) return std::nullopt;
  const MuonMember& own = members[receiver];
  const int d = own.entry->tensor_dim;
  const auto du = static_cast<std::size_t>(d);
  const Shape rest = without_dim(own.box.shape, d);
  if (!check_reads(members, own, numel(rest), why)) return std::nullopt;
  Box out{Shape(global.size(), 0), own.box.shape};
  out.shape[du] = std::accumulate(own.entry->split_sizes.begin(), own.entry->split_sizes.end(),
                                  std::int64_t{0});
  if (is_empty(out)) return out;
  std::optional<Box> prev;
  for (std::size_t k = 0; k < members.size(); ++k) {
    const Box& piece = members[k].box;
    if (is_empty(piece)) continue;
    if (members[k].entry->tensor_dim != d || without_dim(piece.shape, d) != rest) {
      why = "member " + std::to_string(k) + " piece " + box_text(piece) + " is not laid out as " +
            shape_text(own.box.shape) + " along dim " + std::to_string(d);
      return std::nullopt;
    }
    Box next_expected = prev ? *prev : piece;
    if (prev) next_expected.offset[du] += prev->shape[du];
    if (prev && piece.offset != next_expected.offset) {
      why = "member " + std::to_string(k) + " piece " + box_text(piece) + " does not continue " +
            box_text(*prev) + " along dim " + std::to_string(d);
      return std::nullopt;
    }
    if (!prev) out.offset = piece.offset;
    prev = piece;
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
Shape real_unsharded(const std::vector<Fsdp2Member>& members, int d) {
  Shape real(members.front().box.shape.size(), 0);
  for (const Fsdp2Member& member : members) {
    if (is_empty(member.box)) continue;
    for (std::size_t e = 0; e < real.size(); ++e)
      real[e] = static_cast<int>(e) == d ? real[e] + member.box.shape[e] : member.box.shape[e];
  }
  if (numel(real) == 0) real.assign(real.size(), 0);
  return real;
}

bool fsdp2_shapes_ok(const std::vector<Fsdp2Member>& members, const Fsdp2Member& own,
                     std::string& why) {
  const int d = own.entry->shard_dim;
  const Shape& pad = own.entry->padded_shape;
  const Shape& un = own.entry->unsharded_shape;
  if (un.size() != pad.size() || without_dim(un, d) != without_dim(pad, d) ||
      un[static_cast<std::size_t>(d)] >
          pad[static_cast<std::size_t>(d)] * static_cast<std::int64_t>(members.size())) {
    why = "unsharded_shape " + shape_text(un) + " is not " + std::to_string(members.size()) +
          " padded shards " + shape_text(pad) + " along dim " + std::to_string(d);
    return false;
  }
  std::int64_t held = 0;
  const Shape real = real_unsharded(members, d);
  for (std::size_t k = 0; k < members.size(); ++k) {
    const Shape& ls = members[k].box.shape;
    held += numel(ls);
    bool fits = members[k].entry->padded_shape == pad && ls.size() == pad.size();
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

}  // namespace

// Element mode without materializing the gathered rows: row k is member k's
// padded shard, flattened, holding its piece's global flat indices (as
// int32) where the piece is and padding elsewhere; the receiver views the
// rows as padded shards concatenated along the FSDP dim. Each element of the
// unsharded tensor reads slot (k, local) = (element[d] / pad[d], element with
// element[d] % pad[d]): a value when local is inside member k's piece. The
// innermost dim is walked in segments where "inside the piece" and "real"
// do not change; a real segment inside the piece whose first value is the
// expected one (same step, within int32) is right throughout.
std::optional<Box> fsdp2_unpack_elements(const Shape& global,
                                         const std::vector<Fsdp2Member>& members,
                                         std::size_t receiver, std::string& why) {
  if (!members_addressable(global, members, why)) return std::nullopt;
  const Fsdp2Member& own = members[receiver];
  if (!fsdp2_shapes_ok(members, own, why)) return std::nullopt;
  const Shape& pad = own.entry->padded_shape;
  const auto d = static_cast<std::size_t>(own.entry->shard_dim);
  const Shape& un = own.entry->unsharded_shape;
  Shape gs = strides_of(global);
  gs.resize(un.size(), 0);  // (verify passes shapes with the global's dims)
  // Real rows are a prefix box of the unsharded tensor; the rest is padding.
  const Shape real = real_unsharded(members, own.entry->shard_dim);
  Box out{Shape(global.size(), 0), real};
  if (numel(un) == 0) return out;  // nothing unpacked (real is empty too)
  // The slot of `element`: its member and its index in the member's piece.
  const auto slot_of = [&](const Shape& element, Shape& local) {
    local = element;
    local[d] = element[d] % pad[d];
    return static_cast<std::size_t>(element[d] / pad[d]);
  };
  const auto in_piece = [](const Box& piece, const Shape& local, std::size_t upto) {
    for (std::size_t e = 0; e < upto; ++e)
      if (local[e] >= piece.shape[e]) return false;
    return true;
  };
  Shape element(un.size(), 0);
  Shape local;
  if (numel(real) > 0) {
    // The first element (element = 0) is real: its value decides the origin.
    const Box& b0 = members[slot_of(element, local)].box;
    const std::int32_t got =
        in_piece(b0, local, un.size()) ? value(flat_origin(gs, b0.offset)) : kPad;
    if (got < 0) {
      why = "the first unsharded element is padding";
      return std::nullopt;
    }
    out.offset = unflat(got, global);
  }
  const std::int64_t out_flat = flat_origin(gs, out.offset);
  const std::size_t last = un.size() - 1;  // the innermost dim, walked in segments
  const std::int64_t step = gs[last];
  for (;;) {
    // One row: element[0 .. last) fixed, element[last] from 0 to un[last].
    bool outer_real = true;
    std::int64_t row_flat = out_flat;  // expected value at element[last] = 0
    for (std::size_t e = 0; e < last; ++e) {
      outer_real = outer_real && element[e] < real[e];
      row_flat += element[e] * gs[e];
    }
    for (std::int64_t lo = 0; lo < un[last];) {
      element[last] = lo;
      const std::size_t k = slot_of(element, local);
      const Box& piece = members[k].box;
      const std::int64_t koff = lo - local[last];  // element[last] of the slot's local 0
      // The chunk of the row in slot k (one chunk unless the row runs along d).
      const std::int64_t chunk_end = last == d ? std::min(un[last], koff + pad[last]) : un[last];
      const bool outer_in = in_piece(piece, local, last);
      const std::int64_t piece_end =
          outer_in ? std::clamp(koff + piece.shape[last], lo, chunk_end) : lo;
      const std::int64_t real_end = outer_real ? std::clamp(real[last], lo, chunk_end) : lo;
      // Value of the element at element[last] = x inside the piece: piece_flat + x * step.
      std::int64_t piece_flat = flat_origin(gs, piece.offset) - koff * step;
      for (std::size_t e = 0; e < last; ++e) piece_flat += local[e] * gs[e];
      for (std::int64_t s = lo; s < chunk_end;) {
        const bool inside_piece = s < piece_end;
        const bool is_real = s < real_end;
        std::int64_t end = chunk_end;
        if (s < piece_end) end = std::min(end, piece_end);
        if (s < real_end) end = std::min(end, real_end);
        const std::int64_t g0 = piece_flat + s * step;
        const std::int64_t e0 = row_flat + s * step;
        const bool fast =
            (!inside_piece && !is_real) || (inside_piece && is_real && g0 == e0 && g0 >= 0 &&
                                            g0 + (end - s - 1) * step <= INT32_MAX);
        for (std::int64_t x = s; !fast && x < end; ++x) {
          const std::int32_t got = inside_piece ? value(piece_flat + x * step) : kPad;
          element[last] = x;
          if (!is_real && got >= 0) {
            why =
                "element " + shape_text(element) + " should be padding, got " + std::to_string(got);
            return std::nullopt;
          }
          const std::int64_t expect = row_flat + x * step;
          if (is_real && got != expect) {
            why = "element " + shape_text(element) + ": expected " + std::to_string(expect) +
                  ", got " + (got < 0 ? "padding" : std::to_string(got));
            return std::nullopt;
          }
        }
        s = end;
      }
      lo = chunk_end;
    }
    // Next row: the outer dims as an odometer.
    std::size_t carry = last;
    while (carry > 0 && ++element[carry - 1] == un[carry - 1]) element[--carry] = 0;
    if (carry == 0) break;
    element[last] = 0;
  }
  if (!is_empty(out) && !inside(out, global)) {
    why = "unsharded piece " + box_text(out) + " leaves the global shape";
    return std::nullopt;
  }
  return out;
}

std::optional<Box> fsdp2_unpack_boxes(const Shape& global, const std::vector<Fsdp2Member>& members,
                                      std::size_t receiver, std::string& why) {
  if (!members_addressable(global, members, why)) return std::nullopt;
  const Fsdp2Member& own = members[receiver];
  if (!fsdp2_shapes_ok(members, own, why)) return std::nullopt;
  const auto d = static_cast<std::size_t>(own.entry->shard_dim);
  const std::int64_t slot_rows = own.entry->padded_shape[d];
  const Shape real = real_unsharded(members, own.entry->shard_dim);
  Box out{Shape(global.size(), 0), real};
  if (is_empty(out)) return out;
  // Real rows of member k must be exactly rows [k c, min((k+1) c, R)) of
  // the real prefix R (pad rows of a padded dim follow it).
  for (std::size_t k = 0; k < members.size(); ++k) {
    const auto kk = static_cast<std::int64_t>(k);
    const std::int64_t want = std::clamp<std::int64_t>(real[d] - kk * slot_rows, 0, slot_rows);
    const Box& piece = members[k].box;
    if (piece.shape[d] != want && !(want == 0 && is_empty(piece))) {
      why = "member " + std::to_string(k) + " holds " + std::to_string(piece.shape[d]) +
            " rows on dim " + std::to_string(d) + ", its slot of the unsharded tensor has " +
            std::to_string(want);
      return std::nullopt;
    }
    if (want == 0) continue;
    Box at = piece;
    at.offset[d] -= kk * slot_rows;
    if (k == 0) out.offset = at.offset;
    if (at.offset != out.offset) {
      why = "member " + std::to_string(k) + " piece " + box_text(piece) +
            " is not at its slot after member 0's " + box_text(members[0].box);
      return std::nullopt;
    }
  }
  if (!inside(out, global)) {
    why = "unsharded piece " + box_text(out) + " leaves the global shape";
    return std::nullopt;
  }
  return out;
}

void append_key(std::string& key, std::int64_t value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void append_key(std::string& key, const std::vector<std::int64_t>& values) {
  append_key(key, static_cast<std::int64_t>(values.size()));
  if (!values.empty())
    key.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(std::int64_t));
}

void append_piece_key(std::string& key, const Box& piece, const Shape& anchor) {
  Shape relative = piece.offset;
  for (std::size_t d = 0; d < relative.size(); ++d) relative[d] -= anchor[d];
  if (is_empty(piece)) relative.assign(1, -1);
  append_key(key, relative);
  append_key(key, piece.shape);
}

}  // namespace shardc::verify
