"""Muon all-gather by the plan's `muon_allgather` layout (contract §6.3).

For each group and batch, stages run innermost split first. At stage s each
param's current piece (initially its unpadded local shard) has `tensor_dim`
moved to dim 0 and is written at its slot's `offset` of a per-rank slot of
`total_numel[s]` elements (the batch dtype), zero-filled to `padded_numel`.
After the all-gather, member k contributes its first split_sizes[s][k] x rest
elements; concatenated and moved back they are the next stage's input. After
the last stage every param is its global tensor; `slice_back` cuts this rank's
piece out of a full tensor (last stage first).

The slots (offsets, padded sizes, input shapes) are the rank file's layout as
`RankFile` reads it (`MuonBatch.slots`, derived once by the reader from the
split sizes and checked against `total_numel`); this module only packs and
unpacks by them, and refuses a piece whose shape is not its slot's. Pure numpy;
the collectives are `shardc_runtime.torch.allgather_group`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from . import dtypes
from .errors import PlanError
from .layout import MuonBatch, MuonGroup, MuonSlot, RankFile
from .safetensors_io import Array

Layout = Mapping[str, MuonSlot]


def pack_stage(group: MuonGroup, batch: MuonBatch, stage: int,
               current: Mapping[str, Array]) -> tuple[Array, Layout]:
    """uint8 slot of stage s from {name: current piece}; returns (slot, layout)."""
    layout = batch.slots[stage]
    st, sdt = group.stages[stage], dtypes.storage_dtype(batch.dtype)
    slot = np.zeros(batch.total_numel[stage], dtype=sdt)
    for name, place in layout.items():
        if tuple(current[name].shape) != place.input_shape:
            raise PlanError(f"muon {name} stage {stage}: piece {list(current[name].shape)} is "
                            f"not the rank file's {list(place.input_shape)}")
        piece = np.moveaxis(current[name], st.tensor_dim, 0).reshape(-1)
        slot[place.offset:place.offset + piece.size] = piece
    return slot.view(np.uint8), layout


def unpack_stage(group: MuonGroup, batch: MuonBatch, stage: int, gathered: Array,
                 layout: Layout) -> dict[str, Array]:
    """{name: gathered piece} from the [G, slot bytes] uint8 all-gather output; `layout`
    is the member's own (`pack_stage`): the other members' slots sit at the same offsets."""
    st, sdt = group.stages[stage], dtypes.storage_dtype(batch.dtype)
    out: dict[str, Array] = {}
    for name, place in layout.items():
        rest = list(np.moveaxis(np.empty(place.input_shape, dtype=np.uint8), st.tensor_dim,
                                0).shape[1:])
        parts = []
        for k, size in enumerate(group.split_sizes[name][stage]):
            row = gathered[k].view(sdt)
            count = size * int(np.prod(rest, dtype=np.int64))
            parts.append(row[place.offset:place.offset + count].reshape([size] + rest))
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
