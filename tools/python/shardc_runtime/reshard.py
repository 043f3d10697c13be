"""A `shardc reshard PLAN_A PLAN_B` listing as messages (pure numpy).

The listing (`shardc.reshard/v1`, schemas/reshard.schema.json) says, for every
plan-B rank and param, which boxes to read from which plan-A rank (`src`),
where the box starts in the source's unpadded plan-A local tensor
(`src_offset`) and in the destination's (`dst_offset`); for a packed param (rank-file
`boxes`) that local tensor is its boxes concatenated, each at its `local_offset`, and
every read lies inside one box on either side. `plan_messages`
inverts it: each source sends each destination one message holding, in listing
order, every box that destination reads from it; `pack_message` builds one.
Boxes with src == dst are local copies. The send/recv executor is
`shardc_runtime.torch.reshard`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import PlanError
from .safetensors_io import Array

Read = dict[str, Any]
Message = list[tuple[str, str, Read]]


def box_of(array: Array, offset: list[int], shape: list[int]) -> Array:
    """The view of `array` at `offset` with `shape` (numpy basic slicing)."""
    return array[tuple(slice(o, o + s) for o, s in zip(offset, shape))]


def plan_messages(listing: Mapping[str, Any]) -> dict[tuple[int, int], Message]:
    """{(src, dst): [(param name, dtype, read)]} of every transfer (src != dst),
    in listing order (destination ascending, params, reads)."""
    msgs: dict[tuple[int, int], Message] = {}
    for dest in listing["ranks"]:
        for p in dest["params"]:
            for read in p["reads"]:
                if read["src"] != dest["rank"]:
                    msgs.setdefault((read["src"], dest["rank"]), []).append(
                        (p["name"], p["dtype"], read))
    return msgs


def pack_message(items: Message, source: Mapping[str, Array]) -> Array:
    """The uint8 bytes of one message: every item's box of this rank's plan-A
    shard (`source`: {name: unpadded plan-A local array}), in order."""
    parts = []
    for name, _, read in items:
        if name not in source:
            raise PlanError(f"reshard: asked to send {name} {read['src_offset']}+{read['shape']}, "
                            "which this rank does not hold under plan A")
        box = box_of(source[name], read["src_offset"], read["shape"])
        if list(box.shape) != list(read["shape"]):
            raise PlanError(f"reshard: {name} box {read['src_offset']}+{read['shape']} leaves the "
                            f"plan-A shard {list(source[name].shape)}")
        parts.append(np.ascontiguousarray(box).reshape(-1).view(np.uint8))
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)
