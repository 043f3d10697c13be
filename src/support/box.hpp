// Boxes of a tensor (no domain knowledge): an offset and an extent per dim,
// in ELEMENTS. The one box type of reshard's transfers and verify's
// simulator; a packed param's ShardBox (core/plan.hpp) adds its local offset.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "support/shape.hpp"

namespace shardc {

/// `shape` elements starting at `offset`, per dim.
struct Box {
  Shape offset;
  Shape shape;
  bool operator==(const Box&) const = default;
};

/// Elements in `box` (product of its shape; 1 for a 0-dim box).
[[nodiscard]] std::int64_t numel(const Box& box);

/// True when some dim of `box` is empty (it holds no element).
[[nodiscard]] bool is_empty(const Box& box);

/// The intersection of two boxes of the same ndim; nullopt when it holds no
/// element (any dim empty, or the ndims differ).
[[nodiscard]] std::optional<Box> intersect(const Box& first, const Box& second);

/// `inner.offset - outer.offset` per dim: where `inner` starts inside
/// `outer`'s local tensor. Precondition: same ndim.
[[nodiscard]] Shape offset_within(const Box& inner, const Box& outer);

/// "[o0, o1] + [s0, s1]".
[[nodiscard]] std::string box_text(const Box& box);

}  // namespace shardc
