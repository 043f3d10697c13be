#!/usr/bin/env python3
"""Hostile-input folders (tests/hostile/<name>/, issue 24) as tests.

    run_hostile.py FOLDER --shardc BIN [--sanitizer]

Each folder is a copy of one finding of the hostile-input campaign (`README.md` with command,
expected and observed; `repro.sh` as filed, kept for reference) plus `test.py`, which asserts
the expected behaviour. `test.py` defines `run(h)`; `h` is a Harness:

  h.shardc(*args, timeout=20, cwd=None, stdin=None) -> Result(code, out, err, seconds)
      runs the binary; a timeout, a signal, exit 3 or a sanitizer/crash report on stderr is a
      failure on its own (recorded, the Result still returned; code None on a timeout)
  h.expect(cond, what)            records a failure unless cond
  h.expect_exit(result, code, *substrings)   exit code and substrings of stdout + stderr
  h.tiny_ckpt(dir, config=None)   tests/hostile/make_tiny_ckpt.py (needs numpy)
  h.resign(outdir)                recomputes manifest.json's sizes and sha256 of every listed
                                  file, as a tool that rewrote the outputs would
  h.tmp                           a fresh temporary directory (removed afterwards)
  h.folder, h.hostile, h.repo     the folder, tests/hostile/, the repository root

Timeouts are multiplied by 5 with --sanitizer. Exit status: 0 pass, 1 a failure. Stdlib only
(test.py files may import numpy through make_tiny_ckpt.py).
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests" / "hostile"
CRASH_RE = re.compile(r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|"
                      r"LeakSanitizer|terminate called|Segmentation fault|internal error")


@dataclass
class Result:
    code: int | None
    out: str
    err: str
    seconds: float

    @property
    def text(self) -> str:
        return self.out + self.err


class Harness:
    def __init__(self, folder: Path, shardc: str, sanitizer: bool, tmp: Path) -> None:
        self.folder = folder
        self.hostile = HOSTILE
        self.repo = ROOT
        self.bin = shardc
        self.sanitizer = sanitizer
        self.tmp = tmp
        self.failures: list[str] = []

    def expect(self, cond: bool, what: str) -> bool:
        if not cond:
            self.failures.append(what)
            print(f"  FAIL {what}")
        return cond

    def shardc(self, *args: str | Path, timeout: float = 20, cwd: Path | None = None,
               stdin: bytes | None = None) -> Result:
        cmd = [self.bin] + [str(a) for a in args]
        limit = timeout * (5 if self.sanitizer else 1)
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=cwd or self.folder, input=stdin,
                                  stdin=None if stdin is not None else subprocess.DEVNULL,
                                  capture_output=True, timeout=limit)
        except subprocess.TimeoutExpired as e:
            r = Result(None, (e.stdout or b"").decode("utf-8", "replace"),
                       (e.stderr or b"").decode("utf-8", "replace"), time.monotonic() - start)
            self.expect(False, f"{' '.join(map(str, args))}: did not finish within {limit:g} s")
            return r
        r = Result(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                   proc.stderr.decode("utf-8", "replace"), time.monotonic() - start)
        shown = " ".join(str(a) for a in args)
        print(f"  $ shardc {shown[:200]}: exit {r.code}, {r.seconds:.2f} s")
        self.expect(r.code is not None and r.code >= 0, f"{shown}: killed by signal {r.code}")
        self.expect(r.code != 3, f"{shown}: exit 3 (internal error): {r.err[-2000:]}")
        self.expect(not CRASH_RE.search(r.err),
                    f"{shown}: crash or sanitizer report on stderr:\n{r.err[-3000:]}")
        return r

    def expect_exit(self, r: Result, code: int, *substrings: str) -> bool:
        ok = self.expect(r.code == code, f"exit {r.code}, expected {code}: {r.text[-1500:]}")
        for s in substrings:
            ok = self.expect(s in r.text, f"output lacks {s!r}: {r.text[-1500:]}") and ok
        return ok

    def tiny_ckpt(self, directory: Path, config: Path | None = None) -> Path:
        cmd = [sys.executable, str(HOSTILE / "make_tiny_ckpt.py"), str(directory)]
        if config is not None:
            cmd += ["--config", str(config)]
        subprocess.run(cmd, check=True)
        return directory

    @staticmethod
    def resign(outdir: Path) -> None:
        manifest_path = outdir / "manifest.json"
        manifest = json.loads(manifest_path.read_text())

        def sign(entry: dict, rel: str) -> None:
            data = (outdir / rel).read_bytes()
            entry["bytes"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()

        sign(manifest["plan"], "plan.json")
        for entry in manifest.get("rank_files", {}).get("files", []):
            sign(entry, entry["path"])
        manifest_path.write_text(json.dumps(manifest))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--sanitizer", action="store_true")
    args = ap.parse_args()
    folder = args.folder.resolve()
    spec = importlib.util.spec_from_file_location(f"hostile_{folder.name}", folder / "test.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory(prefix=f"shardc-hostile-{folder.name}-") as tmp:
        h = Harness(folder, str(Path(args.shardc).resolve()), args.sanitizer, Path(tmp))
        module.run(h)
    if h.failures:
        print(f"{folder.name}: {len(h.failures)} failure(s)")
        return 1
    print(f"{folder.name}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
