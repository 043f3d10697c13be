"""One rank of the FSDP2 + TP training step (test_train.py; imported by worker.py).

The model is built on the meta device with parameter names of the plan
(cases/train_mlp); tensor parallelism is applied with PyTorch's own
`parallelize_module` (ColwiseParallel where the plan shards a Linear weight's
dim 0 on tp, RowwiseParallel for dim 1), FSDP2 with the adapter's
`apply_fully_shard` by the plan's units; FSDP2's own sharding must equal the
rank file (`fsdp2_mismatches`). Then every local shard is filled from the
checkpoint by the plan (`read_param`: only this rank's bytes), and two SGD
steps run. One process runs the same model unsharded on the same global batch:
the losses, the gradients after the first backward and the weights after each
step must agree (float tolerance).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

from shardc_runtime import Checkpoint, OutDir
from shardc_runtime.load import read_param
from shardc_runtime.torch import (apply_fully_shard, device_meshes, distribute_model,
                                  fsdp2_mismatches, param_mesh, to_torch)

VOCAB, HIDDEN, FFN, LAYERS, BATCH, SEQ = 13, 8, 10, 2, 3, 5


class Scale(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = Scale(HIDDEN)
        self.up = nn.Linear(HIDDEN, FFN, bias=False)
        self.down = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.tanh(self.up(self.norm(x))))


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.model = Inner()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.model.embed(tokens)
        for layer in self.model.layers:
            x = layer(x)
        return self.model.head(x)


def batch(dp_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + dp_index)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    return tokens, torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)


def full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if isinstance(t, DTensor) else t


def close(got: torch.Tensor, want: torch.Tensor, tol: float = 1e-5) -> bool:
    """Relative error in norm (float32 sums in another order differ in the last bits,
    which two steps of SGD amplify element-wise but not in norm)."""
    return bool((got - want).norm() <= tol * want.norm() + 1e-7)


def avg_probe(group: Any, rank: int) -> float:
    """gloo reduce_scatter_tensor with ReduceOp.AVG, as FSDP2 calls it for fp32
    gradients: 1.0 when it averages, the group size when it sums
    (pytorch/pytorch#162338)."""
    size = dist.get_world_size(group)
    inp = torch.ones(size * 2)
    out = torch.empty(2)
    dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.AVG, group=group)
    return float(out[0])


def run(task: dict[str, Any], rank: int, world: int, fail: Callable[[str], None]) -> list[str]:
    label = task["name"]
    out = OutDir(task["outdir"])
    me = out.rank(rank)
    meshes = device_meshes(out, me)
    mesh = meshes["dense"]
    dp_size = mesh["dp_shard"].size()
    with torch.device("meta"):
        net = Net()
    names = [axis["name"] for axis in out.plan["meshes"]["dense"]]
    styles: dict[str, Any] = {}
    for name, spec in out.params.items():
        label_tp = spec["placements"][names.index("tp")]
        module = name.removesuffix(".weight")
        if label_tp == "Shard(0)":
            styles[module] = ColwiseParallel()
        elif label_tp == "Shard(1)":
            styles[module] = RowwiseParallel()
    parallelize_module(net, mesh["tp"], styles)
    apply_fully_shard(net, me, {"dense": mesh["dp_shard"]})
    probe = avg_probe(mesh["dp_shard"].get_group(), rank)
    if rank == 0:
        print(f"{label}: gloo reduce_scatter AVG over {dp_size} ranks gives {probe} "
              f"({'averages' if probe == 1.0 else 'SUMS: pytorch/pytorch#162338'})", flush=True)
    units = [m for m in net.modules() if isinstance(m, FSDPModule)]
    if probe != 1.0:  # the workaround: SUM in the collective, FSDP2 divides afterwards
        for unit in units:
            unit.set_force_sum_reduction_for_comms(True)
    if "divide_factor" in task:  # the negative test: gradients summed, as #162338 does
        for unit in units:  # (force_sum: gloo has no PREMUL_SUM for a factor)
            unit.set_force_sum_reduction_for_comms(True)
            unit.set_gradient_divide_factor(float(task["divide_factor"]))
    for message in fsdp2_mismatches(net, me):
        fail(f"{label}: {message}")
    for name, param in net.named_parameters():
        _, placements = param_mesh(out, meshes, out.params[name])
        sharded = cast(DTensor, param)
        dims = sharded.device_mesh.mesh_dim_names or ()
        got = list(sharded.placements)
        want = [p for p, axis in zip(placements, names) if axis in dims]
        if got != want:
            fail(f"{label}: {name}: FSDP2 + TP placements {got}, plan {out.params[name]['placements']}")
    net.to_empty(device="cpu")
    ck = Checkpoint(task["ckpt"])
    for name, param in net.named_parameters():
        info = me.params[name]
        padded = read_param(info, ck)
        local = cast(DTensor, param).to_local()
        with torch.no_grad():
            local.copy_(to_torch(np.ascontiguousarray(
                padded[tuple(slice(0, n) for n in info.local_shape)]), info.dtype))
    # distribute_model: the same meta-device model, every parameter the plan's DTensor
    with torch.device("meta"):
        plain = Net()
    distribute_model(plain, out, rank, ck, meshes)
    for name, param in plain.named_parameters():
        if not isinstance(param, DTensor) or not torch.equal(
                param.full_tensor(), to_torch(ck.read_full(name), "float32")):
            fail(f"{label}: distribute_model: {name} is not the checkpoint's DTensor")
    ref = Net()
    with torch.no_grad():
        for name, param in ref.named_parameters():
            param.copy_(to_torch(ck.read_full(name), "float32"))
    dp_index = me.coords["dense"]["dp_shard"]
    tokens, targets = batch(dp_index)
    all_tokens = torch.cat([batch(d)[0] for d in range(dp_size)])
    all_targets = torch.cat([batch(d)[1] for d in range(dp_size)])
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(2):
        loss = F.cross_entropy(net(tokens).reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        ref_loss = F.cross_entropy(ref(all_tokens).reshape(-1, VOCAB), all_targets.reshape(-1))
        ref_loss.backward()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world  # every tp rank of a dp group computed the same loss
        if not close(mean, ref_loss.detach()):
            fail(f"{label}: step {step}: loss {mean.item()} sharded, {ref_loss.item()} unsharded")
        elif rank == 0:
            print(f"{label}: step {step}: loss {mean.item():.6f} = unsharded {ref_loss.item():.6f}")
        ref_params = dict(ref.named_parameters())
        for name, param in net.named_parameters():
            assert param.grad is not None and ref_params[name].grad is not None
            grad, ref_grad = full(param.grad), cast(torch.Tensor, ref_params[name].grad)
            if not close(grad, ref_grad):
                ratio = (grad.norm() / ref_grad.norm()).item()
                fail(f"{label}: step {step}: {name}: gradient differs from the unsharded one "
                     f"(norm ratio {ratio:.4f})")
        opt.step()
        ref_opt.step()
        opt.zero_grad()
        ref_opt.zero_grad()
        for name, param in net.named_parameters():
            weight, ref_weight = full(param.detach()), ref_params[name].detach()
            if not close(weight, ref_weight):
                error = ((weight - ref_weight).norm() / ref_weight.norm()).item()
                fail(f"{label}: step {step}: {name} after the optimizer step differs from the "
                     f"unsharded one (relative error {error})")
    return []
