"""Loading a rank's shards from a safetensors checkpoint (numpy, bit patterns).

`load_rank(rank_file, checkpoint)` reads only the boxes the rank file names
(`Checkpoint.read_box`: a slice of each box, never a whole tensor unless the
rank holds all of it) and returns numpy arrays shaped `padded_shape`, FSDP2
padding (at the end of the FSDP dim) zero-filled. Tied aliases share their
source's array; a tied copy on another stage reads the tie source when the
checkpoint lacks the alias (Hugging Face checkpoints store tied weights once);
stacked experts read each expert's own tensor (plan.json `stacked_from`) unless
the checkpoint holds the stacked name. Every tensor read must have the plan's
dtype and shape (the global shape, or one expert's slab of it): a checkpoint
of another layout with the same byte count is refused (`CheckpointError`),
never read as the plan's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from . import dtypes
from .errors import CheckpointError
from .layout import ParamInfo, RankFile, Shape
from .safetensors_io import Array, Checkpoint


@dataclass(frozen=True)
class LoadedRank:
    """What `load_rank` returns: arrays {name: numpy array of padded_shape,
    storage dtype} (an alias maps to its source's array object), the RankFile
    (`info`), and the checkpoint data bytes read for this rank."""

    info: RankFile
    arrays: Mapping[str, Array]
    bytes_read: int

    def padded(self, name: str) -> Array:
        """The padded shard of `name` (numpy, storage dtype)."""
        return self.arrays[name]

    def local(self, name: str) -> Array:
        """The unpadded shard of `name`: a view of `padded(name)`."""
        p = self.info.params[name]
        return self.arrays[name][tuple(slice(0, n) for n in p.local_shape)]


def _reads_for(p: ParamInfo, ckpt: Checkpoint) -> list[tuple[str, Shape, Shape, Shape, Shape]]:
    """(tensor, offset, shape, local offset, the tensor's expected shape) of
    each read of `p`, falling back to the stacked name or tie source."""
    if p.stacked_from is not None and p.name not in ckpt:
        return [(name, off, shape, loff, p.global_shape[1:])
                for name, off, shape, loff in p.checkpoint_reads()]
    source = p.name if p.name in ckpt or p.tied_copy_of is None else p.tied_copy_of
    return [(source, b.global_offset, b.shape, b.local_offset, p.global_shape) for b in p.boxes]


def read_param(p: ParamInfo, ckpt: Checkpoint) -> Array:
    """Padded numpy array of ParamInfo `p` filled from Checkpoint `ckpt`."""
    out = np.zeros(p.padded_shape, dtype=dtypes.storage_dtype(p.dtype))
    for name, goff, shape, loff, want in _reads_for(p, ckpt):
        entry = ckpt.entry(name)
        if entry.dtype != p.dtype:
            raise CheckpointError(f"is {entry.dtype}, the plan's {p.name} is {p.dtype}",
                                  tensor=name, file=entry.path)
        if entry.shape != want:
            raise CheckpointError(f"has shape {list(entry.shape)}, the plan's {p.name} needs "
                                  f"{list(want)}", tensor=name, file=entry.path)
        box = ckpt.read_box(name, list(goff), list(shape))
        if len(loff) > box.ndim:  # stacked: one expert slab at local index loff[0]
            out[loff[0]][tuple(slice(o, o + s) for o, s in zip(loff[1:], shape))] = box
        else:
            out[tuple(slice(o, o + s) for o, s in zip(loff, shape))] = box
    return out


def load_rank(rank_file: RankFile, checkpoint: str | os.PathLike[str] | Checkpoint) -> LoadedRank:
    """Load every param `rank_file` holds from `checkpoint` (a path accepted by
    `Checkpoint`, or a Checkpoint). Returns a LoadedRank."""
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else Checkpoint(checkpoint)
    before = ckpt.bytes_read
    arrays: dict[str, Array] = {}
    for p in rank_file.params.values():
        if p.alias_of is None:
            arrays[p.name] = read_param(p, ckpt)
    for p in rank_file.params.values():
        if p.alias_of is not None:
            arrays[p.name] = arrays[p.alias_of]
    return LoadedRank(rank_file, arrays, ckpt.bytes_read - before)
