"""Executing a `shardc reshard PLAN_A PLAN_B` listing with send/recv.

The listing (`shardc.reshard/v1`, schemas/reshard.schema.json) says, for every
plan-B rank and param, which boxes to read from which plan-A rank (`src`),
where the box starts in the source's unpadded plan-A local tensor
(`src_offset`) and in the destination's (`dst_offset`). `reshard` inverts it:
each rank sends to each destination one message holding, in listing order,
every box that destination reads from it, and receives from each source
exactly the bytes the listing names (a message of any other size is an error:
gloo fails the receive). Boxes with src == dst are local copies. A tied alias
that shares its source's storage under plan B (`shares_storage_with`) gets the
source's array.

All ranks of the default group call `reshard` (world = max of both plans'
world sizes; a rank absent from a plan holds nothing in it).
"""

import numpy as np

from . import dtypes
from .layout import PlanError, numel


def _box(a, offset, shape):
    return a[tuple(slice(o, o + s) for o, s in zip(offset, shape))]


def plan_messages(listing):
    """{(src, dst): [(param name, dtype, read)]} of every transfer (src != dst),
    in listing order (destination ascending, params, reads)."""
    msgs = {}
    for r in listing["ranks"]:
        for p in r["params"]:
            for rd in p["reads"]:
                if rd["src"] != r["rank"]:
                    msgs.setdefault((rd["src"], r["rank"]), []).append((p["name"], p["dtype"], rd))
    return msgs


def _pack(items, source):
    parts = []
    for name, dtype, rd in items:
        if name not in source:
            raise PlanError(f"reshard: asked to send {name} {rd['src_offset']}+{rd['shape']}, "
                            "which this rank does not hold under plan A")
        box = _box(source[name], rd["src_offset"], rd["shape"])
        if list(box.shape) != list(rd["shape"]):
            raise PlanError(f"reshard: {name} box {rd['src_offset']}+{rd['shape']} leaves the "
                            f"plan-A shard {list(source[name].shape)}")
        parts.append(np.ascontiguousarray(box).reshape(-1).view(np.uint8))
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def reshard(listing, rank, source, dest_params, fill=0x5A):
    """Run this rank's part of the listing with real send/recv.

    source: {name: this rank's UNPADDED plan-A local array} ({} when the rank is
    not in plan A); dest_params: {name: ParamInfo} of this rank under plan B
    ({} when not in plan B). Returns (arrays, stats): arrays {name: padded
    plan-B array, pad zero-filled}, stats {"received_bytes", "sent_bytes",
    "local_bytes", "coverage_ok"} where coverage_ok says every element of
    every local tensor was written exactly once.
    """
    import torch
    import torch.distributed as dist

    msgs = plan_messages(listing)
    mine = next((r for r in listing["ranks"] if r["rank"] == rank), None)
    if dest_params and mine is None:
        raise PlanError(f"reshard: the listing has no entry for plan-B rank {rank}")
    arrays, counts, entries = {}, {}, {}
    for p in (mine["params"] if mine else []):
        info = dest_params.get(p["name"])
        if info is None or list(info.local_shape) != list(p["local_shape"]) or \
                list(info.global_offset) != list(p["global_offset"]):
            raise PlanError(f"reshard: {p['name']} on rank {rank}: listing and plan-B rank "
                            "file disagree on local shape / offset")
        entries[p["name"]] = p
        if p.get("shares_storage_with"):
            continue
        a = np.empty(info.padded_shape, dtype=dtypes.storage_dtype(info.dtype))
        a.reshape(-1).view(np.uint8)[:] = fill
        pad = np.ones(info.padded_shape, bool)
        _box(pad, [0] * a.ndim, info.local_shape)[...] = False
        a[pad] = 0
        arrays[p["name"]] = a
        counts[p["name"]] = np.zeros(info.local_shape, np.int32)
    for name, p in entries.items():
        if p.get("shares_storage_with"):
            arrays[name] = arrays[p["shares_storage_with"]]
    stats = {"received_bytes": 0, "sent_bytes": 0, "local_bytes": 0}

    works, recvs = [], []
    for (src, dst), items in sorted(msgs.items()):
        if src == rank:
            buf = torch.from_numpy(_pack(items, source))
            stats["sent_bytes"] += buf.numel()
            works.append((dist.isend(buf, dst), buf))
        elif dst == rank:
            n = sum(rd["bytes"] for _, _, rd in items)
            buf = torch.empty(n, dtype=torch.uint8)
            works.append((dist.irecv(buf, src), buf))
            recvs.append((items, buf))
    for name, p in entries.items():  # local copies
        for rd in p["reads"]:
            if rd["src"] == rank:
                if name not in source:
                    raise PlanError(f"reshard: {name} read in place on rank {rank}, which does "
                                    "not hold it under plan A")
                box = _box(source[name], rd["src_offset"], rd["shape"])
                _box(arrays[name], rd["dst_offset"], rd["shape"])[...] = box
                _box(counts[name], rd["dst_offset"], rd["shape"])[...] += 1
                stats["local_bytes"] += box.nbytes
    for w, _ in works:
        w.wait()
    for items, buf in recvs:
        data, pos = buf.numpy(), 0
        for name, dtype, rd in items:
            sdt = dtypes.storage_dtype(dtype)
            n = numel(rd["shape"]) * sdt.itemsize
            if n != rd["bytes"]:
                raise PlanError(f"reshard: {name} read of {rd['shape']} is {n} bytes, listing "
                                f"says {rd['bytes']}")
            box = data[pos:pos + n].view(sdt).reshape(rd["shape"])
            _box(arrays[name], rd["dst_offset"], rd["shape"])[...] = box
            _box(counts[name], rd["dst_offset"], rd["shape"])[...] += 1
            pos += n
        stats["received_bytes"] += pos
    stats["coverage_ok"] = all(bool((c == 1).all()) for c in counts.values())
    return arrays, stats
