"""Find a python3 that imports torch (stdlib only, so any python3 can run it)."""

import os
import shutil
import subprocess
import sys


def find_torch_python():
    """A python3 that imports torch and numpy and has gloo: /usr/bin/python3
    first (Debian's python3-torch), then $SHARDC_TORCH_PYTHON, then python3 on
    PATH, then this interpreter. None when there is none."""
    cands = ["/usr/bin/python3", os.environ.get("SHARDC_TORCH_PYTHON"), shutil.which("python3"),
             sys.executable]
    for c in cands:
        if not c or not os.path.exists(c):
            continue
        r = subprocess.run([c, "-c", "import torch, numpy, torch.distributed as d; "
                            "assert d.is_available() and d.is_gloo_available()"],
                           capture_output=True, timeout=120)
        if r.returncode == 0:
            return c
    return None
