"""Loading a rank's shards from a safetensors checkpoint.

`load_rank(rank_file, checkpoint)` reads only the boxes the rank file names
(`Checkpoint.read_box`: header + pread of the covered runs, never a whole tensor
unless the rank holds all of it) and returns numpy arrays shaped `padded_shape`,
FSDP2 padding (at the end of the FSDP dim) zero-filled. Tied aliases share their
source's array; a tied copy on another stage reads the tie source when the
checkpoint lacks the alias (Hugging Face checkpoints store tied weights once);
stacked experts read each expert's own tensor (plan.json `stacked_from`) unless
the checkpoint holds the stacked name.
"""

import numpy as np

from . import dtypes
from .safetensors_io import Checkpoint


class LoadedRank:
    """What `load_rank` returns.

    arrays: {name: numpy array of padded_shape, storage dtype} (an alias maps to
    its source's array object); info: the RankFile; bytes_read: checkpoint data
    bytes read for this rank.
    """

    def __init__(self, rank_file, arrays, bytes_read):
        self.info, self.arrays, self.bytes_read = rank_file, arrays, bytes_read

    def padded(self, name):
        """The padded shard of `name` (numpy, storage dtype)."""
        return self.arrays[name]

    def local(self, name):
        """The unpadded shard of `name`: a view of `padded(name)`."""
        p = self.info.params[name]
        return self.arrays[name][tuple(slice(0, n) for n in p.local_shape)]

    def torch(self, name, padded=True):
        """The shard as a torch tensor of the param's dtype (shares memory)."""
        p = self.info.params[name]
        return dtypes.to_torch(self.padded(name) if padded else self.local(name), p.dtype)


def _reads_for(p, ckpt):
    """checkpoint_reads of p, falling back to the stacked name or tie source."""
    if p.stacked_from is not None and p.name in ckpt:
        reads = []
        for b in p.boxes:
            reads.append((p.name, b.global_offset, b.shape, b.local_offset))
        return reads
    reads = p.checkpoint_reads()
    if p.tied_copy_of is not None and p.name in ckpt:
        reads = [(p.name,) + r[1:] for r in reads]
    return reads


def read_param(p, ckpt):
    """Padded numpy array of ParamInfo `p` filled from Checkpoint `ckpt`."""
    out = np.zeros(p.padded_shape, dtype=dtypes.storage_dtype(p.dtype))
    for name, goff, shape, loff in _reads_for(p, ckpt):
        e = ckpt.entry(name)
        if e.dtype != p.dtype:
            raise ValueError(f"{p.name}: checkpoint tensor {name} is {e.dtype}, plan says {p.dtype}")
        box = ckpt.read_box(name, goff, shape)
        if len(loff) > box.ndim:  # stacked: one expert slab at local index loff[0]
            out[loff[0]][tuple(slice(o, o + s) for o, s in zip(loff[1:], shape))] = box
        else:
            out[tuple(slice(o, o + s) for o, s in zip(loff, shape))] = box
    return out


def load_rank(rank_file, checkpoint):
    """Load every param `rank_file` (a RankFile) holds from `checkpoint` (a path
    accepted by `Checkpoint`, or a Checkpoint). Returns a LoadedRank."""
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else Checkpoint(checkpoint)
    before = ckpt.bytes_read
    arrays = {}
    for p in rank_file.params.values():
        if p.alias_of is None:
            arrays[p.name] = read_param(p, ckpt)
    for p in rank_file.params.values():
        if p.alias_of is not None:
            arrays[p.name] = arrays[p.alias_of]
    return LoadedRank(rank_file, arrays, ckpt.bytes_read - before)


def local_tensors(rank_file, checkpoint=None, padded=True, requires_grad=False, aliases=True):
    """{name: torch tensor} of a rank's shards, the real dtypes (float8 as int8
    views on a torch without float8). With a checkpoint the values are loaded,
    else zeros; padded=True gives FSDP2 `padded_shape` tensors (what FSDP2
    allocates), else `local_shape` tensors. Aliases map to their source's tensor
    object (aliases=False leaves them out, e.g. to hand each storage to an
    optimizer once). requires_grad=True marks the floating tensors whose plan
    param has requires_grad. Meant for memory measurements (optimizer state of
    exactly what a rank holds: `torch.optim.AdamW(local_tensors(me,
    requires_grad=True, aliases=False).values())`) and start-up code."""
    import torch

    if checkpoint is not None:
        loaded = load_rank(rank_file, checkpoint)
        get = (lambda n: loaded.padded(n)) if padded else (lambda n: loaded.local(n))
    else:
        def get(n):
            p = rank_file.params[n]
            return np.zeros(p.padded_shape if padded else p.local_shape,
                            dtype=dtypes.storage_dtype(p.dtype))
    out = {}
    for p in rank_file.params.values():
        if p.alias_of is not None:
            continue
        t = dtypes.to_torch(np.ascontiguousarray(get(p.name)), p.dtype)
        if requires_grad and p.requires_grad and t.is_floating_point():
            t.requires_grad_(True)
        out[p.name] = t
    if aliases:
        for p in rank_file.params.values():
            if p.alias_of is not None:
                out[p.name] = out[p.alias_of]
    return out
