"""Executing a `shardc reshard PLAN_A PLAN_B` listing with send/recv.

Each rank sends to each destination one message holding, in listing order,
every box that destination reads from it (`shardc_runtime.reshard.plan_messages`),
and receives from each source exactly the bytes the listing names (a message
of any other size is an error: gloo fails the receive). Boxes with src == dst
are local copies. A tied alias that shares its source's storage under plan B
(`shares_storage_with`) gets the source's array.

All ranks of the default group call `reshard` (world = max of both plans'
world sizes; a rank absent from a plan holds nothing in it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from .. import dtypes
from ..errors import PlanError
from ..layout import ParamInfo, numel
from ..reshard import box_of, pack_message, plan_messages
from ..safetensors_io import Array


def reshard(listing: Mapping[str, Any], rank: int, source: Mapping[str, Array],
            dest_params: Mapping[str, ParamInfo],
            fill: int = 0x5A) -> tuple[dict[str, Array], dict[str, Any]]:
    """Run this rank's part of the listing with real send/recv.

    source: {name: this rank's UNPADDED plan-A local array} ({} when the rank is
    not in plan A); dest_params: {name: ParamInfo} of this rank under plan B
    ({} when not in plan B). Returns (arrays, stats): arrays {name: padded
    plan-B array, pad zero-filled}, stats {"received_bytes", "sent_bytes",
    "local_bytes", "coverage_ok"} where coverage_ok says every element of
    every local tensor was written exactly once. `fill` pre-fills the real
    elements so that an element nobody writes is visible.
    """
    msgs = plan_messages(listing)
    mine = next((r for r in listing["ranks"] if r["rank"] == rank), None)
    if dest_params and mine is None:
        raise PlanError(f"reshard: the listing has no entry for plan-B rank {rank}")
    arrays: dict[str, Array] = {}
    counts: dict[str, Array] = {}
    entries: dict[str, Any] = {}
    for p in (mine["params"] if mine else []):
        info = dest_params.get(p["name"])
        if info is None or list(info.local_shape) != list(p["local_shape"]) or \
                list(info.global_offset) != list(p["global_offset"]):
            raise PlanError(f"reshard: {p['name']} on rank {rank}: listing and plan-B rank "
                            "file disagree on local shape / offset")
        entries[p["name"]] = p
        if p.get("shares_storage_with"):
            continue
        array = np.empty(info.padded_shape, dtype=dtypes.storage_dtype(info.dtype))
        array.reshape(-1).view(np.uint8)[:] = fill
        pad = np.ones(info.padded_shape, bool)
        box_of(pad, [0] * array.ndim, list(info.local_shape))[...] = False
        array[pad] = 0
        arrays[p["name"]] = array
        counts[p["name"]] = np.zeros(info.local_shape, np.int32)
    for name, p in entries.items():
        if p.get("shares_storage_with"):
            arrays[name] = arrays[p["shares_storage_with"]]
    stats: dict[str, Any] = {"received_bytes": 0, "sent_bytes": 0, "local_bytes": 0}

    works, recvs = [], []
    for (src, dst), items in sorted(msgs.items()):
        if src == rank:
            buf = torch.from_numpy(pack_message(items, source))
            stats["sent_bytes"] += buf.numel()
            works.append((dist.isend(buf, dst), buf))
        elif dst == rank:
            size = sum(read["bytes"] for _, _, read in items)
            buf = torch.empty(size, dtype=torch.uint8)
            works.append((dist.irecv(buf, src), buf))
            recvs.append((items, buf))
    for name, p in entries.items():  # local copies
        for read in p["reads"]:
            if read["src"] == rank:
                if name not in source:
                    raise PlanError(f"reshard: {name} read in place on rank {rank}, which does "
                                    "not hold it under plan A")
                box = box_of(source[name], read["src_offset"], read["shape"])
                box_of(arrays[name], read["dst_offset"], read["shape"])[...] = box
                box_of(counts[name], read["dst_offset"], read["shape"])[...] += 1
                stats["local_bytes"] += box.nbytes
    for work, _ in works:
        if work is not None:
            work.wait()
    for items, buf in recvs:
        data, pos = buf.numpy(), 0
        for name, dtype, read in items:
            sdt = dtypes.storage_dtype(dtype)
            size = numel(read["shape"]) * sdt.itemsize
            if size != read["bytes"]:
                raise PlanError(f"reshard: {name} read of {read['shape']} is {size} bytes, "
                                f"listing says {read['bytes']}")
            box = data[pos:pos + size].view(sdt).reshape(read["shape"])
            box_of(arrays[name], read["dst_offset"], read["shape"])[...] = box
            box_of(counts[name], read["dst_offset"], read["shape"])[...] += 1
            pos += size
        stats["received_bytes"] += pos
    stats["coverage_ok"] = all(bool((c == 1).all()) for c in counts.values())
    return arrays, stats
