#!/usr/bin/env python3
"""Validates and compiles shipped plans: every plans/*.recipe.yaml with its model.

    run_plans.py --shardc BIN [--plans DIR] [RECIPE ...]

A recipe's model is `plans/<m>.model.yaml` where <m> is the longest model name that
prefixes the recipe's file name (`llama-3.1-8b-dp8-tp8.recipe.yaml` -> llama-3.1-8b), or
the file named by a `# model: <file>` comment in the recipe. For each recipe:
`shardc validate MODEL RECIPE` must exit 0, then `shardc compile ... --ranks <sample>`
(first, a middle and the last rank) must exit 0 and write plan.json (world size = mesh
product) and exactly the sampled rank files, whose shards lie inside the global shapes.
Exit status 0 when every recipe passes. Stdlib only (PyYAML used when present).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def model_for(recipe: Path) -> Path:
    m = re.search(r"^#\s*model:\s*(\S+)", recipe.read_text(), re.M)
    if m:
        return recipe.parent / m.group(1)
    stem = recipe.name[: -len(".recipe.yaml")]
    cands = [p for p in recipe.parent.glob("*.model.yaml")
             if stem.startswith(p.name[: -len(".model.yaml")])]
    if not cands:
        raise FileNotFoundError(f"no plans/*.model.yaml prefixes {recipe.name}")
    return max(cands, key=lambda p: len(p.name))


def mesh_sizes(recipe: Path) -> list[int]:
    text = recipe.read_text()
    try:
        import yaml  # type: ignore
        return [int(a["size"]) for a in yaml.safe_load(text)["mesh"]]
    except ImportError:
        block = re.search(r"^mesh:\s*\n((?:[ \t]+-.*\n)+)", text, re.M)
        return [int(s) for s in re.findall(r"size:\s*(\d+)", block.group(1))] if block else []


def sample_ranks(world: int) -> list[int]:
    return sorted({r for r in (0, 17 if world > 17 else world // 2, world // 2 + 1, world - 1)
                   if 0 <= r < world})


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


def tail(text: str, n: int = 3000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


def check_rank_file(path: Path, errors: list[str]) -> None:
    rf = json.loads(path.read_text())
    for p in rf.get("params", []):
        g, l, o = p.get("global_shape"), p.get("local_shape"), p.get("global_offset")
        if g is None or l is None or o is None or not (len(g) == len(l) == len(o)):
            errors.append(f"{path.name}: {p.get('name')}: malformed shapes {g} {l} {o}")
            continue
        for d, (gd, ld, od) in enumerate(zip(g, l, o)):
            if ld < 0 or ld > gd or (ld > 0 and od + ld > gd) or (ld == 0 and od != gd):
                errors.append(f"{path.name}: {p['name']} dim {d}: local {ld} at {od} "
                              f"outside global {gd}")
                break


def check_recipe(recipe: Path, shardc: str) -> list[str]:
    errors: list[str] = []
    model = model_for(recipe)
    proc = run([shardc, "validate", str(model), str(recipe)])
    if proc.returncode != 0:
        return [f"validate exited {proc.returncode}:\n{tail(proc.stdout)}\n{tail(proc.stderr)}"]
    sizes = mesh_sizes(recipe)
    world = 1
    for s in sizes:
        world *= s
    ranks = sample_ranks(world)
    tmp = Path(tempfile.mkdtemp(prefix="shardc-plan-"))
    try:
        out = tmp / "out"
        proc = run([shardc, "compile", str(model), str(recipe), "-o", str(out), "--force",
                    "--ranks", ",".join(map(str, ranks))])
        if proc.returncode != 0:
            return [f"compile exited {proc.returncode}:\n{tail(proc.stdout)}\n{tail(proc.stderr)}"]
        plan = json.loads((out / "plan.json").read_text())
        if plan.get("world_size") != world:
            errors.append(f"plan.json world_size {plan.get('world_size')} != mesh product {world}")
        written = sorted((out / "ranks").glob("rank-*.json"))
        got = sorted(int(p.stem.split("-", 1)[1]) for p in written)
        if got != ranks:
            errors.append(f"rank files {got}, expected exactly {ranks}")
        for p in written:
            check_rank_file(p, errors)
        print(f"  world {world}, {len(plan.get('params', []))} params, "
              f"{len(plan.get('diagnostics', []))} diagnostics, ranks {ranks}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return errors


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--plans", default=str(REPO / "plans"))
    ap.add_argument("recipes", nargs="*", help="recipes to check (default: all in --plans)")
    args = ap.parse_args(argv)
    recipes = [Path(r) for r in args.recipes] or sorted(Path(args.plans).glob("*.recipe.yaml"))
    if not Path(args.shardc).exists():
        print(f"run_plans: shardc binary {args.shardc} not found", file=sys.stderr)
        return 2
    failed = 0
    for recipe in recipes:
        try:
            errors = check_recipe(recipe.resolve(), args.shardc)
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            errors = [f"{type(e).__name__}: {e}"]
        print(("FAIL " if errors else "PASS ") + recipe.name)
        for e in errors:
            print("  " + e.replace("\n", "\n  "))
        failed += bool(errors)
    print(f"{len(recipes) - failed}/{len(recipes)} plans pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
