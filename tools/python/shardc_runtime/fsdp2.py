"""FSDP2 all-gather by the plan's `fsdp2_allgather` layout (contract §6.3), pure numpy.

A unit's buffer on each rank is `total` (in `units`: elements of the unit's
single dtype, or bytes when the unit mixes dtypes) holding each param's padded
shard flattened at its `offset`, no alignment. All-gather gives rank-major
[W, total]; member m's slot holds member m's padded shard; its first
`chunk(L, W, m)` rows on `shard_dim` are real (FSDP2 pads every shard to the
first chunk's size), concatenated in FSDP order they form the unsharded,
TP/EP-local tensor (`unsharded_shape`). The collective itself is
`shardc_runtime.torch.allgather_unit`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from . import dtypes
from .errors import PlanError
from .layout import Fsdp2Param, Fsdp2Unit, RankFile
from .safetensors_io import Array


def chunk_size(length: int, ways: int, k: int) -> int:
    """Extent of piece k when `length` is split `ways` ways by torch.chunk."""
    per = -(-length // ways) if ways else 0
    return max(0, min(length - k * per, per))


def _span(unit: Fsdp2Unit, p: Fsdp2Param, dtype: str) -> tuple[int, int]:
    """(byte offset, byte length) of param p in a slot of `unit`."""
    size = 1 if unit.units == "bytes" else dtypes.element_size(dtype)
    return p.offset * size, p.padded_numel * size


def pack_unit(unit: Fsdp2Unit, rank_file: RankFile, arrays: Mapping[str, Array]) -> Array:
    """This rank's slot of `unit` as a uint8 array of `total_bytes`, from
    {name: padded array} (e.g. LoadedRank.arrays)."""
    buf = np.zeros(unit.total_bytes, dtype=np.uint8)
    for p in unit.params:
        info = rank_file.params[p.name]
        a = np.ascontiguousarray(arrays[p.name])
        if a.shape != p.padded_shape:
            raise PlanError(f"{p.name}: shard shape {list(a.shape)} != padded_shape "
                            f"{list(p.padded_shape)}")
        off, n = _span(unit, p, info.dtype)
        if a.nbytes != n or off + n > unit.total_bytes:
            raise PlanError(f"{p.name}: padded shard of {a.nbytes} bytes does not fit its "
                            f"slot [{off}, {off + n}) of {unit.total_bytes}")
        buf[off:off + n] = a.reshape(-1).view(np.uint8)
    return buf


def unpack_unit(unit: Fsdp2Unit, rank_file: RankFile, gathered: Array) -> dict[str, Array]:
    """{name: unsharded (TP/EP-local) array} from the [W, total_bytes] gathered
    uint8 buffer, each member's real rows cut from its padded slot."""
    out, ways = {}, len(unit.ranks)
    for p in unit.params:
        info = rank_file.params[p.name]
        sdt = dtypes.storage_dtype(info.dtype)
        off, n = _span(unit, p, info.dtype)
        slots = [gathered[m, off:off + n].view(sdt).reshape(p.padded_shape) for m in range(ways)]
        if p.shard_dim < 0:
            out[p.name] = slots[unit.index].copy()
            continue
        d, length = p.shard_dim, p.unsharded_shape[p.shard_dim]
        pieces = [np.take(s, range(chunk_size(length, ways, m)), axis=d)
                  for m, s in enumerate(slots)]
        full = np.concatenate(pieces, axis=d)
        if full.shape != p.unsharded_shape:
            raise PlanError(f"{p.name}: unpacked {list(full.shape)} != unsharded_shape "
                            f"{list(p.unsharded_shape)}")
        out[p.name] = full
    return out
