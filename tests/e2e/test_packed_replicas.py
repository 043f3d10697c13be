#!/usr/bin/env python3
"""Packed parts with their own placement (issue 27 item 7), proven independently.

    test_packed_replicas.py --shardc BIN

Compiles the fused q|k|v plans of tests/data/packed (Llama-3.1-8B-shaped, 32 q / 8 KV heads
at tp 16 with FSDP 2; 2 KV heads at tp 4 and tp 8) with every rank file, and checks each
rank's `qkv_proj` boxes against vLLM's QKVParallelLinear rule computed here with numpy
slicing and no shardc code: q split by head over tp (rows tp_rank x q / tp), each KV part
cut in tp / R pieces with tp rank t holding piece t // R (`num_kv_head_replicas` = R,
vllm/model_executor/layers/linear.py weight_loader), the TP-local tensor q | k | v, then
FSDP2's torch.chunk of its dim 0 (padded to ceil(L / F) rows). For every rank the global
row of each local row (numpy slices of the row numbers) is compared with the one the rank
file's boxes describe (the boxes span the other dims); plan.json's `packed` lists the names and replicas; memory
(rank totals) follows the local shapes; `verify` and `verify --against` accept each OUTDIR.
Exit 0 all pass, 1 a check failed, 2 harness error.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "packed"

# (model, recipe, {param suffix: (q, k, v) rows, replicas R})
CASES = [
    ("llama-3.1-8b-fused-qkv", "llama-3.1-8b-fused-qkv-tp16", ((4096, 1024, 1024), 2)),
    ("gqa-2kv", "gqa-2kv-tp4", ((512, 128, 128), 2)),
    ("gqa-2kv", "gqa-2kv-tp8", ((512, 128, 128), 8)),
]
ESIZE = {"bfloat16": 2, "float32": 4}


def run(cmd: list) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600)


def expected_rows(parts: tuple[int, int, int], replicas: int, tp: int, tp_rank: int,
                  fsdp: int, fsdp_rank: int) -> np.ndarray:
    """Global row indices of the rank's local tensor on dim 0 (vLLM's rule, then FSDP2)."""
    q, k, v = parts
    q_per = q // tp
    kv_pieces = tp // replicas
    k_per, v_per = k // kv_pieces, v // kv_pieces
    kv = tp_rank // replicas
    rows = np.concatenate([np.arange(q)[tp_rank * q_per:(tp_rank + 1) * q_per],
                           q + np.arange(k)[kv * k_per:(kv + 1) * k_per],
                           q + k + np.arange(v)[kv * v_per:(kv + 1) * v_per]])
    chunk = -(-len(rows) // fsdp)  # FSDP2: torch.chunk, every shard padded to the first's size
    return rows[fsdp_rank * chunk:(fsdp_rank + 1) * chunk]


def check(shardc: str, model_name: str, recipe_name: str, spec, tmp: Path) -> list[str]:
    parts, replicas = spec
    model, recipe = DATA / f"{model_name}.model.yaml", DATA / f"{recipe_name}.recipe.yaml"
    out = tmp / recipe_name
    p = run([shardc, "-q", "compile", model, recipe, "-o", out, "--force"])
    if p.returncode != 0:
        return [f"compile {recipe_name}: exit {p.returncode}\n{p.stderr}"]
    problems = []
    plan = json.loads((out / "plan.json").read_text())
    mesh = {a["name"]: a["size"] for a in plan["meshes"]["dense"]}
    tp, fsdp = mesh["tp"], mesh.get("dp_shard", 1)
    qkv = [pp for pp in plan["params"] if ".qkv_proj." in pp["name"]]
    if not qkv:
        return [f"{recipe_name}: no qkv_proj param"]
    for pp in qkv:
        want = {"dim": 0, "parts": list(parts), "names": ["q", "k", "v"],
                "replicas": [1, replicas, replicas]}
        if pp.get("packed") != want:
            problems.append(f"{recipe_name}: {pp['name']} packed {pp.get('packed')} != {want}")
    checked = 0
    for rank in range(plan["world_size"]):
        doc = json.loads((out / "ranks" / f"rank-{rank:0{len(str(plan['world_size'] - 1))}d}.json")
                         .read_text())
        coords = doc["coords"]["dense"]
        held_bytes = 0
        for p in doc["params"]:
            held_bytes += 0 if p.get("alias_of") else p["bytes"]
            if ".qkv_proj." not in p["name"]:
                continue
            gshape = p["global_shape"]
            rows = expected_rows(parts, replicas, tp, coords["tp"], fsdp,
                                 coords.get("dp_shard", 0))
            # The rank file's local tensor, row by row: global row of each local row (-1 pad).
            got = np.full(p["padded_shape"][0], -1, dtype=np.int64)
            for b in p["boxes"]:
                if b["global_offset"][1:] != [0] * (len(gshape) - 1) or \
                        b["local_offset"][1:] != [0] * (len(gshape) - 1) or \
                        b["shape"][1:] != gshape[1:]:
                    problems.append(f"{recipe_name}: rank {rank} {p['name']}: box {b} does not "
                                    "span the other dims")
                lo, n = b["local_offset"][0], b["shape"][0]
                got[lo:lo + n] = np.arange(b["global_offset"][0], b["global_offset"][0] + n)
            real = got[:p["local_shape"][0]]
            if real.shape != rows.shape or not (real == rows).all() or \
                    p["local_shape"][1:] != gshape[1:]:
                problems.append(f"{recipe_name}: rank {rank} {p['name']}: local rows "
                                f"{list(real[:4])}..{list(real[-2:])} != vLLM's "
                                f"{list(rows[:4])}..{list(rows[-2:])}")
            want_numel = int(len(rows) * np.prod(gshape[1:]))
            if p["numel"] != want_numel:
                problems.append(f"{recipe_name}: rank {rank} {p['name']}: numel {p['numel']}")
            checked += 1
        if doc["totals"]["param_bytes"] != held_bytes:
            problems.append(f"{recipe_name}: rank {rank}: totals.param_bytes "
                            f"{doc['totals']['param_bytes']} != its params' {held_bytes}")
    for args in (["verify", out], ["verify", out, "--against", model, recipe]):
        v = run([shardc, *args])
        if v.returncode != 0:
            problems.append(f"{recipe_name}: {' '.join(map(str, args[:1] + args[2:3]))} exit "
                            f"{v.returncode}\n{v.stdout[-600:]}{v.stderr[-600:]}")
    print(f"  {recipe_name}: tp {tp} x FSDP {fsdp}, replicas {replicas}: {checked} qkv shards "
          "equal vLLM's rows; verify, verify --against ok" if not problems else
          f"  {recipe_name}: {len(problems)} problems")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    args = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="shardc-replicas-") as tmp:
        for model, recipe, spec in CASES:
            problems = check(args.shardc, model, recipe, spec, Path(tmp))
            for pr in problems[:20]:
                print("    " + pr)
            failed += bool(problems)
    print(f"test_packed_replicas: {len(CASES) - failed}/{len(CASES)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
