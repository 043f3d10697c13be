"""Find a python3 that imports torch (stdlib only, so any python3 can run it)."""

import os
import shutil
import subprocess
import sys


def find_torch_python():
    """A python3 that imports torch and numpy and has gloo: $SHARDC_TORCH_PYTHON
    (the project's .venv, tools/venv) first, then this interpreter, then python3
    on PATH. None when there is none; with SHARDC_REQUIRE_TORCH=1 (a build
    configured with SHARDC_TORCH_PYTHON, as tools/test does) that is an error,
    not a skip."""
    cands = [os.environ.get("SHARDC_TORCH_PYTHON"), sys.executable, shutil.which("python3")]
    for c in cands:
        if not c or not os.path.exists(c):
            continue
        r = subprocess.run([c, "-c", "import torch, numpy, torch.distributed as d; "
                            "assert d.is_available() and d.is_gloo_available()"],
                           capture_output=True, timeout=120)
        if r.returncode == 0:
            return c
    if os.environ.get("SHARDC_REQUIRE_TORCH") == "1":
        sys.exit("error: SHARDC_TORCH_PYTHON=%r does not import torch with gloo; run tools/venv"
                 % os.environ.get("SHARDC_TORCH_PYTHON"))
    return None
