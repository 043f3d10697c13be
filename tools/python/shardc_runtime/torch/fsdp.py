"""FSDP2 (`fully_shard`) by the plan's units, and FSDP2's own sharding checked
against the plan.

`apply_fully_shard(model, rank_file, dp_mesh, **options)` calls `fully_shard`
on each module the plan's `fsdp2_allgather` units name (children before parents,
the root `""` last) with the FSDP mesh of the unit's mesh: the plan's FSDP
axis (`fsdp.shard`, `dp_replicate` x `dp_shard` as an HSDP 2-D mesh when the
plan replicates) — given by the caller as `dp_mesh`, a dict {plan mesh name:
FSDP DeviceMesh} (e.g. `{"dense": meshes["dense"]["dp_shard"]}`), since the axis
names are the recipe's. Apply tensor parallelism first (e.g.
`parallelize_module`), as torchtitan does. Before any `fully_shard`, the module
is checked against the rank file (`model.check_model`: names, shapes, dtypes,
ties) and `dp_mesh` against the plan (a dict with a DeviceMesh per unit mesh,
spanning each unit's FSDP group): a TypeError / ValueError / PlanError says
which, and nothing is sharded.

`fsdp2_mismatches(model, rank_file)` lists the module's differences from the
rank file (`model.model_mismatches`), then compares, per unit, what FSDP2
made with the rank file: the unit's member order (FSDP2's all-gather input
order), each member's sharded (unpadded) size = `local_shape`, padded sharded
size = `padded_shape`, the unit's all-gather input numel = `total` and bytes =
`total_bytes`, and each
sharded param's DTensor layout (`compute_local_shape_and_global_offset` of its
mesh and placements) = the rank file's local shape and global offset. Returns
one message per difference (empty: FSDP2 agrees with the plan). One convention
differs without a difference in data: FSDP2 reports a chunk with no elements with
its FSDP dim set to 0 (`_get_dim_chunked_size`: an EP rank without experts has
sharded size [0, 0, 8] where DTensor and the rank file say [0, 2, 8]); two empty
shapes are taken as equal, the padded sizes are still compared. FSDP2's
internals used here (`_get_fsdp_state`, `_fsdp_param_groups`, `FSDPParam`'s
`sharded_size` / `padded_sharded_param_size`) are torch 2.13's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor, Shard

from ..errors import PlanError
from ..layout import RankFile, numel
from .dtensor import compute_local_shape_and_global_offset
from .model import check_model, model_mismatches


def _unit_module(name: str, members: list[str], shared: bool) -> str:
    """The module a unit is applied to: the unit's name, or, when another mesh's unit
    has the same name (experts beside dense params in one layer, as torchtitan shards
    `moe.experts` on the expert mesh first), its members' deepest common module."""
    if not shared:
        return name
    common: list[str] = []
    for level in zip(*(m.split(".")[:-1] for m in members)):
        if any(part != level[0] for part in level):
            break
        common.append(level[0])
    return ".".join(common)


def _check_dp_mesh(rank_file: RankFile, dp_mesh: Any) -> None:
    """`dp_mesh` is {plan mesh name: DeviceMesh} with a mesh for every unit's mesh,
    each spanning its units' FSDP groups on this rank."""
    needed = sorted({unit.mesh for unit in rank_file.fsdp2})
    example = ("{'dense': meshes['dense']['dp_shard']} (the recipe's fsdp.shard axis; "
               "a 2-D (replicate, shard) mesh for HSDP)")
    if not isinstance(dp_mesh, Mapping):
        raise TypeError(f"apply_fully_shard: dp_mesh must be a dict {{plan mesh name: FSDP "
                        f"DeviceMesh}} for the plan's meshes {needed}, e.g. {example}; got "
                        f"{type(dp_mesh).__name__} {dp_mesh!r}"[:600])
    missing = [m for m in needed if m not in dp_mesh]
    if missing:
        raise ValueError(f"apply_fully_shard: dp_mesh has no FSDP mesh for the plan's mesh "
                         f"{missing[0]!r} (its keys: {sorted(map(str, dp_mesh))}; the plan's "
                         f"FSDP2 units are on {needed}), e.g. {example}")
    for name in needed:
        mesh = dp_mesh[name]
        if not isinstance(mesh, DeviceMesh):
            raise TypeError(f"apply_fully_shard: dp_mesh[{name!r}] must be a DeviceMesh, got "
                            f"{type(mesh).__name__}")
        spans = {int(r) for r in mesh.mesh.flatten().tolist()}
        for unit in rank_file.fsdp2:
            if unit.mesh == name and not set(unit.ranks) <= spans:
                raise ValueError(f"apply_fully_shard: dp_mesh[{name!r}] {mesh} spans ranks "
                                 f"{sorted(spans)[:16]}, but the FSDP group of unit "
                                 f"{unit.name!r} on rank {rank_file.rank} is "
                                 f"{list(unit.ranks)[:16]}: pass the plan's FSDP axis, e.g. "
                                 f"{example}")


def apply_fully_shard(model: nn.Module, rank_file: RankFile,
                      dp_mesh: Mapping[str, DeviceMesh], **options: Any) -> list[str]:
    """`fully_shard` every module a plan unit names, deepest first, the root last;
    returns the module names in the order sharded. `dp_mesh`: {plan mesh name: FSDP
    DeviceMesh} (a 2-D (replicate, shard) mesh for HSDP). Each param's FSDP dim is the
    unit's `shard_dim` (`shard_placement_fn`); params of the module that no unit lists
    (the plan leaves them unsharded, e.g. requires_grad false) are `ignored_params`.
    `options` go to fully_shard. Raises (and shards nothing) when `dp_mesh` is not in
    that form (TypeError / ValueError) or the module is not the plan's (PlanError)."""
    _check_dp_mesh(rank_file, dp_mesh)
    check_model(model, rank_file, None, "apply_fully_shard")
    members = {p.name: p.shard_dim for u in rank_file.fsdp2 for p in u.params}
    by_name: dict[str, list[str]] = {}
    for unit in rank_file.fsdp2:
        by_name.setdefault(unit.name, []).append(unit.mesh)
    targets = []
    for unit in rank_file.fsdp2:
        shared = len(by_name[unit.name]) > 1 and unit.mesh != "dense"
        targets.append((_unit_module(unit.name, [p.name for p in unit.params], shared),
                        unit.mesh))
    targets.sort(key=lambda item: (-(item[0].count(".") + (item[0] != "")), item[0]))
    # Every FQN of a shared (tied) Parameter: the plan names the tie's source, which need
    # not be the FQN named_parameters() keeps (its first in module order); matched by
    # name, the tied weight was passed as ignored (trial E 3).
    named = list(model.named_parameters(remove_duplicate=False))
    managed = {id(p) for name, p in named if name in members}
    ignored = {p for _, p in named if id(p) not in managed}
    dims = {id(p): members[name] for name, p in named if name in members}

    def placement_of(param: nn.Parameter) -> Shard:
        return Shard(max(dims.get(id(param), 0), 0))

    done = []
    for name, mesh in targets:
        try:
            module = model.get_submodule(name)
        except AttributeError:
            raise PlanError(f"fsdp2 unit {name!r}: the model has no such module") from None
        fully_shard(module, mesh=dp_mesh[mesh], shard_placement_fn=placement_of,
                    ignored_params=ignored or None, **options)
        done.append(name)
    return done


def _fsdp_params(module: nn.Module) -> list[Any]:
    if not isinstance(module, FSDPModule):
        return []
    state = module._get_fsdp_state()
    return [p for group in state._fsdp_param_groups for p in group.fsdp_params]


def fsdp2_mismatches(model: nn.Module, rank_file: RankFile) -> list[str]:
    """Differences between `model` (its parameters: `model_mismatches`; FSDP2's
    sharding of it) and the rank file (see module doc); [] when they agree."""
    names: dict[int, str] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        # a tied param by the plan's source name, whichever FQN comes first in the module
        info = rank_file.params.get(name)
        names.setdefault(id(param), info.alias_of or name if info is not None else name)
    out = model_mismatches(model, rank_file)
    rank = rank_file.rank
    for unit in rank_file.fsdp2:
        shared = sum(u.name == unit.name for u in rank_file.fsdp2) > 1 and unit.mesh != "dense"
        module = model.get_submodule(_unit_module(unit.name, [p.name for p in unit.params], shared))
        params = _fsdp_params(module)  # a nested FSDP module (experts) keeps its own
        got = [names.get(id(p.sharded_param), "?") for p in params]
        want = [p.name for p in unit.params]
        if got != want:
            out.append(f"unit {unit.name!r} on rank {rank}: FSDP2 members {got}, plan {want}")
            continue
        total = 0
        for fsdp_param, member in zip(params, unit.params):
            info = rank_file.params[member.name]
            sharded = tuple(fsdp_param.sharded_size)
            padded = tuple(fsdp_param.padded_sharded_param_size)
            total += numel(padded)
            if numel(sharded) == 0 and info.numel == 0:
                sharded = info.local_shape  # FSDP2 zeroes the FSDP dim of an empty chunk
            if sharded != info.local_shape or padded != info.padded_shape:
                out.append(f"{member.name} on rank {rank}: FSDP2 sharded size {list(sharded)} "
                           f"padded {list(padded)}, plan {list(info.local_shape)} padded "
                           f"{list(info.padded_shape)}")
            param = fsdp_param.sharded_param
            if isinstance(param, DTensor):
                shape, offset = compute_local_shape_and_global_offset(
                    torch.Size(info.global_shape), param.device_mesh, param.placements)
                if info.numel == 0:  # DCP sentinel vs DTensor's offset of an empty shard
                    offset = info.global_offset
                if tuple(shape) != info.local_shape or tuple(offset) != info.global_offset:
                    out.append(f"{member.name} on rank {rank}: FSDP2 {param.placements} holds "
                               f"{list(shape)} at {list(offset)}, plan {list(info.local_shape)} "
                               f"at {list(info.global_offset)}")
        if unit.units == "elements" and total != unit.total:
            out.append(f"unit {unit.name!r} on rank {rank}: FSDP2 all-gathers {total} elements "
                       f"per rank, plan {unit.total}")
        size = sum(numel(tuple(p.padded_sharded_param_size)) * p.sharded_param.element_size()
                   for p in params)
        if size != unit.total_bytes:
            out.append(f"unit {unit.name!r} on rank {rank}: FSDP2 all-gathers {size} bytes per "
                       f"rank, plan {unit.total_bytes}")
    return out

