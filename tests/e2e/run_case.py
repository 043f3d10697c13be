#!/usr/bin/env python3
"""Runs one golden case folder through the real shardc CLI and compares with expected.json.

    run_case.py CASE_DIR --shardc BIN [--update] [--keep]

Valid case (`expect_error: null`): `shardc compile MODEL RECIPE -o TMP --ranks <listed>
--force`, then compares plan.json params (name, dtype, global_shape, mesh, placements,
uneven, stage, alias_of, stacked_from), the expected warning codes (plan.json
`diagnostics`), and every listed rank's ranks/rank-<r>.json (coords; per param
local_shape, global_offset, padded_shape, alias_of, and boxes where expected lists them; params absent from expected must be
absent from the rank file).

Invalid case (`expect_error: [codes]`): `shardc validate MODEL RECIPE --format json` must
exit 1 and report every expected code.

Models: `model` in expected.json is relative to the case folder; a path into the shared
`models/` folder that does not exist there is looked up in tests/data/models/ (as is or as
a .gz that is unpacked to a temporary folder).

--update rewrites expected.json from the product's output (only for cases not produced by
the independent oracle, unless --force-oracle): review the diff before committing.
Exit status: 0 pass, 1 mismatch, 2 harness/setup error. Stdlib only.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
DATA_MODELS = TESTS / "data" / "models"
SPEC_WARNINGS = {"W-UNUSED-RULE", "W-EXPERTS", "W-STRIDED"}
PLAN_FIELDS = ["dtype", "global_shape", "mesh", "placements", "uneven", "stage", "alias_of",
               "stacked_from"]
RANK_FIELDS = ["local_shape", "global_offset", "padded_shape", "alias_of", "boxes"]
CODE_RE = re.compile(r"\b([EW]-[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*)\b")


class Mismatch:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, where: str, expected, actual) -> None:
        self.lines.append(f"  {where}:\n      expected {json.dumps(expected)}\n      actual   "
                          f"{json.dumps(actual)}")

    def note(self, text: str) -> None:
        self.lines.append("  " + text)

    def __bool__(self) -> bool:
        return bool(self.lines)


def resolve_model(case: Path, rel: str, tmp: Path) -> Path:
    direct = (case / rel).resolve()
    if direct.exists():
        return direct
    base = Path(rel).name
    for cand in (DATA_MODELS / base, case / base):
        if cand.exists():
            return cand
    gz = DATA_MODELS / (base + ".gz")
    if gz.exists():
        out = tmp / base
        with gzip.open(gz, "rb") as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        return out
    raise FileNotFoundError(f"model {rel!r} not found (looked in {case}, {DATA_MODELS})")


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    print("$ " + " ".join(cmd), flush=True)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        print("TIMEOUT after 600 s", file=sys.stderr)
        raise


def show_output(proc: subprocess.CompletedProcess, limit: int = 4000) -> None:
    for label, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        if text.strip():
            cut = text if len(text) <= limit else text[:limit] + "\n... (truncated)"
            print(f"--- {label} ---\n{cut}")


# ------------------------------------------------------------ diagnostics


def collect_diags(node, out: list[dict]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("code"), str):
            out.append(node)
        for v in node.values():
            collect_diags(v, out)
    elif isinstance(node, list):
        for v in node:
            collect_diags(v, out)


def diags_from_output(text: str) -> list[dict]:
    """Diagnostics from `--format json` output (one document, or JSON lines), else text."""
    out: list[dict] = []
    stripped = text.strip()
    if not stripped:
        return out
    try:
        collect_diags(json.loads(stripped), out)
        return out
    except json.JSONDecodeError:
        pass
    parsed_any = False
    for line in stripped.splitlines():
        line = line.strip()
        if line.startswith("{") or line.startswith("["):
            try:
                collect_diags(json.loads(line), out)
                parsed_any = True
            except json.JSONDecodeError:
                pass
    if not parsed_any:
        for m in CODE_RE.finditer(stripped):
            out.append({"code": m.group(1), "message": "(from text output)"})
    return out


# ------------------------------------------------------------ comparisons


def norm_alias(value, names: list[str]):
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    return value


def norm_stacked(value):
    """plan.json may list every source; expected gives {count, first, last}."""
    if value is None:
        return None
    if isinstance(value, list):
        return {"count": len(value), "first": value[0] if value else None,
                "last": value[-1] if value else None}
    if isinstance(value, dict):
        return {k: value.get(k) for k in ("count", "first", "last")}
    return value


def compare_plan(exp: dict, plan: dict, bad: Mismatch) -> None:
    if "world_size" in exp and plan.get("world_size") != exp["world_size"]:
        bad.add("plan.world_size", exp["world_size"], plan.get("world_size"))
    params = plan.get("params") or []
    names = [p.get("name") for p in params]
    by_name = {p.get("name"): p for p in params}
    exp_names = [p["name"] for p in exp["params"]]
    if names != exp_names:
        missing = [n for n in exp_names if n not in by_name]
        extra = [n for n in names if n not in set(exp_names)]
        if missing:
            bad.add("plan.params missing", missing[:20], None)
        if extra:
            bad.add("plan.params unexpected", None, extra[:20])
        if not missing and not extra:
            bad.add("plan.params order", exp_names, names)
    for ep in exp["params"]:
        ap = by_name.get(ep["name"])
        if ap is None:
            continue
        for field in PLAN_FIELDS:
            if field not in ep:
                continue
            want, got = ep[field], ap.get(field, "<absent>")
            if field == "alias_of":
                got = norm_alias(got, names)
            if field == "stacked_from":
                want, got = norm_stacked(want), norm_stacked(got)
            if want != got:
                bad.add(f"plan.params[{ep['name']}].{field}", want, got)


def diag_matches(want: dict, d: dict) -> bool:
    if d.get("code") != want.get("code"):
        return False
    param = want.get("param")
    if not param:
        return True
    if d.get("param"):
        return d["param"] == param
    return param in str(d.get("message", ""))


def compare_warnings(exp: dict, diags: list[dict], bad: Mismatch) -> None:
    pool = [d for d in diags if str(d.get("severity", "warning")) != "error"]
    used: set[int] = set()
    for want in exp.get("warnings", []):
        want = want if isinstance(want, dict) else {"code": want}
        hit = next((i for i, d in enumerate(pool) if i not in used and diag_matches(want, d)), None)
        if hit is None:
            bad.add("warning not reported", {k: want.get(k) for k in ("code", "param", "message")
                                             if k in want}, None)
        else:
            used.add(hit)
    expected_codes = {(w.get("code") if isinstance(w, dict) else w) for w in exp.get("warnings", [])}
    for i, d in enumerate(pool):
        if i in used:
            continue
        if d.get("code") in SPEC_WARNINGS and d.get("code") not in expected_codes:
            bad.add("unexpected warning", None, {k: d.get(k) for k in ("code", "param", "message")})
    errors = [d for d in diags if d.get("severity") == "error"]
    if errors:
        bad.add("errors in plan.json diagnostics", [], errors[:10])


def rank_file(outdir: Path, rank: int, world: int) -> Path | None:
    width = len(str(max(world - 1, 0)))
    cand = outdir / "ranks" / f"rank-{rank:0{width}d}.json"
    if cand.exists():
        return cand
    for p in (outdir / "ranks").glob("rank-*.json"):
        try:
            if int(p.stem.split("-", 1)[1]) == rank:
                return p
        except ValueError:
            continue
    return None


def compare_rank(rank: str, want: dict, got: dict, bad: Mismatch) -> None:
    where = f"rank-{rank}"
    if got.get("rank") not in (int(rank), None):
        bad.add(f"{where}.rank", int(rank), got.get("rank"))
    if "coords" in want and got.get("coords") != want["coords"]:
        bad.add(f"{where}.coords", want["coords"], got.get("coords"))
    if "stage" in want and "stage" in got and got["stage"] != want["stage"]:
        bad.add(f"{where}.stage", want["stage"], got["stage"])
    params = got.get("params") or []
    if isinstance(params, dict):  # tolerate {fqn: {...}}
        params = [dict(v, name=k) for k, v in params.items()]
    by_name = {p.get("name"): p for p in params}
    for fqn, wp in want["params"].items():
        gp = by_name.get(fqn)
        if gp is None:
            bad.add(f"{where}.params[{fqn}]", "present", "absent")
            continue
        for field in RANK_FIELDS + ["stage"]:
            if field not in wp or (field == "stage" and "stage" not in gp):
                continue
            if gp.get(field, "<absent>") != wp[field]:
                bad.add(f"{where}.params[{fqn}].{field}", wp[field], gp.get(field, "<absent>"))
    extra = [n for n in by_name if n not in want["params"]]
    if extra:
        bad.add(f"{where}.params unexpected (rank should not hold them)", [], extra[:20])


# ------------------------------------------------------------ update


def updated_valid(exp: dict, plan: dict, outdir: Path) -> dict:
    new = dict(exp, oracle="shardc --update")
    names = [p.get("name") for p in plan.get("params", [])]
    new["params"] = [{"name": p.get("name"), **{f: (norm_alias(p.get(f), names) if f == "alias_of"
                                                   else norm_stacked(p.get(f)) if f == "stacked_from"
                                                   else p.get(f)) for f in PLAN_FIELDS}}
                     for p in plan.get("params", [])]
    new["warnings"] = [{k: d.get(k) for k in ("code", "severity", "message", "param") if k in d}
                       for d in plan.get("diagnostics", []) if d.get("severity") != "error"]
    per_rank = {}
    for r in exp.get("ranks", []):
        path = rank_file(outdir, int(r), int(plan.get("world_size", 1)))
        if path is None:
            continue
        rf = json.loads(path.read_text())
        per_rank[str(r)] = {"coords": rf.get("coords"), "params": {
            p["name"]: {f: p.get(f) for f in RANK_FIELDS} for p in rf.get("params", [])}}
    new["per_rank"] = per_rank
    return new


# ------------------------------------------------------------ main


def run_valid(case: Path, exp: dict, model: Path, shardc: str, tmp: Path, args) -> int:
    outdir = tmp / "out"
    ranks = [int(r) for r in exp.get("ranks") or sorted(int(r) for r in exp.get("per_rank", {}))]
    cmd = [shardc, "compile", str(model), str(case / exp.get("recipe", "recipe.yaml")),
           "-o", str(outdir), "--force"]
    if ranks:
        cmd += ["--ranks", ",".join(str(r) for r in ranks)]
    proc = run(cmd)
    if proc.returncode != 0:
        print(f"FAIL {case.name}: compile exited {proc.returncode} (expected 0)")
        show_output(proc)
        return 1
    plan_path = outdir / "plan.json"
    if not plan_path.exists():
        print(f"FAIL {case.name}: {plan_path} not written")
        return 1
    plan = json.loads(plan_path.read_text())
    if args.update:
        (case / "expected.json").write_text(json.dumps(updated_valid(exp, plan, outdir), indent=1)
                                            + "\n")
        print(f"UPDATED {case / 'expected.json'}")
        return 0
    bad = Mismatch()
    compare_plan(exp, plan, bad)
    compare_warnings(exp, plan.get("diagnostics") or [], bad)
    world = int(plan.get("world_size") or exp.get("world_size") or 1)
    for r, want in sorted(exp.get("per_rank", {}).items(), key=lambda kv: int(kv[0])):
        path = rank_file(outdir, int(r), world)
        if path is None:
            bad.add(f"rank-{r}", "ranks/rank-<r>.json written", "missing")
            continue
        compare_rank(r, want, json.loads(path.read_text()), bad)
    if bad:
        print(f"FAIL {case.name}: {len(bad.lines)} mismatch(es)")
        print("\n".join(bad.lines[:200]))
        if len(bad.lines) > 200:
            print(f"  ... and {len(bad.lines) - 200} more")
        show_output(proc, 2000)
        return 1
    print(f"PASS {case.name}")
    return 0


def run_invalid(case: Path, exp: dict, model: Path, shardc: str, args) -> int:
    cmd = [shardc, "validate", str(model), str(case / exp.get("recipe", "recipe.yaml")),
           "--format", "json"]
    proc = run(cmd)
    diags = diags_from_output(proc.stdout) + diags_from_output(proc.stderr)
    codes = sorted({d.get("code") for d in diags if d.get("severity", "error") == "error"
                    or str(d.get("code", "")).startswith("E-")})
    if args.update:
        (case / "expected.json").write_text(json.dumps(dict(exp, oracle="shardc --update",
                                                            expect_error=codes), indent=1) + "\n")
        print(f"UPDATED {case / 'expected.json'}")
        return 0
    bad = Mismatch()
    if proc.returncode != 1:
        bad.add("validate exit code", 1, proc.returncode)
    missing = [c for c in exp["expect_error"] if c not in codes]
    if missing:
        bad.add("error codes not reported", exp["expect_error"], codes)
        for cond in exp.get("conditions", []):
            bad.note(f"expected condition: {json.dumps(cond)}")
    if bad:
        print(f"FAIL {case.name}")
        print("\n".join(bad.lines))
        show_output(proc)
        return 1
    print(f"PASS {case.name} (reported {', '.join(codes)})")
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="Run one shardc golden case.")
    ap.add_argument("case_dir")
    ap.add_argument("--shardc", required=True, help="path to the shardc binary")
    ap.add_argument("--update", action="store_true", help="rewrite expected.json from output")
    ap.add_argument("--force-oracle", action="store_true",
                    help="allow --update on a case computed by the independent oracle")
    ap.add_argument("--keep", action="store_true", help="keep the temporary output folder")
    args = ap.parse_args(argv)

    case = Path(args.case_dir).resolve()
    exp_path = case / "expected.json"
    if not exp_path.exists():
        print(f"run_case: {exp_path} missing", file=sys.stderr)
        return 2
    exp = json.loads(exp_path.read_text())
    if args.update and str(exp.get("oracle", "")).startswith("shardc-oracle") and \
            not args.force_oracle:
        print(f"run_case: {case.name} was computed by the independent oracle; a disagreement "
              "is a product bug until proven otherwise (use --force-oracle to overwrite)",
              file=sys.stderr)
        return 2
    if not Path(args.shardc).exists():
        print(f"run_case: shardc binary {args.shardc} not found", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix=f"shardc-case-{case.name}-"))
    try:
        model = resolve_model(case, exp.get("model", "model.yaml"), tmp)
        if exp.get("expect_error"):
            return run_invalid(case, exp, model, args.shardc, args)
        return run_valid(case, exp, model, args.shardc, tmp, args)
    except (FileNotFoundError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        print(f"FAIL {case.name}: {e}")
        return 1
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
