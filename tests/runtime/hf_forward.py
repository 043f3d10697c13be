"""One rank of the Hugging Face sharded forward (test_hf.py; imported by worker.py).

A transformers `LlamaForCausalLM` built from its config.json on the meta device
(`AutoModelForCausalLM.from_config`), tensor parallelism from the plan's tp
placements with `parallelize_module` (Shard(0) Linear weights colwise, Shard(1)
rowwise: the model's `base_model_tp_plan`), FSDP2 by the plan's units
(`apply_fully_shard`, agreement checked with `fsdp2_mismatches`), every local
shard read from the checkpoint by the plan, buffers (rotary inv_freq) recomputed
from the config. The sharded forward's logits and loss must equal one unsharded
process's (float tolerance). transformers 5.24's attention reshapes q/k/v with
`view(*input_shape, -1, head_dim)`, so it runs on the local heads a TP shard
holds without being told their count; the rank file's local attributes are applied
anyway (`apply_local_attributes`: num_key_value_groups = local q heads / KV heads, here
the global 2 since q and k/v are split alike), as a runtime starting up would.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)
from transformers import AutoConfig, AutoModelForCausalLM

from shardc_runtime import Checkpoint, OutDir
from shardc_runtime.load import read_param
from shardc_runtime.torch import (apply_fully_shard, apply_local_attributes, device_meshes,
                                  fsdp2_mismatches, to_torch)


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
    ref = AutoModelForCausalLM.from_pretrained(task["ckpt"])
    ref_buffers = dict(ref.named_buffers())
    with torch.no_grad():
        for name, buf in net.named_buffers():
            buf.copy_(ref_buffers[name])
    told = apply_local_attributes(net, me)
    if len([line for line in told if "num_key_value_groups 2" in line]) != config.num_hidden_layers:
        fail(f"{label}: rank {rank}: attention modules told {told}")
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, config.vocab_size, (2, 6), generator=g)
    logits = net(input_ids=tokens).logits
    logits = logits.full_tensor() if isinstance(logits, DTensor) else logits
    want = ref(input_ids=tokens).logits
    err = ((logits - want).norm() / want.norm()).item()
    if not err < 1e-5:
        fail(f"{label}: rank {rank}: sharded logits differ from the unsharded model "
             f"(relative error {err})")
    loss = F.cross_entropy(logits.reshape(-1, config.vocab_size), tokens.reshape(-1))
    loss.backward()
    if rank == 0:
        print(f"{label}: sharded forward = unsharded (relative error {err:.2e}), loss "
              f"{loss.item():.6f}, backward ran", flush=True)
    return []
