"""Checkpoint chunk metadata in the shape torch.distributed.checkpoint uses.

`checkpoint_metadata(outdir)` returns plain data (json-serializable) that a newer
PyTorch turns into its `Metadata` one to one:

    {"state_dict_metadata": {fqn: {"type": "tensor", "dtype": "bfloat16",
                                   "size": [...],
                                   "chunks": [{"offsets": [...], "sizes": [...],
                                               "writer_rank": r}, ...]}},
     "storage_data": [{"fqn": fqn, "offset": [...], "relative_path": "__r_0.distcp",
                       "byte_offset": b, "length": n}, ...],
     "aliases": {alias_fqn: source_fqn}}

-> `TensorStorageMetadata(TensorProperties(dtype), torch.Size(size),
[ChunkStorageMetadata(torch.Size(offsets), torch.Size(sizes))])` per fqn and
`{MetadataIndex(fqn, offset): _StorageInfo(relative_path, byte_offset, length)}`.

Rules: one chunk per distinct shard (plan.json `shards`; per box of a packed
param's shard, since a DCP chunk is one box), written by the first
(lowest) rank of its replica set, as DCP's de-duplication keeps one writer per
replicated chunk; empty shards are skipped (DCP writes no empty chunk); a tied
alias sharing storage is not stored again (listed under `aliases`); a tied copy
on another stage is stored under its own name (a separate tensor there).
storage_data lays each writer's chunks out back to back in plan order in
`__<rank>_0.distcp` (the file naming of DCP's FileSystemWriter), raw bytes
row-major, so the lengths are numel x element size.
"""

from . import dtypes
from .layout import numel
from .rankset import parse_rank_set


def checkpoint_metadata(outdir):
    """Plain-data DCP metadata of an OutDir (see module doc)."""
    md, storage, aliases, pos = {}, [], {}, {}
    for p in outdir.plan["params"]:
        if p.get("alias_of"):
            aliases[p["name"]] = p["alias_of"]
            continue
        chunks = []
        for s in p["shards"]:
            writer = parse_rank_set(s["ranks"])[0]
            boxes = s.get("boxes") or [{"global_offset": s["global_offset"], "shape": s["local_shape"]}]
            for b in boxes:  # a packed param's piece is several boxes: one chunk each
                if numel(b["shape"]) == 0:
                    continue
                chunks.append({"offsets": list(b["global_offset"]), "sizes": list(b["shape"]),
                               "writer_rank": writer})
        md[p["name"]] = {"type": "tensor", "dtype": p["dtype"], "size": list(p["global_shape"]),
                         "chunks": chunks}
        es = dtypes.element_size(p["dtype"])
        for c in chunks:
            w = c["writer_rank"]
            n = numel(c["sizes"]) * es
            storage.append({"fqn": p["name"], "offset": c["offsets"],
                            "relative_path": f"__{w}_0.distcp", "byte_offset": pos.get(w, 0),
                            "length": n})
            pos[w] = pos.get(w, 0) + n
    return {"state_dict_metadata": md, "storage_data": storage, "aliases": aliases}


def write_items(metadata, rank):
    """The chunks `rank` writes: [(fqn, offsets, sizes)] (storage_data order)."""
    out = []
    for fqn, m in metadata["state_dict_metadata"].items():
        for c in m["chunks"]:
            if c["writer_rank"] == rank:
                out.append((fqn, c["offsets"], c["sizes"]))
    return out
