#!/usr/bin/env python3
"""Proves compiled outputs are byte-identical across runs and writer counts, and pinned.

    test_deterministic.py --shardc BIN [--check bytes|golden|all] [--plans DIR]
                          [--golden FILE] [--update]

`bytes`: compiles shipped plans three times into fresh folders — `-j 2`, `-j 2` again and
`-j 1` — and every output file (plan.json, ranks/rank-*.json, manifest.json, the
.shardc-output marker)
must be byte-identical across the three, with the same file names:
  * deepseek-v3-pp16-ep64 (2,048 ranks, MoE, pipeline, both buffer kinds) with a --ranks
    sample, and llama-3.1-70b-hsdp (256 ranks, HSDP) with a --ranks sample;
  * qwen3-30b-a3b-ep8-fsdp (64 ranks, experts, both buffer kinds) and gpt2-tp4-tied
    (8 ranks, tied) with every rank file, so the parallel writers really run in parallel.
The rank sample is run_plans.py's: first, 17, middle + 1, last.

`golden`: compiles every plans/*.recipe.yaml with that rank sample and compares the
sha256 of plan.json, manifest.json and of each sampled rank file with
tests/golden/outputs.sha256 (`sha256sum` format: `<hex>  <plan>/plan.json`,
`<hex>  <plan>/ranks/rank-NN.json`), so a
change that alters any output byte — a performance rewrite included — fails here. When the
change is intended, refresh the file with `tools/update-golden` (or `--update`) and review
the diff. Exit status 0 when every check passes. Stdlib only.
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from run_plans import mesh_sizes, model_for, sample_ranks  # noqa: E402

GOLDEN = REPO / "tests" / "golden" / "outputs.sha256"

SAMPLED_PLANS = ["deepseek-v3-pp16-ep64", "llama-3.1-70b-hsdp"]
ALL_RANKS_PLANS = ["qwen3-30b-a3b-ep8-fsdp", "gpt2-tp4-tied"]


def world_of(recipe: Path) -> int:
    world = 1
    for s in mesh_sizes(recipe):
        world *= s
    return world


def compile_plan(shardc: str, recipe: Path, out: Path, ranks: list[int] | None,
                 jobs: int | None = None) -> None:
    # Paths relative to the repository root (run from there): diagnostics in plan.json
    # quote the input paths as given, so absolute paths would make the digests depend on
    # where the repository is cloned.
    base = recipe.parent.parent
    model = model_for(recipe).relative_to(base)
    cmd = [shardc, "--quiet", "compile", str(model), str(recipe.relative_to(base)), "-o",
           str(out)]
    if ranks is not None:
        cmd += ["--ranks", ",".join(map(str, ranks))]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=base)
    if proc.returncode != 0:
        raise RuntimeError(f"compile exited {proc.returncode}:\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-2000:]}")
    if proc.stdout:  # trial A 3.4: --quiet printed the summary anyway
        raise RuntimeError(f"compile --quiet printed on stdout:\n{proc.stdout[-2000:]}")


def files_of(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes()
            for p in sorted(out.rglob("*")) if p.is_file()}


def check_bytes(shardc: str, plans: Path, tmp: Path) -> list[str]:
    errors: list[str] = []
    for name in SAMPLED_PLANS + ALL_RANKS_PLANS:
        recipe = plans / f"{name}.recipe.yaml"
        before = len(errors)
        ranks = sample_ranks(world_of(recipe)) if name in SAMPLED_PLANS else None
        runs: list[tuple[str, dict[str, bytes]]] = []
        for label, jobs in (("run 1 (-j 2)", 2), ("run 2 (-j 2)", 2), ("run 3 (-j 1)", 1)):
            out = tmp / f"{name}-{len(runs)}"
            compile_plan(shardc, recipe, out, ranks, jobs)
            runs.append((label, files_of(out)))
            shutil.rmtree(out, ignore_errors=True)
        ref_label, ref = runs[0]
        n_ranks = sum(1 for k in ref if k.startswith("ranks/"))
        expected = len(ranks) if ranks is not None else world_of(recipe)
        if n_ranks != expected:
            errors.append(f"{name}: {n_ranks} rank files, expected {expected}")
        for label, files in runs[1:]:
            if sorted(files) != sorted(ref):
                errors.append(f"{name}: {label} wrote files {sorted(set(files) ^ set(ref))[:5]} "
                              f"that {ref_label} did not (or vice versa)")
            differ = [k for k in sorted(set(files) & set(ref)) if files[k] != ref[k]]
            if differ:
                errors.append(f"{name}: {label} differs from {ref_label} in {len(differ)} files, "
                              f"e.g. {differ[:3]}")
        print(f"  {name}: {len(ref)} files, {sum(map(len, ref.values())):,} bytes, "
              f"{'identical' if len(errors) == before else 'DIFFER'}")
    return errors


def golden_digests(shardc: str, plans: Path, tmp: Path) -> dict[str, str]:
    digests: dict[str, str] = {}
    for recipe in sorted(plans.glob("*.recipe.yaml")):
        name = recipe.name[: -len(".recipe.yaml")]
        out = tmp / f"golden-{name}"
        compile_plan(shardc, recipe, out, sample_ranks(world_of(recipe)))
        for rel, data in files_of(out).items():
            if rel in ("plan.json", "manifest.json") or rel.startswith("ranks/"):
                digests[f"{name}/{rel}"] = hashlib.sha256(data).hexdigest()
        shutil.rmtree(out, ignore_errors=True)
    return digests


def read_golden(path: Path) -> dict[str, str]:
    got: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, rel = line.split(None, 1)
            got[rel.strip().lstrip("*")] = digest
    return got


def check_golden(shardc: str, plans: Path, tmp: Path, golden: Path, update: bool) -> list[str]:
    digests = golden_digests(shardc, plans, tmp)
    if update:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text("".join(f"{d}  {rel}\n" for rel, d in sorted(digests.items())))
        print(f"wrote {len(digests)} digests to {golden}")
        return []
    if not golden.exists():
        return [f"{golden} missing: run tools/update-golden"]
    want = read_golden(golden)
    errors = []
    for rel in sorted(set(want) | set(digests)):
        if rel not in digests:
            errors.append(f"{rel}: in {golden.name} but not produced")
        elif rel not in want:
            errors.append(f"{rel}: produced but not in {golden.name}")
        elif want[rel] != digests[rel]:
            errors.append(f"{rel}: sha256 {digests[rel][:16]}… != golden {want[rel][:16]}…")
    if errors:
        errors.append("outputs changed: if intended, run tools/update-golden and review the diff")
    else:
        print(f"  {len(digests)} digests match {golden}")
    return errors


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--check", choices=["bytes", "golden", "all"], default="all")
    ap.add_argument("--plans", default=str(REPO / "plans"))
    ap.add_argument("--golden", default=str(GOLDEN))
    ap.add_argument("--update", action="store_true", help="rewrite the golden digest file")
    args = ap.parse_args(argv)
    if not Path(args.shardc).exists():
        print(f"test_deterministic: shardc binary {args.shardc} not found", file=sys.stderr)
        return 2
    plans = Path(args.plans).resolve()
    if "/" in args.shardc:  # compile runs from the repository root
        args.shardc = str(Path(args.shardc).resolve())
    tmp = Path(tempfile.mkdtemp(prefix="shardc-determinism-"))
    errors: list[str] = []
    try:
        if args.check in ("bytes", "all") and not args.update:
            errors += check_bytes(args.shardc, plans, tmp)
        if args.check in ("golden", "all") or args.update:
            errors += check_golden(args.shardc, plans, tmp, Path(args.golden), args.update)
    except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        errors.append(f"{type(e).__name__}: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for e in errors:
        print("FAIL " + e.replace("\n", "\n  "))
    print("PASS" if not errors else f"{len(errors)} failure(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
