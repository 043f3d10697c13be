"""Flat optimizer buffers by a plan's `megatron_distopt` / `deepspeed_zero`
layout (src/planner/buffers.hpp, docs/megatron.md), pure numpy.

A rank's buffer holds its rank-local tensors flattened at each piece's `start`
(padding zero); bucket j of `numel` elements is cut into len(ranks) equal
contiguous shards and rank `index` owns shard `index` of every bucket: the
fp32 main params and optimizer state of the `owned` ranges. `shard` cuts this
rank's shards out of a buffer (what Megatron's reduce-scatter leaves it and its
param all-gather sends); `assemble` rebuilds a buffer from every member's
shards, bucket by bucket, as the all-gather does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from . import dtypes
from .errors import PlanError
from .layout import FlatBuffer
from .safetensors_io import Array


def build_buffer(fb: FlatBuffer, arrays: Mapping[str, Array]) -> Array:
    """The whole buffer (`numel` elements of param_dtype's storage) from
    {name: rank-local array} (ZeRO-3: the unsharded TP-local tensor)."""
    sdt = dtypes.storage_dtype(fb.param_dtype)
    buf = np.zeros(fb.numel, dtype=sdt)
    for p in fb.pieces:
        flat = np.ascontiguousarray(arrays[p.name]).reshape(-1)
        if p.param_offset + p.numel > flat.size or p.start + p.numel > fb.numel:
            raise PlanError(f"{p.name}: piece [{p.param_offset}, {p.param_offset + p.numel}) "
                            f"of {flat.size} elements at {p.start} does not fit the buffer "
                            f"of {fb.numel}")
        buf[p.start:p.start + p.numel] = flat[p.param_offset:p.param_offset + p.numel].view(sdt)
    return buf


def shard(fb: FlatBuffer, buffer: Array) -> list[Array]:
    """This rank's shard of every bucket (views of `buffer`)."""
    ways = len(fb.ranks)
    out = []
    for start, end, _ in fb.buckets:
        size = (end - start) // ways
        out.append(buffer[start + fb.index * size:start + (fb.index + 1) * size])
    return out


def assemble(fb: FlatBuffer, shards: Sequence[Sequence[Array]]) -> Array:
    """The buffer from shards[k][j] = member k's shard of bucket j."""
    if len(shards) != len(fb.ranks):
        raise PlanError(f"{len(shards)} members' shards for a group of {len(fb.ranks)}")
    parts: list[Array] = []
    for j in range(len(fb.buckets)):
        parts.extend(shards[k][j] for k in range(len(fb.ranks)))
    return np.concatenate(parts) if parts else np.zeros(0)


def owned_ranges(fb: FlatBuffer) -> list[tuple[str, int, int, int]]:
    """(name, param_offset, numel, buffer_start) per owned range, buffer order:
    the param elements whose fp32 main params and optimizer state this rank
    keeps (Megatron's "param" and "gbuf_world" ranges)."""
    return [(fb.pieces[piece].name, off, n, start) for piece, off, n, start in fb.owned]
