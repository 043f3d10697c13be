#!/usr/bin/env python3
"""Thin wrapper kept for old scripts: `shardc import INVENTORY [-o OUT.yaml]`.

Usage: compact_model.py INVENTORY.json [-o OUT.yaml]

The compaction (repeat groups folded, attributes, tied pairs) lives in the C++ front end
(src/import/compact.cpp). The shardc binary is $SHARDC, else build/release/shardc, else
build/test/shardc, else `shardc` on PATH.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def find_shardc() -> str:
    for cand in (os.environ.get("SHARDC"), REPO / "build/release/shardc",
                 REPO / "build/test/shardc", shutil.which("shardc")):
        if cand and Path(cand).is_file():
            return str(cand)
    sys.exit("compact_model.py: no shardc binary (build it with tools/run, or set SHARDC)")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    sys.exit(subprocess.call([find_shardc(), "import", *sys.argv[1:]]))
