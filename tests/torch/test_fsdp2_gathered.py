"""FSDP2's gathered units, as shardc's memory model counts them (docs/memory.md).

torch is the witness: on the fake process group (dp_shard 2), a small model with one FSDP2
unit per layer and a root unit, run forward + backward and look at what FSDP2 still holds.

* `reshard_after_forward=False`: after the forward every unit is still gathered; the
  bytes of the unsharded params equal `shardc memory`'s `fsdp2_allgather` of the same model
  and recipe with `fsdp.reshard_after_forward: false` (every unit, not a unit and the next).
* What torch.distributed.pipelining does to a stage module for every backward but the
  step's last (stage.py `backward_maybe_with_nosync`: `set_reshard_after_backward(False)`,
  `set_requires_gradient_sync(False)`; checked in its source): after the backward every
  unit is still gathered and holds its gradient at the unsharded shape, no sharded grad.
  That is the state shardc counts under a pipeline (every unit gathered, every unit's
  unsharded grads).
"""

from __future__ import annotations

import inspect
import json
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.pipelining.stage import _PipelineStageBase
from torch.testing._internal.distributed.fake_pg import FakeStore

HIDDEN = 16
LAYERS = 3


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x))


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.layers = torch.nn.ModuleList(Block() for _ in range(LAYERS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return x


@pytest.fixture(scope="module")
def mesh() -> Any:
    dist.init_process_group("fake", rank=0, world_size=2, store=FakeStore())
    yield init_device_mesh("cpu", (2,), mesh_dim_names=("dp_shard",))
    dist.destroy_process_group()


def sharded(mesh: Any, reshard_after_forward: bool) -> Net:
    torch.manual_seed(0)
    net = Net()
    for layer in net.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(net, mesh=mesh, reshard_after_forward=reshard_after_forward)
    return net


def groups(net: Net) -> list[Any]:
    from torch.distributed.fsdp._fully_shard._fsdp_state import _get_module_fsdp_state
    found = []
    for module in [net, *net.layers]:
        state = _get_module_fsdp_state(module)
        assert state is not None and state._fsdp_param_group is not None
        found.append(state._fsdp_param_group)
    return found


def unsharded_bytes(net: Net) -> int:
    return sum(p.unsharded_param.numel() * p.unsharded_param.element_size()
               for g in groups(net) for p in g.fsdp_params)


def shardc_fsdp2_allgather(shardc: str, tmp: Path, net: Net) -> int:
    params = "\n".join(f"  - {{name: {name}, shape: {list(p.shape)}}}"
                       for name, p in Net().named_parameters())
    (tmp / "model.yaml").write_text(f"format: shardc.model/v1\nname: net\ndtype: float32\n"
                                    f"params:\n{params}\n")
    (tmp / "recipe.yaml").write_text(
        "format: shardc.recipe/v1\nmesh:\n  - {name: dp_shard, size: 2}\n"
        "rules:\n  - {match: \"**\", placements: {}}\n"
        "fsdp:\n  shard: dp_shard\n  reshard_after_forward: false\n"
        "buffers:\n  - {kind: fsdp2_allgather, units: [\"layers.{i}\", \"**\"]}\n")
    run = subprocess.run([shardc, "memory", str(tmp / "model.yaml"), str(tmp / "recipe.yaml"),
                          "--format", "json"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["layouts"].get("fsdp2_every_unit_gathered") is True, run.stdout[:400]
    stage = report["stages"][0]["fsdp2_allgather"]
    assert stage["min"] == stage["max"], stage
    return int(stage["max"])


def test_no_reshard_after_forward_keeps_every_unit(mesh: Any, shardc: str, tmp_path: Path) -> None:
    net = sharded(mesh, reshard_after_forward=False)
    out = net(torch.randn(4, HIDDEN))
    assert all(g.is_unsharded for g in groups(net)), "a unit was resharded after forward"
    assert unsharded_bytes(net) == shardc_fsdp2_allgather(shardc, tmp_path, net)
    out.sum().backward()
    # And FSDP2's default: after forward the layer units are resharded.
    net = sharded(mesh, reshard_after_forward=True)
    net(torch.randn(4, HIDDEN))
    assert not any(g.is_unsharded for g in groups(net)[1:])


def held_peak(net: torch.nn.Module, fsdp_modules: list[torch.nn.Module],
              probed: list[torch.nn.Module]) -> int:
    """The most bytes FSDP2 holds gathered (a unit unsharded, or a prefetch's all-gather
    output pending) over a forward and backward, sampled on entering each of `probed` in
    forward and on leaving it in backward (a probe op first in the module: its backward
    runs after the module's pre_backward unshards and prefetches)."""
    from torch.distributed.fsdp._fully_shard._fsdp_state import _get_module_fsdp_state
    states = [_get_module_fsdp_state(m) for m in fsdp_modules]
    all_groups = [s._fsdp_param_group for s in states if s and s._fsdp_param_group]

    def held() -> int:
        return sum(p.unsharded_param.numel() * p.unsharded_param.element_size()
                   for g in all_groups if g.is_unsharded or g._all_gather_result is not None
                   for p in g.fsdp_params)

    samples: list[int] = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
            samples.append(held())
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
            samples.append(held())
            return grad

    for module in probed:
        module.register_forward_pre_hook(lambda _m, args: (Probe.apply(args[0]),))
    net(torch.randn(4, HIDDEN)).sum().backward()
    return max(samples)


def shardc_peak(shardc: str, tmp: Path, net: torch.nn.Module, units: str) -> int:
    """`shardc memory`'s fsdp2_allgather for `net`'s params on dp_shard 2 (FSDP2's default:
    reshard after forward, no pipeline) with the FSDP2 units `units`."""
    params = "\n".join(f"  - {{name: {name}, shape: {list(p.shape)}}}"
                       for name, p in net.named_parameters())
    (tmp / "model.yaml").write_text(f"format: shardc.model/v1\nname: net\n"
                                    f"dtype: float32\nparams:\n{params}\n")
    (tmp / "recipe.yaml").write_text(
        "format: shardc.recipe/v1\nmesh:\n  - {name: dp_shard, size: 2}\n"
        "rules:\n  - {match: \"**\", placements: {}}\nfsdp:\n  shard: dp_shard\n"
        f"buffers:\n  - {{kind: fsdp2_allgather, units: {units}}}\n")
    run = subprocess.run([shardc, "memory", str(tmp / "model.yaml"), str(tmp / "recipe.yaml"),
                          "--format", "json"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    stage = json.loads(run.stdout)["stages"][0]["fsdp2_allgather"]
    assert stage["min"] == stage["max"], stage
    return int(stage["max"])


EMBED = HIDDEN * HIDDEN * 4
LAYER = (HIDDEN * HIDDEN + HIDDEN) * 4


def test_the_root_unit_stays_gathered_beside_a_unit_and_the_next(
        mesh: Any, shardc: str, tmp_path: Path) -> None:
    """FSDP2's default (no pipeline, reshard after forward): the root's params (here the
    embedding) are gathered through the forward (the root does not reshard after forward:
    FSDPState._lazy_init) and through the whole backward (its pre_backward runs first, its
    post_backward last), beside the layer being run and the one prefetched in backward.
    shardc counted the largest two consecutive units (root + layer 0, or two layers): found
    by a fresh-user trial, gemma-2-2b's 590 MB embedding root left out beside two layers."""
    net = sharded(mesh, reshard_after_forward=True)
    peak = held_peak(net, [net, *net.layers], list(net.layers))
    assert peak == EMBED + 2 * LAYER, peak
    assert shardc_peak(shardc, tmp_path, Net(), '["layers.{i}", "**"]') == peak


class HeadNet(Net):
    """Net with an output head after the blocks (torchtitan's [norm, output])."""

    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(HIDDEN, 2 * HIDDEN, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(super().forward(x))


def test_torchtitan_wrapping_keeps_no_unit_the_whole_step(
        mesh: Any, shardc: str, tmp_path: Path) -> None:
    """torchtitan's apply_fsdp: the embedding, each block and the output head are units of
    their own, the head kept after forward (its backward comes first), the root holding no
    param. shardc's recipe writes the head as "**" (after the blocks in module order): a
    unit of the chain, not a root held the whole step."""
    torch.manual_seed(0)
    net = HeadNet()
    fully_shard(net.embed, mesh=mesh)
    for layer in net.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(net.head, mesh=mesh, reshard_after_forward=False)
    fully_shard(net, mesh=mesh)
    peak = held_peak(net, [net.embed, *net.layers, net.head], [*net.layers, net.head])
    assert peak == 2 * HIDDEN * HIDDEN * 4 + LAYER, peak  # the head and the last layer
    assert shardc_peak(shardc, tmp_path, HeadNet(), '["embed", "layers.{i}", "**"]') == peak


def test_pipelining_keeps_units_and_unsharded_grads(mesh: Any) -> None:
    source = inspect.getsource(_PipelineStageBase.backward_maybe_with_nosync)
    for call in ("set_reshard_after_backward(False)", "set_requires_gradient_sync(False)"):
        assert call in source, f"torch's pipelining no longer calls {call}: revisit docs/memory.md"
    net = sharded(mesh, reshard_after_forward=True)
    cast(FSDPModule, net).set_reshard_after_backward(False)
    cast(FSDPModule, net).set_requires_gradient_sync(False)
    net(torch.randn(4, HIDDEN)).sum().backward()
    for group in groups(net):
        assert group.is_unsharded, "a unit was resharded after backward"
        for param in group.fsdp_params:
            grad = param.unsharded_param.grad
            assert grad is not None and grad.shape == param.unsharded_param.shape
            assert param.sharded_param.grad is None
    # With gradient sync on (the step's last micro-batch), the grads are reduce-scattered.
    net = sharded(mesh, reshard_after_forward=True)
    net(torch.randn(4, HIDDEN)).sum().backward()
    for group in groups(net):
        for param in group.fsdp_params:
            assert param.sharded_param.grad is not None
