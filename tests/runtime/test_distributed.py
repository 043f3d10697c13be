"""Real processes consume shardc plans (marker `distributed`; CTest label `runtime`).

Each test compiles its plans, writes a random safetensors checkpoint, and
launches one worker process per rank (harness.launch: gloo on 127.0.0.1, free
port, bounded; worker.py does the checks and prints `MISMATCH ...` lines).
At most one launch runs at a time (8 processes).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from typing import Any

import harness
import pytest

pytestmark = pytest.mark.distributed

CASES = os.path.join(harness.HERE, "cases")
PLANS = os.path.join(harness.REPO, "plans")
SHIPPED = [("qwen2.5-0.5b", "qwen2.5-0.5b-dp4-tp2"), ("gpt2", "gpt2-tp4-tied"),
           ("gemma-2-2b", "gemma-2-2b-tp4-tied")]
FEATURES = ["tp_uneven", "hsdp_tp", "ep_efsdp", "tied_pp"]


def plan_task(name: str, outdir: str, ckpt: str) -> dict[str, Any]:
    return {"kind": "plan", "name": name, "outdir": outdir, "ckpt": ckpt}


def compile_case(shardc: str, work: str, case: str, model: str | None = None,
                 recipe: str | None = None) -> tuple[str, str]:
    model = model or os.path.join(CASES, case, "model.yaml")
    recipe = recipe or os.path.join(CASES, case, "recipe.yaml")
    out = harness.compile_plan(shardc, model, recipe, os.path.join(work, case))
    ckpt = os.path.join(work, f"{case}.safetensors")
    harness.write_checkpoint(out, ckpt, seed=len(case))
    return out, ckpt


def run(tasks: list[dict[str, Any]], work: str, world: int = 8) -> tuple[bool, str]:
    ok, outputs = harness.launch(sys.executable, world, {"tasks": tasks}, work)
    return ok, "\n".join(f"--- rank {r} ---\n{o}" for r, o in enumerate(outputs))


def mismatches(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "MISMATCH" in line or "Error" in line)


def test_plans(shardc: str, tmp_path: Any) -> None:
    """Shipped recipes on their models shrunk to test size."""
    work, tasks = str(tmp_path), []
    for model, recipe in SHIPPED:
        small = harness.shrink_model(os.path.join(PLANS, f"{model}.model.yaml"),
                                     harness.SHRINK[model], os.path.join(work, f"{model}.model.yaml"))
        out, ckpt = compile_case(shardc, work, recipe, small,
                                 os.path.join(PLANS, f"{recipe}.recipe.yaml"))
        tasks.append(plan_task(recipe, out, ckpt))
    ok, text = run(tasks, work)
    assert ok, mismatches(text) or text


def test_flat_buffers(shardc: str, tmp_path: Any) -> None:
    """cases/megatron_distopt: Megatron's DistOpt buffers (virtual stages, expert DP, a
    cross-stage tie) and DeepSpeed ZeRO-2 flat groups, their shards all-gathered over
    the DP groups with real collectives (and the plan's usual rebuild checks)."""
    work, tasks = str(tmp_path), []
    for recipe in ("recipe.yaml", "recipe_ds2.yaml"):
        name = "megatron_distopt_" + recipe.removesuffix(".yaml")
        out, ckpt = compile_case(shardc, work, name, os.path.join(CASES, "megatron_distopt",
                                                                  "model.yaml"),
                                 os.path.join(CASES, "megatron_distopt", recipe))
        tasks.append(plan_task(name, out, ckpt))
    ok, text = run(tasks, work)
    assert ok, mismatches(text) or text


def test_features(shardc: str, tmp_path: Any) -> None:
    """cases/: uneven and empty shards, HSDP x TP with mixed dtypes, EP with expert FSDP,
    ties across pipeline stages."""
    work = str(tmp_path)
    ok, text = run([plan_task(c, *compile_case(shardc, work, c)) for c in FEATURES], work)
    assert ok, mismatches(text) or text


def resign(outdir: str, rel: str) -> None:
    """Make manifest.json list rel's current size and sha256."""
    mpath = os.path.join(outdir, "manifest.json")
    m = json.load(open(mpath))
    data = open(os.path.join(outdir, rel), "rb").read()
    entry = m["plan"] if rel == "plan.json" else next(
        f for f in m["rank_files"]["files"] if f["path"] == rel)
    entry["bytes"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    with open(mpath, "w") as f:
        json.dump(m, f)


def perturb(outdir: str, rank: int, param: str) -> None:
    """Shift `param`'s global_offset by one row in the shard class rank `rank` holds:
    in plan.json and in the rank file of every rank of its replica set, each
    re-signed in manifest.json, so the files agree with each other and only the
    plan's meaning is wrong (the adapter's reader accepts it; the runtime checks
    must catch it)."""
    from shardc_runtime.rankset import parse_rank_set

    plan_path = os.path.join(outdir, "plan.json")
    plan = json.load(open(plan_path))
    world = plan["world_size"]
    spec = next(p for p in plan["params"] if p["name"] == param)
    shard = next(s for s in spec["shards"] if rank in parse_rank_set(s["ranks"], world))
    old = list(shard["global_offset"])
    shard["global_offset"][0] += 1
    with open(plan_path, "w") as f:
        json.dump(plan, f)
    resign(outdir, "plan.json")
    for holder in parse_rank_set(shard["ranks"], world):
        rel = f"ranks/rank-{holder:0{len(str(world - 1))}d}.json"
        doc = json.load(open(os.path.join(outdir, rel)))
        p = next(p for p in doc["params"] if p["name"] == param)
        assert p["global_offset"] == old
        p["global_offset"][0] += 1
        with open(os.path.join(outdir, rel), "w") as f:
            json.dump(doc, f)
        resign(outdir, rel)


def test_negative(shardc: str, tmp_path: Any) -> None:
    """One rank file's offset shifted by a row: the checks must report it."""
    work = str(tmp_path)
    out, ckpt = compile_case(shardc, work, "hsdp_tp")
    param = "model.layers.0.up.weight"  # rank 0 holds rows [0, 2) of [7, 6]: [1, 3) is in range
    perturb(out, 0, param)
    ok, text = run([plan_task("hsdp_tp-perturbed", out, ckpt)], work)
    assert not ok and f"MISMATCH hsdp_tp-perturbed: {param}" in text, \
        "NOT CAUGHT (or failed otherwise):\n" + text


def reshard_listing(shardc: str, a: str, b: str, path: str, extra: list[str]) -> str:
    """`shardc reshard A B -o PATH` (the listing the transfers must follow)."""
    r = subprocess.run([shardc, "reshard", a, b, "-o", path, "--quiet", *extra],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"shardc reshard {a} {b} failed ({r.returncode}):\n{r.stderr}"
    return path


# (case, extra reshard args): plan A = cases/<case>/recipe.yaml, plan B = recipe_b.yaml
RESHARD = [
    ("tp_uneven", []),                          # 8 -> 6 ranks (2 idle), chunk -> balanced, + FSDP
    ("tp_uneven", ["--ranks-per-node", "4"]),   # same, sources on the destination's node first
    ("hsdp_tp", []),                            # HSDP x TP -> FSDP 8, mixed dtypes
    ("ep_efsdp", []),                           # tp 2 -> 4, ep 4 -> 2, efsdp 2 -> 4
    ("tied_pp", []),                            # 2 -> 3 pipeline stages, 8 -> 6 ranks, ties
    ("packed_qkv", []),                         # packed q|k|v, gate|up: several boxes per rank
    ("packed_replicas", []),                    # tp 2 -> 4 with KV heads on 2 ranks each
]


def perturb_listing(task: dict[str, Any], path: str) -> str:
    """A copy of the task's listing with one moved box read one row off in its
    source (same size, other bytes): the destination must catch it."""
    listing = json.load(open(task["listing"]))
    world = json.load(open(os.path.join(task["a"], "plan.json")))["world_size"]
    src_shapes = {}
    for r in range(world):
        doc = json.load(open(os.path.join(task["a"], "ranks",
                                          f"rank-{r:0{len(str(world - 1))}d}.json")))
        src_shapes[r] = {p["name"]: p["local_shape"] for p in doc["params"]}
    for dst in listing["ranks"]:
        for p in dst["params"]:
            for rd in p["reads"]:
                local = src_shapes[rd["src"]][p["name"]]
                if rd["src"] != dst["rank"] and rd["src_offset"][0] + rd["shape"][0] < local[0]:
                    rd["src_offset"][0] += 1
                    with open(path, "w") as f:
                        json.dump(listing, f)
                    return path
    raise AssertionError("no read of the listing can be shifted by a row")


@pytest.mark.skipif(not os.path.isdir(os.path.join(harness.REPO, "src", "reshard")),
                    reason="shardc reshard not in this tree")
def test_reshard(shardc: str, tmp_path: Any) -> None:
    """Plan-A holders send plan-B ranks exactly what `shardc reshard` lists."""
    work, tasks = str(tmp_path), []
    for i, (case, extra) in enumerate(RESHARD):
        a, ckpt = compile_case(shardc, work, case)
        b = harness.compile_plan(shardc, os.path.join(CASES, case, "model.yaml"),
                                 os.path.join(CASES, case, "recipe_b.yaml"),
                                 os.path.join(work, case + "-b"))
        listing = reshard_listing(shardc, a, b, os.path.join(work, f"{case}-{i}.reshard.json"), extra)
        tasks.append({"kind": "reshard", "name": f"{case}{' '.join([''] + extra)}", "a": a, "b": b,
                      "listing": listing, "ckpt": ckpt})
    bad = perturb_listing(tasks[0], os.path.join(work, "perturbed.reshard.json"))
    tasks.append(dict(tasks[0], name=tasks[0]["name"] + " (perturbed listing)", listing=bad,
                      expect_mismatch=True))
    ok, text = run(tasks, work)
    assert ok and "EXPECTED: " in text, mismatches(text) or text
