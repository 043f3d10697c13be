"""FSDP2 (`fully_shard`) by the plan's units, and FSDP2's own sharding checked
against the plan.

`apply_fully_shard(model, outdir, rank_file, meshes)` calls `fully_shard` on
each module the plan's `fsdp2_allgather` units name (children before parents,
the root `""` last) with the FSDP mesh of the unit's mesh: the plan's FSDP
axis (`fsdp.shard`, `dp_replicate` x `dp_shard` as an HSDP 2-D mesh when the
plan replicates) — given by the caller as `dp_mesh` per mesh name, since the
axis names are the recipe's. Apply tensor parallelism first (e.g.
`parallelize_module`), as torchtitan does.

`fsdp2_mismatches(model, outdir, rank_file)` compares, per unit, what FSDP2
made with the rank file: the unit's member order (FSDP2's all-gather input
order), each member's sharded (unpadded) size = `local_shape`, padded sharded
size = `padded_shape`, the unit's all-gather input numel = `total`, and each
sharded param's DTensor layout (`compute_local_shape_and_global_offset` of its
mesh and placements) = the rank file's local shape and global offset. Returns
one message per difference (empty: FSDP2 agrees with the plan). FSDP2's
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
from torch.distributed.tensor import DTensor
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

from ..errors import PlanError
from ..layout import RankFile, numel


def apply_fully_shard(model: nn.Module, rank_file: RankFile,
                      dp_mesh: Mapping[str, DeviceMesh], **options: Any) -> None:
    """`fully_shard` every module a plan unit names, deepest first, the root last.
    `dp_mesh`: {plan mesh name: FSDP DeviceMesh}; `options` go to fully_shard."""
    names = sorted({(u.name, u.mesh) for u in rank_file.fsdp2},
                   key=lambda item: (-item[0].count(".") - (item[0] != ""), item[0]))
    for name, mesh in names:
        try:
            module = model.get_submodule(name)
        except AttributeError:
            raise PlanError(f"fsdp2 unit {name!r}: the model has no such module") from None
        fully_shard(module, mesh=dp_mesh[mesh], **options)


def _fsdp_params(module: nn.Module) -> list[Any]:
    if not isinstance(module, FSDPModule):
        return []
    state = module._get_fsdp_state()
    return [p for group in state._fsdp_param_groups for p in group.fsdp_params]


def fsdp2_mismatches(model: nn.Module, rank_file: RankFile) -> list[str]:
    """Differences between FSDP2's sharding of `model` and the rank file (see
    module doc); [] when they agree."""
    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    out: list[str] = []
    rank = rank_file.rank
    for unit in rank_file.fsdp2:
        module = model.get_submodule(unit.name)
        params = _fsdp_params(module)
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
    return out

