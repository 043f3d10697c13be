"""Reading a compiled OUTDIR: plan.json, manifest.json and rank files.

`OutDir(path)` opens a `shardc compile` output directory; `OutDir.rank(r)` gives
a `RankFile`: every param the rank holds (`ParamInfo`: local shape, global
offset, padded shape, alias / tied copy, stage, boxes to read from a checkpoint)
and its buffer layouts normalized to one in-memory form (`MuonGroup`,
`Fsdp2Unit`) whichever way the rank file wrote them: the full contract §6.3 form
(every derived field written) or the lean form (params by index, rank lists as
strings, run-length split sizes, derived fields dropped; README "Rank files:
derived fields"). All shapes and offsets are ELEMENTS unless a name says bytes.
"""

import hashlib
import json
import os

from . import dtypes
from .rankset import parse_rank_list, parse_rank_set


class PlanError(ValueError):
    """A plan or rank file the runtime cannot use (inconsistent, incomplete, changed)."""


def numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


class Box:
    """A box of the global tensor held by a rank: `global_offset` and `shape` in
    the global tensor, `local_offset` where it sits in the rank's local tensor."""

    def __init__(self, global_offset, shape, local_offset):
        self.global_offset = list(global_offset)
        self.shape = list(shape)
        self.local_offset = list(local_offset)

    def __repr__(self):
        return f"Box(global={self.global_offset}, shape={self.shape}, local={self.local_offset})"


class ParamInfo:
    """One param a rank holds (rank file `params` entry).

    name, dtype (torch name), stage, global_shape, local_shape (unpadded),
    global_offset (DCP sentinel = global size on an empty dim), padded_shape
    (FSDP2 allocation; pad at the end of the FSDP dim), alias_of (shares the
    source's storage on this rank), tied_copy_of (own copy of a tie source that
    sits on another stage), stacked_from (source FQNs of a stacked expert param,
    from plan.json, else None), requires_grad (plan.json; True without a plan),
    packed (the rank file lists `boxes`: a fused param, several boxes per piece), boxes (list of `Box`; one for an ordinary param,
    none for an empty shard).
    """

    def __init__(self, entry, stacked_from=None, requires_grad=True):
        self.name = entry["name"]
        self.requires_grad = requires_grad
        self.dtype = entry["dtype"]
        self.stage = entry.get("stage", 0)
        self.global_shape = list(entry["global_shape"])
        self.local_shape = list(entry["local_shape"])
        self.global_offset = list(entry["global_offset"])
        self.padded_shape = list(entry.get("padded_shape", entry["local_shape"]))
        self.alias_of = entry.get("alias_of")
        self.tied_copy_of = entry.get("tied_copy_of")
        self.stacked_from = stacked_from
        self.packed = "boxes" in entry  # a packed (fused) param: `boxes` give its pieces
        self.numel = numel(self.local_shape)
        self.nbytes = self.numel * dtypes.element_size(self.dtype)
        self.boxes = self._boxes(entry)
        self._check(entry)

    def _boxes(self, entry):
        if "boxes" in entry:  # a packed (fused) param: several global boxes per piece
            return [Box(b["global_offset"], b["shape"], b["local_offset"]) for b in entry["boxes"]
                    if numel(b["shape"]) > 0]
        if self.numel == 0:
            return []
        return [Box(self.global_offset, self.local_shape, [0] * len(self.local_shape))]

    def _check(self, entry):
        nd = len(self.global_shape)
        if not (len(self.local_shape) == len(self.global_offset) == len(self.padded_shape) == nd):
            raise PlanError(f"{self.name}: shape ranks differ in the rank file")
        if entry.get("numel", self.numel) != self.numel:
            raise PlanError(f"{self.name}: numel {entry['numel']} != prod(local_shape)")
        for b in self.boxes:
            for o, s, g in zip(b.global_offset, b.shape, self.global_shape):
                if o < 0 or o + s > g:
                    raise PlanError(f"{self.name}: box {b} outside global shape {self.global_shape}")
            for o, s, n in zip(b.local_offset, b.shape, self.local_shape):
                if o < 0 or o + s > n:
                    raise PlanError(f"{self.name}: box {b} outside local shape {self.local_shape}")
        if sum(numel(b.shape) for b in self.boxes) != self.numel:
            raise PlanError(f"{self.name}: boxes hold {sum(numel(b.shape) for b in self.boxes)} "
                            f"elements, local_shape {self.numel}")
        for l, p in zip(self.local_shape, self.padded_shape):
            if p < l:
                raise PlanError(f"{self.name}: padded_shape {self.padded_shape} < local_shape")

    @property
    def storage_of(self):
        """Name whose storage this param uses on the rank (itself unless an alias)."""
        return self.alias_of or self.name

    def checkpoint_reads(self):
        """[(checkpoint tensor name, global offset, shape, local offset)] to fill the
        local tensor. Stacked expert params read each expert's slab from its source
        tensor (expert e = stacked_from[e]) when the plan lists the sources."""
        source = self.tied_copy_of or self.name
        out = []
        for b in self.boxes:
            if self.stacked_from is None:
                out.append((source, b.global_offset, b.shape, b.local_offset))
                continue
            e0 = b.global_offset[0]
            for k in range(b.shape[0]):
                local = [b.local_offset[0] + k] + b.local_offset[1:]
                out.append((self.stacked_from[e0 + k], b.global_offset[1:], b.shape[1:], local))
        return out


class MuonStage:
    """One muon all-gather stage: `axes`, `tensor_dim`, `ranks` (group, by split
    coordinate), `index` (this rank's position)."""

    def __init__(self, axes, tensor_dim, ranks, index):
        self.axes, self.tensor_dim = list(axes), int(tensor_dim)
        self.ranks, self.index = parse_rank_list(ranks), int(index)
        if not 0 <= self.index < len(self.ranks):
            raise PlanError(f"muon stage {axes}: index {index} outside its {len(self.ranks)} ranks")


class MuonBatch:
    """One muon batch: dtype, params (names, packing order), total_numel per stage."""

    def __init__(self, dtype, params, total_numel):
        self.dtype, self.params, self.total_numel = dtype, list(params), list(total_numel)


class MuonGroup:
    """A muon layout group of one rank (normalized).

    stages: [MuonStage] innermost first; params: names (group order);
    split_sizes: {name: [[member extents] per stage]}; owner: {name: coord};
    replicate_coord; batches: [MuonBatch]; written: {(batch, stage, name): dict}
    of the derived fields the full form wrote (for cross-checks), else empty.
    """

    def __init__(self, g, names, alignment_bytes):
        self.key, self.mesh = g.get("key", ""), g.get("mesh", "dense")
        self.replicate_axes = list(g.get("replicate_axes", []))
        self.replicate_coord = list(g.get("replicate_coord", []))
        self.alignment_bytes = alignment_bytes
        self.written = {}
        if "stages" in g:
            self._lean(g, names)
        else:
            self._full(g)

    def _lean(self, g, names):
        self.stages = [MuonStage(s["axes"], s["tensor_dim"], s["ranks"], s["index"])
                       for s in g["stages"]]
        self.params, self.split_sizes, self.owner = [], {}, {}
        for p in g["params"]:
            name = names(p["param"])
            self.params.append(name)
            self.owner[name] = list(p["owner"])
            self.split_sizes[name] = [[v for v, n in runs for _ in range(n)]
                                      for runs in p["split_sizes"]]
        self.batches = [MuonBatch(b["dtype"], [names(i) for i in b["params"]], b["total_numel"])
                        for b in g["batches"]]

    def _full(self, g):
        self.params = list(g["params"])
        self.owner = {o["param"]: list(o["owner"]) for o in g["owners"]}
        self.split_sizes = {n: [] for n in self.params}
        self.stages, self.batches = None, []
        for bi, b in enumerate(g["batches"]):
            stages = [MuonStage(s["axes"], s["params"][0]["tensor_dim"] if s["params"] else 0,
                                s["ranks"], s["index"]) for s in b["stages"]]
            if self.stages is None:
                self.stages = stages
            order = [sp["name"] for sp in b["stages"][0]["params"]] if b["stages"] else []
            self.batches.append(MuonBatch(b["dtype"], order, [s["total_numel"] for s in b["stages"]]))
            for si, s in enumerate(b["stages"]):
                for sp in s["params"]:
                    self.split_sizes[sp["name"]].append(list(sp["split_sizes"]))
                    self.written[(bi, si, sp["name"])] = sp
        self.stages = self.stages or []

    def is_owner(self, name):
        return self.owner[name] == self.replicate_coord


class Fsdp2Param:
    """One param of an FSDP2 unit: name, shard_dim (-1: not sharded), offset and
    padded_numel (in the unit's `units`), padded_shape, local_shape, unsharded_shape."""

    def __init__(self, name, shard_dim, offset, padded_numel, padded_shape, local_shape,
                 unsharded_shape):
        self.name, self.shard_dim = name, int(shard_dim)
        self.offset, self.padded_numel = int(offset), int(padded_numel)
        self.padded_shape, self.local_shape = list(padded_shape), list(local_shape)
        self.unsharded_shape = list(unsharded_shape)


class Fsdp2Unit:
    """One FSDP2 unit buffer of a rank: name, mesh, units ("elements" | "bytes"),
    ranks (FSDP group by FSDP coordinate), index, total (per-rank slot, in units),
    total_bytes, params ([Fsdp2Param], packing order)."""

    def __init__(self, u, names, params):
        self.name, self.mesh, self.units = u["name"], u.get("mesh", "dense"), u["units"]
        self.ranks, self.index = parse_rank_list(u["ranks"]), int(u["index"])
        self.total, self.total_bytes = int(u["total"]), int(u["total_bytes"])
        self.params = []
        for p in u["params"]:
            name = names(p["param"]) if "param" in p else p["name"]
            info = params[name]
            self.params.append(Fsdp2Param(name, p["shard_dim"], p["offset"], p["padded_numel"],
                                          p.get("padded_shape", info.padded_shape),
                                          p.get("local_shape", info.local_shape),
                                          p["unsharded_shape"]))
        if not 0 <= self.index < len(self.ranks):
            raise PlanError(f"fsdp2 unit {self.name!r}: index outside its ranks")


class RankFile:
    """A parsed rank file. `params`: {name: ParamInfo} in file (model) order;
    `muon`: [MuonGroup] (empty without a muon layout); `fsdp2`: [Fsdp2Unit];
    `rank`, `world_size`, `stage`, `coords`."""

    def __init__(self, doc, plan=None, path=None):
        if doc.get("format") != "shardc.rank/v1":
            raise PlanError(f"{path}: not a shardc.rank/v1 file")
        self.path, self.doc = path, doc
        self.rank, self.world_size = doc["rank"], doc.get("world_size")
        self.stage, self.coords = doc.get("stage", 0), doc["coords"]
        stacked, grads = {}, {}
        if plan is not None:
            grads = {p["name"]: p.get("requires_grad", True) for p in plan["params"]}
            for p in plan["params"]:
                sf = p.get("stacked_from")
                if sf:  # {count, first, last, sources} (older plans: a plain list)
                    stacked[p["name"]] = sf["sources"] if isinstance(sf, dict) else list(sf)
        order = [p["name"] for p in doc["params"]]
        self.params = {p["name"]: ParamInfo(p, stacked.get(p["name"]), grads.get(p["name"], True))
                       for p in doc["params"]}
        for p in self.params.values():
            if p.alias_of is not None and p.alias_of not in self.params:
                raise PlanError(f"{p.name}: alias of {p.alias_of}, which this rank does not hold")
        names = lambda ref: order[ref] if isinstance(ref, int) else ref  # noqa: E731
        self.muon, self.fsdp2, self.muon_alignment = [], [], None
        for b in doc.get("buffers", []):
            if b["kind"] == "muon_allgather":
                self.muon_alignment = b["alignment_bytes"]
                self.muon = [MuonGroup(g, names, b["alignment_bytes"]) for g in b["groups"]]
            elif b["kind"] == "fsdp2_allgather":
                self.fsdp2 = [Fsdp2Unit(u, names, self.params) for u in b["units"]]

    def storage_params(self):
        """Params that own storage on this rank (aliases excluded), file order."""
        return [p for p in self.params.values() if p.alias_of is None]


class OutDir:
    """A `shardc compile` output directory.

    require_manifest: refuse a directory without `manifest.json` (an interrupted
    or foreign compile). When the manifest is present every file read is checked
    against its size and sha256 and must be listed in it (README "Output
    directory commits"). On by default: `shardc compile` writes the manifest
    last, so a directory without it is an interrupted or foreign compile.
    """

    def __init__(self, path, require_manifest=True):
        self.path = os.fspath(path)
        self.manifest = None
        mpath = os.path.join(self.path, "manifest.json")
        if os.path.exists(mpath):
            with open(mpath) as f:
                self.manifest = json.load(f)
            if self.manifest.get("format") != "shardc.manifest/v1":
                raise PlanError(f"{mpath}: not a shardc.manifest/v1 file")
        elif require_manifest:
            ranks_dir = os.path.join(self.path, "ranks")
            n = len(os.listdir(ranks_dir)) if os.path.isdir(ranks_dir) else 0
            raise PlanError(f"{self.path}: incomplete compile: {n} rank files and no "
                            "manifest.json; rerun compile")
        self._files = {}
        if self.manifest is not None:
            self._files["plan.json"] = self.manifest["plan"]
            for f in self.manifest["rank_files"]["files"]:
                self._files[f["path"]] = f
        self.plan = json.loads(self._read("plan.json"))
        if self.plan.get("format") != "shardc.plan/v1":
            raise PlanError(f"{self.path}: plan.json is not shardc.plan/v1")
        self.world_size = self.plan["world_size"]
        self.params = {p["name"]: p for p in self.plan["params"]}

    def _read(self, rel):
        path = os.path.join(self.path, rel)
        if self.manifest is not None:
            meta = self._files.get(rel)
            if meta is None:
                raise PlanError(f"{path}: not listed in manifest.json (not part of the compile)")
            with open(path, "rb") as f:
                data = f.read()
            if len(data) != meta["bytes"] or hashlib.sha256(data).hexdigest() != meta["sha256"]:
                raise PlanError(f"{path}: changed after the compile (size or sha256 differs "
                                "from manifest.json)")
            return data
        with open(path, "rb") as f:
            return f.read()

    def rank_path(self, r):
        """Relative path of rank r's file: ranks/rank-<r>.json, zero-padded."""
        width = len(str(self.world_size - 1))
        return f"ranks/rank-{r:0{width}d}.json"

    def rank(self, r):
        """The RankFile of rank r (PlanError when missing, unlisted or changed)."""
        if not 0 <= r < self.world_size:
            raise PlanError(f"rank {r} outside world size {self.world_size}")
        rel = self.rank_path(r)
        doc = json.loads(self._read(rel))
        if doc.get("rank") != r:
            raise PlanError(f"{rel}: holds rank {doc.get('rank')}, expected {r}")
        return RankFile(doc, self.plan, os.path.join(self.path, rel))

    def shard_ranks(self, name):
        """[(sorted replica ranks, local_shape, global_offset)] of a param, from plan.json."""
        return [(parse_rank_set(s["ranks"]), s["local_shape"], s["global_offset"])
                for s in self.params[name]["shards"]]

