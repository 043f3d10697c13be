"""The plan's checkpoint as `torch.distributed.checkpoint` metadata.

`checkpoint_metadata(outdir)` returns a real
`torch.distributed.checkpoint.metadata.Metadata`: per param (FQN) a
`TensorStorageMetadata(TensorProperties(dtype), Size(global_shape), chunks)`
with one `ChunkStorageMetadata(offsets, sizes)` per distinct non-empty shard
(plan.json `shards`; per box of a packed param's shard, since a DCP chunk is
one box), in plan order. `storage_data` is None: byte placement is the
storage writer's (FileSystemWriter serializes each chunk itself), the plan
only decides what is written.

Where it differs from what `dcp.save(model.state_dict())` writes with torch 2.13
(found on gloo, trial E 8), by choice, for comparing layouts:
* empty shards are left out; DCP writes a zero-size chunk for them too;
* a tied alias sharing its source's storage is not a tensor of its own
  (`aliases(outdir)` lists them); `state_dict()` holds both keys, so DCP writes
  the alias as a tensor with the source's chunks;
* `chunk_writers` gives the lowest rank of each chunk's replica set: the writer
  with `DefaultSavePlanner(dedup_save_to_lowest_rank=True)`; the default
  (False) lets DCP's dedup pick writers to balance the load.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.checkpoint.metadata import (ChunkStorageMetadata, Metadata,
                                                   TensorProperties, TensorStorageMetadata)

from ..layout import OutDir, numel
from ..rankset import parse_rank_set
from .tensors import torch_dtype

ChunkKey = tuple[str, tuple[int, ...]]


def _chunks(outdir: OutDir, p: dict[str, Any]) -> list[tuple[tuple[int, ...], tuple[int, ...],
                                                             int]]:
    """(offsets, sizes, writer) of every non-empty box of a plan param."""
    out = []
    for index, shard in enumerate(p["shards"]):
        writer = parse_rank_set(shard["ranks"], outdir.world_size,
                                f"plan.json {p['name']} shards[{index}].ranks").first
        boxes = shard.get("boxes") or [{"global_offset": shard["global_offset"],
                                        "shape": shard["local_shape"]}]
        for box in boxes:  # a packed param's piece is several boxes: one chunk each
            if numel(box["shape"]) > 0:
                out.append((tuple(box["global_offset"]), tuple(box["shape"]), writer))
    return out


def checkpoint_metadata(outdir: OutDir) -> Metadata:
    """The DCP `Metadata` of the plan's checkpoint (see module doc)."""
    state: dict[str, Any] = {}
    for p in outdir.plan["params"]:
        if p.get("alias_of"):
            continue
        chunks = [ChunkStorageMetadata(offsets=torch.Size(off), sizes=torch.Size(size))
                  for off, size, _ in _chunks(outdir, p)]
        state[p["name"]] = TensorStorageMetadata(
            properties=TensorProperties(dtype=torch_dtype(p["dtype"])),
            size=torch.Size(p["global_shape"]), chunks=chunks)
    return Metadata(state_dict_metadata=state)


def chunk_writers(outdir: OutDir) -> dict[ChunkKey, int]:
    """{(fqn, chunk offsets): lowest rank holding the chunk} (DCP's writer under
    `dedup_save_to_lowest_rank=True`; see the module doc)."""
    return {(p["name"], off): writer for p in outdir.plan["params"] if not p.get("alias_of")
            for off, _, writer in _chunks(outdir, p)}


def aliases(outdir: OutDir) -> dict[str, str]:
    """{alias FQN: source FQN} of the tied params that share storage."""
    return {p["name"]: p["alias_of"] for p in outdir.plan["params"] if p.get("alias_of")}


def write_items(outdir: OutDir, rank: int) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """The chunks `rank` writes when each is written by its lowest holder:
    [(fqn, offsets, sizes)] in plan order."""
    return [(p["name"], off, size) for p in outdir.plan["params"] if not p.get("alias_of")
            for off, size, writer in _chunks(outdir, p) if writer == rank]
