#!/usr/bin/env python3
"""Runs one tests/reports/<case>/ through the real CLI and checks expect.json.

expect.json: {"generate": SCRIPT (optional), "runs": [RUN, ...]}; SCRIPT is a Python file of
the case folder run once in a temporary folder (it writes sparse checkpoints there); a
`model` of "@NAME" names NAME in that folder. Each RUN:
  command    "validate" (default) or "import": `import MODEL --format json --diag-format
             json -o OUT`; its diagnostics are checked as validate's, then `imported`
  imported   {"names": [...] exact param names in order, "has": [...], "lacks": [...],
             "fields": {param: {field: value}}, "top": {key: value}} of the imported JSON
  recipe     recipe file in the case folder (default recipe.yaml); model: model.yaml
  args       extra validate args (e.g. ["--strict"])
  exit       validate's exit code
  codes      codes that must be reported; absent: codes that must not be
  count      {code: n} exact number of diagnostics with that code
  messages   {code: [substrings]} every substring in some diagnostic of that code
             (message + hint); not_messages: substrings no message of that code has
  compile    true: also compile (all ranks) and check `plan`, `ranks`, run verify
  plan       {param: {field: value}} plan.json param fields; "shards": [...] exact
  ranks      {rank: {param: {field: value}}} rank-file param fields (null: absent)
  muon_stage [{rank, stage, param, field: value}] fields of a muon stage entry
Stdlib only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def model_path(case, name, tmp, generated=None):
    if name.startswith("@"):
        if generated is None:
            fail("model %s needs a `generate` script in expect.json" % name)
        return os.path.join(generated, name[1:])
    path = os.path.join(case, name)
    if not path.endswith(".gz"):
        return path
    import gzip
    out = os.path.join(tmp, os.path.basename(path)[:-3])
    with gzip.open(path, "rb") as src, open(out, "wb") as dst:
        dst.write(src.read())
    return out


def run_one(shardc, case, run, idx, generated=None):
    with tempfile.TemporaryDirectory() as tmp:
        run_in(shardc, case, run, idx, model_path(case, run.get("model", "model.yaml"), tmp, generated))


def check_imported(where, got, want):
    names = [q["name"] for q in got["params"]]
    if "names" in want and names != want["names"]:
        fail("%s: imported params %s, expected %s" % (where, names, want["names"]))
    for n in want.get("has", []):
        if n not in names:
            fail("%s: %s is not imported: %s" % (where, n, names))
    for n in want.get("lacks", []):
        if n in names:
            fail("%s: %s must not be imported as a param" % (where, n))
    by_name = {q["name"]: q for q in got["params"]}
    for n, fields in want.get("fields", {}).items():
        for k, v in fields.items():
            if by_name.get(n, {}).get(k) != v:
                fail("%s: imported %s.%s = %r, expected %r" % (where, n, k, by_name.get(n, {}).get(k), v))
    for k, v in want.get("top", {}).items():
        if got.get(k) != v:
            fail("%s: imported %s = %r, expected %r" % (where, k, got.get(k), v))


def run_in(shardc, case, run, idx, model):
    with tempfile.TemporaryDirectory() as work:
        run_in_dir(shardc, case, run, idx, model, work)


def run_in_dir(shardc, case, run, idx, model, work):
    recipe = os.path.join(case, run.get("recipe", "recipe.yaml"))
    importing = run.get("command", "validate") == "import"
    where = "run %d (%s)" % (idx, ("import " + run.get("model", "")) if importing
                              else run.get("recipe", "recipe.yaml"))
    out_json = os.path.join(work, "imported.json")
    if importing:
        cmd = [shardc, "import", model, "--format", "json", "--diag-format", "json", "-o", out_json]
    else:
        cmd = [shardc, "validate", model, recipe, "--format", "json"]
    p = subprocess.run(cmd + run.get("args", []), capture_output=True, text=True, timeout=120)
    if p.returncode != run.get("exit", 0):
        fail("%s: validate exit %d, expected %d\n%s%s" % (where, p.returncode, run.get("exit", 0),
                                                          p.stdout, p.stderr))
    diags = json.loads(p.stdout) if p.stdout.strip() else []
    codes = [d["code"] for d in diags]
    for c in run.get("codes", []):
        if c not in codes:
            fail("%s: expected %s, got %s" % (where, c, codes))
    for c in run.get("absent", []):
        if c in codes:
            fail("%s: %s must not be reported: %s" % (where, c, [d for d in diags if d["code"] == c]))
    for c, n in run.get("count", {}).items():
        if codes.count(c) != n:
            fail("%s: %d x %s, expected %d" % (where, codes.count(c), c, n))
    for c, subs in run.get("messages", {}).items():
        texts = [d["message"] + " | " + d["hint"] for d in diags if d["code"] == c]
        for s in subs:
            if not any(s in t for t in texts):
                fail("%s: no %s diagnostic contains %r: %s" % (where, c, s, texts))
    for c, subs in run.get("not_messages", {}).items():
        for d in diags:
            if d["code"] == c and any(s in d["message"] for s in subs):
                fail("%s: %s message must not contain %s: %s" % (where, c, subs, d["message"]))
    for d in diags:
        if not d.get("hint"):
            fail("%s: diagnostic without a hint: %s" % (where, d))
    if importing:
        if "imported" in run:
            if not os.path.exists(out_json):
                fail("%s: import wrote no model" % where)
            with open(out_json) as fh:
                check_imported(where, json.load(fh), run["imported"])
        return
    if not run.get("compile"):
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        p = subprocess.run([shardc, "compile", model, recipe, "-o", out, "--quiet"],
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            fail("%s: compile exit %d\n%s" % (where, p.returncode, p.stderr))
        plan = json.load(open(os.path.join(out, "plan.json")))
        by_name = {q["name"]: q for q in plan["params"]}
        for name, fields in run.get("plan", {}).items():
            if name not in by_name:
                fail("%s: %s not in plan.json" % (where, name))
            for k, v in fields.items():
                if by_name[name].get(k) != v:
                    fail("%s: plan %s.%s = %r, expected %r" % (where, name, k, by_name[name].get(k), v))
        width = len(str(max(plan["world_size"] - 1, 0)))
        for rank, params in run.get("ranks", {}).items():
            path = os.path.join(out, "ranks", "rank-%s.json" % str(rank).zfill(width))
            rf = json.load(open(path))
            held = {q["name"]: q for q in rf["params"]}
            for name, fields in params.items():
                if fields is None:
                    if name in held:
                        fail("%s: rank %s must not hold %s" % (where, rank, name))
                    continue
                if name not in held:
                    fail("%s: rank %s does not hold %s" % (where, rank, name))
                for k, v in fields.items():
                    if held[name].get(k) != v:
                        fail("%s: rank %s %s.%s = %r, expected %r" % (where, rank, name, k,
                                                                       held[name].get(k), v))
        for m in run.get("muon_stage", []):
            path = os.path.join(out, "ranks", "rank-%s.json" % str(m["rank"]).zfill(width))
            rf = json.load(open(path))
            found = muon_stage_fields(rf, m["stage"], m["param"])
            if found is None:
                fail("%s: rank %s has no muon stage %d for %s" % (where, m["rank"], m["stage"], m["param"]))
            for k, v in m.items():
                if k in ("rank", "stage", "param"):
                    continue
                if found.get(k) != v:
                    fail("%s: rank %s muon stage %d %s.%s = %r, expected %r" % (
                        where, m["rank"], m["stage"], m["param"], k, found.get(k), v))
        p = subprocess.run([shardc, "verify", out], capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            fail("%s: verify exit %d\n%s%s" % (where, p.returncode, p.stdout, p.stderr))


def muon_stage_fields(rf, stage, param):
    """The muon stage fields of `param` at `stage` as the full form wrote them, derived
    from the lean rank file the way docs/formats.md "Rank files: derived fields" says a runtime
    does: the stage's input shape is local_shape with every earlier stage's tensor_dim
    set to that stage's gathered extent (sum of its split sizes); member k's shape sets
    tensor_dim to split_sizes[k], the pad shape to their maximum."""
    order = [q["name"] for q in rf["params"]]
    local = {q["name"]: q["local_shape"] for q in rf["params"]}
    for buf in rf["buffers"]:
        for g in buf.get("groups", []):
            if stage >= len(g.get("stages", [])):
                continue
            for gp in g.get("params", []):
                name = order[gp["param"]] if isinstance(gp["param"], int) else gp["param"]
                if name != param:
                    continue
                sizes = [[v for v, n in runs for _ in range(n)] for runs in gp["split_sizes"]]
                shape = list(local[name])
                for t in range(stage):
                    shape[g["stages"][t]["tensor_dim"]] = sum(sizes[t])
                d = g["stages"][stage]["tensor_dim"]
                member = lambda e: shape[:d] + [e] + shape[d + 1:]  # noqa: E731
                return {"split_sizes": sizes[stage],
                        "rank_shapes": [member(e) for e in sizes[stage]],
                        "pad_shape": member(max(sizes[stage]))}
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--shardc", required=True)
    a = ap.parse_args()
    path = os.path.join(a.case, "expect.json")
    if not os.path.exists(path):
        # An upstream report folder (../shared/reports) has the inputs and the README's right
        # answer only: the checks are written into tests/reports/<name>/expect.json here.
        print(f"setup error: {path} does not exist (tests/reports/<name>/ holds the "
              "expect.json written from the report's README)", file=sys.stderr)
        return 2
    with open(path) as fh:
        expect = json.load(fh)
    with tempfile.TemporaryDirectory() as generated:
        if "generate" in expect:
            g = subprocess.run([sys.executable, os.path.abspath(os.path.join(a.case, expect["generate"]))],
                               cwd=generated, capture_output=True, text=True, timeout=120)
            if g.returncode != 0:
                fail("generate %s: exit %d\n%s" % (expect["generate"], g.returncode, g.stderr))
        for i, run in enumerate(expect["runs"]):
            run_one(a.shardc, a.case, run, i, generated if "generate" in expect else None)
    print("ok: %s (%d runs)" % (os.path.basename(a.case.rstrip("/")), len(expect["runs"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
