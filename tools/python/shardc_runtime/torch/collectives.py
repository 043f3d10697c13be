"""torch.distributed plumbing: process groups by rank list, byte all-gathers,
the FSDP2 / muon all-gathers of the plan's buffer layouts, and the param
all-gather of a flat optimizer buffer (megatron_distopt / deepspeed_zero).

Every collective moves raw bytes (torch.uint8 tensors), so any dtype — bf16,
float8, bool, mixed dtypes in one FSDP2 unit — crosses gloo bit for bit.

torch's `new_group(ranks)` orders the group by ascending global rank, while
shardc lists a group's ranks by split coordinate (rank-file order). `all_gather`
below returns the pieces in the *rank file's* order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from .. import flat, fsdp2, muon
from ..errors import PlanError
from ..layout import FlatBuffer, Fsdp2Unit, MuonGroup, RankFile
from ..safetensors_io import Array


class Groups:
    """Process groups by rank list, created collectively.

    `ensure(rank_lists)` must be called by every process of the default group
    with the rank lists it needs (possibly none): the lists are exchanged
    (all_gather_object), and every group any process needs is created on all
    of them in one sorted order, as `torch.distributed.new_group` requires.
    """

    def __init__(self) -> None:
        self._groups: dict[tuple[int, ...], Any] = {}

    def ensure(self, rank_lists: Sequence[Sequence[int]]) -> None:
        mine = sorted({tuple(sorted(ranks)) for ranks in rank_lists if len(ranks) > 1})
        for key in mine:
            if len(set(key)) != len(key):
                raise PlanError(f"a group lists a rank twice: {list(key)[:16]}")
        everyone: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
        for key in sorted({tuple(k) for lst in everyone for k in lst}):
            if key not in self._groups:
                self._groups[key] = dist.new_group(list(key))

    def get(self, ranks: Sequence[int]) -> Any:
        """The group of `ranks` (any order); call `ensure` first."""
        return self._groups[tuple(sorted(ranks))]


def all_gather(groups: Groups, ranks: Sequence[int], data: Array) -> Array:
    """All-gather the uint8 numpy array `data` (same size on every member) over
    `ranks` (rank-file order). Returns a [len(ranks), data.size] uint8 array whose
    row k is member k's data."""
    members = list(ranks)
    if len(members) == 1:
        return data.reshape(1, -1).copy()
    if data.size == 0:  # e.g. an EP rank without experts: every member's slot is empty,
        return np.zeros((len(members), 0), np.uint8)  # and gloo aborts on 0-byte all-gathers
    tensor = torch.from_numpy(np.ascontiguousarray(data))
    outs = [torch.empty_like(tensor) for _ in members]
    dist.all_gather(outs, tensor, group=groups.get(members))
    by_rank = dict(zip(sorted(members), outs))  # torch orders groups by rank
    return np.stack([by_rank[r].numpy() for r in members])


def allgather_unit(groups: Groups, unit: Fsdp2Unit, rank_file: RankFile,
                   arrays: Mapping[str, Array]) -> dict[str, Array]:
    """Pack, all-gather over the unit's FSDP group with real collectives, unpack.
    Returns {name: unsharded array}. `groups` must know unit.ranks."""
    gathered = all_gather(groups, unit.ranks, fsdp2.pack_unit(unit, rank_file, arrays))
    return fsdp2.unpack_unit(unit, rank_file, gathered)


def allgather_flat(groups: Groups, fb: FlatBuffer, arrays: Mapping[str, Array]) -> Array:
    """Megatron's param all-gather of a flat buffer: this rank builds its buffer from
    `arrays` ({name: rank-local array}; ZeRO-3: the unsharded TP-local tensors), keeps
    its shard of every bucket, and all-gathers the shards bucket by bucket over the DP
    group (`fb.ranks`, which `groups` must know). Returns the reassembled buffer as
    uint8 bytes (numel x element size)."""
    mine = flat.shard(fb, flat.build_buffer(fb, arrays))
    per_member: list[list[Array]] = [[] for _ in fb.ranks]
    for piece in mine:
        gathered = all_gather(groups, fb.ranks, np.ascontiguousarray(piece).view(np.uint8))
        for k in range(len(fb.ranks)):
            per_member[k].append(gathered[k])
    return flat.assemble(fb, per_member)


def allgather_group(groups: Groups, group: MuonGroup, rank_file: RankFile,
                    arrays: Mapping[str, Array]) -> dict[str, Array]:
    """Run every batch's stages with real all-gathers; returns {name: full
    (global) tensor} for the group's params. `arrays`: {name: local shard or
    padded shard} (the unpadded local view is taken)."""
    full: dict[str, Array] = {}
    for batch in group.batches:
        current = {}
        for name in batch.params:
            p = rank_file.params[name]
            current[name] = np.ascontiguousarray(
                arrays[name][tuple(slice(0, extent) for extent in p.local_shape)])
        for index, stage in enumerate(group.stages):
            slot, layout = muon.pack_stage(group, batch, index, current)
            gathered = all_gather(groups, stage.ranks, slot)
            current = muon.unpack_stage(group, batch, index, gathered, layout)
        full.update(current)
    for name in group.params:  # a group with no sharding stage: every rank holds the full tensor
        if name not in full and not group.stages:
            full[name] = np.array(arrays[name])
    return full
