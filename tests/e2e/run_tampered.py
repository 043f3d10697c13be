#!/usr/bin/env python3
"""`shardc verify` on tampered outputs (tests/tampered/cases.json).

    run_tampered.py --shardc BIN [--sanitizer] [--only NAME] CASES_JSON

Compiles the shipped Qwen2.5-0.5B plan (dp 4 x tp 2, 8 ranks, every rank file, a muon
buffer) once, then for each case copies the output, applies the case's edits and runs
`shardc verify` on the copy. Unless a case says `"resign": false`, manifest.json is then
re-signed (sizes and sha256 of the edited files recomputed), as a tool that rewrote the
outputs would do, so the digest check passes and the field checks must catch the edit.
Each case gives the expected exit code and a message that must appear (stdout + stderr).
Cases run two at a time, verify with `--max-elements 65536` (box arithmetic above) unless the
case's args give their own.
Every run must end within 20 s (x5 under sanitizers) and print no sanitizer report.

A case: {"name", "edits": [EDIT...], "exit", "message", "args"?: [...], "resign"?: bool};
"{model}" and "{recipe}" in args stand for the shipped model and recipe compiled.
EDIT is one of
  {"file": F, "set": PATH, "value": V}      JSON value at PATH (list of keys / indices)
  {"file": F, "delete": PATH}               remove the member or element at PATH
  {"file": F, "append": PATH, "from": PATH2}  append a copy of the value at PATH2 to the list at PATH
  {"file": F, "text": "truncate", "keep": N}  keep the first N bytes
  {"file": F, "text": "append", "value": S}   append raw text
  {"file": F, "replace": OLD, "with": NEW}    replace the one occurrence of text OLD
  {"file": F, "remove": true}               delete the file
  {"file": F, "copy_of": G}                 create F as a copy of G
  {"file": F, "write": S}                   create F with text S
  {"file": F, "symlink": TARGET}            create F as a symlink (TARGET relative to OUTDIR or absolute)
F is relative to OUTDIR ("plan.json", "manifest.json", "ranks/rank-3.json").
Exit status: 0 all cases pass, 1 otherwise. Stdlib only.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "plans" / "qwen2.5-0.5b.model.yaml"
RECIPE = ROOT / "plans" / "qwen2.5-0.5b-dp4-tp2.recipe.yaml"
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "UndefinedBehaviorSanitizer")


def walk(doc, path):
    node = doc
    for key in path[:-1]:
        node = node[key]
    return node, path[-1]


def apply_edit(out: Path, edit: dict) -> None:
    f = out / edit["file"]
    if "set" in edit or "delete" in edit or "append" in edit:
        doc = json.loads(f.read_text())
        if "set" in edit:
            node, key = walk(doc, edit["set"])
            node[key] = edit["value"]
        elif "delete" in edit:
            node, key = walk(doc, edit["delete"])
            del node[key]
        else:
            node, key = walk(doc, edit["from"])
            target, tkey = walk(doc, edit["append"])
            target[tkey].append(json.loads(json.dumps(node[key])))
        f.write_text(json.dumps(doc))
    elif edit.get("text") == "truncate":
        f.write_bytes(f.read_bytes()[: edit["keep"]])
    elif edit.get("text") == "append":
        f.write_bytes(f.read_bytes() + edit["value"].encode())
    elif "replace" in edit:
        text = f.read_text()
        if text.count(edit["replace"]) != 1:
            raise ValueError(f"{edit['file']}: {edit['replace']!r} occurs "
                             f"{text.count(edit['replace'])} times, not once")
        f.write_text(text.replace(edit["replace"], edit["with"]))
    elif edit.get("remove"):
        f.unlink()
    elif "copy_of" in edit:
        shutil.copyfile(out / edit["copy_of"], f)
    elif "write" in edit:
        f.write_text(edit["write"])
    elif "symlink" in edit:
        target = edit["symlink"]
        f.symlink_to(target if target.startswith("/") else out / target)
    else:
        raise ValueError(f"unknown edit {edit}")


def resign(out: Path) -> None:
    mpath = out / "manifest.json"
    if not mpath.exists():
        return
    try:
        m = json.loads(mpath.read_text())
        entries = [m["plan"]] + list(m["rank_files"]["files"])
    except (ValueError, KeyError, TypeError):
        return  # the case tampers with the manifest itself
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("path"), str):
            continue
        p = out / e["path"]
        if p.is_file() and not e["path"].startswith(".."):
            data = p.read_bytes()
            e["bytes"] = len(data)
            e["sha256"] = hashlib.sha256(data).hexdigest()
    mpath.write_text(json.dumps(m))


def run_case(shardc: str, base: Path, tmp: Path, case: dict, limit: float) -> str:
    out = tmp / case["name"]
    shutil.copytree(base, out, symlinks=True)
    for edit in case["edits"]:
        apply_edit(out, edit)
    if case.get("resign", True):
        resign(out)
    # Box arithmetic for params above 2^16 elements keeps each run short (under the
    # sanitizers too); the field checks do not depend on it.
    args = [a.replace("{model}", str(MODEL)).replace("{recipe}", str(RECIPE))
            for a in case.get("args", [])]
    max_elements = [] if "--max-elements" in args else ["--max-elements", "65536"]
    cmd = [shardc, "verify", str(out), *max_elements, *args]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return f"did not finish within {limit:.0f} s"
    dt = time.monotonic() - t0
    text = r.stdout + r.stderr
    shutil.rmtree(out, ignore_errors=True)
    if any(mark in text for mark in SANITIZER_MARKS):
        return "sanitizer report:\n" + text[-3000:]
    if r.returncode != case["exit"]:
        return f"exit {r.returncode}, expected {case['exit']}\n{text[-2000:]}"
    if case["message"] not in text:
        return f"message {case['message']!r} not in output\n{text[-2000:]}"
    return f"ok ({dt:.2f} s)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--sanitizer", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("cases")
    args = ap.parse_args()
    cases = json.loads(Path(args.cases).read_text())["cases"]
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        print("duplicate case names")
        return 1
    limit = 20.0 * (5 if args.sanitizer else 1)
    failures = []
    with tempfile.TemporaryDirectory(prefix="shardc-tampered-") as name:
        tmp = Path(name)
        base = tmp / "base"
        r = subprocess.run([args.shardc, "compile", str(MODEL), str(RECIPE), "-o", str(base),
                            "--quiet"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            print(f"FAIL compile of the base output: {r.stderr}")
            return 1
        r = subprocess.run([args.shardc, "verify", str(base), "--strict"], capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            print(f"FAIL the untampered output does not verify:\n{r.stdout}{r.stderr}")
            return 1
        todo = [c for c in cases if not args.only or c["name"] == args.only]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results = pool.map(lambda c: run_case(args.shardc, base, tmp, c, limit), todo)
            for case, got in zip(todo, results):
                ok = got.startswith("ok")
                print(("ok   " if ok else "FAIL ") + case["name"] + ("" if ok else ": " + got),
                      flush=True)
                if not ok:
                    failures.append(case["name"])
    print(f"run_tampered: {len(cases)} cases, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
