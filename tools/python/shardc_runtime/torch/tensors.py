"""numpy storage arrays as torch tensors of the real dtype, and the tensors a
rank allocates (`local_tensors`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .. import dtypes
from ..layout import RankFile
from ..load import load_rank
from ..safetensors_io import Array, Checkpoint


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a shardc dtype name (torch 2.13 has all of them)."""
    dtypes.element_size(name)  # PlanError for a name shardc does not have
    dtype = getattr(torch, name)
    assert isinstance(dtype, torch.dtype)
    return dtype


def to_torch(array: Array, name: str) -> torch.Tensor:
    """A torch tensor sharing `array`'s memory, reinterpreted as dtype `name`
    (bit patterns kept, no conversion)."""
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    real = torch_dtype(name)
    return tensor if tensor.dtype == real else tensor.view(real)


def to_storage(tensor: torch.Tensor) -> Array:
    """A CPU tensor's elements as a numpy array of the storage dtype (bits kept)."""
    name = str(tensor.dtype).removeprefix("torch.")
    flat = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
    out: Array = np.array(flat.view(dtypes.storage_dtype(name))).reshape(tuple(tensor.shape))
    return out


def local_tensors(rank_file: RankFile, checkpoint: str | Checkpoint | None = None,
                  padded: bool = True, requires_grad: bool = False,
                  aliases: bool = True) -> dict[str, torch.Tensor]:
    """{name: torch tensor} of a rank's shards in their real dtypes. With a
    checkpoint the values are loaded, else zeros; padded=True gives FSDP2
    `padded_shape` tensors (what FSDP2 allocates), else `local_shape` tensors.
    Aliases map to their source's tensor object (aliases=False leaves them out,
    e.g. to hand each storage to an optimizer once). requires_grad=True marks
    the floating tensors whose plan param has requires_grad. For memory
    measurements (`torch.optim.AdamW(local_tensors(me, requires_grad=True,
    aliases=False).values())`) and start-up code."""
    loaded = load_rank(rank_file, checkpoint) if checkpoint is not None else None
    out: dict[str, torch.Tensor] = {}
    for p in rank_file.params.values():
        if p.alias_of is not None:
            continue
        shape = p.padded_shape if padded else p.local_shape
        array: Any
        if loaded is None:
            array = np.zeros(shape, dtype=dtypes.storage_dtype(p.dtype))
        else:
            array = loaded.padded(p.name) if padded else loaded.local(p.name)
        tensor = to_torch(np.ascontiguousarray(array), p.dtype)
        if requires_grad and p.requires_grad and tensor.is_floating_point():
            tensor.requires_grad_(True)
        out[p.name] = tensor
    if aliases:
        for p in rank_file.params.values():
            if p.alias_of is not None:
                out[p.name] = out[p.alias_of]
    return out
