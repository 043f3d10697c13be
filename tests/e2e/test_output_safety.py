#!/usr/bin/env python3
"""Output safety of `shardc compile` (contract §2, docs/commands.md "Command line").

    test_output_safety.py --shardc BIN

Checks, each in a fresh temporary folder:
  * a fresh OUTDIR gets plan.json, rank files, the marker and manifest.json (the commit
    marker, listing every rank file); no temporary files or temporary siblings remain
  * a rerun is byte-identical (every file), and a rerun without --force is allowed
    (shardc wrote the folder)
  * a non-empty OUTDIR that shardc did not write is refused (exit 2, message names --force,
    nothing written); --force overwrites it and keeps the foreign file
  * an invalid recipe leaves OUTDIR untouched (no plan.json, no marker) and an existing
    compiled OUTDIR unchanged
  * an OUTDIR that is a symbolic link is refused with a clear message (exit 2), and the
    link's target stays empty
  * an unwritable OUTDIR (its parent is a regular file; works as root too) exits 2 with a
    message, no crash
  * a compile that fails half-way (ranks/ is a regular file) exits 2 and leaves no temporary
    files
  * rank files removed by --ranks are deleted on the next run (no stale outputs), and
    manifest.json records the subset
  * a shardc OUTDIR with a foreign file beside the marker is written in place: the foreign
    file is kept, the compile is complete (the kill tests are in test_commit.py)
Exit status: 0 pass, 1 failure. Stdlib only.
"""
from __future__ import annotations

import argparse
import json
import stat
import os
import subprocess
import sys
import tempfile
from pathlib import Path

MODEL = """format: shardc.model/v1
name: tiny
dtype: bfloat16
attributes: {num_attention_heads: 4, num_key_value_heads: 2}
params:
  - {name: model.embed_tokens.weight, shape: [1000, 64]}
  - repeat: {i: [0, 2]}
    params:
      - {name: "model.layers.{i}.self_attn.q_proj.weight", shape: [64, 64]}
      - {name: "model.layers.{i}.input_layernorm.weight", shape: [64], dtype: float32}
  - {name: lm_head.weight, shape: [1000, 64]}
"""
RECIPE = """format: shardc.recipe/v1
mesh:
  - {name: dp_shard, size: 2}
  - {name: tp, size: 2}
rules:
  - match: "**.q_proj.weight"
    placements: {tp: Shard(0)}
  - match: "**"
    placements: {}
fsdp: {shard: dp_shard}
"""
BAD_RECIPE = RECIPE.replace("Shard(0)", "Shard(7)")

FAILURES: list[str] = []


def check(cond: bool, what: str, detail: str = "") -> None:
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)
        if detail:
            print("     " + detail.replace("\n", "\n     "))


def snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if not p.is_symlink():
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def siblings(out: Path) -> list[str]:
    return sorted(n for n in os.listdir(out.parent) if ".shardc-tmp." in n)


def temps(root: Path) -> list[str]:
    return [k for k in snapshot(root) if ".tmp." in k]


class Env:
    def __init__(self, shardc: str, tmp: Path) -> None:
        self.shardc = shardc
        self.model = tmp / "model.yaml"
        self.recipe = tmp / "recipe.yaml"
        self.bad = tmp / "bad.recipe.yaml"
        self.model.write_text(MODEL)
        self.recipe.write_text(RECIPE)
        self.bad.write_text(BAD_RECIPE)

    def compile(self, out: Path | str, *extra: str, recipe: Path | None = None):
        cmd = [self.shardc, "compile", str(self.model), str(recipe or self.recipe), "-o",
               str(out), "--quiet", *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_fresh_and_rerun(env: Env, tmp: Path) -> None:
    out = tmp / "fresh" / "nested"
    r = env.compile(out)
    check(r.returncode == 0, "fresh nested OUTDIR compiles", r.stderr)
    files = snapshot(out)
    check("plan.json" in files and any(k.startswith("ranks/rank-") for k in files),
          "plan.json and rank files written", str(sorted(files)))
    check(not temps(out), "no temporary files left", str(temps(out)))
    check("manifest.json" in files and ".shardc-output" in files, "manifest.json and marker",
          str(sorted(files)))
    manifest = json.loads(files["manifest.json"])
    check(manifest["rank_files"]["ranks"] == "0-3" and manifest["rank_files"]["count"] == 4,
          "manifest.json lists ranks 0-3", str(manifest["rank_files"]["ranks"]))
    check(not siblings(out), "no temporary sibling left", str(siblings(out)))
    r = env.compile(out)
    check(r.returncode == 0, "rerun into shardc's own OUTDIR needs no --force", r.stderr)
    check(snapshot(out) == files, "rerun is byte-identical")
    r = env.compile(out, "--ranks", "0-1")
    left = sorted(k for k in snapshot(out) if k.startswith("ranks/"))
    check(r.returncode == 0 and left == ["ranks/rank-0.json", "ranks/rank-1.json"],
          "--ranks removes stale rank files", str(left))
    manifest = json.loads((out / "manifest.json").read_text())
    check(manifest["rank_files"]["ranks"] == "0,1", "manifest.json records the --ranks subset")
    (out / "notes.txt").write_text("mine\n")
    r = env.compile(out)
    check(r.returncode == 0 and (out / "notes.txt").read_text() == "mine\n"
          and (out / "manifest.json").exists() and len(list((out / "ranks").iterdir())) == 4,
          "a foreign file beside the marker: compiled in place, the file kept", r.stderr)
    check(not siblings(out), "no temporary sibling left (in place)", str(siblings(out)))


def test_foreign_dir(env: Env, tmp: Path) -> None:
    out = tmp / "foreign"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    r = env.compile(out)
    check(r.returncode == 2, "non-empty foreign OUTDIR is refused (exit 2)", r.stderr)
    check("--force" in r.stderr, "the refusal names --force", r.stderr)
    check(sorted(snapshot(out)) == ["notes.txt"], "refused OUTDIR is untouched",
          str(sorted(snapshot(out))))
    r = env.compile(out, "--force")
    check(r.returncode == 0 and "plan.json" in snapshot(out), "--force writes into it", r.stderr)
    check((out / "notes.txt").read_text() == "mine\n", "--force keeps foreign files")


def test_invalid_leaves_no_output(env: Env, tmp: Path) -> None:
    out = tmp / "invalid"
    r = env.compile(out, recipe=env.bad)
    check(r.returncode == 1, "invalid recipe: exit 1", r.stderr)
    check(not out.exists() or not any(out.iterdir()), "invalid recipe: OUTDIR untouched",
          str(snapshot(out)) if out.exists() else "")
    good = tmp / "compiled"
    check(env.compile(good).returncode == 0, "compile a good plan")
    before = snapshot(good)
    r = env.compile(good, "--force", recipe=env.bad)
    check(r.returncode == 1 and snapshot(good) == before,
          "invalid recipe: existing outputs unchanged (even with --force)")
    r = env.compile(tmp / "missing-model", recipe=tmp / "no-such.yaml")
    check(r.returncode == 2 and not (tmp / "missing-model").exists(),
          "unreadable recipe: exit 2, no OUTDIR created", r.stderr)


def test_symlink(env: Env, tmp: Path) -> None:
    target = tmp / "link-target"
    target.mkdir()
    link = tmp / "link"
    link.symlink_to(target, target_is_directory=True)
    for spelled in (str(link), str(link) + "/"):
        r = env.compile(spelled)
        check(r.returncode == 2 and "symbolic link" in r.stderr,
              f"symlinked OUTDIR {spelled!r} refused with a clear message", r.stderr)
    check(not any(target.iterdir()), "the symlink's target stays empty")
    out = tmp / "ranks-link"
    check(env.compile(out, "--no-rank-files").returncode == 0, "compile without rank files")
    (out / "ranks").symlink_to(target, target_is_directory=True)
    r = env.compile(out)
    check(r.returncode == 2 and "symbolic link" in r.stderr and not any(target.iterdir()),
          "symlinked OUTDIR/ranks refused", r.stderr)


def test_unwritable(env: Env, tmp: Path) -> None:
    blocker = tmp / "a-file"
    blocker.write_text("x")
    r = env.compile(blocker / "out")
    check(r.returncode == 2 and "shardc: error[E-OUTPUT]:" in r.stderr and "out" in r.stderr,
          "OUTDIR under a regular file: exit 2 with a message", r.stderr)
    r = env.compile(blocker)
    check(r.returncode == 2 and "shardc: error[E-OUTPUT]:" in r.stderr,
          "OUTDIR that is a regular file: exit 2 with a message", r.stderr)
    check(blocker.read_text() == "x", "the regular file is untouched")
    r = env.compile("/proc/version/out")
    check(r.returncode == 2, "OUTDIR under /proc/version: exit 2", r.stderr)
    out = tmp / "ranks-file"
    out.mkdir()
    (out / "ranks").write_text("not a folder")
    r = env.compile(out, "--force")
    check(r.returncode == 2 and "shardc: error[E-OUTPUT]:" in r.stderr,
          "ranks/ is a regular file: exit 2 with a message", r.stderr)
    check(not temps(out), "failed compile leaves no temporary files", str(temps(out)))


def test_single_file_outputs(env: Env, tmp: Path) -> None:
    """`import -o FILE` and `reshard -o FILE` replace a regular file atomically, and refuse
    (exit 2, target untouched) a FILE that is a symlink, a FIFO or a device: the rename would
    replace the link or node itself (`-o /dev/null` as root)."""
    def imp(out: Path | str):
        return subprocess.run([env.shardc, "import", str(env.model), "-o", str(out)],
                              capture_output=True, text=True, timeout=60)
    reg = tmp / "model-out.yaml"
    check(imp(reg).returncode == 0 and imp(reg).returncode == 0 and reg.is_file(),
          "import -o FILE writes and rewrites a regular file")
    target = tmp / "target.yaml"
    target.write_text("mine\n")
    link = tmp / "link.yaml"
    link.symlink_to(target)
    r = imp(link)
    check(r.returncode == 2 and "is a symbolic link" in r.stderr and link.is_symlink()
          and target.read_text() == "mine\n", "import -o SYMLINK is refused, link and target kept",
          r.stderr)
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    r = imp(fifo)
    check(r.returncode == 2 and "is a FIFO" in r.stderr and stat.S_ISFIFO(os.lstat(fifo).st_mode),
          "import -o FIFO is refused, the FIFO kept", r.stderr)
    r = imp("/dev/null")
    check(r.returncode == 2 and "is a device" in r.stderr
          and stat.S_ISCHR(os.lstat("/dev/null").st_mode), "import -o /dev/null is refused", r.stderr)
    left = [n for n in os.listdir(tmp) if ".tmp." in n]  # (snapshot() would read the FIFO)
    check(not left, "no temporary files left", str(left))
    a, b = tmp / "a", tmp / "b"
    check(env.compile(a).returncode == 0 and env.compile(b).returncode == 0, "two plans compile")
    r = subprocess.run([env.shardc, "reshard", str(a), str(b), "-o", str(link)],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "is a symbolic link" in r.stderr and link.is_symlink(),
          "reshard -o SYMLINK is refused, the link kept", r.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    args = ap.parse_args()
    tests = [test_fresh_and_rerun, test_foreign_dir, test_invalid_leaves_no_output,
             test_symlink, test_unwritable, test_single_file_outputs]
    for t in tests:
        with tempfile.TemporaryDirectory(prefix="shardc-out-") as name:
            print(f"# {t.__name__}")
            t(Env(args.shardc, Path(name)), Path(name))
    print(f"test_output_safety: {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
