"""Reading a compiled OUTDIR: manifest.json, plan.json and rank files.

`OutDir(path)` opens a `shardc compile` output directory; `OutDir.rank(r)` gives
a `RankFile`: every param the rank holds (`ParamInfo`: local shape, global
offset, padded shape, alias / tied copy, stage, boxes to read from a checkpoint)
and its buffer layouts (`MuonGroup`, `Fsdp2Unit`) read from the form shardc
writes (docs/formats.md "Rank files: derived fields": params by index, rank lists as
strings, run-length split sizes, derived fields dropped). All shapes and
offsets are ELEMENTS unless a name says bytes; every value is a frozen
dataclass with tuples.

What `shardc verify` refuses, the reader refuses (a `PlanError` naming file and
field): a directory without manifest.json; a manifest that is not
shardc.manifest/v1, has a world size outside [1, 2^31 - 1], lists a rank twice
or out of order, a path other than `ranks/rank-<r>.json` (`../` and absolute
paths included) or a rank set that is not the files' ranks; a file whose size or
sha256 differs from the manifest; a FIFO, device or directory where a file
should be (never opened, so never blocks); rank strings out of shardc's bounds
(`rankset`); fields of the wrong JSON type; shapes, offsets and boxes that do
not fit the global tensor; a rank file that disagrees with plan.json (a shard
plan.json does not list for the rank, a tie other than plan.json's, stacked
sources out of order).
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from . import dtypes
from .errors import PlanError
from .files import read_regular, require_regular
from .rankset import MAX_WORLD_SIZE, RankList, parse_rank_list, parse_rank_set

MAX_MANIFEST_BYTES = 130 << 23  # shardc: ~130 bytes per rank file, 2^23 rank files
MAX_EXTENT = 1 << 62  # shardc: limits::kMaxNumel
Shape = tuple[int, ...]
_HEX64 = re.compile(r"[0-9a-f]{64}")


def numel(shape: Shape | list[int]) -> int:
    """Product of the extents (1 for a 0-dim shape)."""
    count = 1
    for extent in shape:
        count *= int(extent)
    return count


def _get(doc: Any, key: str, where: str) -> Any:
    if not isinstance(doc, dict):
        raise PlanError(f"{where}: {type(doc).__name__} instead of an object")
    if key not in doc:
        raise PlanError(f"{where}: missing `{key}`")
    return doc[key]


def _int(value: Any, where: str, low: int = 0, high: int = MAX_EXTENT) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise PlanError(f"{where}: {value!r} is not an integer in [{low}, {high}]")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise PlanError(f"{where}: {value!r} is not a string")
    return value


def _dtype(value: Any, where: str) -> str:
    name = _str(value, where)
    try:
        dtypes.element_size(name)
    except PlanError as ex:
        raise PlanError(f"{where}: {ex}") from None
    return name


def _shape(value: Any, where: str, low: int = 0) -> Shape:
    if not isinstance(value, list) or len(value) > 64:
        raise PlanError(f"{where}: {value!r} is not a list of at most 64 integers")
    return tuple(_int(v, f"{where}[{i}]", low) for i, v in enumerate(value))


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise PlanError(f"{where}: {type(value).__name__} instead of a list")
    return value


@dataclass(frozen=True)
class Box:
    """A box of the global tensor held by a rank: `global_offset` and `shape` in
    the global tensor, `local_offset` where it sits in the rank's local tensor."""

    global_offset: Shape
    shape: Shape
    local_offset: Shape


@dataclass(frozen=True)
class ParamInfo:
    """One param a rank holds (rank file `params` entry).

    dtype is torch's name; global_offset uses the DCP sentinel (= global size)
    on an empty dim; padded_shape is the FSDP2 allocation (pad at the end of the
    FSDP dim); alias_of: shares the source's storage on this rank; tied_copy_of:
    own copy of a tie source on another stage; stacked_from: the source FQNs of a
    stacked expert param (plan.json), else None; requires_grad from plan.json;
    packed: the rank file lists `boxes` (a fused param); boxes: one for an
    ordinary param, none for an empty shard.
    """

    name: str
    dtype: str
    stage: int
    global_shape: Shape
    local_shape: Shape
    global_offset: Shape
    padded_shape: Shape
    alias_of: str | None
    tied_copy_of: str | None
    stacked_from: tuple[str, ...] | None
    requires_grad: bool
    packed: bool
    boxes: tuple[Box, ...]

    @property
    def numel(self) -> int:
        return numel(self.local_shape)

    @property
    def nbytes(self) -> int:
        return self.numel * dtypes.element_size(self.dtype)

    @property
    def storage_of(self) -> str:
        """Name whose storage this param uses on the rank (itself unless an alias)."""
        return self.alias_of or self.name

    @classmethod
    def read(cls, entry: Any, where: str, stacked_from: tuple[str, ...] | None = None,
             requires_grad: bool = True) -> ParamInfo:
        name = _str(_get(entry, "name", where), f"{where}.name")
        where = f"{where} ({name})"
        dtype = _dtype(_get(entry, "dtype", where), f"{where}.dtype")
        global_shape = _shape(_get(entry, "global_shape", where), f"{where}.global_shape")
        local_shape = _shape(_get(entry, "local_shape", where), f"{where}.local_shape")
        global_offset = _shape(_get(entry, "global_offset", where), f"{where}.global_offset")
        padded_shape = _shape(_get(entry, "padded_shape", where), f"{where}.padded_shape")
        alias_of, tied = _get(entry, "alias_of", where), entry.get("tied_copy_of")
        for key, value in (("alias_of", alias_of), ("tied_copy_of", tied)):
            if value is not None:
                _str(value, f"{where}.{key}")
        packed = "boxes" in entry
        if packed:
            boxes = tuple(Box(_shape(_get(b, "global_offset", f"{where}.boxes[{i}]"),
                                     f"{where}.boxes[{i}].global_offset"),
                              _shape(_get(b, "shape", f"{where}.boxes[{i}]"),
                                     f"{where}.boxes[{i}].shape"),
                              _shape(_get(b, "local_offset", f"{where}.boxes[{i}]"),
                                     f"{where}.boxes[{i}].local_offset"))
                          for i, b in enumerate(_list(entry["boxes"], f"{where}.boxes")))
            boxes = tuple(b for b in boxes if numel(b.shape) > 0)
        elif numel(local_shape) == 0:
            boxes = ()
        else:
            boxes = (Box(global_offset, local_shape, (0,) * len(local_shape)),)
        info = cls(name, dtype, _int(_get(entry, "stage", where), f"{where}.stage"), global_shape,
                   local_shape, global_offset, padded_shape, alias_of, tied, stacked_from,
                   requires_grad, packed, boxes)
        info._check(entry, where)
        return info

    def _check(self, entry: Mapping[str, Any], where: str) -> None:
        rank = len(self.global_shape)
        if not len(self.local_shape) == len(self.global_offset) == len(self.padded_shape) == rank:
            raise PlanError(f"{where}: shape ranks differ (global {list(self.global_shape)}, "
                            f"local {list(self.local_shape)}, offset {list(self.global_offset)}, "
                            f"padded {list(self.padded_shape)})")
        if _get(entry, "numel", where) != self.numel:
            raise PlanError(f"{where}: numel {entry['numel']} != prod(local_shape) {self.numel}")
        if _get(entry, "bytes", where) != self.nbytes:
            raise PlanError(f"{where}: bytes {entry['bytes']} != numel x element size "
                            f"{self.nbytes}")
        for extent, offset, size in zip(self.local_shape, self.global_offset, self.global_shape):
            if extent > size or (extent > 0 and offset + extent > size) or offset > size:
                raise PlanError(f"{where}: local shape {list(self.local_shape)} at offset "
                                f"{list(self.global_offset)} leaves global shape "
                                f"{list(self.global_shape)}")
        for b in self.boxes:
            if not len(b.global_offset) == len(b.shape) == len(b.local_offset) == rank:
                raise PlanError(f"{where}: box {b} has the wrong rank")
            for o, s, g in zip(b.global_offset, b.shape, self.global_shape):
                if o + s > g:
                    raise PlanError(f"{where}: box {b} outside global shape "
                                    f"{list(self.global_shape)}")
            for o, s, n in zip(b.local_offset, b.shape, self.local_shape):
                if o + s > n:
                    raise PlanError(f"{where}: box {b} outside local shape "
                                    f"{list(self.local_shape)}")
        held = sum(numel(b.shape) for b in self.boxes)
        if held != self.numel:
            raise PlanError(f"{where}: boxes hold {held} elements, local_shape {self.numel}")
        if any(p < n for n, p in zip(self.local_shape, self.padded_shape)):
            raise PlanError(f"{where}: padded_shape {list(self.padded_shape)} < local_shape "
                            f"{list(self.local_shape)}")
        if self.stacked_from is not None and (
                rank == 0 or len(self.stacked_from) != self.global_shape[0]):
            raise PlanError(f"{where}: {len(self.stacked_from)} stacked sources for "
                            f"global shape {list(self.global_shape)}")

    def checkpoint_reads(self) -> list[tuple[str, Shape, Shape, Shape]]:
        """[(checkpoint tensor name, global offset, shape, local offset)] to fill the
        local tensor. Stacked expert params read each expert's slab from its source
        tensor (expert e = stacked_from[e]); the local offset then has one more
        dim (the expert's index in the local stack) than offset and shape."""
        source = self.tied_copy_of or self.name
        out: list[tuple[str, Shape, Shape, Shape]] = []
        for b in self.boxes:
            if self.stacked_from is None:
                out.append((source, b.global_offset, b.shape, b.local_offset))
                continue
            first = b.global_offset[0]
            for k in range(b.shape[0]):
                local = (b.local_offset[0] + k,) + b.local_offset[1:]
                out.append((self.stacked_from[first + k], b.global_offset[1:], b.shape[1:], local))
        return out


@dataclass(frozen=True)
class MuonStage:
    """One muon all-gather stage: mesh `axes`, `tensor_dim`, `ranks` (the group,
    by split coordinate), `index` (this rank's position in it)."""

    axes: tuple[str, ...]
    tensor_dim: int
    ranks: RankList
    index: int


@dataclass(frozen=True)
class MuonSlot:
    """Where one param of a muon batch sits in a stage's per-rank slot: `offset` and
    `padded_numel` in elements of the batch dtype, and this rank's `input_shape` (its piece
    entering the stage)."""

    offset: int
    padded_numel: int
    input_shape: Shape


@dataclass(frozen=True)
class MuonBatch:
    """One muon batch: dtype, params (names, packing order), total_numel per stage, and
    per stage the slot of each param (`MuonSlot`, the layout the reader derives once from
    the rank file's split sizes and local shapes, docs/formats.md "Rank files: derived
    fields", and checks against `total_numel`)."""

    dtype: str
    params: tuple[str, ...]
    total_numel: tuple[int, ...]
    slots: tuple[Mapping[str, MuonSlot], ...] = ()


@dataclass(frozen=True)
class MuonGroup:
    """A muon layout group of one rank.

    stages: innermost first; params: names (group order); split_sizes:
    {name: ((member extents) per stage)}; owner: {name: replicate coordinate};
    batches: packing per dtype.
    """

    key: str
    mesh: str
    replicate_axes: tuple[str, ...]
    replicate_coord: tuple[int, ...]
    alignment_bytes: int
    stages: tuple[MuonStage, ...]
    params: tuple[str, ...]
    split_sizes: Mapping[str, tuple[tuple[int, ...], ...]]
    owner: Mapping[str, tuple[int, ...]]
    batches: tuple[MuonBatch, ...]

    def is_owner(self, name: str) -> bool:
        return self.owner[name] == self.replicate_coord


@dataclass(frozen=True)
class Fsdp2Param:
    """One param of an FSDP2 unit: shard_dim (-1: not sharded), offset and
    padded_numel (in the unit's `units`), padded / local shape (the param's),
    unsharded_shape (the TP/EP-local tensor FSDP2 all-gathers)."""

    name: str
    shard_dim: int
    offset: int
    padded_numel: int
    padded_shape: Shape
    local_shape: Shape
    unsharded_shape: Shape


@dataclass(frozen=True)
class Fsdp2Unit:
    """One FSDP2 unit buffer of a rank: units ("elements" | "bytes"), ranks (the
    FSDP group by FSDP coordinate), index (this rank's), total (per-rank slot,
    in units), total_bytes, params (packing order)."""

    name: str
    mesh: str
    units: str
    ranks: RankList
    index: int
    total: int
    total_bytes: int
    params: tuple[Fsdp2Param, ...]


def _run_lengths(value: Any, where: str) -> tuple[int, ...]:
    sizes: list[int] = []
    for i, run in enumerate(_list(value, where)):
        if not isinstance(run, list) or len(run) != 2:
            raise PlanError(f"{where}[{i}]: not a [size, count] run")
        size = _int(run[0], f"{where}[{i}][0]", 0, 1 << 40)
        count = _int(run[1], f"{where}[{i}][1]", 1, 1 << 24)
        if len(sizes) + count > 1 << 24:
            raise PlanError(f"{where}: more than 2^24 members")
        sizes.extend([size] * count)
    return tuple(sizes)


def _stage(doc: Any, where: str, world: int, rank: int) -> MuonStage:
    ranks = parse_rank_list(_get(doc, "ranks", where), world, f"{where}.ranks")
    index = _int(_get(doc, "index", where), f"{where}.index")
    if index >= len(ranks) or ranks[index] != rank:
        raise PlanError(f"{where}: index {index} is not rank {rank}'s place in its "
                        f"{len(ranks)} ranks")
    axes = tuple(_str(a, f"{where}.axes") for a in _list(_get(doc, "axes", where), where))
    return MuonStage(axes, _int(_get(doc, "tensor_dim", where), f"{where}.tensor_dim", 0, 63),
                     ranks, index)


def _muon_group(doc: Any, where: str, name_of: Callable[[Any, str], str], alignment: int,
                world: int, rank: int) -> MuonGroup:
    stages = tuple(_stage(s, f"{where}.stages[{i}]", world, rank)
                   for i, s in enumerate(_list(_get(doc, "stages", where), where)))
    params, split_sizes, owner = [], {}, {}
    for i, p in enumerate(_list(_get(doc, "params", where), f"{where}.params")):
        pw = f"{where}.params[{i}]"
        name = name_of(_get(p, "param", pw), pw)
        params.append(name)
        owner[name] = _shape(_get(p, "owner", pw), f"{pw}.owner")
        runs = _list(_get(p, "split_sizes", pw), f"{pw}.split_sizes")
        if len(runs) != len(stages):
            raise PlanError(f"{pw}: {len(runs)} split size lists for {len(stages)} stages")
        split_sizes[name] = tuple(
            _run_lengths(r, f"{pw}.split_sizes[{s}]") for s, r in enumerate(runs))
        for s, sizes in enumerate(split_sizes[name]):
            if len(sizes) != len(stages[s].ranks):
                raise PlanError(f"{pw}: {len(sizes)} split sizes at stage {s} for "
                                f"{len(stages[s].ranks)} ranks")
    batches = []
    for i, b in enumerate(_list(_get(doc, "batches", where), f"{where}.batches")):
        bw = f"{where}.batches[{i}]"
        dtype = _dtype(_get(b, "dtype", bw), f"{bw}.dtype")
        batches.append(MuonBatch(
            dtype, tuple(name_of(x, bw) for x in _list(_get(b, "params", bw), bw)),
            tuple(_int(t, f"{bw}.total_numel") for t in _list(_get(b, "total_numel", bw), bw))))
    return MuonGroup(
        _str(_get(doc, "key", where), f"{where}.key"), _str(_get(doc, "mesh", where), f"{where}.mesh"),
        tuple(_str(a, where) for a in _list(_get(doc, "replicate_axes", where), where)),
        _shape(_get(doc, "replicate_coord", where), f"{where}.replicate_coord"), alignment, stages,
        tuple(params), split_sizes, owner, tuple(batches))


def _muon_slots(group: MuonGroup, batch: MuonBatch, params: Mapping[str, ParamInfo],
                where: str) -> MuonBatch:
    """`batch` with the slot layout of every stage, derived as docs/formats.md's table says
    (the rank file writes split sizes and totals only): a param's input shape at stage s is
    its local_shape with every earlier stage's tensor_dim set to the sum of that stage's
    split sizes; pad_shape sets tensor_dim to max(split_sizes[s]); padded_numel is
    numel(pad_shape) rounded up to alignment_bytes / element size (at least 1); offsets run
    over the batch's params in order. Distrusts the file: the total must be its
    `total_numel[s]`, and this rank's piece its own split size."""
    if len(batch.total_numel) != len(group.stages):
        raise PlanError(f"{where}: {len(batch.total_numel)} total_numel for "
                        f"{len(group.stages)} stages")
    align = max(1, group.alignment_bytes // dtypes.element_size(batch.dtype))
    slots: list[Mapping[str, MuonSlot]] = []
    for s, stage in enumerate(group.stages):
        offset, layout = 0, {}
        for name in batch.params:
            if name not in group.split_sizes:
                raise PlanError(f"{where}: {name} is in a batch but not in the group")
            sizes = group.split_sizes[name]
            shape = list(params[name].local_shape)
            if max(st.tensor_dim for st in group.stages[:s + 1]) >= len(shape):
                raise PlanError(f"{where}: {name}: a stage's tensor_dim is out of its "
                                f"{len(shape)} dims")
            for earlier in range(s):
                shape[group.stages[earlier].tensor_dim] = sum(sizes[earlier])
            if shape[stage.tensor_dim] != sizes[s][stage.index]:
                raise PlanError(f"{where}: {name} stage {s}: piece extent "
                                f"{shape[stage.tensor_dim]} != split_sizes[{stage.index}] "
                                f"{sizes[s][stage.index]}")
            pad = list(shape)
            pad[stage.tensor_dim] = max(sizes[s])
            padded = -(-numel(pad) // align) * align
            layout[name] = MuonSlot(offset, padded, tuple(shape))
            offset += padded
        if offset != batch.total_numel[s]:
            raise PlanError(f"{where}: stage {s}: total_numel {batch.total_numel[s]} != "
                            f"derived {offset}")
        slots.append(layout)
    return MuonBatch(batch.dtype, batch.params, batch.total_numel, tuple(slots))


def _fsdp2_unit(doc: Any, where: str, name_of: Callable[[Any, str], str],
                params: Mapping[str, ParamInfo], world: int, rank: int) -> Fsdp2Unit:
    ranks = parse_rank_list(_get(doc, "ranks", where), world, f"{where}.ranks")
    index = _int(_get(doc, "index", where), f"{where}.index")
    if index >= len(ranks) or ranks[index] != rank:
        raise PlanError(f"{where}: index {index} is not rank {rank}'s place in its "
                        f"{len(ranks)} ranks")
    units = _str(_get(doc, "units", where), f"{where}.units")
    if units not in ("elements", "bytes"):
        raise PlanError(f"{where}.units: {units!r} is neither 'elements' nor 'bytes'")
    members = []
    for i, p in enumerate(_list(_get(doc, "params", where), f"{where}.params")):
        pw = f"{where}.params[{i}]"
        name = name_of(_get(p, "param", pw), pw)
        info = params[name]
        members.append(Fsdp2Param(
            name, _int(_get(p, "shard_dim", pw), f"{pw}.shard_dim", -1, 63),
            _int(_get(p, "offset", pw), f"{pw}.offset"),
            _int(_get(p, "padded_numel", pw), f"{pw}.padded_numel"), info.padded_shape,
            info.local_shape, _shape(_get(p, "unsharded_shape", pw), f"{pw}.unsharded_shape")))
    return Fsdp2Unit(_str(_get(doc, "name", where), f"{where}.name"),
                     _str(_get(doc, "mesh", where), f"{where}.mesh"), units, ranks, index,
                     _int(_get(doc, "total", where), f"{where}.total"),
                     _int(_get(doc, "total_bytes", where), f"{where}.total_bytes"),
                     tuple(members))


@dataclass(frozen=True)
class FlatPiece:
    """Elements [param_offset, param_offset + numel) of `name`'s rank-local tensor
    flattened (ZeRO-3: before the FSDP split) at [start, start + numel) of a flat buffer."""

    name: str
    param_offset: int
    numel: int
    start: int
    bucket: int


@dataclass(frozen=True)
class FlatBuffer:
    """A flat optimizer buffer of one rank (megatron_distopt / deepspeed_zero,
    src/planner/buffers.hpp): `ranks` is the DP group by ZeRO index, rank
    `index` owns shard `index` of every bucket; `owned` lists (piece index,
    param_offset, numel, buffer_start), ELEMENTS of `param_dtype`."""

    kind: str
    zero_stage: int
    mesh: str
    expert: bool
    model_chunk: int
    param_dtype: str
    grad_dtype: str
    ranks: RankList
    index: int
    bucket_size: int | None
    numel: int
    shard_numel: int
    owned_numel: int
    buckets: tuple[tuple[int, int, int], ...]
    pieces: tuple[FlatPiece, ...]
    owned: tuple[tuple[int, int, int, int], ...]


def _int_row(v: Any, n: int, where: str) -> tuple[int, ...]:
    row = _list(v, where)
    if len(row) != n:
        raise PlanError(f"{where}: expected {n} integers, got {len(row)}")
    return tuple(_int(x, where) for x in row)


def _flat_buffer(doc: Any, where: str, kind: str, stage: int,
                 name_of: Callable[[Any, str], str], world: int, rank: int) -> FlatBuffer:
    ranks = parse_rank_list(_get(doc, "ranks", where), world, f"{where}.ranks")
    index = _int(_get(doc, "index", where), f"{where}.index")
    if index >= len(ranks) or ranks[index] != rank:
        raise PlanError(f"{where}: index {index} is not rank {rank}'s place in its "
                        f"{len(ranks)} ranks")
    pieces = []
    for i, row in enumerate(_list(_get(doc, "params", where), f"{where}.params")):
        pw = f"{where}.params[{i}]"
        ref, off, n, start, bucket = _int_row(row, 5, pw)
        pieces.append(FlatPiece(name_of(ref, pw), off, n, start, bucket))
    buckets = []
    for b in _list(_get(doc, "buckets", where), f"{where}.buckets"):
        start, end, unpadded = _int_row(b, 3, f"{where}.buckets")
        buckets.append((start, end, unpadded))
    owned = []
    for o in _list(_get(doc, "owned", where), f"{where}.owned"):
        piece, off, n, at = _int_row(o, 4, f"{where}.owned")
        owned.append((piece, off, n, at))
    for o in owned:
        if o[0] >= len(pieces):
            raise PlanError(f"{where}.owned: piece {o[0]} of {len(pieces)}")
    bucket_size = _get(doc, "bucket_size", where)
    return FlatBuffer(kind, stage, _str(_get(doc, "mesh", where), f"{where}.mesh"),
                      bool(_get(doc, "expert", where)),
                      _int(_get(doc, "model_chunk", where), f"{where}.model_chunk"),
                      _str(_get(doc, "param_dtype", where), f"{where}.param_dtype"),
                      _str(_get(doc, "grad_dtype", where), f"{where}.grad_dtype"), ranks, index,
                      None if bucket_size is None else _int(bucket_size, f"{where}.bucket_size"),
                      _int(_get(doc, "numel", where), f"{where}.numel"),
                      _int(_get(doc, "shard_numel", where), f"{where}.shard_numel"),
                      _int(_get(doc, "owned_numel", where), f"{where}.owned_numel"),
                      tuple(buckets), tuple(pieces), tuple(owned))


@dataclass(frozen=True)
class RankFile:
    """A parsed rank file: `params` {name: ParamInfo} in file (model) order,
    `muon` groups, `fsdp2` units, `flat` optimizer buffers, `rank`,
    `world_size`, `stage`, `coords` ({mesh: {axis: coordinate}}, only the
    meshes the plan has)."""

    path: str
    rank: int
    world_size: int
    stage: int
    coords: Mapping[str, Mapping[str, int]]
    params: Mapping[str, ParamInfo]
    muon: tuple[MuonGroup, ...]
    fsdp2: tuple[Fsdp2Unit, ...]
    muon_alignment: int | None
    doc: Mapping[str, Any] = field(repr=False, compare=False)
    flat: tuple[FlatBuffer, ...] = ()

    @classmethod
    def read(cls, doc: Any, plan: Mapping[str, Any], path: str) -> RankFile:
        if not isinstance(doc, dict) or doc.get("format") != "shardc.rank/v1":
            raise PlanError(f"{path}: not a shardc.rank/v1 file")
        world = _int(_get(doc, "world_size", path), f"{path}: world_size", 1, MAX_WORLD_SIZE)
        if world != plan["world_size"]:
            raise PlanError(f"{path}: world_size {world}, plan.json says {plan['world_size']}")
        rank = _int(_get(doc, "rank", path), f"{path}: rank", 0, world - 1)
        coords = _get(doc, "coords", path)  # a mesh the plan lacks (no experts) is null
        if not isinstance(coords, dict) or not all(
                c is None or isinstance(c, dict) and all(isinstance(v, int) for v in c.values())
                for c in coords.values()):
            raise PlanError(f"{path}: coords is not {{mesh: {{axis: coordinate}} or null}}")
        coords = {mesh: c for mesh, c in coords.items() if c is not None}
        stage = _int(_get(doc, "stage", path), f"{path}: stage")
        _check_coords(coords, stage, rank, plan, path)
        plan_params = {p["name"]: p for p in plan["params"]}
        entries = _list(_get(doc, "params", path), f"{path}: params")
        params: dict[str, ParamInfo] = {}
        for i, entry in enumerate(entries):
            where = f"{path}: params[{i}]"
            name = _get(entry, "name", where)
            spec = plan_params.get(name)
            if spec is None:
                raise PlanError(f"{where}: {name!r} is not a param of plan.json")
            if name in params:
                raise PlanError(f"{where}: {name!r} is listed twice")
            info = ParamInfo.read(entry, where, _stacked_sources(spec, where),
                                  bool(_get(spec, "requires_grad", f"plan.json {name}")))
            if info.global_shape != tuple(spec["global_shape"]) or info.dtype != spec["dtype"]:
                raise PlanError(f"{where}: {info.dtype} {list(info.global_shape)}, plan.json says "
                                f"{spec['dtype']} {spec['global_shape']}")
            if info.stage != stage or spec.get("stage", 0) != stage:
                raise PlanError(f"{where} ({name}): stage {info.stage}, the rank's stage {stage}, "
                                f"plan.json stage {spec.get('stage', 0)}: all three must agree")
            params[name] = info
        for p in params.values():
            _check_tie(p, params, plan_params[p.name], path)
            _check_shard(p, rank, world, plan_params[p.name], path)
        _check_totals(doc, params, plan, rank, path)
        meshes = {spec["mesh"] for spec in (plan_params[n] for n in params)}
        missing = sorted(m for m in meshes if m not in coords)
        if missing:
            raise PlanError(f"{path}: params on mesh {missing[0]!r}, which the rank's coords "
                            f"({sorted(coords)}) do not have")
        order = list(params)

        def name_of(ref: Any, where: str) -> str:
            return order[_int(ref, f"{where}.param", 0, len(order) - 1)]

        muon: tuple[MuonGroup, ...] = ()
        fsdp2: tuple[Fsdp2Unit, ...] = ()
        alignment = None
        flat: tuple[FlatBuffer, ...] = ()
        for i, b in enumerate(_list(_get(doc, "buffers", path), f"{path}: buffers")):
            where = f"{path}: buffers[{i}]"
            kind = _get(b, "kind", where)
            if kind == "muon_allgather":
                alignment = _int(_get(b, "alignment_bytes", where), f"{where}.alignment_bytes",
                                 1, 1 << 20)
                groups = [_muon_group(g, f"{where}.groups[{k}]", name_of, alignment, world,
                                      rank)
                          for k, g in enumerate(_list(_get(b, "groups", where), where))]
                muon = tuple(
                    replace(g, batches=tuple(
                        _muon_slots(g, batch, params, f"{where}.groups[{k}].batches[{j}]")
                        for j, batch in enumerate(g.batches)))
                    for k, g in enumerate(groups))
            elif kind == "fsdp2_allgather":
                fsdp2 = tuple(_fsdp2_unit(u, f"{where}.units[{k}]", name_of, params, world, rank)
                              for k, u in enumerate(_list(_get(b, "units", where), where)))
            elif kind in ("megatron_distopt", "deepspeed_zero"):
                zero_stage = _int(_get(b, "zero_stage", where), f"{where}.zero_stage", 1, 3)
                flat += tuple(_flat_buffer(fb, f"{where}.flat[{k}]", kind, zero_stage, name_of,
                                           world, rank)
                              for k, fb in enumerate(_list(_get(b, "flat", where), where)))
            else:
                raise PlanError(f"{where}: unknown buffer kind {kind!r}")
        return cls(path, rank, world, stage, coords, params, muon, fsdp2, alignment, doc, flat)

    def storage_params(self) -> list[ParamInfo]:
        """Params that own storage on this rank (aliases excluded), file order."""
        return [p for p in self.params.values() if p.alias_of is None]


def _mesh_axes(plan: Mapping[str, Any], mesh: str, world: int) -> list[tuple[str, int]] | None:
    """[(axis name, size)] of plan.json `meshes.<mesh>` (None when the plan has no
    such mesh), checked as verify checks it: distinct names, sizes in
    [1, 2^31 - 1] whose product is the world size."""
    where = f"plan.json meshes.{mesh}"
    axes = _get(plan.get("meshes"), mesh, "plan.json meshes")
    if axes is None and mesh == "expert":
        return None
    out: list[tuple[str, int]] = []
    product = 1
    for i, axis in enumerate(_list(axes, where)):
        name = _str(_get(axis, "name", f"{where}[{i}]"), f"{where}[{i}].name")
        size = _int(_get(axis, "size", f"{where}[{i}]"), f"{where}[{i}].size", 1, MAX_WORLD_SIZE)
        if any(name == n for n, _ in out):
            raise PlanError(f"{where}[{i}].name: axis {name!r} twice")
        out.append((name, size))
        product *= size
    if product != world:
        raise PlanError(f"{where}: product of the axis sizes {product} but world_size {world}")
    return out


def _coords_of(axes: list[tuple[str, int]], rank: int) -> dict[str, int]:
    """Coordinates of `rank` on a mesh (row-major: the last axis varies fastest)."""
    out: dict[str, int] = {}
    for name, size in reversed(axes):
        out[name] = rank % size
        rank //= size
    return out


def _num_stages(plan: Mapping[str, Any]) -> tuple[str | None, int]:
    """(pipeline axis or None, number of stages) of plan.json `pipeline`, the axis one
    of meshes.dense whose size is num_stages."""
    pipeline = plan.get("pipeline")
    if pipeline is None:
        return None, 1
    axis = _str(_get(pipeline, "axis", "plan.json pipeline"), "plan.json pipeline.axis")
    stages = _int(_get(pipeline, "num_stages", "plan.json pipeline"),
                  "plan.json pipeline.num_stages", 1, MAX_WORLD_SIZE)
    dense = dict(_mesh_axes(plan, "dense", plan["world_size"]) or [])
    if axis not in dense:
        raise PlanError(f"plan.json pipeline.axis: {axis!r} is not an axis of meshes.dense")
    if dense[axis] != stages:
        raise PlanError(f"plan.json pipeline.num_stages {stages} but axis {axis!r} has size "
                        f"{dense[axis]}")
    return axis, stages


_LABEL = re.compile(r"Replicate\(\)|Shard\((\d+)\)|_StridedShard\((\d+), sf=[1-9]\d*\)")


def _check_placements(plan: Mapping[str, Any], p: Mapping[str, Any], where: str) -> None:
    """plan.json `placements` (what DTensor / FSDP2 are built from) against the param's
    mesh and shards, as verify re-derives them (src/verify/fields.cpp
    `check_placements`): one label per mesh axis; a Replicate() axis of size > 1 keeps
    the rank that differs from a shard's first rank only on that axis (same pipeline
    stage) in that shard; a dim no axis of size > 1 splits is whole in every non-empty
    shard."""
    world = plan["world_size"]
    axes = _mesh_axes(plan, _str(p["mesh"], f"{where}.mesh"), world) or []
    labels = _list(_get(p, "placements", where), f"{where}.placements")
    global_shape = _shape(_get(p, "global_shape", where), f"{where}.global_shape")
    if len(labels) != len(axes):
        raise PlanError(f"{where}.placements: {len(labels)} labels but mesh {p['mesh']!r} has "
                        f"{len(axes)} axes")
    split = [False] * len(global_shape)
    replicated: list[int] = []
    for a, label in enumerate(labels):
        match = _LABEL.fullmatch(label) if isinstance(label, str) else None
        dim = None if match is None or match.lastindex is None else int(match[match.lastindex])
        if match is None or (dim is not None and dim >= len(global_shape)):
            raise PlanError(f"{where}.placements[{a}]: {label!r} is not Replicate(), Shard(d) "
                            f"or _StridedShard(d, sf=F) with d below {len(global_shape)}")
        if axes[a][1] == 1:
            continue
        if dim is None:
            replicated.append(a)
        else:
            split[dim] = True
    pipeline, _ = _num_stages(plan)
    dense = _mesh_axes(plan, "dense", world) or []

    def stride(mesh_axes: list[tuple[str, int]], a: int) -> int:
        return numel([size for _, size in mesh_axes[a + 1:]])

    def stage_of(rank: int) -> int:
        for a, (name, size) in enumerate(dense):
            if name == pipeline:
                return rank // stride(dense, a) % size
        return 0

    for i, shard in enumerate(_list(_get(p, "shards", where), f"{where}.shards")):
        swhere = f"{where}.shards[{i}]"
        ranks = parse_rank_set(_str(_get(shard, "ranks", swhere), f"{swhere}.ranks"), world,
                               f"{swhere}.ranks")
        first = ranks.first
        for a in replicated:
            size = axes[a][1]
            step = stride(axes, a)
            at = first // step % size
            other = first + ((at + 1) % size - at) * step
            if stage_of(other) == stage_of(first) and other not in ranks:
                raise PlanError(f"{where}.placements: axis {axes[a][0]!r} is Replicate(), but "
                                f"shards[{i}] holds rank {first} and not rank {other}, which "
                                "differs from it only on that axis")
        local = _shape(_get(shard, "local_shape", swhere), f"{swhere}.local_shape")
        offset = _shape(_get(shard, "global_offset", swhere), f"{swhere}.global_offset")
        if numel(local) == 0 or len(local) != len(global_shape) or len(offset) != len(local):
            continue
        for d, whole in enumerate(global_shape):
            if not split[d] and (local[d] != whole or offset[d] != 0):
                raise PlanError(f"{where}.placements {labels}: no axis splits dim {d}, but "
                                f"shards[{i}] holds {local[d]} of its {whole} at offset "
                                f"{offset[d]}")


def check_plan_header(plan: Mapping[str, Any], manifest: Mapping[str, Any],
                      path: str) -> None:
    """The fields of plan.json a runtime builds from before any rank file, checked
    as `shardc verify` checks them (src/verify/fields.cpp): the meshes (the
    DeviceMeshes), the pipeline axis, each param's mesh and stage, summary.num_params,
    and the inputs' digests against manifest.json's."""
    world = plan["world_size"]
    _mesh_axes(plan, "dense", world)
    has_expert = _mesh_axes(plan, "expert", world) is not None
    _, stages = _num_stages(plan)
    params = _list(_get(plan, "params", path), f"{path} params")
    for i, p in enumerate(params):
        where = f"{path} params[{i}]"
        _int(_get(p, "stage", where), f"{where}.stage", 0, stages - 1)
        mesh = _get(p, "mesh", where)
        if mesh not in (("dense", "expert") if has_expert else ("dense",)):
            raise PlanError(f"{where}.mesh: {mesh!r} is not a mesh of the plan")
        _check_placements(plan, p, f"{where} ({p.get('name')})")
    summary = _get(plan, "summary", path)
    count = _int(_get(summary, "num_params", f"{path} summary"), f"{path} summary.num_params")
    if count != len(params):
        raise PlanError(f"{path} summary.num_params {count} but {len(params)} params listed")
    if _get(plan, "inputs", path) != _get(manifest, "inputs", "manifest.json"):
        raise PlanError(f"{path} inputs (model and recipe sha256) differ from manifest.json's")


def _axes_text(coords: Mapping[str, int] | None) -> str:
    """{a: 1, b: 0} sorted by axis name (as verify prints coordinates), or null."""
    if coords is None:
        return "null"
    return "{" + ", ".join(f"{name}: {value}" for name, value in sorted(coords.items())) + "}"


def _check_coords(coords: Mapping[str, Mapping[str, int]], stage: int, rank: int,
                  plan: Mapping[str, Any], path: str) -> None:
    """A rank file's coords are plan.json's meshes at this rank, and its stage is
    its coordinate on the pipeline axis (0 without pipeline)."""
    world = plan["world_size"]
    for mesh in ("dense", "expert"):
        axes = _mesh_axes(plan, mesh, world)
        want = None if axes is None else _coords_of(axes, rank)
        got = coords.get(mesh)
        if got != want:
            raise PlanError(f"{path}: coords.{mesh} {_axes_text(got)} but plan.json meshes give "
                            f"{_axes_text(want)}")
    axis, _ = _num_stages(plan)
    want_stage = 0 if axis is None else coords["dense"][axis]
    if stage != want_stage:
        raise PlanError(f"{path}: stage {stage} but plan.json gives rank {rank} stage "
                        f"{want_stage}")


def _check_totals(doc: Mapping[str, Any], params: Mapping[str, ParamInfo],
                  plan: Mapping[str, Any], rank: int, path: str) -> None:
    """`totals` are the sums of the held params that own storage (aliases share
    it), within plan.json's summary min / max, equal to them on the ranks listed."""
    where = f"{path}: totals"
    totals = _get(doc, "totals", path)
    owned = [p for p in params.values() if p.alias_of is None]
    want = {"param_bytes": sum(p.nbytes for p in owned),
            "padded_param_bytes": sum(numel(p.padded_shape) * dtypes.element_size(p.dtype)
                                      for p in owned),
            "num_params": len(owned)}
    got = {key: _int(_get(totals, key, where), f"{where}.{key}") for key in want}
    if got != want:
        raise PlanError(f"{where} {got} but its params sum to {want}")
    summary = _get(plan, "summary", "plan.json")
    for key in ("param_bytes", "padded_param_bytes"):
        field_name = f"per_rank_{key}"
        stat = _get(summary, field_name, "plan.json summary")
        swhere = f"plan.json summary.{field_name}"
        low = _int(_get(stat, "min", swhere), f"{swhere}.min")
        high = _int(_get(stat, "max", swhere), f"{swhere}.max")
        at_low = parse_rank_set(_str(_get(stat, "min_ranks", swhere), f"{swhere}.min_ranks"),
                                plan["world_size"], f"{swhere}.min_ranks")
        at_high = parse_rank_set(_str(_get(stat, "max_ranks", swhere), f"{swhere}.max_ranks"),
                                 plan["world_size"], f"{swhere}.max_ranks")
        value = got[key]
        if not low <= value <= high or (rank in at_low and value != low) or (
                rank in at_high and value != high):
            raise PlanError(f"{where}.{key} {value} but {swhere} gives min {low}, max {high}")


def _check_shard(p: ParamInfo, rank: int, world: int, spec: Mapping[str, Any],
                 path: str) -> None:
    """plan.json lists the rank file's shard: a `shards` entry with the same local
    shape and global offset whose replica set holds this rank."""
    shards = _list(_get(spec, "shards", f"plan.json {p.name}"), f"plan.json {p.name} shards")
    for index, shard in enumerate(shards):
        shard_where = f"plan.json {p.name} shards[{index}]"
        local_shape = _shape(_get(shard, "local_shape", shard_where), f"{shard_where}.local_shape")
        offset = _shape(_get(shard, "global_offset", shard_where), f"{shard_where}.global_offset")
        if local_shape != p.local_shape or offset != p.global_offset:
            continue
        ranks = parse_rank_set(_get(shard, "ranks", shard_where), world, f"{shard_where}.ranks")
        if rank in ranks:
            return
    raise PlanError(f"{path}: {p.name}: rank {rank} holds {list(p.local_shape)} at "
                    f"{list(p.global_offset)}, which plan.json lists for no shard of this rank")


def _check_tie(p: ParamInfo, params: Mapping[str, ParamInfo], spec: Mapping[str, Any],
               path: str) -> None:
    """A held param's tie is plan.json's: `alias_of` (same stage: shares the source's
    storage, so the same dtype and shard) or `tied_copy_of` (the source on another
    stage) names plan.json's `alias_of`, and an untied param has neither."""
    want = _get(spec, "alias_of", f"plan.json {p.name}")
    got = p.alias_of or p.tied_copy_of
    if got != want or (p.alias_of is not None and p.tied_copy_of is not None):
        raise PlanError(f"{path}: {p.name}: alias_of {p.alias_of!r} / tied_copy_of "
                        f"{p.tied_copy_of!r}, plan.json's alias_of is {want!r}")
    if p.alias_of is None:
        return
    source = params.get(p.alias_of)
    if source is None:
        raise PlanError(f"{path}: {p.name} is an alias of {p.alias_of}, which this rank does not "
                        "hold")
    if (source.dtype, source.global_shape, source.local_shape, source.global_offset,
            source.padded_shape) != (p.dtype, p.global_shape, p.local_shape, p.global_offset,
                                     p.padded_shape):
        raise PlanError(f"{path}: {p.name} shares the storage of {p.alias_of}, but holds "
                        f"{p.dtype} {list(p.local_shape)} at {list(p.global_offset)}, the source "
                        f"{source.dtype} {list(source.local_shape)} at "
                        f"{list(source.global_offset)}")


def _stacked_sources(spec: Mapping[str, Any], where: str) -> tuple[str, ...] | None:
    """plan.json `stacked_from.sources`, checked: `count` sources, distinct, differing
    from each other in exactly one dot-separated segment, the expert index, which
    counts up by one (sources[e] is expert first + e: a swap or rename is refused)."""
    stacked = _get(spec, "stacked_from", where)
    if stacked is None:
        return None
    where = f"{where} stacked_from"
    sources = tuple(_str(s, f"{where}.sources")
                    for s in _list(_get(stacked, "sources", where), where))
    count = _int(_get(stacked, "count", where), f"{where}.count", 1)
    if count != len(sources) or not sources:
        raise PlanError(f"{where}: count {count} for {len(sources)} sources")
    split = [s.split(".") for s in sources]
    if any(len(parts) != len(split[0]) for parts in split):
        raise PlanError(f"{where}: sources of different depth")
    differ = [i for i in range(len(split[0])) if len({parts[i] for parts in split}) > 1]
    if len(sources) > 1 and len(differ) != 1:
        raise PlanError(f"{where}: sources differ in {len(differ)} name segments, not one "
                        "(the expert index)")
    if differ:
        index = differ[0]
        values = [parts[index] for parts in split]
        if not all(v.isdigit() for v in values) or [int(v) for v in values] != list(
                range(int(values[0]), int(values[0]) + len(values))):
            raise PlanError(f"{where}: expert indices {values[:8]} are not consecutive in "
                            "order (sources swapped or renamed)")
    return sources


def rank_file_name(rank: int, world_size: int) -> str:
    """ranks/rank-<r>.json, r zero-padded to the width of world_size - 1
    (shardc's `rank_file_name`)."""
    width = len(str(max(world_size - 1, 0)))
    return f"ranks/rank-{rank:0{width}d}.json"


@dataclass(frozen=True)
class ManifestEntry:
    """A file of the compile: path (relative to the OUTDIR), size, sha256."""

    path: str
    bytes: int
    sha256: str


def _manifest_entry(doc: Any, where: str) -> ManifestEntry:
    path = _str(_get(doc, "path", where), f"{where}.path")
    digest = _str(_get(doc, "sha256", where), f"{where}.sha256")
    if not _HEX64.fullmatch(digest):
        raise PlanError(f"{where}.sha256: not 64 lowercase hex digits")
    return ManifestEntry(path, _int(_get(doc, "bytes", where), f"{where}.bytes"), digest)


def read_manifest(doc: Any, where: str) -> tuple[int, dict[str, ManifestEntry]]:
    """(world_size, {relative path: entry}) of a manifest.json, checked as
    verify checks it (src/outputs/readback.cpp `read_manifest`)."""
    if not isinstance(doc, dict) or doc.get("format") != "shardc.manifest/v1":
        raise PlanError(f"{where}: not a shardc.manifest/v1 file")
    world = _int(_get(doc, "world_size", where), f"{where}: world_size", 1, MAX_WORLD_SIZE)
    plan = _manifest_entry(_get(doc, "plan", where), f"{where}: plan")
    if plan.path != "plan.json":
        raise PlanError(f"{where}: plan.path {plan.path!r} is not 'plan.json'")
    files = {"plan.json": plan}
    rank_files = _get(doc, "rank_files", where)
    listed = _list(_get(rank_files, "files", f"{where}: rank_files"), f"{where}: rank_files.files")
    count = _int(_get(rank_files, "count", f"{where}: rank_files"), f"{where}: rank_files.count")
    if count != len(listed):
        raise PlanError(f"{where}: rank_files lists {len(listed)} files but count says {count}")
    previous = -1
    for i, entry in enumerate(listed):
        fw = f"{where}: rank_files.files[{i}]"
        rank = _int(_get(entry, "rank", fw), f"{fw}.rank", 0, world - 1)
        if rank <= previous:
            raise PlanError(f"{fw}.rank: ranks not strictly ascending ({rank} after {previous})")
        previous = rank
        item = _manifest_entry(entry, fw)
        if item.path != rank_file_name(rank, world):
            raise PlanError(f"{fw}.path: {item.path!r} is not the file name of rank {rank}")
        files[item.path] = item
    ranks_text = _str(_get(rank_files, "ranks", f"{where}: rank_files"),
                      f"{where}: rank_files.ranks")
    if listed or ranks_text:
        ranks = parse_rank_set(ranks_text, world, f"{where}: rank_files.ranks")
        if len(ranks) != count or not all(_get(e, "rank", where) in ranks for e in listed):
            raise PlanError(f"{where}: rank_files.ranks {ranks_text[:40]!r} is not the set of the "
                            "listed files' ranks")
    return world, files


class OutDir:
    """A `shardc compile` output directory, refused unless complete and unchanged.

    `manifest.json` is required (compile writes it last: a directory without it
    is an interrupted or foreign compile) and every file read is checked against
    the size and sha256 it lists before it is used.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        if not os.path.isdir(self.path):
            raise PlanError(f"{self.path}: not a directory (an OUTDIR of `shardc compile`)")
        manifest_path = os.path.join(self.path, "manifest.json")
        if not os.path.lexists(manifest_path):
            ranks_dir = os.path.join(self.path, "ranks")
            count = len(os.listdir(ranks_dir)) if os.path.isdir(ranks_dir) else 0
            raise PlanError(f"{self.path}: incomplete compile: {count} rank files and no "
                            "manifest.json; rerun compile")
        text = read_regular(manifest_path, MAX_MANIFEST_BYTES, PlanError)
        self.manifest = _json(text, manifest_path)
        manifest_world, self._files = read_manifest(self.manifest, manifest_path)
        self.plan: dict[str, Any] = _json(self._read("plan.json"), self._full("plan.json"))
        if not isinstance(self.plan, dict) or self.plan.get("format") != "shardc.plan/v1":
            raise PlanError(f"{self._full('plan.json')}: not a shardc.plan/v1 file")
        self.world_size = _int(_get(self.plan, "world_size", "plan.json"), "plan.json world_size",
                               1, MAX_WORLD_SIZE)
        if self.world_size != manifest_world:
            raise PlanError(f"{manifest_path}: world_size {manifest_world}, plan.json says "
                            f"{self.world_size}")
        plan_params = _list(_get(self.plan, "params", "plan.json"), "plan.json params")
        self.params: dict[str, dict[str, Any]] = {}
        for i, p in enumerate(plan_params):
            name = _str(_get(p, "name", f"plan.json params[{i}]"), f"plan.json params[{i}].name")
            if name in self.params:
                raise PlanError(f"plan.json params[{i}]: {name!r} is listed twice")
            self.params[name] = p
        check_plan_header(self.plan, self.manifest, self._full("plan.json"))

    def _full(self, rel: str) -> str:
        return os.path.join(self.path, rel)

    def _read(self, rel: str) -> bytes:
        path = self._full(rel)
        meta = self._files.get(rel)
        if meta is None:
            raise PlanError(f"{path}: not listed in manifest.json (not part of the compile)")
        size = require_regular(path, PlanError)
        if size != meta.bytes:
            raise PlanError(f"{path}: changed after the compile ({size} bytes, manifest.json "
                            f"says {meta.bytes})")
        data = read_regular(path, meta.bytes, PlanError)
        if len(data) != meta.bytes or hashlib.sha256(data).hexdigest() != meta.sha256:
            raise PlanError(f"{path}: changed after the compile (size or sha256 differs "
                            "from manifest.json)")
        return data

    def _rank_number(self, rank: Any) -> int:
        """`rank` as an int: TypeError for anything but an integer (a bool, a str from
        os.environ, a float), PlanError outside [0, world_size)."""
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
            raise TypeError(f"rank must be an int, got {type(rank).__name__} {rank!r}"
                            + (" (convert it: int(os.environ['RANK']))"
                               if isinstance(rank, str) else ""))
        number = int(rank)
        if not 0 <= number < self.world_size:
            raise PlanError(f"rank {number} outside world size {self.world_size} of "
                            f"{self._full('plan.json')}: the plan has ranks 0 to "
                            f"{self.world_size - 1}; a launch of more processes than "
                            f"{self.world_size} does not fit it (launch {self.world_size}, or "
                            "recompile for the launch's world size)")
        return number

    def rank_path(self, rank: int) -> str:
        """Relative path of rank r's file: ranks/rank-<r>.json, zero-padded."""
        return rank_file_name(self._rank_number(rank), self.world_size)

    def rank(self, rank: int) -> RankFile:
        """The RankFile of `rank` (an int; TypeError for a str, float or bool; PlanError
        when outside the world size, missing, unlisted or changed)."""
        rank = self._rank_number(rank)
        rel = self.rank_path(rank)
        doc = _json(self._read(rel), self._full(rel))
        if isinstance(doc, dict) and doc.get("rank") != rank:
            raise PlanError(f"{self._full(rel)}: holds rank {doc.get('rank')}, expected {rank}")
        return RankFile.read(doc, self.plan, self._full(rel))

    def shard_ranks(self, name: str) -> list[tuple[list[int], Shape, Shape]]:
        """[(sorted replica ranks, local_shape, global_offset)] of a param, from plan.json."""
        return [(list(parse_rank_set(s["ranks"], self.world_size, f"plan.json {name} shards")),
                 tuple(s["local_shape"]), tuple(s["global_offset"]))
                for s in self.params[name]["shards"]]


def _json(data: bytes, path: str) -> Any:
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise PlanError(f"{path}: duplicate key {key!r}")
            out[key] = value
        return out

    try:
        return json.loads(data, object_pairs_hook=unique)
    except (json.JSONDecodeError, UnicodeDecodeError) as ex:
        raise PlanError(f"{path}: not valid JSON ({ex})") from None
