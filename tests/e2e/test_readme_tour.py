#!/usr/bin/env python3
"""Runs the README's "A five-minute tour" exactly as written.

    test_readme_tour.py --shardc BIN [--readme README.md]

Takes the first ```sh block under "## A five-minute tour", sets `S` to BIN instead of
build/release/shardc, and runs each command (continuation lines joined) with bash in a
temporary folder where `plans/` and `tests/` point at the repository's. A command must exit 0, or 1
when its comment says "exit 1"; its output must not say "not verifiable" or
"mismatch". Stdlib only.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tour_commands(readme: str) -> list[str]:
    part = readme.split("## A five-minute tour", 1)[1]
    block = re.search(r"```sh\n(.*?)```", part, re.S).group(1)
    cmds: list[str] = []
    cur = ""
    for line in block.splitlines():
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        cur += line + "\n"
        if not line.split("#", 1)[0].rstrip().endswith("\\"):
            cmds.append(cur)
            cur = ""
    return cmds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    args = ap.parse_args()
    cmds = tour_commands(Path(args.readme).read_text())
    if not cmds or not cmds[0].startswith("S="):
        print("FAIL: the tour does not start with S=...")
        return 1
    cmds[0] = f"S={os.path.abspath(args.shardc)}\n"
    failures = []
    with tempfile.TemporaryDirectory(prefix="shardc-tour-") as tmp:
        os.symlink(ROOT / "plans", Path(tmp) / "plans")
        os.symlink(ROOT / "tests", Path(tmp) / "tests")  # tests/e2e/checkpoint_util.py (step 0)
        env_prefix = cmds[0]
        for cmd in cmds[1:]:
            want = 1 if re.search(r"#.*\bexit 1\b", cmd) else 0
            proc = subprocess.run(["bash", "-c", env_prefix + cmd], cwd=tmp, capture_output=True,
                                  text=True, timeout=600)
            text = proc.stdout + proc.stderr
            print(f"$ {cmd.strip()}\n{text[-2000:]}(exit {proc.returncode})\n", flush=True)
            if proc.returncode != want:
                failures.append(f"exit {proc.returncode}, expected {want}: {cmd.strip()}")
            elif "not verifiable" in text or "mismatch" in text:
                failures.append(f"verify did not pass: {cmd.strip()}")
    for f in failures:
        print("FAIL " + f)
    if not failures:
        print(f"PASS: {len(cmds) - 1} commands")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
