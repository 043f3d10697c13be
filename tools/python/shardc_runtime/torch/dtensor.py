"""DeviceMeshes and DTensors from a shardc plan.

`device_meshes(outdir)` creates the plan's meshes with PyTorch's own API: the
dense mesh by `init_device_mesh` with the recipe's axis names, the expert mesh
(`meshes.expert`, e.g. efsdp x ep) as a second `DeviceMesh` over the same
ranks. Both are row-major over the global ranks, as shardc numbers them; the
rank file's `coords` are checked against the mesh's coordinate of this rank.

`placements(label)` turns a plan label (`Shard(0)`, `Replicate()`,
`_StridedShard(0, sf=8)`: FSDP sharding a TP shard) into DTensor's placement.
`param_mesh(...)` is the mesh a param's DTensor lives on: the param's mesh,
without the pipeline axis (a stage's params live only on its ranks).

`dtensor(...)` makes one param's DTensor: the local shard (unpadded
`local_shape`) read straight from the safetensors checkpoint through
`get_slice` (only this rank's bytes), wrapped by `DTensor.from_local` with the
plan's placements and global shape. Before wrapping, DTensor's own layout
rule (`compute_local_shape_and_global_offset`) must give the rank file's local
shape and offset, else `PlanError` names the param, rank and both values: a
layout DTensor cannot express (`uneven: balanced`, packed params) is refused,
never mislabeled. `distribute_model(model, outdir, rank, checkpoint, meshes)`
swaps every parameter of a (meta-device) module for its DTensor; tied params
share one Parameter object. It first checks the module against the plan
(`model.check_model`: shapes, dtypes, ties, the params the rank holds) and
changes nothing when they differ. `device_meshes` and `distribute_model` need
`init_process_group` first (they never start a process group) and a group of
the plan's world size (`check_launch`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor, Placement, Replicate, Shard
# torch 2.13's private DTensor helpers, imported here only (the adapter's other modules
# import them from this one; they change between releases, torch is pinned)
from torch.distributed.tensor._utils import (
    compute_local_shape_and_global_offset as compute_local_shape_and_global_offset,
)
from torch.distributed.tensor.placement_types import _StridedShard

from ..errors import PlanError
from ..layout import OutDir, ParamInfo, RankFile
from ..load import read_param
from ..safetensors_io import Checkpoint
from .model import check_model
from .tensors import to_torch, torch_dtype

_LABEL = re.compile(r"(Shard|_StridedShard)\((\d+)(?:, sf=(\d+))?\)|Replicate\(\)")


def placement(label: str) -> Placement:
    """DTensor placement of a plan label (`Shard(d)`, `Replicate()`,
    `_StridedShard(d, sf=k)`); PlanError for anything else."""
    match = _LABEL.fullmatch(label)
    if match is None:
        raise PlanError(f"placement {label!r} is not Shard(d), Replicate() or "
                        "_StridedShard(d, sf=k)")
    kind, dim, factor = match.groups()
    if kind is None:
        return Replicate()
    if kind == "Shard":
        if factor is not None:
            raise PlanError(f"placement {label!r}: Shard takes no split factor")
        return Shard(int(dim))
    if factor is None:
        raise PlanError(f"placement {label!r}: _StridedShard needs sf=")
    return _StridedShard(int(dim), split_factor=int(factor))


def _axes(outdir: OutDir, mesh: str) -> list[tuple[str, int]]:
    meshes = outdir.plan.get("meshes") or {}
    if mesh not in meshes:
        raise PlanError(f"plan.json has no mesh {mesh!r}")
    return [(axis["name"], int(axis["size"])) for axis in meshes[mesh]]


def check_launch(outdir: OutDir, caller: str, allow_spare_ranks: bool = False) -> None:
    """The default process group must exist (RuntimeError naming `caller` otherwise: the
    adapter never starts one) and have the plan's world size (PlanError naming both
    numbers and the OUTDIR); `allow_spare_ranks` accepts a larger group whose ranks at
    or above the plan's world size hold nothing (e.g. a job loading a DCP checkpoint into
    a smaller plan)."""
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(f"{caller}: torch.distributed is not initialized: call "
                           "torch.distributed.init_process_group(...) on every rank first (the "
                           "adapter does not start a process group; under torchrun, "
                           "init_process_group('nccl' or 'gloo') reads RANK and WORLD_SIZE)")
    world = dist.get_world_size()
    if world < outdir.world_size or (world > outdir.world_size and not allow_spare_ranks):
        raise PlanError(f"{caller}: the process group has {world} ranks, {outdir.path} was "
                        f"compiled for world_size {outdir.world_size}: launch "
                        f"{outdir.world_size} processes (torchrun --nproc-per-node ...), or "
                        f"recompile the plan for {world} ranks")


def device_meshes(outdir: OutDir, rank_file: RankFile | None = None,
                  device_type: str = "cpu", *,
                  allow_spare_ranks: bool = False) -> dict[str, DeviceMesh]:
    """{"dense": mesh, "expert": mesh (when the plan has one)}. Collective:
    every rank of the default group calls it, after `init_process_group` (a
    RuntimeError otherwise: it never starts one). The group's size must be the
    plan's world size, else PlanError on every rank; `allow_spare_ranks=True` lets
    a larger group through (ranks at or above the plan's world size get no mesh
    coordinate and hold nothing: a job that loads a checkpoint into a smaller plan).
    With `rank_file`, its coords must be this rank's mesh coordinates."""
    check_launch(outdir, "device_meshes", allow_spare_ranks)
    out: dict[str, DeviceMesh] = {}
    for name in ("dense", "expert"):
        if name not in (outdir.plan.get("meshes") or {}) or not outdir.plan["meshes"][name]:
            continue
        axes = _axes(outdir, name)
        shape = tuple(size for _, size in axes)
        names = tuple(axis for axis, _ in axes)
        if name == "dense":
            mesh = init_device_mesh(device_type, shape, mesh_dim_names=names)
        else:
            ranks = torch.arange(outdir.world_size, dtype=torch.int).reshape(shape)
            mesh = DeviceMesh(device_type, ranks, mesh_dim_names=names)
        if rank_file is not None:
            want = rank_file.coords.get(name)
            got = dict(zip(names, mesh.get_coordinate() or []))
            if want is not None and dict(want) != got:
                raise PlanError(f"{rank_file.path}: coords {dict(want)} on mesh {name!r}, "
                                f"DeviceMesh gives {got}")
        out[name] = mesh
    return out


def param_mesh(outdir: OutDir, meshes: Mapping[str, DeviceMesh],
               spec: Mapping[str, Any]) -> tuple[DeviceMesh, list[Placement]]:
    """(mesh, placements) of a plan param's DTensor: the pipeline axis (a
    param lives on one stage's ranks) dropped from both."""
    mesh = meshes[spec["mesh"]]
    names = [axis for axis, _ in _axes(outdir, spec["mesh"])]
    labels = list(spec["placements"])
    if len(labels) != len(names):
        raise PlanError(f"{spec['name']}: {len(labels)} placements for mesh {names}")
    pipeline = (outdir.plan.get("pipeline") or {}).get("axis")
    if pipeline in names:
        keep = [i for i, axis in enumerate(names) if axis != pipeline]
        if labels[names.index(pipeline)] != "Replicate()":
            raise PlanError(f"{spec['name']}: placement on the pipeline axis is "
                            f"{labels[names.index(pipeline)]}")
        mesh = mesh[tuple(names[i] for i in keep)]
        labels = [labels[i] for i in keep]
    return mesh, [placement(label) for label in labels]


def check_layout(info: ParamInfo, rank: int, mesh: DeviceMesh,
                 placements: list[Placement]) -> None:
    """DTensor's local shape and global offset of this rank must be the rank
    file's (PlanError naming param, rank and both otherwise)."""
    if info.packed:
        raise PlanError(f"{info.name}: a packed param (several boxes per shard) is not one "
                        "DTensor shard")
    shape, offset = compute_local_shape_and_global_offset(
        torch.Size(info.global_shape), mesh, placements)
    got_shape, got_offset = tuple(shape), tuple(offset)
    want_offset = info.global_offset
    if info.numel == 0:  # empty: DCP's sentinel is the global size; DTensor's varies
        got_offset, want_offset = (), ()
    if got_shape != info.local_shape or got_offset != want_offset:
        raise PlanError(f"{info.name} on rank {rank}: DTensor {placements} gives local shape "
                        f"{list(got_shape)} at {list(got_offset)}, the rank file "
                        f"{list(info.local_shape)} at {list(info.global_offset)}")


def dtensor(outdir: OutDir, rank_file: RankFile, meshes: Mapping[str, DeviceMesh], name: str,
            checkpoint: Checkpoint | None) -> DTensor:
    """The DTensor of param `name` on this rank, its local shard read from
    `checkpoint` (only this rank's bytes), or zeros when `checkpoint` is None
    (e.g. a state dict for `dcp.load` to fill)."""
    info = rank_file.params[name]
    spec = outdir.params[name]
    mesh, places = param_mesh(outdir, meshes, spec)
    check_layout(info, rank_file.rank, mesh, places)
    if checkpoint is None:
        local = torch.zeros(info.local_shape, dtype=torch_dtype(info.dtype))
    else:
        padded = read_param(info, checkpoint)
        local = to_torch(padded[tuple(slice(0, n) for n in info.local_shape)].copy(), info.dtype)
    return DTensor.from_local(local, mesh, places, run_check=False,
                              shape=torch.Size(info.global_shape),
                              stride=torch.empty(info.global_shape, device="meta").stride())


def distribute_model(model: nn.Module, outdir: OutDir, rank: int,
                     checkpoint: str | Checkpoint,
                     meshes: Mapping[str, DeviceMesh] | None = None, *,
                     dtype_from_plan: bool = False) -> dict[str, DeviceMesh]:
    """Replace every parameter of `model` (on the meta device, or any) by its
    DTensor under the plan. A param the rank does not hold (another pipeline
    stage) is removed from the module. Tied params (alias_of) share their
    source's Parameter. Returns the meshes (created when not given; collective).

    The module must be the one the plan describes: before anything changes,
    every parameter is checked (`check_model`: names, the params this rank holds,
    global shapes, dtypes, ties both ways, a param the module froze and the plan
    trains) and a PlanError lists every difference; the module is left as it was
    (so too when a shard cannot be read or laid out). requires_grad is the plan's
    (the recipe's freezing applies to a freshly built module). `dtype_from_plan=True`
    is the one deliberate conversion: a param whose dtype differs takes the plan's
    (the checkpoint's values, e.g. DeepSeek-V3's float32 router weight, bf16 in the
    checkpoint and the plan). Needs `init_process_group` first, and a process group
    of the plan's world size when `meshes` is not given (PlanError otherwise)."""
    check_launch(outdir, "distribute_model", allow_spare_ranks=meshes is not None)
    rank_file = outdir.rank(rank)
    check_model(model, rank_file, outdir, "distribute_model", dtypes=not dtype_from_plan)
    meshes = dict(meshes) if meshes is not None else device_meshes(outdir, rank_file)
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else Checkpoint(checkpoint)
    names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    made: dict[str, nn.Parameter] = {}
    for name in names:  # every DTensor first: a refusal leaves the module unchanged
        info = rank_file.params.get(name)
        source = info.alias_of or name if info is not None else None
        if source is not None and source not in made:
            made[source] = nn.Parameter(dtensor(outdir, rank_file, meshes, source, ckpt),
                                        requires_grad=rank_file.params[source].requires_grad)
    for name in names:
        info = rank_file.params.get(name)
        owner_name, _, attr = name.rpartition(".")
        owner = model.get_submodule(owner_name)
        if info is None:
            delattr(owner, attr)
            continue
        setattr(owner, attr, made[info.alias_of or name])
    return meshes
