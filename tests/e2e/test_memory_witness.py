#!/usr/bin/env python3
"""Runtime witness of `shardc memory`: real torch tensors and a real torch.optim.AdamW step
hold exactly the bytes shardc reports for every rank, per kind.

    test_memory_witness.py --shardc BIN          (run with a Python that has torch)

For a small plan with FSDP padding, a same-stage tie (alias), a frozen param, bf16 and
float32 params and `training: {optimizer: adamw, master_weights: float32}` (tp 2 x
dp_shard 2), compiled with every rank file, each rank's memory is rebuilt from its rank file
with the runtime adapter (tools/python/shardc_runtime: `OutDir`, `local_tensors(padded=True,
aliases=False)`) the way FSDP2 allocates it:
  * params: one storage of `padded_shape` per held param (aliases share it), the parameter
    is the unpadded narrow (`local_shape`) of it, as FSDPParam does;
  * grads: one padded storage per trainable param, the grad the unpadded view into it (as
    FSDP2's reduce-scatter output); dtype = the param's;
  * master weights: `p.detach().float()` of every trainable param narrower than float32
    (a copy of the unpadded view);
  * optimizer state: created by torch itself, `torch.optim.AdamW(...).step()` once over the
    masters (and over the float32 params themselves), grads copied in.
Bytes are counted per distinct untyped storage (`storage().nbytes()`), per kind, and must
equal `shardc memory --format json --ranks ...` exactly. The 0-d `step` tensors (host side)
are not counted by shardc and are checked to be 0-d here. Exit 77 (skip) without torch.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import torch
except ImportError:
    # CTest runs us on the project's environment (tools/venv) when the build knows it;
    # a C++-only build has no torch and skips.
    print("skip: torch is not installed for this Python (run tools/venv)")
    sys.exit(77)

MODEL = """format: shardc.model/v1
name: witness
dtype: bfloat16
attributes: {num_attention_heads: 4, num_key_value_heads: 2, tie_word_embeddings: true}
params:
  - {name: model.embed_tokens.weight, shape: [1001, 64]}    # 1001 / tp 2 / fsdp 2: padded
  - repeat: {i: [0, 2]}
    params:
      - {name: "model.layers.{i}.self_attn.q_proj.weight", shape: [64, 64]}
      - {name: "model.layers.{i}.self_attn.o_proj.weight", shape: [64, 64]}
      - {name: "model.layers.{i}.mlp.up_proj.weight", shape: [90, 64]}   # 45 / 2: padded
      - {name: "model.layers.{i}.input_layernorm.weight", shape: [64], dtype: float32}
      - {name: "model.layers.{i}.rotary.inv_freq", shape: [16], dtype: float32,
         requires_grad: false}
  - {name: model.norm.weight, shape: [63], dtype: float32}  # 63 / fsdp 2: padded
  - {name: lm_head.weight, shape: [1001, 64]}
"""
RECIPE = """format: shardc.recipe/v1
mesh:
  - {name: dp_shard, size: 2}
  - {name: tp, size: 2}
rules:
  - match: [model.embed_tokens.weight, lm_head.weight]
    placements: {tp: Shard(0)}
  - match: ["model.layers.*.self_attn.q_proj.weight", "model.layers.*.mlp.up_proj.weight"]
    placements: {tp: Shard(0)}
  - match: "model.layers.*.self_attn.o_proj.weight"
    placements: {tp: Shard(1)}
  - match: "**"
    placements: {}
tied: auto
fsdp: {shard: dp_shard}
training: {optimizer: adamw, master_weights: float32}
"""
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "python"))
from shardc_runtime.layout import OutDir  # noqa: E402  (the runtime adapter)
from shardc_runtime.torch import local_tensors  # noqa: E402
KINDS = ["params", "grads", "master_weights", "optimizer_state"]


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors`."""
    seen = {}
    for t in tensors:
        s = t.storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def unpadded_view(storage: torch.Tensor, local_shape: list[int]) -> torch.Tensor:
    return storage[tuple(slice(0, n) for n in local_shape)] if local_shape else storage


def measure(rank_file) -> dict[str, int]:
    """Bytes per kind of a rank built from its rank file (a shardc_runtime RankFile)."""
    params, grads, masters, optimized = [], [], [], []
    # What FSDP2 allocates: one padded storage per held param, aliases once.
    stores = local_tensors(rank_file, padded=True, aliases=False)
    for name, store in stores.items():
        info = rank_file.params[name]
        param = torch.nn.Parameter(unpadded_view(store, info.local_shape),
                                   requires_grad=info.requires_grad)
        assert param.storage().data_ptr() == store.storage().data_ptr()
        params.append(param)
        if not param.requires_grad:
            continue
        grad_store = torch.zeros(info.padded_shape, dtype=store.dtype)
        param.grad = unpadded_view(grad_store, info.local_shape)
        grads.append(param.grad)
        if torch.finfo(store.dtype).bits < 32:
            master = param.detach().float().requires_grad_(True)
            master.grad = param.grad.float()
            masters.append(master)
            optimized.append(master)
        else:
            optimized.append(param)
    opt = torch.optim.AdamW(optimized, lr=1e-3)
    opt.step()
    state = []
    for t in optimized:
        st = opt.state[t]
        assert st["step"].dim() == 0, "step is a 0-d host tensor (not counted)"
        state += [st["exp_avg"], st["exp_avg_sq"]]
    # master grads are transient copies (freed after the step in a real loop): not counted.
    return {"params": storage_bytes(params), "grads": storage_bytes(grads),
            "master_weights": storage_bytes(masters), "optimizer_state": storage_bytes(state)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    shardc = ap.parse_args().shardc
    failures = 0
    with tempfile.TemporaryDirectory(prefix="shardc-witness-") as tmp_str:
        tmp = Path(tmp_str)
        (tmp / "m.yaml").write_text(MODEL)
        (tmp / "r.yaml").write_text(RECIPE)
        subprocess.run([shardc, "compile", tmp / "m.yaml", tmp / "r.yaml", "-o", tmp / "out",
                        "--quiet"], check=True)
        report = json.loads(subprocess.run(
            [shardc, "memory", tmp / "m.yaml", tmp / "r.yaml", "--format", "json", "--ranks",
             "0-3"], check=True, capture_output=True, text=True).stdout)
        out = OutDir(tmp / "out")
        padded_seen = False
        for entry in report["ranks"]:
            r = entry["rank"]
            rank_file = out.rank(r)
            padded_seen |= any(p.padded_shape != p.local_shape
                               for p in rank_file.params.values())
            got = measure(rank_file)
            in_file = rank_file.doc["memory"]
            for k in KINDS:
                ok = got[k] == entry["bytes"][k] == in_file[k]
                print(f"{'ok  ' if ok else 'FAIL'} rank {r} {k}: torch {got[k]}, shardc memory "
                      f"{entry['bytes'][k]}, rank file {in_file[k]}")
                failures += not ok
        if not padded_seen:
            print("FAIL the witness plan has no FSDP padding (it must exercise it)")
            failures += 1
    print("witness: " + ("ok" if failures == 0 else f"{failures} mismatches"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
