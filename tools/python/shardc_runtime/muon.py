"""Muon all-gather by the plan's `muon_allgather` layout (contract §6.3).

For each group and batch, stages run innermost split first. At stage s each
param's current piece (initially its unpadded local shard) has `tensor_dim`
moved to dim 0 and is written at `offset` of a per-rank slot of
`total_numel[s]` elements (the batch dtype), zero-filled to `padded_numel`:
numel(pad_shape) rounded up to alignment_bytes / element_size elements, where
pad_shape is the input shape with tensor_dim set to max(split_sizes[s]). After
the all-gather, member k contributes its first split_sizes[s][k] x rest
elements; concatenated and moved back they are the next stage's input. After
the last stage every param is its global tensor; `slice_back` cuts this rank's
piece out of a full tensor (last stage first).

Every derived value (offsets, padded sizes, totals, shapes) is computed from
split_sizes and the local shape (the rank file writes only those). Pure numpy; the collectives are `shardc_runtime.torch.allgather_group`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from . import dtypes
from .errors import PlanError
from .layout import MuonBatch, MuonGroup, RankFile, Shape, numel
from .safetensors_io import Array

Layout = dict[str, tuple[int, int, list[int]]]


def _align_elems(group: MuonGroup, dtype: str) -> int:
    return max(1, group.alignment_bytes // dtypes.element_size(dtype))


def stage_layout(group: MuonGroup, batch: MuonBatch, stage: int,
                 shapes: Mapping[str, Shape | list[int]]) -> tuple[Layout, int]:
    """{name: (offset, padded_numel, input shape)} of stage s of `batch`, and the
    slot total, from the current `shapes` {name: input shape at stage s}."""
    dim, off = group.stages[stage].tensor_dim, 0
    out: Layout = {}
    for name in batch.params:
        shape = list(shapes[name])
        pad = shape[:]
        pad[dim] = max(group.split_sizes[name][stage])
        align = _align_elems(group, batch.dtype)
        padded = -(-numel(pad) // align) * align
        out[name] = (off, padded, shape)
        off += padded
    return out, off


def input_shapes(group: MuonGroup, batch: MuonBatch, rank_file: RankFile,
                 stage: int) -> dict[str, list[int]]:
    """Input shape of each param of `batch` at stage s: local_shape with every
    earlier stage's tensor_dim set to that stage's gathered extent."""
    shapes: dict[str, list[int]] = {}
    for name in batch.params:
        shape = list(rank_file.params[name].local_shape)
        for earlier in range(stage):
            shape[group.stages[earlier].tensor_dim] = sum(group.split_sizes[name][earlier])
        shapes[name] = shape
    return shapes


def pack_stage(group: MuonGroup, batch: MuonBatch, stage: int,
               current: Mapping[str, Array]) -> tuple[Array, Layout]:
    """uint8 slot of stage s from {name: current piece}; returns (slot, layout)."""
    layout, total = stage_layout(group, batch, stage, {name: current[name].shape for name in batch.params})
    if total != batch.total_numel[stage]:
        raise PlanError(f"muon {group.key} stage {stage}: total_numel {batch.total_numel[stage]} != "
                        f"derived {total}")
    st, sdt = group.stages[stage], dtypes.storage_dtype(batch.dtype)
    slot = np.zeros(total, dtype=sdt)
    for name, (off, _, shape) in layout.items():
        if shape[st.tensor_dim] != group.split_sizes[name][stage][st.index]:
            raise PlanError(f"muon {name} stage {stage}: piece extent {shape[st.tensor_dim]} != "
                            f"split_sizes[{st.index}] {group.split_sizes[name][stage][st.index]}")
        piece = np.moveaxis(current[name], st.tensor_dim, 0).reshape(-1)
        slot[off:off + piece.size] = piece
    return slot.view(np.uint8), layout


def unpack_stage(group: MuonGroup, batch: MuonBatch, stage: int, gathered: Array,
                 layout: Layout) -> dict[str, Array]:
    """{name: gathered piece} from the [G, slot bytes] uint8 all-gather output."""
    st, sdt = group.stages[stage], dtypes.storage_dtype(batch.dtype)
    out: dict[str, Array] = {}
    for name, (off, _, shape) in layout.items():
        rest = list(np.moveaxis(np.empty(shape, dtype=np.uint8), st.tensor_dim, 0).shape[1:])
        parts = []
        for k, size in enumerate(group.split_sizes[name][stage]):
            row = gathered[k].view(sdt)
            parts.append(row[off:off + size * numel(rest)].reshape([size] + rest))
        out[name] = np.ascontiguousarray(np.moveaxis(np.concatenate(parts, axis=0), 0, st.tensor_dim))
    return out


def slice_back(group: MuonGroup, name: str, full: Array) -> Array:
    """This rank's piece of a full tensor (e.g. the owner's update), last stage
    first: narrow(tensor_dim, sum(split_sizes[s][:index]), split_sizes[s][index])."""
    out = full
    for stage in reversed(range(len(group.stages))):
        st, sizes = group.stages[stage], group.split_sizes[name][stage]
        start = sum(sizes[:st.index])
        out = np.take(out, range(start, start + sizes[st.index]), axis=st.tensor_dim)
    return out


def rank_lists(rank_file: RankFile) -> list[list[int]]:
    """Every group rank list the rank's muon and FSDP2 layouts gather over."""
    lists = [list(st.ranks) for g in rank_file.muon for st in g.stages]
    return lists + [list(u.ranks) for u in rank_file.fsdp2]
