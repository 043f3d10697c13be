#!/usr/bin/env python3
"""Property test over random packed, padded and FP8 layouts (issue 24 item 4).

    test_layout_property.py --shardc BIN [--cases N] [--seed S] [--sanitizer] [--keep DIR]

Each case is a small random model (1 to 3 params of 1 to 3 dims, extents 1 to 20; bf16, or FP8
with `weight_block_size` and its `weight_scale_inv`) and a random recipe over a mesh of up to
16 ranks: per param a rule with random Shard/Replicate placements, `uneven` (chunk, even,
`pad: M`), `unit`, `packed` (a part count or a random list of part sizes on a random, possibly
negative, dim), optional FSDP and `fp8_scales: follow`. Properties:

  * `validate` exits 0 or 1 (a diagnostic), or 2 only with E-RECIPE/E-MODEL: never 3 (the
    planner's own invariant, which the test build checks after every plan), never a crash;
  * when valid, `compile` exits 0 and the rank files, read by this script's own reader (an
    independent oracle, not shardc's), tile every param: each global element is held the same
    number of times over the world, no rank holds an element twice, every packed box lies
    inside one part, boxes sum to the local shape and fit the padded shape;
  * `verify` of the compiled OUTDIR exits 0.

Exit status: 0 all pass, 1 a property failed (the case's files are printed). Stdlib only.
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

CRASH_RE = re.compile(r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|"
                      r"LeakSanitizer|terminate called|internal error")


def partition(rng: random.Random, extent: int) -> list[int]:
    """Random positive part sizes summing to extent (1 to 6 parts)."""
    count = rng.randint(1, min(6, extent))
    cuts = sorted(rng.sample(range(1, extent), count - 1)) if count > 1 else []
    edges = [0] + cuts + [extent]
    return [b - a for a, b in itertools.pairwise(edges)]


def make_case(rng: random.Random) -> tuple[str, str]:
    axes = [(f"a{i}", rng.choice([1, 2, 2, 3, 4])) for i in range(rng.randint(1, 3))]
    while _world(axes) > 16:
        axes.pop()
    use_fsdp = rng.random() < 0.4 and _world(axes) * 2 <= 16
    if use_fsdp:
        axes.append(("dp", rng.choice([2, 3]) if _world(axes) * 3 <= 16 else 2))
    fp8 = rng.random() < 0.25
    block = rng.choice([2, 4])
    params, rules = [], []
    for k in range(rng.randint(1, 3)):
        ndim = rng.choice([1, 2, 2, 2, 3])
        shape = [rng.randint(1, 20) for _ in range(ndim)]
        if ndim == 3:
            shape = [min(e, 8) for e in shape]
        name = f"model.layers.0.p{k}.weight"
        entry = {"name": name, "shape": shape}
        if fp8 and ndim == 2:
            entry["dtype"] = "float8_e4m3fn"
            params.append(entry)
            params.append({"name": f"model.layers.0.p{k}.weight_scale_inv",
                           "shape": [-(-e // block) for e in shape], "dtype": "float32"})
        else:
            params.append(entry)
        placements = {}
        for axis, _ in axes:
            if axis == "dp":
                continue
            if rng.random() < 0.6:
                placements[axis] = f"Shard({rng.randrange(-ndim, ndim)})"
        rule = {"match": name, "placements": placements}
        if rng.random() < 0.7:
            dim = rng.randrange(-ndim, ndim)
            extent = shape[dim]
            if rng.random() < 0.5:
                rule["packed"] = {"parts": partition(rng, extent), "dim": dim}
            else:
                rule["packed"] = {"parts": rng.choice([1, 2, 3, 4, extent]), "dim": dim}
        choice = rng.random()
        if choice < 0.3:
            rule["uneven"] = {"pad": rng.choice([1, 2, 3, 4, 8])}
        elif choice < 0.4:
            rule["uneven"] = "even"
        if rng.random() < 0.15:
            rule["unit"] = rng.choice([1, 2, 4])
        rules.append(rule)
    rules.append({"match": "**", "placements": {}})
    model = {"format": "shardc.model/v1", "name": "random", "dtype": "bfloat16", "params": params}
    if fp8:
        model["attributes"] = {"weight_block_size": [block, block]}
    recipe = {"format": "shardc.recipe/v1", "mesh": [{"name": a, "size": s} for a, s in axes],
              "rules": rules}
    if use_fsdp:
        recipe["fsdp"] = {"shard": "dp"}
    if fp8:
        recipe["fp8_scales"] = "follow"
    # JSON is YAML: both files are written as JSON text (flow style), one document each.
    return json.dumps(model, indent=1), json.dumps(recipe, indent=1)


def _world(axes: list[tuple[str, int]]) -> int:
    w = 1
    for _, s in axes:
        w *= s
    return w


def boxes_of(p: dict) -> list[tuple[list[int], list[int], list[int]]]:
    """(global_offset, local_offset, shape) of each box of a rank-file param."""
    if "boxes" in p and p["boxes"]:
        return [(b["global_offset"], b["local_offset"], b["shape"]) for b in p["boxes"]]
    return [(p["global_offset"], [0] * len(p["local_shape"]), p["local_shape"])]


def check_tiling(out: Path, plan: dict) -> list[str]:
    problems = []
    world = plan["world_size"]
    params = {p["name"]: p for p in plan["params"]}
    held: dict[str, dict[tuple[int, ...], int]] = {n: {} for n in params}
    manifest = json.loads((out / "manifest.json").read_text())
    files = {f["rank"]: f["path"] for f in manifest["rank_files"]["files"]}
    if sorted(files) != list(range(world)):
        return [f"manifest lists ranks {sorted(files)[:20]}, world size {world}"]
    for r in range(world):
        rank = json.loads((out / files[r]).read_text())
        for p in rank["params"]:
            name, g = p["name"], params[p["name"]]
            if p.get("alias_of"):
                continue
            if 0 in p["local_shape"]:
                continue
            pk = g.get("packed")
            mine: set[tuple[int, ...]] = set()
            rows = 0
            for goff, loff, shape in boxes_of(p):
                if pk:
                    d = pk["dim"]
                    rows += shape[d]
                    starts = list(itertools.accumulate([0] + pk["parts"]))
                    lo, hi = goff[d], goff[d] + shape[d]
                    if not any(a <= lo and hi <= b for a, b in itertools.pairwise(starts)):
                        problems.append(f"rank {r} {name}: box rows [{lo}, {hi}) cross a part "
                                        f"boundary of {pk['parts']}")
                    if loff[d] + shape[d] > p["padded_shape"][d]:
                        problems.append(f"rank {r} {name}: box past the padded shape")
                for idx in itertools.product(*[range(o, o + s) for o, s in zip(goff, shape)]):
                    if any(i >= e for i, e in zip(idx, g["global_shape"])):
                        problems.append(f"rank {r} {name}: element {idx} outside the param")
                        break
                    if idx in mine:
                        problems.append(f"rank {r} {name}: element {idx} held twice")
                        break
                    mine.add(idx)
            if pk and rows != p["local_shape"][pk["dim"]]:
                problems.append(f"rank {r} {name}: boxes hold {rows} rows, local_shape says "
                                f"{p['local_shape']}")
            for idx in mine:
                held[name][idx] = held[name].get(idx, 0) + 1
    for name, g in params.items():
        if g.get("alias_of"):
            continue
        every = list(itertools.product(*[range(e) for e in g["global_shape"]]))
        counts = {held[name].get(idx, 0) for idx in every}
        if 0 in counts or len(counts) > 1:
            problems.append(f"{name}: elements held {sorted(counts)} times over the world "
                            "(every element must be held, equally often)")
    return problems[:10]


def run(cmd: list[str], timeout: float) -> tuple[int | None, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    return p.returncode, p.stdout + p.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--sanitizer", action="store_true")
    args = ap.parse_args()
    timeout = 20 * (5 if args.sanitizer else 1)
    rng = random.Random(args.seed)
    failures = 0
    stats = {"valid": 0, "diagnosed": 0, "recipe errors": 0}
    with tempfile.TemporaryDirectory(prefix="shardc-layout-property-") as tmp_name:
        tmp = Path(tmp_name)
        for case in range(args.cases):
            model, recipe = make_case(rng)
            d = tmp / f"case{case}"
            d.mkdir()
            (d / "model.yaml").write_text(model)
            (d / "recipe.yaml").write_text(recipe)
            problems = []
            code, text = run([args.shardc, "validate", str(d / "model.yaml"),
                              str(d / "recipe.yaml"), "--format", "json"], timeout)
            if code is None or code not in (0, 1, 2) or CRASH_RE.search(text):
                problems.append(f"validate: exit {code}: {text[-1500:]}")
            elif code == 2:
                stats["recipe errors"] += 1
                if not re.search(r'"E-(RECIPE|MODEL)"', text):
                    problems.append(f"validate exit 2 without E-RECIPE/E-MODEL: {text[-1500:]}")
            elif code == 1:
                stats["diagnosed"] += 1
            else:
                stats["valid"] += 1
                out = d / "out"
                code, text = run([args.shardc, "-q", "compile", str(d / "model.yaml"),
                                  str(d / "recipe.yaml"), "-o", str(out)], timeout)
                if code != 0 or CRASH_RE.search(text):
                    problems.append(f"compile: exit {code}: {text[-1500:]}")
                else:
                    problems += check_tiling(out, json.loads((out / "plan.json").read_text()))
                    code, text = run([args.shardc, "verify", str(out)], timeout)
                    if code != 0 or CRASH_RE.search(text):
                        problems.append(f"verify: exit {code}: {text[-1500:]}")
            if problems:
                failures += 1
                print(f"FAIL case {case} (seed {args.seed}):\n  " + "\n  ".join(problems))
                print("model.yaml:\n" + model + "\nrecipe.yaml:\n" + recipe)
    print(f"{args.cases} random layouts (seed {args.seed}): {stats['valid']} valid, "
          f"{stats['diagnosed']} diagnosed (exit 1), {stats['recipe errors']} recipe errors "
          f"(exit 2); {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
