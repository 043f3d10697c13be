#!/usr/bin/env python3
"""Runtime tests: real processes consume shardc plans (ctest label `runtime`).

    run_runtime.py --shardc BIN --test plans|features|negative|reshard [--keep DIR]

Each test compiles its plans, writes a random safetensors checkpoint, and
launches one worker process per rank (harness.launch: gloo on 127.0.0.1, free
port, bounded). Exit 0 = every check passed; 1 = a check failed; 77 = no
python3 with torch (reported loudly; ctest marks it skipped).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from findpy import find_torch_python

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
PLANS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "plans")
SHIPPED = [("qwen2.5-0.5b", "qwen2.5-0.5b-dp4-tp2"), ("gpt2", "gpt2-tp4-tied"),
           ("gemma-2-2b", "gemma-2-2b-tp4-tied")]
FEATURES = ["tp_uneven", "hsdp_tp", "ep_efsdp", "tied_pp"]


def plan_task(name, outdir, ckpt):
    return {"kind": "plan", "name": name, "outdir": outdir, "ckpt": ckpt,
            "require_manifest": os.path.exists(os.path.join(outdir, "manifest.json"))}


def compile_case(shardc, work, case, model=None, recipe=None):
    model = model or os.path.join(CASES, case, "model.yaml")
    recipe = recipe or os.path.join(CASES, case, "recipe.yaml")
    out = harness.compile_plan(shardc, model, recipe, os.path.join(work, case))
    ckpt = os.path.join(work, f"{case}.safetensors")
    harness.write_checkpoint(out, ckpt, seed=len(case))
    return out, ckpt


def run(python, world, tasks, work, label):
    ok, outputs = harness.launch(python, world, {"tasks": tasks}, work)
    text = "\n".join(f"--- rank {r} ---\n{o}" for r, o in enumerate(outputs))
    return ok, text


def test_plans(shardc, python, work):
    tasks = []
    for model, recipe in SHIPPED:
        small = harness.shrink_model(os.path.join(PLANS, f"{model}.model.yaml"),
                                     harness.SHRINK[model], os.path.join(work, f"{model}.model.yaml"))
        out, ckpt = compile_case(shardc, work, recipe, small,
                                 os.path.join(PLANS, f"{recipe}.recipe.yaml"))
        tasks.append(plan_task(recipe, out, ckpt))
    return run(python, 8, tasks, work, "plans")


def test_features(shardc, python, work):
    tasks = [plan_task(c, *compile_case(shardc, work, c)) for c in FEATURES]
    return run(python, 8, tasks, work, "features")


def perturb(outdir, rank, param):
    """Shift `param`'s global_offset by one row in rank `rank`'s file (and
    re-sign manifest.json when present, so only the plan's meaning is wrong)."""
    out = json.load(open(os.path.join(outdir, "plan.json")))
    width = len(str(out["world_size"] - 1))
    rel = f"ranks/rank-{rank:0{width}d}.json"
    path = os.path.join(outdir, rel)
    doc = json.load(open(path))
    p = next(p for p in doc["params"] if p["name"] == param)
    p["global_offset"][0] += 1
    with open(path, "w") as f:
        json.dump(doc, f)
    mpath = os.path.join(outdir, "manifest.json")
    if os.path.exists(mpath):
        import hashlib
        m = json.load(open(mpath))
        data = open(path, "rb").read()
        for f in m["rank_files"]["files"]:
            if f["path"] == rel:
                f["bytes"], f["sha256"] = len(data), hashlib.sha256(data).hexdigest()
        with open(mpath, "w") as f:
            json.dump(m, f)


def test_negative(shardc, python, work):
    """The runtime test must catch a plan that is wrong by one row."""
    out, ckpt = compile_case(shardc, work, "hsdp_tp")
    param = "model.layers.0.up.weight"  # rank 0 holds rows [0, 2) of [7, 6]: [1, 3) is in range
    perturb(out, 0, param)
    ok, text = run(python, 8, [plan_task("hsdp_tp-perturbed", out, ckpt)], work, "negative")
    caught = not ok and f"MISMATCH hsdp_tp-perturbed: {param}" in text
    report = ("caught: the perturbed offset of " + param + " fails the runtime checks:\n" +
              "\n".join(l for l in text.splitlines() if l.startswith("MISMATCH")))
    return caught, report if caught else "NOT CAUGHT (or failed otherwise):\n" + text


def reshard_listing(shardc, a, b, path, extra=()):
    """`shardc reshard A B -o PATH` (the listing the transfers must follow)."""
    r = subprocess.run([shardc, "reshard", a, b, "-o", path, "--quiet", *extra],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"shardc reshard {a} {b} failed ({r.returncode}):\n{r.stderr}")
    return path


# (case, extra reshard args): plan A = cases/<case>/recipe.yaml, plan B = recipe_b.yaml
RESHARD = [
    ("tp_uneven", []),                          # 8 -> 6 ranks (2 idle), chunk -> balanced, + FSDP
    ("tp_uneven", ["--ranks-per-node", "4"]),   # same, sources on the destination's node first
    ("hsdp_tp", []),                            # HSDP x TP -> FSDP 8, mixed dtypes
    ("ep_efsdp", []),                           # tp 2 -> 4, ep 4 -> 2, efsdp 2 -> 4
    ("tied_pp", []),                            # 2 -> 3 pipeline stages, 8 -> 6 ranks, ties
]


def test_reshard(shardc, python, work):
    """Plan-A holders send plan-B ranks exactly what `shardc reshard` lists."""
    tasks = []
    for i, (case, extra) in enumerate(RESHARD):
        a, ckpt = compile_case(shardc, work, case)
        b = harness.compile_plan(shardc, os.path.join(CASES, case, "model.yaml"),
                                 os.path.join(CASES, case, "recipe_b.yaml"),
                                 os.path.join(work, case + "-b"))
        listing = reshard_listing(shardc, a, b, os.path.join(work, f"{case}-{i}.reshard.json"), extra)
        tasks.append({"kind": "reshard", "name": f"{case}{' '.join([''] + extra)}", "a": a, "b": b,
                      "listing": listing, "ckpt": ckpt,
                      "require_manifest": os.path.exists(os.path.join(a, "manifest.json"))})
    bad = perturb_listing(tasks[0], os.path.join(work, "perturbed.reshard.json"))
    tasks.append(dict(tasks[0], name=tasks[0]["name"] + " (perturbed listing)", listing=bad,
                      expect_mismatch=True))
    ok, text = run(python, 8, tasks, work, "reshard")
    return ok and "EXPECTED: " in text, text


def perturb_listing(task, path):
    """A copy of the task's listing with one moved box read one row off in its
    source (same size, other bytes): the transfers then deliver wrong data,
    which the destination must catch."""
    listing = json.load(open(task["listing"]))
    src_shapes = {}
    for r in range(json.load(open(os.path.join(task["a"], "plan.json")))["world_size"]):
        width = len(str(json.load(open(os.path.join(task["a"], "plan.json")))["world_size"] - 1))
        doc = json.load(open(os.path.join(task["a"], "ranks", f"rank-{r:0{width}d}.json")))
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
    raise RuntimeError("no read of the listing can be shifted by a row")


TESTS = {"plans": test_plans, "features": test_features, "negative": test_negative,
         "reshard": test_reshard}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--test", required=True, choices=sorted(TESTS))
    ap.add_argument("--keep", help="work folder to keep (default: a temporary one, removed)")
    args = ap.parse_args()
    python = sys.executable if os.environ.get("SHARDC_RUNTIME_PYTHON_OK") else find_torch_python()
    if python is None:
        print("*" * 72 + "\nSKIPPED: no python3 with torch + numpy + gloo found "
              "(install python3-torch python3-numpy, or set SHARDC_TORCH_PYTHON)\n" + "*" * 72)
        return 77
    if os.path.realpath(python) != os.path.realpath(sys.executable):  # run under that python
        os.environ["SHARDC_RUNTIME_PYTHON_OK"] = "1"
        os.execv(python, [python, os.path.abspath(__file__)] + sys.argv[1:])
    global harness
    import harness
    work = args.keep or tempfile.mkdtemp(prefix=f"shardc-runtime-{args.test}-")
    os.makedirs(work, exist_ok=True)
    try:
        ok, text = TESTS[args.test](os.path.abspath(args.shardc), python, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(text)
    print(f"runtime/{args.test}: {'PASS' if ok else 'FAIL'} (python {python})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
