"""One rank of the FSDP2 agreement check on real processes (test_fsdp.py; imported
by worker.py).

For a plan with FSDP2 units: a module tree with the plan's parameter names on the
meta device (tied params share one Parameter), tensor / expert parallelism applied
as DTensors on the non-FSDP axes with the plan's placements there (the TP step a
torchtitan user does with parallelize_module), then the adapter's
`apply_fully_shard` with the recipe's FSDP mesh (HSDP: (replicate, shard); experts:
the expert mesh's FSDP axis). FSDP2's own sharding must be the plan's
(`fsdp2_mismatches`: member order, sharded and padded sizes, all-gather bytes,
DTensor layout) and every sharded param's placements plan.json's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs
from torch import nn
from torch.distributed.tensor import DTensor

from shardc_runtime import OutDir
from shardc_runtime.torch.dtensor import compute_local_shape_and_global_offset
from shardc_runtime.torch import (apply_fully_shard, device_meshes, fsdp2_mismatches, placement,
                                  torch_dtype)


def _owner(root: nn.Module, name: str) -> tuple[nn.Module, str]:
    module = root
    *path, attr = name.split(".")
    for part in path:
        if not hasattr(module, part):
            module.add_module(part, nn.Module())
        module = getattr(module, part)
    return module, attr


def run(task: dict[str, Any], rank: int, world: int, fail: Callable[[str], None]) -> list[str]:
    label = task["name"]
    out = OutDir(task["outdir"])
    me = out.rank(rank) if rank < out.world_size else None
    meshes = device_meshes(out, me)
    fsdp = yaml.safe_load(open(task["recipe"]))["fsdp"]
    pipeline = (out.plan.get("pipeline") or {}).get("axis")
    fsdp_axes = {"dense": [a for a in (fsdp.get("replicate"), fsdp["shard"]) if a],
                 "expert": [a for a in (fsdp.get("expert_shard"),) if a]}
    if me is None:
        return []
    root = nn.Module()
    made: dict[str, nn.Parameter] = {}
    later: list[tuple[nn.Module, str, str]] = []  # an alias before its source (module order)
    for name, info in me.params.items():
        owner, attr = _owner(root, name)
        if info.alias_of is not None:
            if info.alias_of in made:
                owner.register_parameter(attr, made[info.alias_of])
            else:
                later.append((owner, attr, info.alias_of))
            continue
        spec = out.params[name]
        axes = [a["name"] for a in out.plan["meshes"][spec["mesh"]]]
        dtype = torch_dtype(info.dtype)
        grad = info.requires_grad and dtype.is_floating_point
        tp = [(a, placement(lbl)) for a, lbl in zip(axes, spec["placements"])
              if a not in fsdp_axes[spec["mesh"]] and a != pipeline and lbl != "Replicate()"]
        if tp:
            mesh = meshes[spec["mesh"]][tuple(a for a, _ in tp)]
            places = [p for _, p in tp]
            shape, _ = compute_local_shape_and_global_offset(torch.Size(info.global_shape), mesh,
                                                             places)
            local = torch.empty(tuple(shape), dtype=dtype, device="meta")
            value: torch.Tensor = DTensor.from_local(
                local, mesh, places, run_check=False, shape=torch.Size(info.global_shape),
                stride=torch.empty(info.global_shape, device="meta").stride())
        else:
            value = torch.empty(info.global_shape, dtype=dtype, device="meta")
        made[name] = nn.Parameter(value, requires_grad=grad)
        owner.register_parameter(attr, made[name])
    for owner, attr, source in later:
        owner.register_parameter(attr, made[source])
    dp = {mesh: meshes[mesh][tuple(names)] for mesh, names in fsdp_axes.items()
          if names and mesh in meshes}
    apply_fully_shard(root, me, dp)
    for message in fsdp2_mismatches(root, me):
        fail(f"{label}: {message}")
    checked = 0
    for name, param in root.named_parameters():
        spec = out.params[name]
        if not isinstance(param, DTensor):
            continue
        axes = [a["name"] for a in out.plan["meshes"][spec["mesh"]]]
        dims = param.device_mesh.mesh_dim_names or ()
        want = [placement(lbl) for a, lbl in zip(axes, spec["placements"]) if a in dims]
        if list(param.placements) != want or [a for a in axes if a in dims] != list(dims):
            fail(f"{label}: {name} on rank {rank}: FSDP2 {list(dims)} {list(param.placements)}, "
                 f"plan {axes} {spec['placements']}")
        checked += 1
    if checked == 0:
        fail(f"{label}: rank {rank}: no FSDP2-sharded param")
    print(f"rank {rank}: {label}: {checked} params, {len(me.fsdp2)} units as FSDP2 shards them",
          flush=True)
    return []
