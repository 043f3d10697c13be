#!/usr/bin/env python3
"""The output directory commits as a whole (docs/commands.md "Output directory commits").

    test_commit.py --shardc BIN [--kills N]

`compile` of DeepSeek-V3 (pp16 x ep64, 2,048 ranks) with a rank subset big enough to take a
few hundred ms is SIGKILLed at N moments spread over its run time, in three scenarios:
  * rerun over a previous complete compile (swap protocol): every resulting OUTDIR is
    byte-for-byte the previous complete state or the new complete state
  * first compile (no OUTDIR yet): OUTDIR is absent, or refused by `shardc verify` as
    "incomplete compile", or complete
  * rerun into an OUTDIR holding a foreign file (in-place protocol, --force): refused as
    incomplete, or complete with the foreign file kept
"Complete" means manifest.json is present, every file it lists has its recorded size and
sha256, and ranks/ holds no rank file it does not list. Afterwards a normal compile removes
the killed runs' temporary siblings. Also: a rerun with changed inputs replaces every file
and records the new input digests; `verify` names a tampered rank file and a tampered
plan.json by digest. Exit status: 0 pass, 1 failure. Stdlib only.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "plans" / "deepseek-v3.model.yaml"
RECIPE = ROOT / "plans" / "deepseek-v3-pp16-ep64.recipe.yaml"
FAILURES: list[str] = []


def check(cond: bool, what: str, detail: str = "") -> None:
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)
        if detail:
            print("     " + detail.replace("\n", "\n     "), flush=True)


def snapshot(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under root (symlinks as their target text)."""
    out = {}
    if not root.exists():
        return out
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            rel = str(p.relative_to(root))
            out[rel] = ("link:" + os.readlink(p)) if p.is_symlink() else \
                hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def complete(root: Path) -> str:
    """'' when root holds a complete compile, else why not."""
    mpath = root / "manifest.json"
    if not mpath.exists():
        return "no manifest.json"
    m = json.loads(mpath.read_text())
    listed = [m["plan"]] + m["rank_files"]["files"]
    for e in listed:
        p = root / e["path"]
        if not p.exists():
            return f"{e['path']} missing"
        data = p.read_bytes()
        if len(data) != e["bytes"] or hashlib.sha256(data).hexdigest() != e["sha256"]:
            return f"{e['path']} differs from manifest.json"
    names = {e["path"] for e in m["rank_files"]["files"]}
    extra = [f"ranks/{n}" for n in os.listdir(root / "ranks")
             if n.startswith("rank-") and f"ranks/{n}" not in names] \
        if (root / "ranks").exists() else []
    return f"unlisted rank files {extra[:3]}" if extra else ""


class Env:
    def __init__(self, shardc: str, tmp: Path) -> None:
        self.shardc = shardc
        self.tmp = tmp

    def cmd(self, out: Path, ranks: str, *extra: str, recipe: Path = RECIPE) -> list[str]:
        return [self.shardc, "compile", str(MODEL), str(recipe), "-o", str(out), "--quiet",
                "--ranks", ranks, "--jobs", "2", *extra]

    def compile(self, out: Path, ranks: str, *extra: str, recipe: Path = RECIPE):
        return subprocess.run(self.cmd(out, ranks, *extra, recipe=recipe), capture_output=True,
                              text=True, timeout=600)

    def killed(self, out: Path, ranks: str, after: float, *extra: str) -> bool:
        """Starts a compile and SIGKILLs it after `after` s; True when it was still running."""
        p = subprocess.Popen(self.cmd(out, ranks, *extra), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(after)
        alive = p.poll() is None
        if alive:
            p.send_signal(signal.SIGKILL)
        p.wait()
        return alive

    def verify(self, out: Path, *extra: str):
        return subprocess.run([self.shardc, "verify", str(out), *extra], capture_output=True,
                              text=True, timeout=600)


def siblings(out: Path) -> list[str]:
    return sorted(n for n in os.listdir(out.parent) if ".shardc-tmp." in n)


def moments(seconds: float, kills: int) -> list[float]:
    # From just after start to just past the end, denser early (planning) and late (commit).
    return [seconds * (0.02 + 1.1 * (i / max(kills - 1, 1))) for i in range(kills)]


def test_rerun_swap(env: Env, kills: int, seconds: float) -> None:
    out = env.tmp / "swap"
    r = env.compile(out, "0-127")
    check(r.returncode == 0 and complete(out) == "", "previous compile is complete", r.stderr)
    before = snapshot(out)
    new_state = None
    outcomes = {"previous": 0, "new": 0}
    for t in moments(seconds, kills):
        alive = env.killed(out, "0-2040:8", t)
        now = snapshot(out)
        if now == before:
            outcomes["previous"] += 1
            continue
        why = complete(out)
        ok = why == "" and (new_state is None or now == new_state)
        check(ok, f"kill at {t:.3f} s (alive={alive}): OUTDIR is the previous or the new "
                  f"complete state", why)
        new_state = now
        outcomes["new"] += 1
        before_rerun = snapshot(out)
        # Back to the previous state for the next kill.
        r = env.compile(out, "0-127")
        check(r.returncode == 0 and snapshot(out) == before,
              "recompiling the previous inputs restores the previous state", r.stderr)
        del before_rerun
    print(f"     outcomes: {outcomes}", flush=True)
    check(outcomes["previous"] > 0, "some kills hit the compile before it committed")
    r = env.compile(out, "0-127")
    check(r.returncode == 0 and siblings(out) == [],
          "the next compile removes the killed runs' temporary siblings", str(siblings(out)))


def test_first_compile(env: Env, kills: int, seconds: float) -> None:
    outcomes = {"absent": 0, "incomplete": 0, "complete": 0}
    for i, t in enumerate(moments(seconds, kills)):
        out = env.tmp / f"first-{i}"
        env.killed(out, "0-2040:8", t)
        if not out.exists():
            outcomes["absent"] += 1
            continue
        why = complete(out)
        if why == "":
            outcomes["complete"] += 1
            r = env.verify(out, "--ranks", "0")
            check(r.returncode != 2 or "incomplete" not in r.stderr,
                  f"kill at {t:.3f} s: a complete OUTDIR is not refused", r.stderr)
            continue
        outcomes["incomplete"] += 1
        r = env.verify(out)
        check(r.returncode == 2 and "error[E-PLAN-FILE]: " in r.stderr
              and "incomplete compile:" in r.stderr and "rerun compile"
              in r.stderr, f"kill at {t:.3f} s: an incomplete OUTDIR is refused by verify",
              r.stdout + r.stderr)
    print(f"     outcomes: {outcomes}", flush=True)


def test_in_place(env: Env, kills: int, seconds: float) -> None:
    out = env.tmp / "inplace"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    r = env.compile(out, "0-127", "--force")
    check(r.returncode == 0 and complete(out) == "", "in-place compile beside a foreign file",
          r.stderr)
    outcomes = {"incomplete": 0, "complete": 0}
    for t in moments(seconds, kills):
        env.killed(out, "0-2040:8", t)
        check((out / "notes.txt").read_text() == "mine\n", "the foreign file is kept")
        why = complete(out)
        if why == "":
            outcomes["complete"] += 1
            continue
        outcomes["incomplete"] += 1
        r = env.verify(out)
        check(r.returncode == 2 and "incomplete compile:" in r.stderr,
              f"kill at {t:.3f} s (in place): refused as incomplete ({why})", r.stderr)
    print(f"     outcomes: {outcomes}", flush=True)


def test_changed_inputs_and_tampering(env: Env) -> None:
    out = env.tmp / "changed"
    check(env.compile(out, "0-15").returncode == 0, "compile 0-15")
    first = json.loads((out / "manifest.json").read_text())
    recipe2 = env.tmp / "changed.recipe.yaml"
    recipe2.write_text(RECIPE.read_text() + "\n# changed input\n")
    r = env.compile(out, "0-7,2047", recipe=recipe2)
    second = json.loads((out / "manifest.json").read_text())
    check(r.returncode == 0 and complete(out) == "", "rerun with a changed recipe is complete",
          r.stderr)
    check(first["inputs"]["recipe"]["sha256"] != second["inputs"]["recipe"]["sha256"],
          "manifest.json records the new recipe digest")
    check(second["rank_files"]["ranks"] == "0-7,2047"
          and sorted(os.listdir(out / "ranks")) == sorted(
              Path(e["path"]).name for e in second["rank_files"]["files"]),
          "only the new rank set is present", str(sorted(os.listdir(out / "ranks"))))
    rank_file = out / second["rank_files"]["files"][1]["path"]
    data = bytearray(rank_file.read_bytes())
    data[data.index(b'"numel":') + 8] ^= 1  # a digit changes, the JSON stays valid
    rank_file.write_bytes(bytes(data))
    r = env.verify(out, "--ranks", "1")
    check(r.returncode == 1 and f"{second['rank_files']['files'][1]['path']} changed after the "
          "compile" in r.stdout, "verify names a tampered rank file by digest",
          r.stdout + r.stderr)
    r = env.compile(out, "0-7,2047", recipe=recipe2)
    plan = out / "plan.json"
    plan.write_bytes(plan.read_bytes() + b" ")
    r = env.verify(out, "--ranks", "0")
    check(r.returncode == 1 and "plan.json changed after the compile" in r.stdout,
          "verify names a tampered plan.json", r.stdout + r.stderr)
    # reshard reads the same compiled plan named as OUTDIR/plan.json: checked the same way
    # (it planned transfers from an edited plan.json, exit 0).
    lone = env.tmp / "lone-plan.json"
    lone.write_bytes(plan.read_bytes())

    def reshard(a: Path, b: Path):
        return subprocess.run([env.shardc, "reshard", str(a), str(b)], capture_output=True,
                              text=True, timeout=300)
    r = reshard(plan, plan)
    check(r.returncode == 2 and "error[E-PLAN-FILE]: " in r.stderr
          and "plan.json changed after the compile" in r.stderr,
          "reshard OUTDIR/plan.json checks its manifest.json", r.stdout + r.stderr)
    r = reshard(lone, lone)
    check(r.returncode == 0, "reshard reads a plan.json alone (no OUTDIR beside it) as it is",
          r.stderr)
    (out / "manifest.json").unlink()
    r = env.verify(out)
    check(r.returncode == 2 and "shardc: error[E-PLAN-FILE]: " in r.stderr
          and "incomplete compile: 9 of 2048 rank files; rerun compile" in r.stderr,
          "verify refuses an OUTDIR without manifest.json (E-PLAN-FILE)", r.stderr)
    r = reshard(plan, lone)
    check(r.returncode == 2 and "incomplete compile: 9 of 2048 rank files" in r.stderr,
          "reshard OUTDIR/plan.json refuses an OUTDIR without manifest.json", r.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--kills", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="shardc-commit-") as name:
        env = Env(args.shardc, Path(name))
        t0 = time.monotonic()
        r = env.compile(env.tmp / "timing", "0-2040:8")
        seconds = time.monotonic() - t0
        check(r.returncode == 0, f"reference compile of 256 ranks ({seconds:.2f} s)", r.stderr)
        for test in (test_rerun_swap, test_first_compile, test_in_place):
            print(f"# {test.__name__}", flush=True)
            test(env, args.kills, seconds)
        print("# test_changed_inputs_and_tampering", flush=True)
        test_changed_inputs_and_tampering(env)
    print(f"test_commit: {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
