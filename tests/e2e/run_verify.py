#!/usr/bin/env python3
"""Compiles a shipped plan or a golden case and proves its buffer layouts round-trip.

    run_verify.py --shardc BIN (--recipe plans/X.recipe.yaml | --case tests/cases/NN_x)

`shardc compile MODEL RECIPE -o TMP --ranks SAMPLE --with-groups`, then `shardc verify TMP
--ranks SAMPLE` must exit 0 and report every buffer as round-tripping. SAMPLE is the
recipe's `# verify-ranks: SET` comment, else every rank when the world has at most 512
ranks; `--with-groups` adds the members of the sample's buffer groups, which verify needs. Recipes without `buffers:` are skipped (exit 0). Then the negative
check: one muon split size (or FSDP2 offset, or flat buffer owned range) in the middle rank
file is corrupted,
manifest.json re-signed (so the digest check passes) and verify must exit 1 naming that
param and rank (verify samples only that rank). Stdlib only.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run_case  # noqa: E402
import run_plans  # noqa: E402
import run_tampered  # noqa: E402

MAX_ALL_RANKS = 512


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1200)


def rank_sample(recipe: Path, world: int) -> str:
    m = re.search(r"^#\s*verify-ranks:\s*(\S+)", recipe.read_text(), re.M)
    if m:
        return m.group(1)
    if world > MAX_ALL_RANKS:
        raise ValueError(f"{recipe.name}: {world} ranks; add a '# verify-ranks: SET' comment")
    return f"0-{world - 1}"


def corrupt(outdir: Path) -> tuple[str, int] | None:
    """Bumps one member's split size (muon) or one offset (fsdp2) in a rank file; (param, rank)."""
    files = sorted((outdir / "ranks").glob("rank-*.json"))
    for path in files[len(files) // 2:] + files[: len(files) // 2]:
        rf = json.loads(path.read_text())
        for buf in rf["buffers"]:
            for g in buf.get("groups", []):
                for p in g["params"]:
                    if not p["split_sizes"]:
                        continue
                    runs = p["split_sizes"][0]  # stage 0, [[size, count], ...]
                    size, count = runs[0]
                    runs[0:1] = [[size + 1, 1]] + ([[size, count - 1]] if count > 1 else [])
                    path.write_text(json.dumps(rf))
                    return rf["params"][p["param"]]["name"], rf["rank"]
            for u in buf.get("units", []):
                if len(u["params"]) > 1:
                    u["params"][1]["offset"] += 1
                    path.write_text(json.dumps(rf))
                    return rf["params"][u["params"][1]["param"]]["name"], rf["rank"]
            for fb in buf.get("flat", []):  # one owned range one element short
                for o in fb["owned"]:
                    if o[2] > 1:
                        o[2] -= 1
                        path.write_text(json.dumps(rf))
                        return rf["params"][fb["params"][o[0]][0]]["name"], rf["rank"]
    return None


def check(model: Path, recipe: Path, shardc: str, world: int) -> list[str]:
    if not re.search(r"^buffers:", recipe.read_text(), re.M):
        print(f"SKIP {recipe.name}: no buffers")
        return []
    ranks = rank_sample(recipe, world)
    tmp = Path(tempfile.mkdtemp(prefix="shardc-verify-"))
    try:
        out = tmp / "out"
        proc = run([shardc, "compile", str(model), str(recipe), "-o", str(out), "--force", "-q",
                    "--ranks", ranks, "--with-groups"])
        if proc.returncode != 0:
            return [f"compile exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"]
        t0 = time.monotonic()
        proc = run([shardc, "verify", str(out), "--ranks", ranks])
        print(proc.stdout + proc.stderr + f"(verify wall time {time.monotonic() - t0:.2f} s)")
        if proc.returncode != 0 or "all buffer layouts round-trip" not in proc.stdout:
            return [f"verify exited {proc.returncode}"]
        hit = corrupt(out)
        if hit is None:
            return []
        run_tampered.resign(out)  # past the digest check: the simulator must catch it
        # Only the corrupted rank is sampled: verify reads the rank files of its buffer
        # groups' members itself, and the whole sample was proven clean just above.
        proc = run([shardc, "verify", str(out), "--ranks", str(hit[1])])
        print(proc.stdout[-1500:] + proc.stderr)
        if proc.returncode != 1 or hit[0] not in proc.stdout or f"rank {hit[1]}" not in proc.stdout:
            return [f"corrupted {hit[0]} on rank {hit[1]}: verify exited {proc.returncode} "
                    "without naming it"]
        return []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--recipe")
    src.add_argument("--case")
    ap.add_argument("--model", help="with --recipe: the model (default: the plan's shipped model)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="shardc-verify-model-"))
    try:
        if args.recipe:
            recipe = Path(args.recipe).resolve()
            model = Path(args.model).resolve() if args.model else run_plans.model_for(recipe)
            world = 1
            for s in run_plans.mesh_sizes(recipe):
                world *= s
        else:
            case = Path(args.case).resolve()
            exp = json.loads((case / "expected.json").read_text())
            recipe = case / exp.get("recipe", "recipe.yaml")
            model = run_case.resolve_model(case, exp.get("model", "model.yaml"), tmp)
            world = int(exp["world_size"])
        errors = check(model, recipe, args.shardc, world)
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        errors = [f"{type(e).__name__}: {e}"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for e in errors:
        print("FAIL " + e)
    if not errors:
        print("PASS")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
