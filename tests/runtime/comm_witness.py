"""One rank of the communication witness (test_comm_witness.py; imported by worker.py).

The Hugging Face LlamaForCausalLM of test_hf.py, laid out by the plan (TP 2 with
`parallelize_module`, FSDP2 4 by the plan's units with the adapter's `apply_fully_shard`),
runs one training step's forward + backward while a TorchDispatchMode sees every c10d and
functional collective (FSDP2 calls c10d all_gather_into_tensor / reduce_scatter_tensor,
DTensor's redistribute the functional all_reduce) and counts the bytes this rank SENDS
under the ring algorithm, as src/comm/comm.hpp defines them: all-gather (n-1) x its
input, reduce-scatter and all-to-all (n-1)/n x the input, all-reduce 2 (n-1)/n x the
tensor. Each rank prints one `COMM {json}` line: bytes by (group size, collective).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoConfig, AutoModelForCausalLM

from shardc_runtime import Checkpoint, OutDir
from shardc_runtime.load import read_param
from shardc_runtime.torch import apply_fully_shard, device_meshes, fsdp2_mismatches, to_torch

# op name -> (collective, index of the tensor argument, how the group is given)
_OPS = {
    "c10d._allgather_base_": ("all_gather", 1, "pg"),
    "c10d.allgather_into_tensor_coalesced_": ("all_gather", 1, "pg"),
    "c10d._reduce_scatter_base_": ("reduce_scatter", 1, "pg"),
    "c10d.reduce_scatter_tensor_coalesced_": ("reduce_scatter", 1, "pg"),
    "c10d.allreduce_": ("all_reduce", 0, "pg"),
    "c10d.alltoall_base_": ("all_to_all", 1, "pg"),
    "_c10d_functional.all_reduce": ("all_reduce", 0, "name"),
    "_c10d_functional.all_reduce_": ("all_reduce", 0, "name"),
    "_c10d_functional.all_gather_into_tensor": ("all_gather", 0, "name"),
    "_c10d_functional.reduce_scatter_tensor": ("reduce_scatter", 0, "name"),
    "_c10d_functional.all_to_all_single": ("all_to_all", 0, "name"),
}
_SEEN_NAMESPACES = ("c10d", "_c10d_functional")
# Ops of those namespaces that move no bytes: waits and the autograd wrapper of a result.
_NOT_COLLECTIVES = ("wait", "_wrap_tensor_autograd")


def _nbytes(arg: Any) -> int:
    if isinstance(arg, torch.Tensor):
        return arg.numel() * arg.element_size()
    if isinstance(arg, (list, tuple)):
        return sum(_nbytes(a) for a in arg)
    return 0


def _group_size(args: tuple[Any, ...], how: str) -> int:
    if how == "name":  # the group's registered name is the last string (after reduce_op)
        from torch.distributed.distributed_c10d import _resolve_process_group
        name = [a for a in args if isinstance(a, str)][-1]
        # torch 2.13 types the argument as its GroupName (a NewType of str)
        return int(_resolve_process_group(cast(Any, name)).size())
    for a in args:
        if how == "pg" and isinstance(a, torch.ScriptObject):  # a boxed ProcessGroup
            return int(dist.ProcessGroup.unbox(a).size())
        if how == "pg" and isinstance(a, dist.ProcessGroup):
            return int(a.size())
    raise RuntimeError(f"no process group among {[type(a).__name__ for a in args]}")


class CountCollectives(TorchDispatchMode):
    """Bytes sent per (group size, collective); unknown collectives are recorded by name
    (the test fails on any, so a collective this mode does not understand cannot hide)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.unknown: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = f"{func.namespace}.{func._opname}" if hasattr(func, "_opname") else str(func)
        name = name.split(".default")[0]
        if func.namespace in _SEEN_NAMESPACES and not func._opname.startswith(_NOT_COLLECTIVES):
            if name not in _OPS:
                self.unknown.append(name)
            else:
                collective, index, how = _OPS[name]
                n = _group_size(tuple(args), how)
                size = _nbytes(args[index])
                if collective == "all_gather":
                    sent = (n - 1) * size  # the input is this rank's chunk
                elif collective == "all_reduce":
                    sent = 2 * (n - 1) * -(-size // n)
                else:
                    sent = (n - 1) * -(-size // n)
                key = f"{n}:{collective}"
                self.sent[key] = self.sent.get(key, 0) + sent
                self.calls[key] = self.calls.get(key, 0) + 1
        return func(*args, **(kwargs or {}))


def run(task: dict[str, Any], rank: int, world: int, fail: Callable[[str], None]) -> list[str]:
    label = task["name"]
    out = OutDir(task["outdir"])
    me = out.rank(rank)
    meshes = device_meshes(out, me)
    mesh = meshes["dense"]
    config = AutoConfig.from_pretrained(task["ckpt"])
    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(config)
    axes = [a["name"] for a in out.plan["meshes"]["dense"]]
    styles: dict[str, Any] = {}
    for name, spec in out.params.items():
        tp_label = spec["placements"][axes.index("tp")]
        if tp_label == "Shard(0)":
            styles[name.removesuffix(".weight")] = ColwiseParallel()
        elif tp_label == "Shard(1)":
            styles[name.removesuffix(".weight")] = RowwiseParallel()
    parallelize_module(net, mesh["tp"], styles)
    apply_fully_shard(net, me, {"dense": mesh["dp_shard"]})
    for message in fsdp2_mismatches(net, me):
        fail(f"{label}: {message}")
    net.to_empty(device="cpu")
    ck = Checkpoint(os.path.join(task["ckpt"], "model.safetensors"))
    for name, param in net.named_parameters():
        info = me.params[name]
        local = param.to_local() if isinstance(param, DTensor) else param
        with torch.no_grad():
            local.copy_(to_torch(np.ascontiguousarray(
                read_param(info, ck)[tuple(slice(0, n) for n in info.local_shape)]), info.dtype))
    ref_buffers = dict(AutoModelForCausalLM.from_pretrained(task["ckpt"]).named_buffers())
    with torch.no_grad():
        for name, buf in net.named_buffers():
            buf.copy_(ref_buffers[name])
    batch, seq = task["micro_batch_size"], task["seq_len"]
    g = torch.Generator().manual_seed(11 + me.coords["dense"]["dp_shard"])
    tokens = torch.randint(0, config.vocab_size, (batch, seq), generator=g)
    dist.barrier()
    mode = CountCollectives()
    with mode:
        logits = net(input_ids=tokens).logits
        logits = logits.full_tensor() if isinstance(logits, DTensor) else logits
        loss = F.cross_entropy(logits.reshape(-1, config.vocab_size), tokens.reshape(-1))
        loss.backward()
    for name in sorted(set(mode.unknown)):
        fail(f"{label}: rank {rank}: a collective the witness does not count: {name}")
    print("COMM " + json.dumps({"rank": rank, "sent": mode.sent, "calls": mode.calls}), flush=True)
    return []
